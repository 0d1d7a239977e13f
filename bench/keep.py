"""Where a bench script keeps its results: ``bench/results/<date>-<name>.json``, or, where a run
of the same day is already kept there, the next free ``<date>-<name>-2.json``, ``-3`` ...: a run
never overwrites results that were kept (and committed)."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def results_path(stem: str) -> Path:
    """``RESULTS / f"{stem}.json"``, or the first ``{stem}-N.json`` not there yet."""
    RESULTS.mkdir(exist_ok=True)
    path, n = RESULTS / f"{stem}.json", 2
    while path.exists():
        path, n = RESULTS / f"{stem}-{n}.json", n + 1
    return path
