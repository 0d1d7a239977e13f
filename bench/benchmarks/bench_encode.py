"""Batch encode throughput (MB/s of output), one core and two."""

from __future__ import annotations

import arrowkafka as ak
from arrowkafka import reference as ref

from .data import WORKLOADS, batch, best_mb_per_s, body


class Encode:
    params = (list(WORKLOADS), [1, 2])
    param_names = ("workload", "threads")
    number = 1
    repeat = 10

    def setup(self, workload: str, threads: int) -> None:
        _, self.message, self.version = WORKLOADS[workload]
        bodies = batch(workload)
        self.rows = ak.decode(bodies, self.message, self.version)
        # Warm the JIT, and check against the reference encoder before timing anything.
        first = ak.encode(self.rows.slice(0, 2), self.message, self.version)[0].as_py()
        spec = ak.load_specs()[self.message]
        assert first == ref.encode(spec, self.version, ref.decode(spec, self.version, body(workload)))
        self.nbytes = bodies.buffers()[2].size

    def time_encode(self, workload: str, threads: int) -> None:
        ak.encode(self.rows, self.message, self.version, threads=threads)

    def track_mb_per_s(self, workload: str, threads: int) -> float:
        return best_mb_per_s(
            lambda: ak.encode(self.rows, self.message, self.version, threads=threads), self.nbytes
        )

    track_mb_per_s.unit = "MB/s"  # type: ignore[attr-defined]
