"""Generated kernel modules are imported from their bytecode where Python writes none
(``PYTHONDONTWRITEBYTECODE``): ``arrowkafka.codegen.modules`` compiles it once, beside the
module in the kernel cache, and later imports read it instead of compiling the source."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import py_compile
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arrowkafka.codegen import modules

SOURCE = "def run():\n    return 42\n"


@pytest.fixture()
def no_bytecode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Python as under PYTHONDONTWRITEBYTECODE=1; where a generated module goes."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    yield tmp_path / "ak_test_module.py"
    for name in ("ak_test_module", "ak_test_module_again", "ak_test_module_third"):
        sys.modules.pop(name, None)


def test_bytecode_written_once_and_read_after(no_bytecode: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = no_bytecode
    modules.write_generated(path, SOURCE)
    cached = Path(importlib.util.cache_from_source(str(path)))
    assert not cached.exists()
    assert modules.load_generated("ak_test_module", path)() == 42
    assert cached.exists()
    written = cached.stat().st_mtime_ns

    def no_compiling(*args: object, **kwargs: object) -> object:
        raise AssertionError("the source was compiled again")

    # a later process: the import reads the bytecode, and nothing compiles or rewrites it
    monkeypatch.setattr(importlib.machinery.SourceFileLoader, "source_to_code", no_compiling)
    monkeypatch.setattr(py_compile, "compile", no_compiling)
    assert modules.load_generated("ak_test_module_again", path)() == 42
    assert cached.stat().st_mtime_ns == written


def test_a_cache_without_room_for_bytecode_still_imports(
    no_bytecode: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> object:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(py_compile, "compile", refused)
    modules.write_generated(no_bytecode, SOURCE)
    assert modules.load_generated("ak_test_module", no_bytecode)() == 42
    assert not Path(importlib.util.cache_from_source(str(no_bytecode))).exists()


def test_bytecode_follows_a_module_written_again(no_bytecode: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module deleted and written again (same source, newer time) makes its bytecode stale:
    it is compiled again, once, not on every import after."""
    path = no_bytecode
    modules.write_generated(path, SOURCE)
    assert modules.load_generated("ak_test_module", path)() == 42
    cached = Path(importlib.util.cache_from_source(str(path)))
    path.unlink()
    modules.write_generated(path, SOURCE)
    later = cached.stat().st_mtime + 5  # (a coarse clock: make the new one visibly later)
    os.utime(path, (later, later))
    assert modules.load_generated("ak_test_module_again", path)() == 42
    assert int.from_bytes(cached.read_bytes()[8:12], "little") == int(later)  # the source's time

    def no_compiling(*args: object, **kwargs: object) -> object:
        raise AssertionError("the source was compiled again")

    monkeypatch.setattr(importlib.machinery.SourceFileLoader, "source_to_code", no_compiling)
    monkeypatch.setattr(py_compile, "compile", no_compiling)
    assert modules.load_generated("ak_test_module_third", path)() == 42
