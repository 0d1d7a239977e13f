"""When a plan moves from the interpreter to the kernel generated for it (``kernel="auto"``).

A generated kernel runs faster than the interpreter but compiles for seconds per plan, once
per machine: Numba then keeps it in its on-disk cache, and loading it is quick (the figures:
the README's kernel tiers, ``bench/``).
Stopping a job to compile only pays off after gigabytes, so the compile happens elsewhere:

- a plan starts on the interpreter (``kernels/tiers.py`` decides between its plain-Python and
  compiled forms);
- once this process has given the plan ``AFTER`` bytes of input (a bulk job, not a one-off),
  a child process compiles the generated kernel into Numba's cache, on another core, while
  this one carries on with the interpreter;
- when the child has finished, the next batch loads the kernel from the cache and uses it from
  then on. A ``.built`` marker beside the generated module says the cache has it, so a later
  process loads it with no child, once the plan has had ``LOAD_AFTER`` bytes, or at once for
  the process's first plan of a kind if it has not loaded the interpreter yet (if Numba's
  cache turns out not to hold it after all, that process compiles it in a child as above
  rather than stopping for seconds, once the plan has had ``LOAD_AFTER`` bytes).

Decode and encode kernels are told apart by ``kind``. A child takes a lock per module, so two
processes needing the same kernel compile it once. If a compile fails, the plan stays on the
interpreter, with a warning.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arrowkafka.codegen.modules import load_generated, write_generated
from arrowkafka.kernels.tiers import compiled

__all__ = ["AFTER", "LOAD_AFTER", "auto", "built", "mark_built", "spawn_compile"]

AFTER = 64 << 20  # bytes of input one plan takes in a process before its kernel is compiled
# bytes of input one plan takes before a kernel built by an earlier process is loaded: loading
# costs about 25-45 ms (the module, and Numba's cache), what the interpreter loses to the
# kernel over 27-49 MB (Metadata v12, bench/first_contact.py: 570 against 1,193 MB/s; encoding
# loses it sooner), so a small job stays on the interpreter, which every plan shares and is
# loaded already
LOAD_AFTER = 32 << 20
# ... unless this process has not loaded the interpreter (of this kind) yet and this is its
# first plan of the kind: then one load or the other is paid either way, and the built kernel is
# the faster one to have loaded (encoding Metadata v12 on the first call: 531 against 298
# MB/s). Only the first: a process of many small plans would otherwise load a kernel for each


@dataclass
class _Tier:
    """One plan's way through the tiers, in this process."""

    spent: int = 0  # bytes of input given to the interpreter
    looked: bool = False  # the marker checked, before the plan had AFTER bytes
    pid: int = 0  # the child compiling the kernel, while it runs
    fast: Any = None  # the generated kernel, once in use
    failed: bool = False  # it did not compile: stay on the interpreter


_TIERS: dict[tuple[str, Any], _Tier] = {}
_AT_ONCE: set[str] = set()  # kinds whose first plan has looked for a built kernel at once
_LOCK = threading.Lock()


def _generated(kind: str) -> tuple[Callable[[Any], tuple[str, Path, str]], Callable[[Any], Any]]:
    """(plan -> (module name, path, source), plan -> the loaded kernel) for ``kind``. The
    generators are imported here, once a plan has earned its kernel: every batch passes
    through ``auto``, and a small job should not load them."""
    from arrowkafka.codegen import decode, encode

    if kind == "decode":
        return decode.module_for, decode.generated_decoder
    return encode.module_for, encode.generated_encoder


def _marker(path: Path) -> Path:
    # per Numba cache folder: a kernel compiled into another cache is not in this one
    where = os.environ.get("NUMBA_CACHE_DIR", "")
    return path.with_suffix(f".{hashlib.sha256(where.encode()).hexdigest()[:8]}.built")


def built(path: Path) -> bool:
    """Is the kernel generated at ``path`` compiled into Numba's cache on this machine?"""
    return _marker(path).exists()


def mark_built(path: Path) -> None:
    _marker(path).touch()


def _jit_disabled() -> bool:
    return os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


def auto(kind: str, plan: Any, nbytes: int, example_args: Callable[[], tuple[Any, ...]]) -> Any | None:
    """The generated kernel if ``kernel="auto"`` should use it for a batch of ``nbytes``, else
    None (use the interpreter). ``example_args()``: arguments of a call to the kernel, whose
    types the child compiles it for."""
    with _LOCK:
        tier = _TIERS.setdefault((kind, plan), _Tier())
        if tier.fast is not None or tier.failed:
            return tier.fast
        tier.spent += nbytes
        if _jit_disabled():
            return None
        at_once = False
        if tier.spent < AFTER and tier.pid == 0:
            # a kernel an earlier process built: taken once loading it pays, unless this batch
            # runs on the plain-Python tier (which does not load Numba)
            if tier.looked or not compiled(nbytes, kind):
                return None
            at_once = tier.spent < LOAD_AFTER
            if at_once and (kind in _AT_ONCE or _interpreter_loaded(kind)):
                return None
            if at_once:  # the process's first plan of this kind: at most one such load
                _AT_ONCE.add(kind)
            tier.looked = True
        module_for, load = _generated(kind)
        name, path, source = module_for(plan)
        if tier.spent < AFTER and tier.pid == 0 and not built(path):
            return None
        if tier.pid == 0 and not _in_cache(path, load, plan, example_args):
            if at_once:  # (a stale marker, now gone) a small job starts no compile
                return None
            tier.pid = spawn_compile(name, path, source, example_args())
            return None
        if tier.pid > 0:
            try:
                done, status = os.waitpid(tier.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                done, status = tier.pid, -1
            if done == 0:
                return None  # still compiling
            tier.pid = -1
            if not built(path):
                log = path.with_suffix(".log")
                why = log.read_text()[-2000:] if log.exists() else f"exit status {status}"
                _fail(tier, plan, why)
                return None
        try:
            fast = load(plan)
            fast(*example_args())  # decodes nothing: loads the machine code from the cache
        except Exception as e:  # a broken module: keep going on the interpreter, but say so
            _fail(tier, plan, str(e))
            return None
        tier.fast = fast
        return fast


def _interpreter_loaded(kind: str) -> bool:
    """Has this process loaded the compiled interpreter of ``kind`` (decode or encode)?"""
    module = sys.modules.get(f"arrowkafka.kernels.{kind}")
    return module is not None and bool(getattr(module.run, "overloads", None))


def _in_cache(path: Path, load: Callable[[Any], Any], plan: Any, example_args: Callable[[], Any]) -> bool:
    """Is the kernel in Numba's cache, so that loading it costs milliseconds? The marker says
    so, and the cache itself is asked (it may have been emptied, or belong to another Numba)."""
    if not built(path):
        return False
    from numba import typeof

    try:
        fast = load(plan)
        sig = tuple(typeof(a) for a in example_args())
        cres = fast._cache.load_overload(sig, fast.targetctx)
        held = cres is not None
        if held:  # keep what was loaded, as Numba's Dispatcher.compile does on a cache hit
            fast.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            fast.add_overload(cres)
    except Exception:  # a broken module or cache: the child finds out, and says why
        held = False
    if not held:
        _marker(path).unlink(missing_ok=True)  # stale: the child compiles it again
    return held


def _fail(tier: _Tier, plan: Any, why: str) -> None:
    tier.failed = True
    warnings.warn(f"{plan.name} v{plan.version}: generated kernel failed to compile: {why}", stacklevel=4)


def spawn_compile(name: str, path: Path, source: str, args: tuple[Any, ...]) -> int:
    """Start a child that compiles module ``name`` (written to ``path``) for the types of
    ``args`` into Numba's cache; its pid. It is reaped with ``os.waitpid``."""
    from numba import typeof  # (here: importing Numba costs half a second)

    write_generated(path, source)
    sig = path.with_suffix(f".{os.getpid()}.sig")
    sig.write_bytes(pickle.dumps(tuple(typeof(a) for a in args)))
    log = path.with_suffix(".log")
    actions = [
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    ]
    # -P: not the working directory's files ahead of the installed package
    argv = [sys.executable, "-P", "-c", _CHILD, name, str(path), str(sig)]
    return os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions)


_CHILD = "import sys; from arrowkafka.codegen.promote import child; child(*sys.argv[1:])"


def child(name: str, path: str, sig_path: str) -> None:
    """In the child: compile, unless another process did while this one waited for the lock."""
    import fcntl

    os.nice(5)  # the parent's work comes first
    sig = pickle.loads(Path(sig_path).read_bytes())
    Path(sig_path).unlink()
    with open(Path(path).with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built(Path(path)):
            load_generated(name, Path(path)).compile(sig)
            mark_built(Path(path))
