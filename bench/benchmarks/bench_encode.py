"""Batch encode throughput (MB/s of output), one core and two, with the interpreter and with
the kernel generated for the plan (its compile timed apart)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.encode import encode_batch

from .data import SMOKE, WORKLOADS, batch, best_mb_per_s, body, some

HERE = Path(__file__).resolve().parents[1]  # bench/: where `benchmarks` imports from


class Encode:
    params = (some(list(WORKLOADS), ["metadata_v1"]), [1, 2], ["interpreter", "specialised"])
    param_names = ("workload", "threads", "kernel")
    number = 1
    repeat = 10
    timeout = 600  # (setup compiles the plan's kernel on an empty cache)

    def setup(self, workload: str, threads: int, kernel: str) -> None:
        _, self.message, self.version = WORKLOADS[workload]
        self.specs = ak.load_specs()
        bodies = batch(workload)
        self.rows = ak.decode(bodies, self.message, self.version)
        assert isinstance(self.rows, pa.RecordBatch)
        # Warm the JIT (or compile the plan's kernel), and check against the oracle
        # before timing anything.
        first = self.encode(self.rows.slice(0, 2), 1, kernel)[0].as_py()
        spec = self.specs[self.message]
        assert first == ref.encode(spec, self.version, ref.decode(spec, self.version, body(workload)))
        self.nbytes = bodies.buffers()[2].size

    def encode(self, rows: Any, threads: int, kernel: str) -> Any:
        return encode_batch(self.specs[self.message], rows, self.version, threads=threads, kernel=kernel)

    def time_encode(self, workload: str, threads: int, kernel: str) -> None:
        self.encode(self.rows, threads, kernel)

    def track_mb_per_s(self, workload: str, threads: int, kernel: str) -> float:
        return best_mb_per_s(lambda: self.encode(self.rows, threads, kernel), self.nbytes)

    track_mb_per_s.unit = "MB/s"  # type: ignore[attr-defined]


COMPILE = """
import time
import arrowkafka as ak
from arrowkafka.codec.encode import encode_batch
from benchmarks.data import WORKLOADS, body
_, message, version = WORKLOADS[{workload!r}]
rows = ak.decode([body({workload!r})], message, version)
encode_batch(ak.load_specs()[message], rows.slice(0, 1), version, kernel="interpreter")  # Numba warm
t = time.perf_counter()
encode_batch(ak.load_specs()[message], rows, version, kernel="specialised")
print(time.perf_counter() - t)
"""


class CompileSpecialised:
    """Seconds to generate and compile one plan's encode kernel, in a fresh process with empty
    kernel caches (the interpreter's compile is warmed first and not counted; the shared calls
    in kernels/encode.py compile too, as on a new machine)."""

    params = (some(list(WORKLOADS), ["metadata_v1"]),)
    param_names = ("workload",)
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, workload: str) -> None:
        self.cache = tempfile.mkdtemp(prefix="ak-numba-")
        warm = "import arrowkafka as ak; from benchmarks.data import body"
        subprocess.run([sys.executable, "-c", warm], check=True, env=self.env(), cwd=HERE)

    def env(self) -> dict[str, str]:
        if SMOKE:  # the interpreter's Numba cache kept (its compile is not counted anyway)
            return {**os.environ, "ARROWKAFKA_CACHE_DIR": self.cache}
        return {**os.environ, "NUMBA_CACHE_DIR": self.cache, "ARROWKAFKA_CACHE_DIR": self.cache}

    def track_compile_s(self, workload: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", COMPILE.format(workload=workload)],
            check=True, env=self.env(), cwd=HERE, capture_output=True, text=True,
        )  # fmt: skip
        return float(out.stdout.split()[-1])

    track_compile_s.unit = "s"  # type: ignore[attr-defined]
