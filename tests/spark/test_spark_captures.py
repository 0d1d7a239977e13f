"""Captures decoded on Spark (arrowkafka.spark.decode_captures) give the CLI's tables: read
back by pyarrow, every message type's table has the CLI's columns and types (in Spark's
types: unsigned widened, uuid as 16 bytes, microsecond timestamps) and the same rows; the
rejects are the same; frames in = rows + rejects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.spark import decode_captures, spark_arrow_type
from arrowkafka.traffic import decode_capture
from tests.conftest import SHARED

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore")]


def canonical(t: pa.DataType) -> pa.DataType:
    """``t`` with what Parquet writers name differently made equal: list items are "item",
    every field nullable (Spark writes every column nullable)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, canonical(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(canonical(t.key_type), canonical(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(canonical(t.value_type))
    return t


def in_spark_types(table: pa.Table) -> pa.Table:
    """The CLI's table as Spark holds it (microseconds: the truncation Spark makes)."""
    cols = [c.combine_chunks().cast(spark_arrow_type(c.type), safe=False) for c in table.columns]
    return pa.table(cols, names=table.column_names)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows in a stable order (a key that orders frames, then the whole row)."""
    keyed = [(r.get("_client") or r.get("client"), r.get("_ts_first") or r.get("ts"), repr(r), r)
             for r in table.to_pylist()]  # fmt: skip
    return [k[-1] for k in sorted(keyed, key=lambda k: (str(k[0]), str(k[1]), k[2]))]


def test_captures_equal_the_cli(spark: Any, tmp_path: Path) -> None:
    paths = sorted(str(p) for p in (SHARED / "captures").glob("*.pcap"))
    assert len(paths) == 3
    summary = decode_captures(spark, paths, tmp_path / "spark")
    cli = decode_capture(paths, tmp_path / "cli", ak.load_specs())

    assert summary.frames_in == cli.frames_in == summary.rows + summary.rejects
    assert (summary.rows, summary.rejects) == (cli.rows, cli.rejects)
    assert summary.tables == cli.tables
    written = sorted(p.name for p in (tmp_path / "spark").iterdir())
    # the Spark capture job does not write the record tables yet (open in the records issue)
    assert written == sorted(p.name for p in (tmp_path / "cli").iterdir() if not p.name.startswith("_record"))
    for name in written:
        want = in_spark_types(pq.read_table(tmp_path / "cli" / name))
        got = pq.read_table(tmp_path / "spark" / name)  # a folder of Spark's parts
        assert got.column_names == want.column_names, name
        assert [canonical(t) for t in got.schema.types] == [canonical(t) for t in want.schema.types], name
        if name == "_rejects.parquet":  # Spark names each file by its URI
            want = want.set_column(0, "capture", pa.array(["file:" + c for c in want["capture"].to_pylist()]))
        assert rows(got) == rows(want), name
        assert got.num_rows > 0
    # both kinds of rejects come through: a partial frame (stage 1) and a body that does not decode
    errors = pq.read_table(tmp_path / "spark" / "_rejects.parquet").column("error").to_pylist()
    assert sorted(errors) == ["Corrupt", "Partial"]
    # decode_frames' rule holds: ApiVersions v4 answered in the v0 error layout is read as v0
    versions = pq.read_table(tmp_path / "spark" / "ApiVersionsResponse.parquet").column("_version")
    assert 0 in versions.to_pylist()
