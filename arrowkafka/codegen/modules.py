"""Where generated kernel modules live and how they are loaded: written once to a cache folder
and imported from there, so Numba caches their machine code on disk like an installed
module's. One place for decode and encode kernels (``codegen.decode``, ``codegen.encode``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import py_compile
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "cache_dir",
    "cache_root",
    "generated_path",
    "import_generated",
    "kernel_sources",
    "write_generated",
    "load_generated",
]

_LOADED: dict[str, Any] = {}


def cache_root() -> Path:
    """The folder arrowkafka keeps what it builds in (``ARROWKAFKA_CACHE_DIR``, else
    ~/.cache/arrowkafka): generated kernels, parsed specs (``api``)."""
    return Path(os.environ.get("ARROWKAFKA_CACHE_DIR") or Path.home() / ".cache" / "arrowkafka")


def cache_dir() -> Path:
    """Where generated kernels live (under ``cache_root``)."""
    return cache_root() / "kernels"


@functools.cache
def kernel_sources(*modules: str) -> bytes:
    """The source of the ``arrowkafka.kernels`` modules a generated kernel calls into, read once
    per process: part of the generated module's name, since Numba's cache of a caller does not
    see a change to its callees."""
    out = b""
    for module in modules:
        found = importlib.util.find_spec(f"arrowkafka.kernels.{module}")
        assert found is not None and found.origin is not None
        out += Path(found.origin).read_bytes()
    return out


def generated_path(name: str) -> Path:
    """Where generated module ``name`` lives: under the cache folder as it is now."""
    return cache_dir() / f"{name}.py"


def import_generated(name: str, path: Path, source: str) -> Any:
    """The ``run`` of generated module ``name`` (decode or encode), written to ``path`` once
    and imported once per process."""
    if name not in _LOADED:
        write_generated(path, source)
        _LOADED[name] = load_generated(name, path)
    return _LOADED[name]


def write_generated(path: Path, source: str) -> None:
    """Write a generated kernel module to ``path``, once: rewriting it would change its
    timestamp, and Numba would take its cache for stale."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        tmp.replace(path)  # atomic: other processes never see half a file


def load_generated(name: str, path: Path) -> Any:
    """Import the generated kernel module at ``path``, so Numba caches it on disk like an
    installed module; its ``run``."""
    _bytecode(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.run


def _current(cached: str, path: Path) -> bool:
    """Is the bytecode at ``cached`` the one an import of ``path`` takes? Its header names the
    source's time and size (PEP 552), as the import checks them: a module deleted and written
    again has the same source and another time."""
    try:
        with open(cached, "rb") as f:
            head = f.read(16)
        st = os.stat(path)
    except OSError:
        return False
    return (
        len(head) == 16
        and head[:4] == importlib.util.MAGIC_NUMBER
        and head[4:8] == bytes(4)  # checked by time and size, not by hash
        and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
    )


def _bytecode(path: Path) -> None:
    """Compile the module at ``path`` to bytecode beside it, once, as pip does for an installed
    module. Where ``PYTHONDONTWRITEBYTECODE`` is set (container images often set it), an import
    writes none, so every process would compile the generated source again: about 9 ms a
    kernel here, as long as decoding 10 MB. The folder is our cache, as Numba's files in it
    are; a cache we cannot write to only leaves the import to compile the source."""
    if not sys.dont_write_bytecode:
        return  # the import writes it
    cached = importlib.util.cache_from_source(str(path))
    if _current(cached, path):
        return
    try:
        py_compile.compile(str(path), cfile=cached, doraise=True)
    except (OSError, py_compile.PyCompileError):
        pass  # (a broken module fails its import, which says why)
