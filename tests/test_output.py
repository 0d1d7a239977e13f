"""The tables a job writes: written, empty ones at the end, and removed when the job fails."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from arrowkafka.output import ParquetTables

SCHEMA = pa.schema([pa.field("n", pa.int64())])


def test_tables_are_written_with_empty_ones_at_the_end(tmp_path: Path) -> None:
    out = ParquetTables(tmp_path)
    out.write("a", pa.table({"n": [1, 2]}, schema=SCHEMA))
    out.write("a", pa.table({"n": [3]}, schema=SCHEMA))
    out.write("b", SCHEMA.empty_table())  # no rows: no file yet
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.parquet"]
    out.close({"a": SCHEMA, "b": SCHEMA})
    assert pq.read_table(tmp_path / "a.parquet")["n"].to_pylist() == [1, 2, 3]
    assert pq.read_table(tmp_path / "b.parquet").num_rows == 0


def test_an_empty_table_of_nested_uuids(tmp_path: Path) -> None:
    """A message table whose rows were all rejected: its schema has uuids in lists and maps,
    which ``Schema.empty_table`` cannot build (found by the fuzz campaign)."""
    schema = pa.schema([pa.field("topics", pa.list_(pa.struct([pa.field("id", pa.uuid())]))),
                        pa.field("ids", pa.map_(pa.string(), pa.uuid()))])  # fmt: skip
    out = ParquetTables(tmp_path)
    out.close({"MetadataResponse": schema})
    got = pq.read_table(tmp_path / "MetadataResponse.parquet")
    assert got.num_rows == 0 and got.schema.names == ["topics", "ids"]


def test_a_failed_job_leaves_none_of_its_tables(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("not the job's")
    out = ParquetTables(tmp_path)
    out.write("a", pa.table({"n": [1]}, schema=SCHEMA))
    out.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_a_failed_task_leaves_no_part_and_no_folder_of_its_own(tmp_path: Path) -> None:
    done = ParquetTables(tmp_path, part="task-0")
    done.write("a", pa.table({"n": [1]}, schema=SCHEMA))
    done.close({"a": SCHEMA, "b": SCHEMA})
    failed = ParquetTables(tmp_path, part="task-1")
    failed.write("a", pa.table({"n": [2]}, schema=SCHEMA))
    failed.write("c", pa.table({"n": [3]}, schema=SCHEMA))
    failed.abort()
    # the other task's parts stay; the folder only the failed task made goes
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == [
        "a.parquet", "a.parquet/task-0.parquet", "b.parquet", "b.parquet/task-0.parquet"]  # fmt: skip
