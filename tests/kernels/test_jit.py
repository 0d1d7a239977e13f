"""``kernels/jit.py``: a kernel taken from Numba's cache loads without Numba's compiler
registries (numpy's linear algebra and the rest, 0.2-0.5 s a process), gives what it gave
when compiled, and anything unexpected on the way falls back to Numba's own loading."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.jit  # (NUMBA_DISABLE_JIT: nothing is cached, nothing to load)

KERNEL = """
import numpy as np
from arrowkafka.kernels.jit import njit

@njit(cache=True, nogil=True)
def total(a):
    s = np.int64(0)
    for x in a:
        s += x
    return s
"""

RUN = """
import json, sys
import numpy as np
{before}
import tiny
got = int(tiny.total(np.arange(1000, dtype=np.int64)))
stats = tiny.total.stats
print(json.dumps({{"got": got, "hits": sum(stats.cache_hits.values()),
                  "misses": sum(stats.cache_misses.values()),
                  "cache": type(tiny.total._cache).__name__,
                  "registries": "numba.np.linalg" in sys.modules}}))
"""

# the first load from the cache fails once in an unexpected way: Numba's own loading follows
FAIL_ONCE = """
from numba.core.caching import FunctionCache
real = FunctionCache._load_overload
calls = []
def once(self, sig, ctx):
    calls.append(1)
    if len(calls) == 1:
        raise RuntimeError("a damaged cache entry")
    return real(self, sig, ctx)
FunctionCache._load_overload = once
"""


def _run(tmp_path: Path, before: str = "") -> dict[str, object]:
    import json

    env = {"PATH": "/usr/bin:/bin", "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    env["PYTHONPATH"] = f"{tmp_path}:{ROOT}"
    code = RUN.format(before=before)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_cached_kernel_loads_without_the_registries(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(KERNEL)
    first = _run(tmp_path)  # an empty cache: Numba compiles (its registries come with it)
    assert first == {"got": 499500, "hits": 0, "misses": 1, "cache": "_QuickLoad", "registries": True}
    second = _run(tmp_path)
    assert second == {"got": 499500, "hits": 1, "misses": 0, "cache": "_QuickLoad", "registries": False}
    # a load that fails unexpectedly: Numba's own way (refresh, load) still takes it from the cache
    third = _run(tmp_path, FAIL_ONCE)
    assert third == {"got": 499500, "hits": 1, "misses": 0, "cache": "_QuickLoad", "registries": True}


MODULES = ["batch_table", "capture", "decode", "encode", "hints", "lz4", "memory", "records"]
MODULES += ["records_encode"]


@pytest.mark.parametrize("module", MODULES)
def test_every_cached_kernel_loads_the_quick_way(module: str) -> None:
    """Every dispatcher cached on disk, in every kernel module, has the quick loading cache
    (a module that went back to ``numba.njit`` would fail here)."""
    from numba.core.caching import FunctionCache

    from arrowkafka.kernels.jit import _QuickLoad

    mod = importlib.import_module(f"arrowkafka.kernels.{module}")
    mine = [v for v in vars(mod).values() if getattr(v, "__module__", "") == mod.__name__]
    caches = [getattr(v, "_cache", None) for v in mine]
    on_disk = [c for c in caches if isinstance(c, FunctionCache)]
    assert all(type(c) is _QuickLoad for c in on_disk)
    if module not in ("hints", "memory"):  # (their cached functions are few or none)
        assert on_disk, f"no cached kernel found in {module}"


def test_generated_kernels_load_the_quick_way() -> None:
    """The kernels generated per plan take their ``njit`` from ``kernels/jit.py`` too (imported,
    not compiled, here)."""
    import arrowkafka as ak
    from arrowkafka.codegen import decode as gen_decode
    from arrowkafka.codegen import encode as gen_encode
    from arrowkafka.kernels.jit import _QuickLoad
    from arrowkafka.plan import compile_plan

    plan = compile_plan(ak.load_specs()["ApiVersionsRequest"], 3)
    for fast in (gen_decode.generated_decoder(plan), gen_encode.generated_encoder(plan)):
        assert type(fast._cache) is _QuickLoad
