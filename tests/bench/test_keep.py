"""A bench run never overwrites results kept (and committed) the same day."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_a_second_run_of_the_day_is_kept_beside_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import keep

    monkeypatch.setattr(keep, "RESULTS", tmp_path)
    first = keep.results_path("2026-11-29-records")
    first.write_text("kept")
    second = keep.results_path("2026-11-29-records")
    assert (first.name, second.name) == ("2026-11-29-records.json", "2026-11-29-records-2.json")
    assert first.read_text() == "kept"
    sys.modules.pop("keep", None)
