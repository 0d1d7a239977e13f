"""Shared fixtures: where the reference material lives, a kernel folder of a test module's
own, and Hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
# The read-only reference material (captures, vectors, other spec revisions): beside the
# checkout, or where ARROWKAFKA_SHARED says (CI may clone elsewhere).
_CANDIDATES = [os.environ.get("ARROWKAFKA_SHARED", ""), str(ROOT.parent / "shared"), "/work/shared"]
SHARED = next((Path(p) for p in _CANDIDATES if p and Path(p).is_dir()), ROOT.parent / "shared")

# Deterministic by default; `HYPOTHESIS_PROFILE=nightly` explores far more.
settings.register_profile("default", derandomize=True, max_examples=25, deadline=None)
settings.register_profile("nightly", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SPEC_FOLDERS = {
    "vendored": ROOT / "specs",
    "old-3.0.0": SHARED / "kafka-specs-old" / "3.0.0",
    "newer": SHARED / "kafka-specs-newer",
    # our own specs for the features no upstream spec uses yet (KIP-625, the KIP-482 draft)
    "features": ROOT / "tests" / "data" / "specs",
}


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"reference material not found at {SHARED}; set ARROWKAFKA_SHARED")
    return SHARED


@pytest.fixture(scope="module")
def own_kernel_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Generated kernels for one test module in a folder of its own (compiled afresh, not
    found in the user's cache)."""
    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("kernels")
    mp.setenv("ARROWKAFKA_CACHE_DIR", str(folder))
    yield folder
    mp.undo()


def writing_threads(monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], list[int]]:
    """(the threads Parquet tables' rows are written in, the steps of the job), as the job goes
    (the tables that got no rows are written by ``close``, in the job's thread)."""
    import threading

    import pyarrow as pa
    import pyarrow.parquet as pq

    from arrowkafka.output import ParquetTables

    threads: set[str] = set()
    steps: list[int] = []
    write_table, step = pq.ParquetWriter.write_table, ParquetTables.step

    def written(self: pq.ParquetWriter, table: pa.Table, *args: object, **kwargs: object) -> None:
        if table.num_rows:
            threads.add(threading.current_thread().name)
        write_table(self, table, *args, **kwargs)

    def stepped(self: ParquetTables) -> None:
        steps.append(1)
        step(self)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", written)
    monkeypatch.setattr(ParquetTables, "step", stepped)
    return threads, steps
