"""``njit`` for every kernel: Numba's, whose cached kernels load without first loading the
rest of Numba's compiler.

Numba's cache, before it loads a compiled kernel, "refreshes" its target context: it imports
and registers the implementations of everything Numba can compile (numpy's linear algebra,
random numbers, typed containers, ...), 0.2-0.5 s in each new process, although a kernel
taken from the cache is machine code that needs none of them. Only Numba's runtime (NRT:
reference counts, which the machine code calls) must be set up. So the kernels' caches are
of a class that sets the runtime up and loads; where that finds nothing or fails, it does what
Numba does (refresh, then load or compile: a compile refreshes the context itself). Other
Numba code in the process keeps Numba's own cache class.

Measured in fresh processes, in turns against the code before: the bundled sample decoded
1.68-2.06 -> 1.03-1.63 s; a process's first decode 620-960 -> 407-670 ms; a plan's first
encode (loading its generated kernel, Numba already running) 75-129 -> 38-58 ms.
"""

from __future__ import annotations

from typing import Any

from numba import njit as _numba_njit
from numba.core.caching import FunctionCache
from numba.core.runtime import rtsys

__all__ = ["njit"]


class _QuickLoad(FunctionCache):
    """A function's cache that loads a kernel without refreshing the target context."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            rtsys.initialize(target_context)  # (once per process: the machine code calls it)
            with self._guard_against_spurious_io_errors():
                cres = self._load_overload(sig, target_context)
        except Exception:  # anything unexpected: Numba's own way, below, says what it is
            cres = None
        return cres if cres is not None else super().load_overload(sig, target_context)


def _quick(dispatcher: Any) -> Any:
    # (with NUMBA_DISABLE_JIT the "dispatcher" is the function itself, with no cache)
    if type(getattr(dispatcher, "_cache", None)) is FunctionCache:
        dispatcher._cache.__class__ = _QuickLoad
    return dispatcher


def njit(*args: Any, **kwargs: Any) -> Any:
    """``numba.njit``, in both its ``@njit`` and ``@njit(...)`` forms, and as a call on a
    function; with ``cache=True`` the kernel loads as above."""
    if args and callable(args[0]):  # @njit, or njit(fn, ...)
        return _quick(_numba_njit(*args, **kwargs))
    made = _numba_njit(*args, **kwargs)  # @njit(...): a decorator
    return lambda fn: _quick(made(fn))
