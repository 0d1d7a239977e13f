"""Stage 2: every (message, version) of every spec folder has an Arrow schema, mapped as the
README's table says, and the all-versions schema holds every version's fields."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.api import SpecSet
from arrowkafka.errors import SpecError
from arrowkafka.ir import load_spec_text
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, column_name, without_records
from tests.conftest import SPEC_FOLDERS


def covers(wide: pa.DataType, narrow: pa.DataType) -> bool:
    """Is every value of ``narrow`` a value of ``wide`` (same shape, extra fields allowed)?"""
    if pa.types.is_struct(narrow):
        if not pa.types.is_struct(wide):
            return False
        names = [wide.field(i).name for i in range(wide.num_fields)]
        for i in range(narrow.num_fields):
            f = narrow.field(i)
            if f.name not in names:
                return False
            w = wide.field(f.name)
            if (f.nullable and not w.nullable) or not covers(w.type, f.type):
                return False
        return True
    if pa.types.is_list(narrow):
        return pa.types.is_list(wide) and covers(wide.value_type, narrow.value_type)
    return wide == narrow


@pytest.fixture(scope="module", params=sorted(SPEC_FOLDERS))
def specs(request: pytest.FixtureRequest) -> SpecSet:
    return ak.load_specs(SPEC_FOLDERS[request.param])


def test_every_pair_has_a_schema_covered_by_all_versions(specs: SpecSet) -> None:
    n = 0
    for name in specs:
        every = specs.arrow_schema(name)
        assert every.names[0] == "_version" and every.field(0).type == pa.int16()
        wide = pa.struct(list(every))
        for version in specs[name].valid_versions:
            one = specs.arrow_schema(name, version)
            assert one.metadata[b"kafka.version"] == str(version).encode()
            assert covers(wide, pa.struct(list(one))), (name, version)
            n += 1
    assert n == sum(1 for _ in specs.pairs())


def test_all_versions_schemas_write_parquet_and_duckdb_reads_them(specs: SpecSet, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    for name in specs:
        schema = specs.arrow_schema(name)
        table = pa.table([pa.nulls(0, f.type) for f in schema], schema=schema)
        path = tmp_path / f"{name}.parquet"
        pq.write_table(table, path)
        assert pq.read_table(path).schema.equals(schema, check_metadata=False), name
        described = duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()
        assert [row[0] for row in described] == schema.names


def test_type_mapping() -> None:
    schema = ak.arrow_schema("SimpleExampleMessage", 1)
    t = {f.name: f.type for f in schema}
    assert t["process_id"] == pa.uuid()
    assert t["my_tagged_int_array"] == pa.list_(pa.field("item", pa.int32(), nullable=False))
    assert t["my_nullable_string"] == pa.string() and schema.field("my_nullable_string").nullable
    assert t["my_int16"] == pa.int16() and t["my_float64"] == pa.float64()
    assert t["my_uint16"] == pa.uint16() and t["my_uint32"] == pa.uint32()
    assert t["my_bytes"] == pa.binary() and t["my_string"] == pa.string()
    assert (
        ak.arrow_schema("MetadataResponse", 12).field("topics").type.value_type.field("is_internal").type
        == pa.bool_()
    )
    assert t[UNKNOWN_TAGS] == pa.map_(pa.uint32(), pa.field("value", pa.binary(), nullable=False))
    records = ak.arrow_schema("ProduceRequest", 9).field("topic_data").type.value_type
    partition = records.field("partition_data").type.value_type
    assert partition.field("records").type == pa.binary()


def test_field_metadata() -> None:
    field = ak.arrow_schema("MetadataResponse", 12).field("topics").type.value_type.field("topic_id")
    meta = {k.decode(): v.decode() for k, v in field.metadata.items()}
    about = meta.pop("kafka.about")
    assert meta == {
        "kafka.name": "TopicId",
        "kafka.type": "uuid",
        "kafka.versions": "10+",
        "kafka.ignorable": "true",
    }
    assert about.startswith("The topic id.")
    tagged = ak.arrow_schema("FetchRequest", 15).field("replica_state")
    tmeta = {k.decode(): v.decode() for k, v in tagged.metadata.items()}
    assert (tmeta["kafka.tag"], tmeta["kafka.tagged_versions"]) == ("1", "15+")
    schema_meta = ak.arrow_schema("FetchRequest", 15).metadata
    assert schema_meta[b"kafka.api_key"] == b"1" and schema_meta[b"kafka.flexible_versions"] == b"12+"


def test_nullability_follows_nullable_versions() -> None:
    # MetadataResponse.ClusterId: versions 2+, nullableVersions 2+.
    assert "cluster_id" not in ak.arrow_schema("MetadataResponse", 1).names
    assert ak.arrow_schema("MetadataResponse", 2).field("cluster_id").nullable
    # MetadataRequest.Topics: nullable from v1 only.
    assert not ak.arrow_schema("MetadataRequest", 0).field("topics").nullable
    assert ak.arrow_schema("MetadataRequest", 1).field("topics").nullable
    assert ak.arrow_schema("MetadataRequest").field("topics").nullable
    # KIP-893: a nullable struct.
    cursor = ak.arrow_schema("DescribeTopicPartitionsRequest", 0).field("cursor")
    assert cursor.nullable and pa.types.is_struct(cursor.type)


def test_unknown_tags_only_in_flexible_versions() -> None:
    assert UNKNOWN_TAGS not in ak.arrow_schema("FetchRequest", 11).names
    assert UNKNOWN_TAGS in ak.arrow_schema("FetchRequest", 12).names
    topic = ak.arrow_schema("FetchRequest", 12).field("topics").type.value_type
    assert topic.field(topic.num_fields - 1).name == UNKNOWN_TAGS
    assert UNKNOWN_TAGS in ak.arrow_schema("FetchRequest").names


def test_tags_present_only_where_a_known_tag_can_be() -> None:
    # FetchRequest v12 has tagged fields at the top (ClusterId) and in partitions, not in topics
    v12 = ak.arrow_schema("FetchRequest", 12)
    assert v12.names[-2:] == [TAGS_PRESENT, UNKNOWN_TAGS]
    assert v12.field(TAGS_PRESENT).type == pa.list_(pa.field("item", pa.uint32(), nullable=False))
    topic = v12.field("topics").type.value_type
    assert TAGS_PRESENT not in [topic.field(i).name for i in range(topic.num_fields)]
    assert TAGS_PRESENT not in ak.arrow_schema("FetchRequest", 11).names
    assert TAGS_PRESENT in ak.arrow_schema("FetchRequest").names
    assert TAGS_PRESENT not in ak.arrow_schema("ApiVersionsRequest", 3).names  # flexible, no tagged field


def test_draft_dialect_schema() -> None:
    from tests.ir.test_load import DRAFT

    spec = load_spec_text(DRAFT)
    specs = SpecSet({spec.name: spec})
    v9 = specs.arrow_schema("FooResponse", 9)
    assert v9.names == ["user_agent", "foos", TAGS_PRESENT, UNKNOWN_TAGS]
    foo = v9.field("foos").type.value_type
    assert [foo.field(i).name for i in range(foo.num_fields)] == ["bar", "baz", TAGS_PRESENT, UNKNOWN_TAGS]
    assert v9.field("user_agent").metadata[b"kafka.optional"] == b"true"
    assert specs.arrow_schema("FooResponse", 8).names == ["foos"]


@pytest.mark.parametrize(
    ("kafka", "column"),
    [
        ("ThrottleTimeMs", "throttle_time_ms"),
        ("IsrNodes", "isr_nodes"),
        ("myUint16", "my_uint16"),
        ("ClusterId", "cluster_id"),
        ("KRaftVersion", "kraft_version"),
        ("isKRaftController", "is_kraft_controller"),
        ("Base64Value", "base64_value"),
        ("V", "v"),
    ],
)
def test_column_name(kafka: str, column: str) -> None:
    assert column_name(kafka) == column


def test_column_name_collision_is_a_spec_error() -> None:
    spec = load_spec_text(
        '{"type": "data", "name": "D", "validVersions": "0", "flexibleVersions": "none", "fields": ['
        '{"name": "TopicId", "type": "int8", "versions": "0+"},'
        '{"name": "topicId", "type": "int8", "versions": "0+"}]}',
        "D.json",
    )
    with pytest.raises(
        SpecError, match=r"D\.json: D\.topicId: fields TopicId and topicId both map to column 'topic_id'"
    ):
        SpecSet({"D": spec}).arrow_schema("D", 0)


def test_bad_version() -> None:
    with pytest.raises(KeyError, match="FetchRequest has no version 99"):
        ak.arrow_schema("FetchRequest", 99)


def _record_fields(t: pa.DataType | pa.Schema) -> int:
    fields = list(t) if isinstance(t, pa.Schema) or pa.types.is_struct(t) else []
    if isinstance(t, pa.DataType) and pa.types.is_map(t):
        return _record_fields(t.item_type)
    if isinstance(t, pa.DataType) and hasattr(t, "value_type"):  # every list type
        return _record_fields(t.value_type)
    return sum((f.metadata or {}).get(b"kafka.type") == b"records" or 0 for f in fields) + sum(
        _record_fields(f.type) for f in fields
    )


def test_without_records_drops_the_record_fields_at_any_depth() -> None:
    specs = ak.load_specs()
    holding = set()
    for name in specs:
        schema = specs.arrow_schema(name)
        bare = without_records(schema)
        assert _record_fields(bare) == 0
        if _record_fields(schema):
            holding.add(name)
            assert not bare.equals(schema)
        else:
            assert bare.equals(schema)
    # the record batches: Produce, Fetch, ShareFetch; a snapshot's records in FetchSnapshot;
    # Kafka's test spec with one at the top level
    assert holding == {"ProduceRequest", "FetchResponse", "ShareFetchResponse", "FetchSnapshotResponse",
                       "SimpleRecordsMessage"}  # fmt: skip
    produce = without_records(specs.arrow_schema("ProduceRequest", 9))
    partition = produce.field("topic_data").type.value_type.field("partition_data").type.value_type
    assert [f.name for f in partition] == ["index", "_unknown_tags"]
    assert produce.field("topic_data").type.value_type.field("name").metadata[b"kafka.name"] == b"Name"
    top = without_records(specs.arrow_schema("SimpleRecordsMessage"))
    assert top.names == ["_version", "topic", "_unknown_tags"]
    # and inside every nesting Arrow has, though the specs' schemas use lists and structs only
    records = pa.field("r", pa.binary(), metadata={"kafka.type": "records"})
    inner = pa.struct([pa.field("a", pa.int8()), records])
    kinds = [pa.list_(inner), pa.large_list(inner), pa.list_(inner, 2), pa.map_(pa.int8(), inner), inner]
    wide = pa.schema([pa.field(str(i), t) for i, t in enumerate(kinds)])
    bare = without_records(wide)
    assert _record_fields(wide) == 5 and _record_fields(bare) == 0
    a = pa.struct([pa.field("a", pa.int8())])
    assert bare.types == [pa.list_(a), pa.large_list(a), pa.list_(a, 2), pa.map_(pa.int8(), a), a]


def test_portable_times_past_microseconds_are_null() -> None:
    from arrowkafka.schema import portable_table

    b = (2**63 - 1) // 1000  # the last millisecond microseconds hold
    t = pa.table(
        {"t": pa.array([b, b + 1, -b, -b - 1, None], pa.timestamp("ms", "UTC")), "n": [1, 2, 3, 4, 5]}
    )
    got = portable_table(t)
    assert got.column("t").type == pa.timestamp("us", "UTC")
    assert got.column("t").cast(pa.int64()).to_pylist() == [b * 1000, None, -b * 1000, None, None]
