"""``kernel="auto"`` (``arrowkafka.codegen.promote``): a plan starts on the interpreter; once it has
had enough input, a child process compiles its generated kernel into Numba's cache while the
interpreter carries on, and the next batch after the child is done uses the kernel. A later
process finds the kernel built and uses it at once; a compile that fails leaves the plan on
the interpreter with a warning; without the JIT no child is started. Every batch, before and
after the switch, decodes (encodes) exactly as the interpreter does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.codegen import decode as codegen
from arrowkafka.codegen import modules, promote
from arrowkafka.kernels import tiers
from arrowkafka.plan import compile_plan
from tests.conftest import SHARED

pytestmark = pytest.mark.jit  # the child compiles with Numba

SPECS = ak.load_specs()
BODY = (SHARED / "vectors" / "fetch_request_v12.bin").read_bytes()
BODIES = pa.array([BODY] * 50, pa.binary())


@pytest.fixture()
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """A new generated-kernel folder (so the child really compiles), per-process state as in a
    new process, a threshold of one batch; the pids of the children started."""
    monkeypatch.setenv("ARROWKAFKA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(promote, "_TIERS", {})
    monkeypatch.setattr(promote, "_AT_ONCE", set())
    monkeypatch.setattr(promote, "AFTER", 1)
    monkeypatch.setattr(modules, "_LOADED", {})  # no kernel imported yet, as in a new process
    tiers.expect(tiers.PURE_BUDGET + 1)  # past a process's first 64 KB: the compiled interpreter
    pids: list[int] = []
    spawn = promote.spawn_compile

    def counted(*args: Any) -> int:
        pids.append(spawn(*args))
        return pids[-1]

    monkeypatch.setattr(promote, "spawn_compile", counted)
    return pids


def tier(kind: str, name: str, version: int) -> Any:
    """The plan's tier (a new one if it has not been through ``auto`` yet)."""
    return promote._TIERS.get((kind, compile_plan(SPECS[name], version)), promote._Tier())


def until_switched(step: Any, kind: str, name: str, version: int, limit: float = 240) -> int:
    """Run ``step()`` until the plan uses its generated kernel; the number of steps."""
    t0, n = time.monotonic(), 0
    while tier(kind, name, version).fast is None:
        assert time.monotonic() - t0 < limit, "the child did not finish in time"
        assert not tier(kind, name, version).failed
        step()
        n += 1
        time.sleep(0.05)
    return n


def test_decode_moves_to_the_generated_kernel_once_the_child_has_compiled_it(
    fresh: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    want = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")

    def step() -> None:
        assert ak.decode(BODIES, "FetchRequest", 12).equals(want)

    step()
    assert len(fresh) == 1 and tier("decode", "FetchRequest", 12).fast is None  # compiling
    steps = until_switched(step, "decode", "FetchRequest", 12)
    assert steps >= 1 and len(fresh) == 1  # one child, however many batches
    name, path, _ = codegen.module_for(compile_plan(SPECS["FetchRequest"], 12))
    assert promote.built(path) and tier("decode", "FetchRequest", 12).fast is modules._LOADED[name]
    step()  # on the generated kernel now

    # a later process: the kernel is built, so it is loaded (with no child) once the plan has
    # had LOAD_AFTER bytes, long before AFTER
    monkeypatch.setattr(promote, "AFTER", 64 << 20)
    monkeypatch.setattr(promote, "LOAD_AFTER", 2 * len(BODY) * len(BODIES))
    promote._TIERS.clear()
    modules._LOADED.clear()
    step()
    assert tier("decode", "FetchRequest", 12).fast is None  # not yet worth loading
    step()
    assert len(fresh) == 1 and tier("decode", "FetchRequest", 12).fast is not None


def test_a_marker_over_an_empty_cache_compiles_in_a_child(
    fresh: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker says built, but Numba's cache does not hold the kernel (emptied, or another
    Numba): the batch stays on the interpreter while a child compiles, instead of compiling
    inside the call."""
    monkeypatch.setattr(promote, "AFTER", 64 << 20)
    monkeypatch.setattr(promote, "LOAD_AFTER", 1)
    _, path, source = codegen.module_for(compile_plan(SPECS["FetchRequest"], 12))
    modules.write_generated(path, source)
    promote.mark_built(path)  # a marker, and nothing in the cache
    want = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")
    assert ak.decode(BODIES, "FetchRequest", 12).equals(want)
    assert len(fresh) == 1 and tier("decode", "FetchRequest", 12).fast is None
    until_switched(lambda: ak.decode(BODIES, "FetchRequest", 12), "decode", "FetchRequest", 12)
    assert promote.built(path) and ak.decode(BODIES, "FetchRequest", 12).equals(want)


def test_encode_moves_the_same_way(fresh: list[int]) -> None:
    batch = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")

    def step() -> None:
        assert ak.encode(batch, "FetchRequest", 12).equals(BODIES)

    step()
    assert len(fresh) == 1
    until_switched(step, "encode", "FetchRequest", 12)
    step()
    assert len(fresh) == 1


def test_a_built_kernel_is_loaded_at_once_where_the_interpreter_is_not_loaded_yet(
    fresh: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later process, where the plan's kernel is built: far below LOAD_AFTER it stays on the
    interpreter if that is loaded already, and takes the kernel at once if not (it loads one of
    the two either way)."""
    tiers.expect(tiers.PURE_BUDGET + 1, "encode")  # the compiled encode interpreter, not plain Python
    batch = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")
    ak.encode(batch, "FetchRequest", 12, kernel="interpreter")
    assert promote._interpreter_loaded("encode") and promote._interpreter_loaded("decode")
    until_switched(lambda: ak.encode(batch, "FetchRequest", 12), "encode", "FetchRequest", 12)
    monkeypatch.setattr(promote, "AFTER", 1 << 40)
    monkeypatch.setattr(promote, "LOAD_AFTER", 1 << 40)
    for loaded in (True, False):
        promote._TIERS.clear()
        modules._LOADED.clear()
        monkeypatch.setattr(promote, "_interpreter_loaded", lambda kind, loaded=loaded: loaded)
        assert ak.encode(batch, "FetchRequest", 12).equals(BODIES)
        fast = tier("encode", "FetchRequest", 12).fast
        assert (fast is None) == loaded
    assert len(fresh) == 1  # the one child that built it


def test_only_a_first_plan_loads_at_once_and_a_stale_marker_starts_no_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where every plan's kernel is built and no interpreter is loaded, only the process's first
    plan of each kind takes its kernel at once; the others wait for LOAD_AFTER as before (a
    process of many small plans would otherwise load a kernel for each). A marker over a cache
    that lacks the kernel starts no compile for a small job. (The kernels are stand-ins.)"""
    monkeypatch.setattr(promote, "_TIERS", {})
    monkeypatch.setattr(promote, "_AT_ONCE", set())
    monkeypatch.setattr(promote, "_interpreter_loaded", lambda kind: False)
    monkeypatch.setattr(promote, "built", lambda path: True)
    held = {"cache": True}
    monkeypatch.setattr(promote, "_in_cache", lambda *args: held["cache"])
    loaded: list[str] = []
    spawned: list[Any] = []
    monkeypatch.setattr(promote, "spawn_compile", lambda *args: spawned.append(args) or -1)

    def generated(kind: str) -> tuple[Any, Any]:
        def load(plan: str) -> Any:
            return lambda *args: loaded.append(plan)

        return (lambda plan: (f"ak_{plan}", Path(f"/nowhere/ak_{plan}.py"), "")), load

    monkeypatch.setattr(promote, "_generated", generated)
    small = tiers.PURE_BUDGET + 1  # compiled, far below LOAD_AFTER
    assert promote.auto("encode", "A", small, lambda: ()) is not None  # the first plan: at once
    assert promote.auto("encode", "B", small, lambda: ()) is None  # another: not yet
    assert promote.auto("decode", "C", small, lambda: ()) is not None  # the other kind's first
    assert promote.auto("encode", "B", promote.LOAD_AFTER, lambda: ()) is not None  # past it
    assert loaded == ["A", "C", "B"]
    monkeypatch.setattr(promote, "_AT_ONCE", set())  # a new process, whose cache lost the kernel
    held["cache"] = False
    assert promote.auto("encode", "D", small, lambda: ()) is None
    assert spawned == [] and loaded == ["A", "C", "B"]


def test_a_failed_compile_warns_and_stays_on_the_interpreter(
    fresh: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = ("ak_broken", tmp_path / "ak_broken.py", "raise RuntimeError('generated source is broken')\n")
    monkeypatch.setattr(codegen, "module_for", lambda plan: broken)
    want = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")
    t0 = time.monotonic()
    with pytest.warns(UserWarning, match="generated source is broken"):
        while not tier("decode", "FetchRequest", 12).failed:
            assert time.monotonic() - t0 < 120
            assert ak.decode(BODIES, "FetchRequest", 12).equals(want)
            time.sleep(0.05)
    assert ak.decode(BODIES, "FetchRequest", 12).equals(want)
    assert len(fresh) == 1 and tier("decode", "FetchRequest", 12).fast is None


def test_no_child_without_the_jit(fresh: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    want = ak.decode(BODIES, "FetchRequest", 12, kernel="interpreter")
    for _ in range(3):
        assert ak.decode(BODIES, "FetchRequest", 12).equals(want)
    assert fresh == [] and tier("decode", "FetchRequest", 12).fast is None


def test_the_threshold_counts_bytes_per_plan(fresh: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promote, "AFTER", 3 * len(BODY) * len(BODIES))
    for _ in range(2):
        ak.decode(BODIES, "FetchRequest", 12)
        ak.decode(BODIES, "FetchRequest", 11, errors="null")  # another plan: its own count
    assert fresh == []
    ak.decode(BODIES, "FetchRequest", 12)
    assert len(fresh) == 1
