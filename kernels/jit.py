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

A cached kernel is its machine code (an object file) and its LLVM IR, which Numba parses on
every load, and whose functions it walks to learn the names the kernel defines: 140 ms of the
bundled sample's 17 loads (85 parsing, 52 walking), 11 ms of a generated kernel's, more than
the object code's own loading. The IR is there only for a later compile that calls the kernel
(Numba links it into the caller), so here it is parsed when that happens, and the names come
from the object file's symbol table, which lists the same ones (checked on every kernel of a
capture, and by the tests). An object file this does not read (not 64-bit little-endian ELF)
loads Numba's way.

Measured in fresh processes, in turns against the code before: the bundled sample decoded
1.68-2.06 -> 1.03-1.63 s; a process's first decode 620-960 -> 407-670 ms; a plan's first
encode (loading its generated kernel, Numba already running) 75-129 -> 38-58 ms.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import struct
import sys
from typing import Any

import llvmlite.binding as ll
from numba import njit as _numba_njit
from numba.core.caching import FunctionCache
from numba.core.codegen import JITCodeLibrary
from numba.core.runtime import rtsys

__all__ = ["njit"]


class _QuickLoad(FunctionCache):
    """A function's cache that loads a kernel without refreshing the target context, keyed
    also on the source of the modules its own imports from its package (``_sources_digest``)."""

    def _index_key(self, sig: Any, codegen: Any) -> Any:
        return (*super()._index_key(sig, codegen), _sources_digest(self._py_func.__module__))

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            rtsys.initialize(target_context)  # (once per process: the machine code calls it)
            codegen = target_context.codegen()
            # for this load only: Numba loads under its compiler lock, so no other thread's does
            # (and a load nested in this one, from an import while unpickling, puts back ours)
            before = codegen.__dict__.get("unserialize_library")
            codegen.unserialize_library = functools.partial(_unserialize, codegen)
            try:
                with self._guard_against_spurious_io_errors():
                    cres = self._load_overload(sig, target_context)
            finally:
                if before is None:
                    del codegen.unserialize_library
                else:
                    codegen.unserialize_library = before
        except Exception:  # anything unexpected: Numba's own way, below, says what it is
            cres = None
        return cres if cres is not None else super().load_overload(sig, target_context)


def _unserialize(codegen: Any, state: tuple[str, str, Any]) -> Any:
    """Numba's ``_unserialize`` of a cached library of object code, but for the IR (parsed
    when first linked) and the defined names (from the object file)."""
    name, kind, data = state
    engine = codegen._engine
    known = isinstance(getattr(engine, "_defined_symbols", None), set)
    ours = known and kind == "object" and codegen._library_class is JITCodeLibrary
    symbols = _defined_symbols(data[0]) if ours else None
    if symbols is None:
        return type(codegen).unserialize_library(codegen, state)
    library = codegen.create_library(name)
    library.__class__ = _LinkedLater
    library._ir_bitcode = data[1]
    library.enable_object_caching()
    library._set_compiled_object(data[0])
    library._finalize_final_module()  # loads the object code
    engine._defined_symbols |= symbols
    return library


class _LinkedLater(JITCodeLibrary):
    """A library loaded from the cache whose IR is parsed when a compile links it in."""

    _ir_bitcode: bytes

    def _get_module_for_linking(self) -> Any:
        if self._shared_module is None:
            self._shared_module = ll.parse_bitcode(self._ir_bitcode)
        return self._shared_module


_ELF64_LE = b"\x7fELF\x02\x01"
_SHT_SYMTAB = 2
_STT_SECTION, _STT_FILE = 3, 4


def _defined_symbols(obj: bytes) -> set[str] | None:
    """The names an ELF64 little-endian object file defines (what Numba collects from the
    IR: every function and global variable that is not a declaration); None for another
    format. Section and file symbols are not names of the code."""
    if obj[:6] != _ELF64_LE:
        return None
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    names: set[str] = set()
    for i in range(shnum):
        _, kind, _, _, offset, size, link, *_ = struct.unpack_from("<IIQQQQII", obj, shoff + i * shentsize)
        if kind != _SHT_SYMTAB:
            continue
        (strings,) = struct.unpack_from("<Q", obj, shoff + link * shentsize + 24)  # its sh_offset
        for at, info, _, section, _, _ in struct.iter_unpack("<IBBHQQ", obj[offset : offset + size]):
            if section != 0 and info & 0xF not in (_STT_SECTION, _STT_FILE):  # 0: undefined
                start = strings + at
                names.add(obj[start : obj.index(b"\0", start)].decode())
    return names


# a module's imports from a package, one line: ``from .x import ...``, ``from pkg.x import ...``
_FROM = re.compile(rb"from (\.+[\w.]*|\w[\w.]*) import \(?([\w ,]*)")


@functools.cache
def _sources_digest(module: str) -> str:
    """A digest of the source of ``module`` and of every module of its package it imports from,
    transitively (``package_sources``). Numba keys a cached kernel on its own file and bytecode
    only, so a change to a helper it inlines from another module (``memory.copy_bytes``, the
    varint readers), with its own file untouched (a ``git pull`` into an editable install),
    would leave the kernel compiled with the old helper in every cache. Each file is read and
    hashed once per process (the kernels of a capture: ten files, about a millisecond)."""
    digest = hashlib.sha256()
    for name, source in sorted(package_sources(module).items()):
        digest.update(name.encode() + b"\0" + source)
    return digest.hexdigest()


def package_sources(module: str) -> dict[str, bytes]:
    """The SHA-256 of the source of ``module`` (imported) and of the modules of its package it
    imports from, transitively, by name (the kernel's own package's, and this one's for a
    generated kernel module)."""
    roots = {module.partition(".")[0], __name__.partition(".")[0]}
    found: dict[str, bytes] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        facts = None if name in found else _module_facts(name)
        if facts is not None:
            found[name] = facts[0]
            todo += [n for n in facts[1] if n.partition(".")[0] in roots]
    return found


_FACTS: dict[str, tuple[bytes, tuple[str, ...]]] = {}


def _module_facts(name: str) -> tuple[bytes, tuple[str, ...]] | None:
    """(the SHA-256 of module ``name``'s source, the modules it names in ``from ... import``
    lines and the names it imports from them, any of which may be a module), once per process;
    None where it is not imported or has no file."""
    if name not in _FACTS:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if path is None:
            return None
        with open(path, "rb") as f:
            source = f.read()
        package = getattr(mod, "__package__", None) or name.rpartition(".")[0]
        named: list[str] = []
        for base, names in _from_lines(source):
            try:
                base_name = importlib.util.resolve_name(base.decode(), package)
            except ImportError:
                continue
            # the module, and any name it imports that is itself a module (``from . import x``)
            named += [base_name, *(f"{base_name}.{n.decode()}" for n in re.findall(rb"\w+", names))]
        _FACTS[name] = (hashlib.sha256(source).digest(), tuple(named))
    return _FACTS[name]


def _from_lines(source: bytes) -> list[tuple[bytes, bytes]]:
    """(module, names) of every line of ``source`` that starts ``from ... import``: found by
    ``bytes.find``, as a regular expression tried at every byte took most of the time."""
    found, at = [], 0 if source.startswith(b"from ") else source.find(b"\nfrom ")
    while at >= 0:
        line = _FROM.match(source, at + (source[at] == 10))  # (10: the newline before it)
        if line:
            found.append((line[1], line[2]))
        at = source.find(b"\nfrom ", at + 1)
    return found


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
