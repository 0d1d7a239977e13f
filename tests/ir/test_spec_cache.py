"""Parsed spec folders are kept in the cache folder, keyed by every spec's text, the IR's source
and Python's version: read back alike, parsed afresh when anything changes, and parsed past
when the cache cannot be read or written."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from arrowkafka import api
from arrowkafka.ir import STRUCT_DEFAULTS, MessageSpec, load_folders

NAMES = ("MetadataRequest", "MetadataResponse", "FetchRequest", "FetchResponse", "ProduceRequest")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir()
    message = api.vendored_specs_dir() / "clients" / "src" / "main" / "resources" / "common" / "message"
    for name in NAMES:
        shutil.copy(message / f"{name}.json", folder)
    return folder


def _plain(specs: dict[str, MessageSpec]) -> dict[str, Any]:
    # (fields and structs compare by identity: as values, through asdict)
    return {name: dataclasses.asdict(spec) for name, spec in specs.items()}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("ARROWKAFKA_CACHE_DIR", str(root))
    return root / "specs"


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(folders: object) -> None:
        raise AssertionError("parsed, where the cache had it")

    monkeypatch.setattr(api, "load_folders", refuse)


def test_read_back_alike(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path)
    parsed = api.cached_folder(folder)
    assert sorted(parsed) == sorted(NAMES) and len(list(cache.glob("*.pickle"))) == 1
    _no_parsing(monkeypatch)
    again = api.cached_folder(folder)
    assert _plain(again) == _plain(parsed) == _plain(load_folders([folder]))
    assert api.SpecSet(again).revision == api.SpecSet(parsed).revision
    # the default of a non-nullable struct is one object, which the decoder tests by identity
    (state,) = [f for f in again["FetchRequest"].root.fields if f.name == "ReplicaState"]
    assert state.default is STRUCT_DEFAULTS


def test_a_changed_spec_is_parsed_afresh(tmp_path: Path, cache: Path) -> None:
    folder = _folder(tmp_path)
    api.cached_folder(folder)
    path = folder / "MetadataRequest.json"
    path.write_text(path.read_text().replace("The topics to fetch metadata for.", "Which topics."))
    changed = api.cached_folder(folder)
    about = [f.about for f in changed["MetadataRequest"].root.fields if f.name == "Topics"]
    assert about == ["Which topics."] and len(list(cache.glob("*.pickle"))) == 2


def test_a_damaged_cache_is_parsed_past(tmp_path: Path, cache: Path) -> None:
    folder = _folder(tmp_path)
    parsed = api.cached_folder(folder)
    (kept,) = cache.glob("*.pickle")
    kept.write_bytes(kept.read_bytes()[:100])  # a write cut short
    assert _plain(api.cached_folder(folder)) == _plain(parsed)
    kept.write_bytes(b"\x80\x05\x95not a pickle")
    assert _plain(api.cached_folder(folder)) == _plain(parsed)


def test_a_cache_folder_that_cannot_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "a file"
    root.write_text("not a folder")
    monkeypatch.setenv("ARROWKAFKA_CACHE_DIR", str(root))
    folder = _folder(tmp_path)
    assert sorted(api.cached_folder(folder)) == sorted(NAMES)


def test_no_home_folder_to_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container run as a user the system does not know, with no HOME: parsed each time."""
    monkeypatch.delenv("ARROWKAFKA_CACHE_DIR", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert sorted(api.cached_folder(_folder(tmp_path))) == sorted(NAMES)
