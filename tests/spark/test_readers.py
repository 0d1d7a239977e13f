"""Every table the CLI writes, read as written by four readers that did not write it: Spark,
DuckDB, pandas and Polars. The real captures (``arrowkafka decode``) and a log dir with both
internal topics (``arrowkafka segments``): message tables, record tables, typed internal-topic
tables (uuid topic ids) and rejects, with nanosecond capture times and unsigned ports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

from arrowkafka.cli import main
from tests.conftest import SHARED
from tests.test_segments import logdir  # noqa: F401 (a fixture: a log dir with both internal topics)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, logdir: Path) -> list[Path]:  # noqa: F811
    out = tmp_path_factory.mktemp("readers")
    captures = sorted(str(p) for p in (SHARED / "captures").glob("*.pcap"))
    assert len(captures) == 3
    assert main(["decode", *captures, "-o", str(out / "captures"), "--port", "9092", "--port", "9093"]) in (
        0,
        1,
    )
    assert main(["segments", str(logdir), "-o", str(out / "segments")]) in (0, 1)
    files = sorted(out.glob("*/*.parquet"))
    names = {p.name for p in files}
    assert {"rejects.parquet", "records.parquet", "FetchResponse.parquet"} <= names
    assert {"consumer_offsets.OffsetCommit.parquet", "cluster_metadata.TopicRecord.parquet"} <= names
    return files


def test_spark_reads_every_table(spark: Any, written: list[Path]) -> None:
    for path in written:
        rows = spark.read.parquet(str(path)).collect()  # every column of every row converted
        assert len(rows) == pq.ParquetFile(path).metadata.num_rows, path


def test_duckdb_pandas_and_polars_read_every_table(written: list[Path]) -> None:
    for path in written:
        n = pq.ParquetFile(path).metadata.num_rows
        assert len(duckdb.sql(f"SELECT * FROM read_parquet('{path}')").fetchall()) == n, path
        assert len(pd.read_parquet(path)) == n, path
        assert pl.read_parquet(path).height == n, path


def test_every_column_is_named_as_sql_takes_it(written: list[Path]) -> None:
    # no column needs quoting: none is a reserved word of DuckDB's SQL (`offset` was)
    reserved = {
        w
        for (w,) in duckdb.sql(
            "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category = 'reserved'"
        ).fetchall()
    }
    assert "offset" in reserved
    for path in written:
        names = pq.read_schema(path).names
        assert not {n.lower() for n in names} & reserved, path
        got = duckdb.sql(f"SELECT {', '.join(names)} FROM read_parquet('{path}') LIMIT 1").columns
        assert got == names, path


def test_the_types_are_the_portable_ones(written: list[Path]) -> None:
    # microseconds, no unsigned ints, uuid as 16 bytes; _latency_ns keeps the nanoseconds
    fetch = pq.read_table(next(p for p in written if p.name == "FetchResponse.parquet"))
    assert str(fetch.schema.field("_ts_first").type) == "timestamp[us, tz=UTC]"
    assert str(fetch.schema.field("_latency_ns").type) == "int64"
    topics = pq.read_table(next(p for p in written if p.name == "cluster_metadata.TopicRecord.parquet"))
    ids = topics.column("topic_id").to_pylist()
    assert ids and all(isinstance(i, bytes) and len(i) == 16 for i in ids)
    for path in written:
        text = str(pq.read_schema(path))
        assert "uint" not in text and "[ns" not in text and "extension" not in text, path


def test_every_row_says_which_capture_it_came_from(written: list[Path]) -> None:
    captures = {str(p) for p in (SHARED / "captures").glob("*.pcap")}
    seen: set[str] = set()
    for path in written:
        if path.parent.name != "captures" or path.name == "rejects.parquet":  # rejects: `capture`
            continue
        table = pq.read_table(path)
        assert table.column_names[0] == "_capture" and table.column("_capture").null_count == 0, path
        seen |= set(table.column("_capture").to_pylist())
    assert seen == captures  # message and record tables of all three captures, each named
