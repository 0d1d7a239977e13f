"""arrowkafka.spark in a real local Spark session (local[2], one for the suite): the decoded
struct column equals ak.decode on the same bytes, row for row; versions from a column; the
errors policy of ak.decode."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.spark import decode_column, spark_arrow_type, spark_type
from arrowkafka.spark.types import drop_tag_columns, without_tag_columns
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


def without_tags(v: Any) -> Any:
    """A row as Python values, less every struct's tag columns."""
    if isinstance(v, dict):
        return {k: without_tags(x) for k, x in v.items() if k not in ("_unknown_tags", "_tags_present")}
    if isinstance(v, list | tuple):  # a map's entries are (key, value) tuples
        return type(v)(without_tags(x) for x in v)
    return v


def test_drop_tag_columns_keeps_the_rest() -> None:
    batch = ak.decode([vector("fetch_request_v12")] * 4, "FetchRequest", 12)
    mask = pa.array([False, True, False, False])
    whole = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema), mask=mask)
    struct = whole.cast(spark_arrow_type(whole.type)).slice(1, 3)  # a null row, an offset
    assert "_tags_present" in str(struct.type) and "_unknown_tags" in str(struct.type)
    out = drop_tag_columns(struct)
    out.validate(full=True)
    assert out.type == without_tag_columns(struct.type)
    assert "_tags_present" not in str(out.type) and "_unknown_tags" not in str(out.type)
    assert out.to_pylist() == without_tags(struct.to_pylist()) and out.to_pylist()[0] is None
    # lists and maps of such structs, sliced, with nulls
    inner = pa.array([{"x": i, "_tags_present": [1]} for i in range(6)])
    offsets, nulls = pa.array([0, 2, 2, 3, 6], pa.int32()), pa.array([False, True, False, False])
    for nested in (
        pa.ListArray.from_arrays(offsets, inner, mask=nulls),
        pa.MapArray.from_arrays(offsets, pa.array(range(6)), inner, mask=nulls),
    ):
        part = nested.slice(1)
        got = drop_tag_columns(part)
        got.validate(full=True)
        assert got.type == without_tag_columns(part.type) != part.type
        assert got.to_pylist() == without_tags(part.to_pylist()) and got.to_pylist()[0] is None


def test_tag_columns_left_out(spark: Any) -> None:
    good = vector("fetch_request_v12")
    df = spark.createDataFrame([(0, good), (1, good[:-3]), (2, good)], "id int, value binary")
    out = decode_column(df, "value", "FetchRequest", 12, errors="null", tag_columns=False).orderBy("id")
    assert "_tags" not in out.schema.simpleString()
    one = without_tags(expected([good], "FetchRequest", 12)[0])
    assert spark_rows(out, "FetchRequest") == [one, None, one]
    v12, v1 = vector("metadata_response_v12_1t1000p"), vector("metadata_response_v1_1t1000p")
    df = spark.createDataFrame([(0, v12, 12), (1, v1, 1)], "id int, value binary, v int")
    lean = decode_column(df, "value", "MetadataResponse", "v", tag_columns=False).orderBy("id")
    got = spark_rows(lean, "MetadataResponse")
    assert got == [
        without_tags(expected([v12], "MetadataResponse", 12, all_versions=True)[0]),
        without_tags(expected([v1], "MetadataResponse", 1, all_versions=True)[0]),
    ]
    # a message of tagged fields only (ListGroupsRequest v3): a struct with no field left
    df = spark.createDataFrame([(0, b"\x00"), (1, b"\x05"), (2, b"\x00")], "id int, value binary")
    empty = decode_column(df, "value", "ListGroupsRequest", 3, errors="null", tag_columns=False)
    assert spark_rows(empty.orderBy("id"), "ListGroupsRequest") == [{}, None, {}]


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
