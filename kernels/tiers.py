"""Two tiers of the same kernel source: compiled by Numba, or run as plain Python.

Importing Numba and its first dispatch cost about half a second in a new process; decoding a
few kilobytes in plain Python costs milliseconds. So a process starts on the plain-Python
tier and moves to the compiled one (for good) once it has more than ``PURE_BUDGET`` bytes
to decode or encode. Both tiers are ``decode.py`` (``encode.py``) itself: the plain one is
that file executed with a do-nothing ``njit``, so there is one source of truth (and
``NUMBA_DISABLE_JIT=1`` runs test it).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["PURE_BUDGET", "compiled", "copy_bytes_py", "expect", "kernel_run", "raw_py"]

PURE_BUDGET = 64 * 1024  # bytes a process decodes on the plain-Python tier, in all

_pure: dict[str, types.ModuleType] = {}
_spent = 0


def _identity(*args: Any, **kwargs: Any) -> Any:
    """``njit`` that does nothing, in both its ``@njit`` and ``@njit(...)`` forms."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


def _no_hint(*args: Any) -> None:
    """A hint to the CPU (``hints.py``), which Python has no use for."""


def raw_py(x: Any) -> Any:
    """``memory.raw`` as Python: the array itself, flat as Numba's bare pointer indexes it (a
    view: a C-order array's ``reshape(-1)`` copies nothing)."""
    return x if x.ndim == 1 else x.reshape(-1)


def copy_bytes_py(src: Any, pos: int, n: int, dst: Any, at: int) -> None:
    """``memory.copy_bytes`` (a Numba intrinsic) as Python: numpy's slice copy."""
    if n > 0:
        dst[at : at + n] = src[pos : pos + n]


def _pure_module(name: str) -> types.ModuleType:
    if name not in _pure:
        path = Path(__file__).with_name(f"{name}.py")
        source = path.read_text().replace("from .jit import njit\n", "njit = _identity\n", 1)
        # hints to the CPU are Numba intrinsics: nothing to do in Python
        source = source.replace("from .hints import message_ahead\n", "message_ahead = _no_hint\n", 1)
        copies = "copy_bytes, zeros = copy_bytes_py, np.zeros\n"  # (a Numba intrinsic each)
        source = source.replace("from .memory import copy_bytes, zeros\n", copies, 1)
        source = source.replace("from .memory import raw as bare", "bare = raw_py", 1)  # (a pointer in Numba)
        module = types.ModuleType(f"{__package__}.{name}_pure")
        module.__file__ = str(path)
        module.__package__ = __package__
        module.__dict__["_identity"] = _identity
        module.__dict__["_no_hint"] = _no_hint
        module.__dict__["copy_bytes_py"] = copy_bytes_py
        module.__dict__["raw_py"] = raw_py
        exec(compile(source, str(path), "exec"), module.__dict__)
        _pure[name] = module
    return _pure[name]


def expect(nbytes: int, kernel: str = "decode") -> None:
    """Say that ``nbytes`` of work are coming, perhaps in many small calls: past the budget,
    the compiled kernel from the first call on (small calls alone would each stay plain)."""
    if _spent + nbytes > PURE_BUDGET:
        importlib.import_module(f"{__package__}.{kernel}")


def compiled(nbytes: int, kernel: str = "decode") -> bool:
    """Will ``kernel_run(nbytes, kernel)`` give the compiled kernel (Numba loaded anyway)?"""
    return f"{__package__}.{kernel}" in sys.modules or _spent + nbytes > PURE_BUDGET


def kernel_run(nbytes: int, kernel: str = "decode") -> Any:
    """The ``run`` function of ``kernels/<kernel>.py`` (decode or encode) for ``nbytes`` more
    bytes of work."""
    global _spent
    if not compiled(nbytes, kernel):
        _spent += nbytes
        return _pure_module(kernel).run
    return importlib.import_module(f"{__package__}.{kernel}").run
