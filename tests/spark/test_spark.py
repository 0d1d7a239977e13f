"""arrowkafka.spark in a real local Spark session (local[2], one for the suite): the decoded
struct column equals ak.decode on the same bytes, row for row; versions from a column; the
errors policy of ak.decode."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.spark import decode_column, spark_arrow_type, spark_type
from tests.conftest import SHARED

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore")]


def vector(name: str) -> bytes:
    return (SHARED / "vectors" / f"{name}.bin").read_bytes()


def expected(bodies: list[bytes], message: str, version: int, **kw: Any) -> list[Any]:
    """ak.decode's rows, in the Arrow types Spark exchanges, as Python values."""
    batch = ak.decode(bodies, message, version, **kw)
    struct = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
    return struct.cast(spark_arrow_type(struct.type)).to_pylist()


def spark_rows(df: Any, column: str) -> list[Any]:
    return df.toArrow().column(column).to_pylist()


def test_schema_is_exact() -> None:
    from pyspark.sql import types as T

    t = spark_type(pa.struct(list(ak.arrow_schema("MetadataResponse", 12))))
    topics = t["topics"].dataType
    assert isinstance(topics, T.ArrayType) and not topics.containsNull
    partition = topics.elementType["partitions"].dataType.elementType
    assert [f.name for f in partition.fields][:4] == [
        "error_code",
        "partition_index",
        "leader_id",
        "leader_epoch",
    ]
    assert partition["error_code"].dataType == T.ShortType()
    assert topics.elementType["topic_id"].dataType == T.BinaryType()  # uuid: its 16 bytes
    assert t["_unknown_tags"].dataType == T.MapType(T.LongType(), T.BinaryType(), False)  # uint32 keys widen


def test_decode_column_equals_ak_decode(spark: Any) -> None:
    body = vector("metadata_response_v12_1t1000p")
    bodies = [body] * 6
    df = spark.createDataFrame([(i, b) for i, b in enumerate(bodies)], "id int, value binary").repartition(2)
    out = decode_column(df, "value", "MetadataResponse", 12, into="m").orderBy("id")
    assert out.columns == ["id", "value", "m"]
    assert spark_rows(out, "m") == expected(bodies, "MetadataResponse", 12)
    # a field deep inside, through Spark SQL
    first = out.selectExpr("m.topics[0].partitions[5].leader_epoch AS e").first()
    assert (
        first is not None
        and first["e"]
        == expected([body], "MetadataResponse", 12)[0]["topics"][0]["partitions"][5]["leader_epoch"]
    )


def test_versions_from_a_column(spark: Any) -> None:
    v12, v1 = vector("metadata_response_v12_1t1000p"), vector("metadata_response_v1_1t1000p")
    rows = [(0, v12, 12), (1, v1, 1), (2, v12, 12)]
    df = spark.createDataFrame(rows, "id int, value binary, v int").repartition(2)
    out = decode_column(df, "value", "MetadataResponse", "v").orderBy("id")
    got = spark_rows(out, "MetadataResponse")
    assert [r["_version"] for r in got] == [12, 1, 12]
    assert got[1] == expected([v1], "MetadataResponse", 1, all_versions=True)[0]
    assert got[0] == got[2] == expected([v12], "MetadataResponse", 12, all_versions=True)[0]


def test_errors_policy(spark: Any) -> None:
    good = vector("fetch_request_v12")
    df = spark.createDataFrame([(0, good), (1, good[:-3])], "id int, value binary")
    nulls = decode_column(df, "value", "FetchRequest", 12, errors="null").orderBy("id")
    got = spark_rows(nulls, "FetchRequest")
    assert got[0] == expected([good], "FetchRequest", 12)[0] and got[1] is None
    with pytest.raises(Exception, match=r"Truncated|needs \d+ bytes"):
        decode_column(df, "value", "FetchRequest", 12).collect()


def test_internal_topics(spark: Any) -> None:
    from arrowkafka import spark as aks
    from arrowkafka import topics
    from tests.test_topics import metadata_values, offsets_records

    keys, values = offsets_records()
    pairs = zip(keys.to_pylist(), values.to_pylist(), strict=True)
    df = spark.createDataFrame(
        [(i, k, v) for i, (k, v) in enumerate(pairs)], "offset long, key binary, value binary"
    )
    tables = aks.decode_consumer_offsets(df)
    assert "OffsetCommit" in tables and "ShareGroupMetadata" in tables
    local = topics.decode_consumer_offsets(keys, values)
    got = tables["OffsetCommit"].orderBy("offset").toArrow()
    assert got.column_names == ["offset", "key", "value"]
    assert got.column("offset").to_pylist() == local["OffsetCommit"].column("_index").to_pylist()
    assert got.column("key").to_pylist() == local["OffsetCommit"].column("key").to_pylist()
    assert got.column("value").to_pylist() == local["OffsetCommit"].column("value").to_pylist()
    assert tables["GroupMetadata"].toArrow().column("value").to_pylist() == [None]
    assert tables["ShareGroupMetadata"].count() == 0

    md = metadata_values()
    mdf = spark.createDataFrame([(i, v) for i, v in enumerate(md.to_pylist())], "offset long, value binary")
    records = aks.decode_cluster_metadata(mdf)
    parts = records["PartitionRecord"].orderBy("offset").toArrow()
    want = expected_records(topics.decode_cluster_metadata(md)["PartitionRecord"])
    assert parts.column("record").to_pylist() == want


def expected_records(table: pa.Table) -> list[Any]:
    struct = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in table.columns[1:]], fields=list(table.schema)[1:]
    )
    return struct.cast(spark_arrow_type(struct.type)).to_pylist()
