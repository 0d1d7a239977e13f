"""``kernels/jit.py``: a kernel taken from Numba's cache loads without Numba's compiler
registries (numpy's linear algebra and the rest, 0.2-0.5 s a process) and without parsing its
IR until a compile links it in, gives what it gave when compiled, and anything unexpected on
the way falls back to Numba's own loading."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

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

TWICE = """

@njit(cache=True, nogil=True)
def twice(a):
    return 2 * total(a)
"""

RUN = """
import json, sys
import numpy as np
{before}
import tiny
got = int(tiny.total(np.arange(1000, dtype=np.int64)))
stats = tiny.total.stats
out = {{"got": got, "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
       "cache": type(tiny.total._cache).__name__, "registries": "numba.np.linalg" in sys.modules}}
library = next(iter(tiny.total.overloads.values())).library
out["library"] = type(library).__name__
out["ir_parsed"] = library._shared_module is not None
# the same process afterwards: new argument types compile (Numba loads its registries then), and
# a function compiled now calls the loaded kernel (its IR is parsed then, to link it in)
from numba import njit
out["int32"] = int(tiny.total(np.arange(10, dtype=np.int32)))
out["caller"] = int(njit(lambda a: tiny.total(a) + np.sort(a)[0])(np.arange(5, 0, -1, dtype=np.int64)))
out["ir_parsed_for_the_caller"] = library._shared_module is not None
print(json.dumps(out))
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

# an object file the quick load cannot read the names of (another format): Numba's unserialize
NOT_ELF = """
from arrowkafka.kernels import jit
jit._defined_symbols = lambda obj: None
"""


def _child(code: str, env: dict[str, str] | None = None, timeout: float = 1200) -> dict[str, Any]:
    """What a new Python process running ``code`` printed last, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _scratch_env(tmp_path: Path) -> dict[str, str]:
    """A child's environment: the scratch module ``tiny`` importable, a scratch Numba cache."""
    cache = str(tmp_path / "numba")
    return {"PATH": "/usr/bin:/bin", "NUMBA_CACHE_DIR": cache, "PYTHONPATH": f"{tmp_path}:{ROOT}"}


def _run(tmp_path: Path, before: str = "") -> dict[str, Any]:
    return _child(RUN.format(before=before), _scratch_env(tmp_path), timeout=300)


def test_a_cached_kernel_loads_without_the_registries(tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(KERNEL)
    same = {"got": 499500, "cache": "_QuickLoad", "int32": 45, "caller": 16, "ir_parsed_for_the_caller": True}
    numbas = {"library": "JITCodeLibrary", "ir_parsed": True}  # what Numba's compile or load makes
    first = _run(tmp_path)  # an empty cache: Numba compiles (its registries come with it)
    assert first == {**same, **numbas, "hits": 0, "misses": 1, "registries": True}
    second = _run(tmp_path)
    quick = {"library": "_LinkedLater", "ir_parsed": False}
    assert second == {**same, **quick, "hits": 1, "misses": 0, "registries": False}
    # a load that fails unexpectedly: Numba's own way (refresh, load) still takes it from the cache
    third = _run(tmp_path, FAIL_ONCE)
    assert third == {**same, **numbas, "hits": 1, "misses": 0, "registries": True}
    # no names from the object file: Numba's unserialize, still without the registries
    fourth = _run(tmp_path, NOT_ELF)
    assert fourth == {**same, **numbas, "hits": 1, "misses": 0, "registries": False}


NESTED = """
import json
import numpy as np
from arrowkafka.kernels import jit
import tiny
# a load inside a load (as an import while unpickling would make): the inner one's kernel first
real, inner = jit._unserialize, []
def nested(codegen, state):
    if not inner:  # (once: the inner load comes through here too)
        inner.append(0)
        inner[0] = int(tiny.twice(np.arange(4, dtype=np.int64)))
    return real(codegen, state)
jit._unserialize = nested
got = int(tiny.total(np.arange(1000, dtype=np.int64)))
kinds = [type(next(iter(f.overloads.values())).library).__name__ for f in (tiny.total, tiny.twice)]
print(json.dumps({"got": got, "inner": inner, "libraries": kinds}))
"""


def test_a_load_inside_a_load_stays_quick(tmp_path: Path) -> None:
    """Loading a kernel while another loads (an import during unpickling can) leaves the outer
    load the quick way too, not Numba's second load of the same code."""
    (tmp_path / "tiny.py").write_text(KERNEL + TWICE)
    env = _scratch_env(tmp_path)
    warm = "import numpy as np, tiny; tiny.total(np.arange(3)); tiny.twice(np.arange(3)); print('{}')"
    _child(warm, env, timeout=300)  # both compiled into the cache
    got = _child(NESTED, env, timeout=300)
    assert got == {"got": 499500, "inner": [12], "libraries": ["_LinkedLater", "_LinkedLater"]}


# a package whose cached kernel inlines a helper from another of its modules
HELPER = """
from arrowkafka.kernels.jit import njit

@njit(inline="always")
def step():
    return {n}
"""
USER = """
from arrowkafka.kernels.jit import njit
from .helper import step

@njit(cache=True)
def stepped():
    return step()
"""
STEPPED = """
import json
from scratchpkg.user import stepped
print(json.dumps({"got": stepped(), "hits": sum(stepped.stats.cache_hits.values())}))
"""


def test_a_changed_helper_reaches_the_cached_kernel_that_inlines_it(tmp_path: Path) -> None:
    """A helper changed in its own module (the kernel's file untouched, as a ``git pull`` into
    an editable install leaves it) is compiled into the kernel, not loaded from the cache with
    the old helper inside (Numba's key alone: the kernel's file and bytecode)."""
    pkg = tmp_path / "scratchpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "user.py").write_text(USER)
    env = {**_scratch_env(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    for n, hits in ((1, 0), (1, 1), (2, 0), (2, 1)):
        (pkg / "helper.py").write_text(HELPER.format(n=n))
        assert _child(STEPPED, env, timeout=300) == {"got": n, "hits": hits}


def test_a_kernels_sources_are_those_it_imports_from_the_package() -> None:
    import arrowkafka.kernels.records  # noqa: F401  (imported: its imports are found)
    from arrowkafka.kernels import jit

    names = set(jit.package_sources("arrowkafka.kernels.records"))
    assert {"arrowkafka.kernels.records", "arrowkafka.kernels.memory", "arrowkafka.kernels.decode"} <= names
    assert "arrowkafka.kernels.capture" not in names
    assert all(n.startswith("arrowkafka.") for n in names)


# every module of the kernels folder that imports Numba (isa and tiers do not; jit is the wrapper)
MODULES = sorted(
    p.stem for p in (ROOT / "kernels").glob("*.py") if p.stem not in ("__init__", "isa", "jit", "tiers")
)


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


def test_no_kernel_source_takes_numbas_own_njit() -> None:
    """What the module check above cannot see (a kernel made inside a function, a generated
    module's header): no source of the kernels or their generators names Numba's ``njit``."""
    sources = [*(ROOT / "kernels").glob("*.py"), *(ROOT / "arrowkafka" / "codegen").glob("*.py")]
    assert len(sources) > 10
    for path in sources:
        if path.name != "jit.py":
            assert not re.search(r"from numba import [^\n]*\bnjit\b|numba\.njit", path.read_text()), path


SAMPLE_RUN = """
import json, sys
import llvmlite.binding as ll
import arrowkafka as ak
from arrowkafka import cli
from arrowkafka.kernels import capture, decode, jit, records

# every kernel loaded: the names read from its object file are those Numba takes from its IR
same = []
quick = jit._unserialize
def checked(codegen, state):
    ir = ll.parse_bitcode(state[2][1])
    names = {{g.name for gs in (ir.functions, ir.global_variables) for g in gs if not g.is_declaration}}
    same.append(len(names) > 5 and names == jit._defined_symbols(state[2][0]))
    return quick(codegen, state)
jit._unserialize = checked

assert cli.main(["sample", "-o", {out!r}]) == 0
kernels = [f for m in (capture, decode, records) for f in vars(m).values() if hasattr(f, "stats")]
hits = sum(sum(f.stats.cache_hits.values()) for f in kernels)
libraries = [cres.library for f in kernels for cres in f.overloads.values()]
unparsed = sum(type(lib).__name__ == "_LinkedLater" and lib._shared_module is None for lib in libraries)
# and the kernels generated for a plan
body = b"\\x02a\\x02b\\x00"  # client software name "a", version "b", no tagged fields
fast = dict(kernel="specialised")
again = ak.encode(ak.decode([body], "ApiVersionsRequest", 3, **fast), "ApiVersionsRequest", 3, **fast)
# after all of it, Numba's array, list and string modules: imported where a loaded kernel's
# environment names them (np.zeros, a slice assignment, ``in`` on a tuple: 35-100 ms)
implementations = sorted(m for m in ("numba.np.arrayobj", "numba.cpython.listobj", "numba.cpython.unicode")
                         if m in sys.modules)
print(json.dumps({{"hits": hits, "unparsed": unparsed, "registries": "numba.np.linalg" in sys.modules,
                  "implementations": implementations,
                  "same": same, "round_trip": again.to_pylist() == [body]}}))
"""


def test_the_real_kernels_load_without_the_registries(tmp_path: Path) -> None:
    """A capture decoded in a new process (the capture, message and record kernels), once the
    kernels are in Numba's cache: they come from it, Numba's registries and the modules of its
    array, list and string implementations stay unloaded, no kernel's IR is parsed, and the
    names each defines, read from its object file, are those its IR gives (a plan's generated
    kernels too)."""
    # the first may compile what the cache lacks
    runs = [_child(SAMPLE_RUN.format(out=str(tmp_path / f"out{i}"))) for i in range(2)]
    last = runs[1]
    assert last["hits"] >= 3 and last["unparsed"] == last["hits"] and last["registries"] is False, runs
    assert last["implementations"] == [], runs
    assert len(last["same"]) > last["hits"] and all(last["same"]), runs  # (the generated kernels' too)
    assert last["round_trip"] is True
