"""Spec folders for the compat tests: a copy of a few upstream specs, edited on purpose."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arrowkafka.cli import main
from arrowkafka.ir.jsonc import parse_jsonc
from tests.conftest import SHARED

MESSAGES = SHARED / "kafka-specs" / "clients" / "src" / "main" / "resources" / "common" / "message"

Specs = dict[str, dict[str, Any]]


def spec_json(name: str) -> dict[str, Any]:
    """An upstream spec as JSON (its licence comment dropped)."""
    value = parse_jsonc((MESSAGES / f"{name}.json").read_text())
    assert isinstance(value, dict)
    return value


def field(spec: dict[str, Any], path: str) -> dict[str, Any]:
    """The JSON object of a field, by its dotted path below the message."""
    fields: list[dict[str, Any]] = spec["fields"]
    found: dict[str, Any] = {}
    for name in path.split("."):
        found = next(f for f in fields if f["name"] == name)
        fields = found.get("fields", [])
    return found


def write(folder: Path, specs: Specs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        (folder / f"{name}.json").write_text(json.dumps(spec, indent=2))
    return folder


MakePair = Callable[..., tuple[Path, Path]]


@pytest.fixture
def make_pair(tmp_path: Path) -> MakePair:
    """``make_pair(names, edit_new, edit_old=None)``: two folders holding the upstream specs
    ``names``, the new one (or the old one) edited in place by a function of the specs."""

    def make(
        names: list[str],
        edit_new: Callable[[Specs], None] | None = None,
        edit_old: Callable[[Specs], None] | None = None,
    ) -> tuple[Path, Path]:
        old = {n: spec_json(n) for n in names}
        new = {n: spec_json(n) for n in names}
        if edit_old is not None:
            edit_old(old)
        if edit_new is not None:
            edit_new(new)
        return write(tmp_path / "old", old), write(tmp_path / "new", new)

    return make


RunCompat = Callable[..., tuple[int, dict[str, Any]]]


@pytest.fixture
def run_compat(capsys: pytest.CaptureFixture[str]) -> RunCompat:
    """Run ``arrowkafka compat OLD NEW --json [args]``; the exit status and the parsed JSON."""

    def run(old: Path | str, new: Path | str, *args: str) -> tuple[int, dict[str, Any]]:
        status = main(["compat", str(old), str(new), "--json", *args])
        out = capsys.readouterr()
        assert out.err == ""
        report = json.loads(out.out)
        assert isinstance(report, dict)
        return status, report

    return run


def incompatible(report: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(kind, message, versions, path, rule) of each incompatible change, in report order."""
    return [
        (c["kind"], c["message"], c["versions"], c["path"], c["rule"])
        for c in report["changes"]
        if not c["compatible"]
    ]


def change_of(report: dict[str, Any], kind: str) -> dict[str, Any]:
    """The one change of this kind in the report."""
    found = [c for c in report["changes"] if c["kind"] == kind]
    assert len(found) == 1, found
    return found[0]
