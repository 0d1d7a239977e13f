"""Cold start, measured in fresh processes: import plus the first decode of a message type not
seen before, with a warm Numba cache; and from an empty cache, one batch of each of 50
different (message, version) pairs."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from .data import SMOKE

PAIRS = 2 if SMOKE else 50  # (ARROWKAFKA_BENCH_SMOKE=1: see data.py)
FIRST_DECODE = (
    "import arrowkafka as ak; "
    "ak.decode([bytes.fromhex('0000000000000000000000000000000000000000')], 'FetchRequest', 3, errors='null')"
)
FIFTY = f"""
import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka import schema
specs = ak.load_specs()
pairs = [(n, v) for n, v in specs.pairs() if specs[n].type in ("request", "response")][::9][:{PAIRS}]
for name, version in pairs:
    spec = specs[name]
    body = ref.encode(spec, version, schema.default_struct(spec, spec.root, version))
    specs.decode([body] * 2000, name, version)  # past the plain-Python tier's budget
print(len(pairs))
"""


def _run(code: str, cache: str) -> float:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
    return time.perf_counter() - t


class ColdStart:
    number = 1
    repeat = 3
    timeout = 600

    def setup(self) -> None:
        self.cache = tempfile.mkdtemp(prefix="ak-numba-")
        _run(FIRST_DECODE, self.cache)  # fill the cache once

    def time_import_and_first_decode_warm_cache(self) -> None:
        _run(FIRST_DECODE, self.cache)

    def time_fifty_pairs_empty_cache(self) -> None:
        _run(FIFTY, tempfile.mkdtemp(prefix="ak-numba-empty-"))


class Import:
    number = 1
    repeat = 10

    def time_import(self) -> None:
        subprocess.run([sys.executable, "-c", "import arrowkafka"], check=True)
