"""Records on Spark: a column of records values decoded in mapInArrow (rows per record and per
batch), and log segments read one task per file; both give what the local functions give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.segments import decode_segments as local_segments
from arrowkafka.spark import decode_records_column, decode_segments
from tests.records.batchtools import Rec, build
from tests.test_output import codecs_of

pytestmark = pytest.mark.spark


def _values() -> list[bytes]:
    recs = [Rec(f"k{i}".encode(), b"v" * i, [("h", b"x")], 1_700_000_000_000 + i) for i in range(30)]
    return [build(2, c, recs[: 10 + c]) + build(2, 0, recs[:3]) for c in range(5)] + [b"", b"\x00" * 8]


def test_a_records_column(spark: Any) -> None:
    values = _values()
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "topic_row int, records binary")
    rows = decode_records_column(df, "records").orderBy("topic_row", "record_offset").collect()
    local = ak.decode_records(values)
    expected = local.records.to_pylist()
    assert len(rows) == len(expected)
    row_of = local.batches.column("row").to_pylist()
    codecs = local.batches.column("codec").to_pylist()
    for got, want in zip(
        rows, sorted(expected, key=lambda r: (row_of[r["batch"]], r["record_offset"])), strict=True
    ):
        assert got["topic_row"] == row_of[want["batch"]]
        fields = ("record_offset", "key", "value")
        assert [got[f] for f in fields] == [want[f] for f in fields]
        assert [(h["key"], h["value"]) for h in got["headers"]] == [
            (h["key"], h["value"]) for h in want["headers"]
        ]
        assert got["batch"]["codec"] == codecs[want["batch"]]
    batches = decode_records_column(df, "records", what="batches").collect()
    assert len(batches) == local.batches.num_rows
    assert sum(1 for b in batches if b["partial"]) == 1  # the 8 bytes: a batch cut short
    bare = decode_records_column(df, "records", payloads=False)
    assert "key" not in bare.columns and "value_size" in bare.columns


def test_segments_one_task_per_file(spark: Any, tmp_path: Path) -> None:
    for part in range(3):
        d = tmp_path / "logs" / f"orders-{part}"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(b"".join(_values()[:4]))
    summary = decode_segments(spark, str(tmp_path / "logs"), tmp_path / "out", compression="zstd")
    local = local_segments([tmp_path / "logs"], tmp_path / "local")
    assert codecs_of(tmp_path / "out") == {"ZSTD"} and codecs_of(tmp_path / "local") == {"SNAPPY"}
    assert (summary.files, summary.batches, summary.records, summary.rejects) == (
        3, local.batches, local.records, 0)  # fmt: skip
    got = spark.read.parquet(str(tmp_path / "out" / "records.parquet"))
    assert got.count() == local.records
    want = pq.read_table(tmp_path / "local" / "records.parquet").drop_columns(["batch_id"])
    order = [("file", "ascending"), ("record_offset", "ascending")]
    mine = pq.read_table(tmp_path / "out" / "records.parquet").drop_columns(["batch_id"]).sort_by(order)
    assert mine.to_pylist() == want.sort_by(order).to_pylist()
    ids = (
        spark.read.parquet(str(tmp_path / "out" / "record_batches.parquet"))
        .select("batch_id")
        .distinct()
        .count()
    )
    assert ids == local.batches  # unique across tasks


def test_times_past_microseconds_are_null_in_spark_rows_too() -> None:
    """The function mapInArrow runs, without Spark: a batch of nanoseconds written as
    milliseconds gives null times, at the top and in the nested batch struct, not wrapped."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from arrowkafka.spark.records import _DecodeRecords, _out_fields

    ns = 1_700_000_000_000_000_000
    rows = pa.record_batch({"id": pa.array([1]), "value": pa.array([build(2, 0, [Rec(b"k", b"v", [], ns)])])})
    out = pa.schema(_out_fields([rows.schema.field("id")], "records", True))
    (got,) = list(_DecodeRecords("value", "records", True, out)(iter([rows])))
    assert got.column("timestamp").to_pylist() == [None]
    for field in ("base_timestamp", "max_timestamp"):
        assert pc.struct_field(got.column("batch"), field).to_pylist() == [None], field
    assert got.column("key").to_pylist() == [b"k"]
