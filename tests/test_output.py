"""The tables a job writes: written, empty ones at the end, and removed when the job fails."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.output import COMPRESSIONS, ParquetTables, _Writer, spare_core
from arrowkafka.segments import decode_segments
from arrowkafka.traffic import decode_capture
from tests.conftest import SHARED

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


def some_steps(out: ParquetTables) -> None:
    """Three steps of a job's writes, into two tables."""
    for step in range(3):
        out.write("a", pa.table({"n": list(range(step * 10, step * 10 + 10))}, schema=SCHEMA))
        out.write("b", pa.table({"n": [step]}, schema=SCHEMA))
        out.step()


def test_tables_written_in_the_background_are_the_same_files(tmp_path: Path) -> None:
    for background in (False, True):
        out = ParquetTables(tmp_path / str(background), background=background)
        (tmp_path / str(background)).mkdir()
        some_steps(out)
        out.close({"a": SCHEMA, "b": SCHEMA, "c": SCHEMA})
    for name in ("a", "b", "c"):
        files = [(tmp_path / str(b) / f"{name}.parquet").read_bytes() for b in (False, True)]
        assert files[0] == files[1], name
    assert pq.read_table(tmp_path / "True" / "a.parquet")["n"].to_pylist() == list(range(30))
    assert pq.ParquetFile(tmp_path / "True" / "a.parquet").metadata.num_row_groups == 3


def test_a_write_that_fails_in_the_background_is_raised_and_the_tables_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_table = pq.ParquetWriter.write_table
    calls = []

    def full_disk(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        write_table(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    (tmp_path / "mine.txt").write_text("not the job's")
    out = ParquetTables(tmp_path, background=True)
    with pytest.raises(OSError, match="No space left on device"):
        some_steps(out)  # the second step's first write fails: the third step's wait says so
        out.close({"a": SCHEMA, "b": SCHEMA})
    out.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
    assert calls[0].startswith("arrowkafka-parquet")  # (it did run in the background)
    assert len(calls) == 3  # nothing was written after the failure


def test_the_background_writer_is_at_most_one_step_behind() -> None:
    writer, log = _Writer(), []
    gates = [threading.Event(), threading.Event()]
    writer.put(lambda: (gates[0].wait(), log.append("step 1 written")))
    writer.step()  # returns at once: the job goes on with its next step
    assert log == []
    threading.Timer(0.2, lambda: (log.append("released"), gates[0].set())).start()
    writer.put(lambda: (gates[1].wait(), log.append("step 2 written")))
    writer.step()  # waits for step 1's writes, not for step 2's (still held)
    assert log == ["released", "step 1 written"]
    gates[1].set()
    writer.finish()
    assert log == ["released", "step 1 written", "step 2 written"]


def test_a_table_begun_after_abort_removed_the_files_makes_none(tmp_path: Path) -> None:
    """(the writer's thread, interrupted in the middle of a write, may go on to open a new
    table while ``abort`` removes the job's files: it makes none)"""
    out = ParquetTables(tmp_path, background=True)
    out.write("a", pa.table({"n": [1]}, schema=SCHEMA))
    out.step()
    out.abort()
    out._write("late", pa.table({"n": [2]}, schema=SCHEMA))
    assert list(tmp_path.iterdir()) == []


def test_a_failure_is_raised_by_every_call_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step's write fails: ``close`` raises it; so does any later call, never a
    cancellation or an empty queue; nothing after it runs, and ``abort`` leaves no table."""
    writer = _Writer()
    ran = []
    writer.put(lambda: ran.append(1))
    writer.put(lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    writer.put(lambda: ran.append(3))
    with pytest.raises(OSError, match="No space left") as first:
        writer.finish()
    for call in (writer.finish, writer.step, lambda: writer.put(lambda: None)):
        with pytest.raises(OSError) as again:
            call()
        assert again.value is first.value
    assert ran == [1]
    done = _Writer()
    done.finish()
    for late in (lambda: done.put(lambda: None), done.step):
        with pytest.raises(RuntimeError, match="closed"):
            late()

    write_table = pq.ParquetWriter.write_table

    def full_disk(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        if table.num_rows == 1:  # the second table's
            raise OSError(28, "No space left on device")
        write_table(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    out = ParquetTables(tmp_path, background=True)
    out.write("a", pa.table({"n": [1, 2]}, schema=SCHEMA))
    out.write("b", pa.table({"n": [3]}, schema=SCHEMA))
    with pytest.raises(OSError, match="No space left on device"):
        out.close({"a": SCHEMA, "b": SCHEMA, "c": SCHEMA})
    out.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("files", "spare"),
    [({}, True), ({"cpu.max": "max 100000\n"}, True), ({"cpu.max": "150000 100000\n"}, False),
     ({"cpu.max": "200000 100000\n"}, True),
     ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, True),
     ({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}, False)],
    ids=["no cgroup", "v2, no quota", "v2, 1.5 cores", "v2, 2 cores", "v1, no quota", "v1, 1 core"],
)  # fmt: skip
def test_a_second_core_is_one_the_container_allows(
    files: dict[str, str], spare: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert spare_core(tmp_path, tmp_path / "none") is spare
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {3})
    assert spare_core(tmp_path, tmp_path / "none") is False


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_a_quota_on_the_process_cgroup_or_above_it_counts(
    version: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(systemd's CPUQuota, a container seen from the host: the quota is on the process's own
    cgroup, or on one above it, not at the root)"""
    root = tmp_path / "cgroup"
    base = root if version == "v2" else root / "cpu"
    own = tmp_path / "own"
    own.write_text(
        "0::/app.slice/job.service\n" if version == "v2" else "4:cpu,cpuacct:/app.slice/job.service\n"
    )
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    (base / "app.slice" / "job.service").mkdir(parents=True)
    assert spare_core(root, own) is True  # no quota anywhere
    for folder in (base / "app.slice", base / "app.slice" / "job.service"):
        if version == "v2":
            (folder / "cpu.max").write_text("100000 100000\n")
        else:
            (folder / "cpu.cfs_quota_us").write_text("100000\n")
            (folder / "cpu.cfs_period_us").write_text("100000\n")
        assert spare_core(root, own) is False, folder
        for name in ("cpu.max", "cpu.cfs_quota_us", "cpu.cfs_period_us"):
            (folder / name).unlink(missing_ok=True)


def codecs_of(folder: Path) -> set[str]:
    """The codecs of every column chunk of every Parquet file under ``folder``, as DuckDB reads
    them from the footers (pyarrow names LZ4_RAW "LZ4")."""
    out: set[str] = set()
    for path in folder.rglob("*.parquet"):
        if path.is_file():
            quoted = str(path).replace("'", "''")
            rows = duckdb.sql(f"SELECT DISTINCT compression FROM parquet_metadata('{quoted}')").fetchall()
            out |= {r[0] for r in rows}
    return out


NESTED = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
])  # fmt: skip


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_each_compression_is_written_and_read_by_other_readers(tmp_path: Path, compression: str) -> None:
    rows = [{"key": b"k%d" % i, "headers": [{"key": "h", "value": b"x" * i}]} for i in range(1000)]
    out = ParquetTables(tmp_path, compression=compression)
    out.write("records", pa.Table.from_pylist(rows, NESTED))
    out.close({"records": NESTED, "empty": SCHEMA})
    want = {"none": "UNCOMPRESSED", "lz4": "LZ4_RAW"}.get(compression, compression.upper())
    assert codecs_of(tmp_path) == {want}
    path = str(tmp_path / "records.parquet")
    got = duckdb.sql(f"SELECT count(*), sum(octet_length(headers[1].value)) FROM '{path}'").fetchall()
    assert got == [(1000, 499500)]
    assert pd.read_parquet(path)["key"].tolist() == [r["key"] for r in rows]
    assert pl.read_parquet(path)["headers"].to_list() == [r["headers"] for r in rows]


def test_an_unknown_compression_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=re.escape("no Parquet compression 'brotli' (one of snappy, zstd, lz4, gzip, none)")
    ):
        ParquetTables(tmp_path, compression="brotli")
    specs = ak.load_specs()
    with pytest.raises(ValueError, match="no Parquet compression 'lzo'"):
        decode_capture(
            [SHARED / "captures" / "tansu_confluent.pcap"], tmp_path / "out", specs, compression="lzo"
        )
    with pytest.raises(ValueError, match="no Parquet compression 'lzo'"):
        decode_segments([tmp_path], tmp_path / "seg", compression="lzo")
    assert list(tmp_path.iterdir()) == []


def test_the_commands_offer_the_codecs_jobs_write() -> None:
    from arrowkafka.cli import PARQUET_COMPRESSIONS

    assert PARQUET_COMPRESSIONS == COMPRESSIONS


def test_the_summary_says_why_rows_were_rejected(tmp_path: Path) -> None:
    """Each cause of rejects counted once per row, the commonest first; a capture's name their
    message and version; reasons that differ only in their numbers (offsets, sizes, CRCs) are
    one cause; the causes past the bound counted together, none lost."""
    from arrowkafka.output import Causes
    from arrowkafka.traffic.columns import REJECT_SCHEMA

    summary = decode_capture([SHARED / "captures" / "tansu_confluent.pcap"], None, ak.load_specs())
    reason = "3 bytes left over after the last field (MetadataRequest v12)"
    assert summary.causes.by == {
        ("Corrupt", "# bytes left over after the last field (MetadataRequest v12)"): (1, reason)
    }
    assert summary.render().splitlines()[-2:] == [
        "rejected, by cause (rejects.parquet holds each, with where and its bytes):",
        f"         1  Corrupt: {reason}",
    ]
    crc = [
        {"error": "Corrupt", "reason": f"CRC-32C mismatch: stored {i:#010x}, computed 0x0000002a"}
        for i in range(4)
    ]
    rows = (
        [{"error": "Partial", "reason": "capture end"}] * 5
        + crc
        + [
            {"error": "Corrupt", "reason": f"cause-{i}", "message": "FetchResponse", "version": 12}
            for i in range(7)
        ]
    )
    causes = Causes()
    causes.add_table(pa.Table.from_pylist(rows, REJECT_SCHEMA))
    causes.add_table(pa.Table.from_pylist(rows[:1], REJECT_SCHEMA))
    lines = causes.lines()
    assert lines[1:4] == [
        "         6  Partial: capture end",
        "         4  Corrupt: CRC-32C mismatch: stored #, computed #",  # (the CRC's name kept)
        "         1  Corrupt: cause-0 (FetchResponse v12)",
    ]
    assert lines[-1] == "         4  of other causes" and len(lines) == 2 + Causes.SHOWN
    merged = Causes()
    merged.merge(causes)
    merged.merge(causes)
    assert merged.by[("Partial", "capture end")] == (12, "capture end")
    bounded = Causes()
    many = [{"error": "Corrupt", "reason": f"r-{i}"} for i in range(Causes.MAX + 10)]
    bounded.add_table(pa.Table.from_pylist(many, REJECT_SCHEMA))
    assert len(bounded.by) == Causes.MAX + 1 and sum(n for n, _ in bounded.by.values()) == len(many)
    assert Causes().lines() == []


def test_a_segment_jobs_summary_says_why_too(tmp_path: Path) -> None:
    """Ten CRC mismatches in a real broker's segment are one cause, not ten."""
    from importlib.resources import files

    source = (
        Path(str(files("arrowkafka.data").joinpath("segments")))
        / "orders-none-0"
        / "00000000000000000000.log"
    )
    data = bytearray(source.read_bytes())
    pos = 0
    for _ in range(10):  # a byte of each of the first ten messages' values flipped
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        data[pos + 12 + size - 3] ^= 0x20
        pos += 12 + size
    segment = tmp_path / "orders-none-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(bytes(data))
    summary = decode_segments([segment], tmp_path / "out")
    assert summary.render().splitlines()[-2:] == [
        "rejected, by cause (rejects.parquet holds each, with where and its bytes):",
        "        10  Corrupt: CRC-32 mismatch: stored #, computed #",
    ]
    reasons = pq.read_table(tmp_path / "out" / "rejects.parquet").column("reason").to_pylist()
    assert len(set(reasons)) == 10 and all(r.startswith("CRC-32 mismatch: stored 0x") for r in reasons)
