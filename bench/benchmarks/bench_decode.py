"""Batch decode throughput, one core and two; and where one call's time goes (pass 1, buffer
allocation, pass 2, assembly), for the interpreter and the kernel specialised to the plan."""

from __future__ import annotations

import time

import numpy as np

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.assembly.assemble import allocate, assemble
from arrowkafka.codec.decode import NO_HOPS, _hops, _input, _Run, decode_batch
from arrowkafka.plan import compile_plan

from .data import WORKLOADS, batch, best_mb_per_s, body, some


class Decode:
    params = (some(list(WORKLOADS), ["metadata_v1"]), [1, 2])
    param_names = ("workload", "threads")
    number = 1
    repeat = 10

    def setup(self, workload: str, threads: int) -> None:
        _, self.message, self.version = WORKLOADS[workload]
        self.bodies = batch(workload)
        # Warm the JIT, and check against the oracle before timing anything.
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


class DecodeStages:
    """Milliseconds of each stage of one call (best of several), one thread: the interpreter
    against the kernel specialised to the plan (which compiles for seconds in setup)."""

    params = (some(["metadata_v12", "metadata_v1"], ["metadata_v1"]), ["interpreter", "specialised"])
    param_names = ("workload", "kernel")
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, workload: str, kernel: str) -> None:
        _, message, version = WORKLOADS[workload]
        self.bodies = batch(workload)
        specs = ak.load_specs()
        self.plan = compile_plan(specs[message], version)
        warm = decode_batch(specs[message], self.bodies.slice(0, 2), version, kernel=kernel)
        assert warm.to_pylist()[0] == ref.decode(specs[message], version, body(workload))
        if kernel == "specialised":
            from arrowkafka.codegen.decode import generated_decoder

            self.fn = generated_decoder(self.plan)
        else:
            from arrowkafka.kernels.decode import run

            self.fn = run
        self.generated = kernel == "specialised"
        self.stages = self._best(7)

    def _best(self, repeat: int) -> dict[str, float]:
        best: dict[str, float] = {}
        nn = len(self.plan.nodes)
        for _ in range(repeat):
            t = [time.perf_counter()]
            data, starts, ends = _input(self.bodies)
            run = _Run(self.plan, data, starts, ends, False)
            run.fn = self.fn
            counts, dcounts = np.zeros(nn, np.int64), np.zeros(nn, np.int64)
            # as decode_batch's passes: only the generated kernels note hops
            hops = _hops(self.plan, starts, ends, 0, len(starts)) if self.generated else NO_HOPS
            run.call(0, len(starts), False, counts, dcounts, None, hops)
            t.append(time.perf_counter())
            bufs = allocate(self.plan, counts, dcounts)
            t.append(time.perf_counter())
            run.call(0, len(starts), True, np.zeros(nn, np.int64), np.zeros(nn, np.int64), bufs, hops)
            t.append(time.perf_counter())
            assemble(self.plan, bufs, counts, dcounts, len(starts)).validate()
            t.append(time.perf_counter())
            for name, dt in zip(("pass1", "allocate", "pass2", "assemble"), np.diff(t), strict=True):
                best[name] = min(best.get(name, float("inf")), dt * 1e3)
        return best

    def track_pass1_ms(self, workload: str, kernel: str) -> float:
        return self.stages["pass1"]

    def track_allocate_ms(self, workload: str, kernel: str) -> float:
        return self.stages["allocate"]

    def track_pass2_ms(self, workload: str, kernel: str) -> float:
        return self.stages["pass2"]

    def track_assemble_ms(self, workload: str, kernel: str) -> float:
        return self.stages["assemble"]

    track_pass1_ms.unit = track_allocate_ms.unit = "ms"  # type: ignore[attr-defined]
    track_pass2_ms.unit = track_assemble_ms.unit = "ms"  # type: ignore[attr-defined]
