"""Batch decode throughput, one core and two."""

from __future__ import annotations

import arrowkafka as ak
from arrowkafka import reference as ref

from .data import WORKLOADS, batch, best_mb_per_s, body


class Decode:
    params = (list(WORKLOADS), [1, 2])
    param_names = ("workload", "threads")
    number = 1
    repeat = 10

    def setup(self, workload: str, threads: int) -> None:
        _, self.message, self.version = WORKLOADS[workload]
        self.bodies = batch(workload)
        # Warm the JIT, and check against the reference before timing anything.
        first = ak.decode(self.bodies.slice(0, 2), self.message, self.version).to_pylist()[0]
        assert first == ref.decode(ak.load_specs()[self.message], self.version, body(workload))
        self.nbytes = self.bodies.buffers()[2].size

    def time_decode(self, workload: str, threads: int) -> None:
        ak.decode(self.bodies, self.message, self.version, threads=threads)

    def track_mb_per_s(self, workload: str, threads: int) -> float:
        return best_mb_per_s(
            lambda: ak.decode(self.bodies, self.message, self.version, threads=threads), self.nbytes
        )

    track_mb_per_s.unit = "MB/s"  # type: ignore[attr-defined]
