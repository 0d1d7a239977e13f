"""The encoder's rules (Kafka's message-definitions README and KIP-482), each with the exact
error text: a test per rule, plus the shapes of input it accepts. Each error is checked with the
kernel generated for the plan too (it checks nothing itself: where a value could fail, the
interpreter sizes the batch and names the failure)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.encode import uuids_as_bytes
from arrowkafka.schema import default_struct
from tests.codec.encode.pure_kernel import encode_specialised
from tests.conftest import SHARED, SPEC_FOLDERS

SPECS = ak.load_specs()
FEATURES = ak.load_specs(SPEC_FOLDERS["features"])


def loose(t: pa.DataType) -> pa.DataType:
    """``t`` with every field nullable (list items too): input that can hold what the wire cannot."""
    if isinstance(t, pa.BaseExtensionType):  # uuid: pyarrow builds nested ones from bytes only
        return t.storage_type
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(loose(t.field(i).type)).with_nullable(True) for i in range(t.num_fields)]
        )
    if pa.types.is_list(t):
        return pa.list_(pa.field("item", loose(t.value_type), nullable=True))
    return t


def rows(
    name: str, version: int, values: list[dict[str, Any]], specs: ak.SpecSet = SPECS, **types: pa.DataType
) -> pa.RecordBatch:
    schema = pa.schema(
        [pa.field(f.name, types.get(f.name, loose(f.type))) for f in specs.arrow_schema(name, version)]
    )
    full = [{**default_struct(specs[name], specs[name].root, version), **v} for v in values]
    return pa.RecordBatch.from_pylist(
        uuids_as_bytes(filled(full, pa.list_(pa.struct(list(schema))))), schema=schema
    )


def filled(value: Any, t: pa.DataType) -> Any:
    """``value`` with an empty ``_unknown_tags`` and ``_tags_present`` in every struct that has
    the column but not the key (the encoder refuses a null in either)."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        out = dict(value)
        for i in range(t.num_fields):
            f = t.field(i)
            if f.name in ("_unknown_tags", "_tags_present") and f.name not in out:
                out[f.name] = []
            elif f.name in out:
                out[f.name] = filled(out[f.name], f.type)
        return out
    if pa.types.is_list(t):
        return [filled(v, t.value_type) for v in value]
    return value


def fails(
    batch: pa.RecordBatch, name: str, version: int, text: str, specs: ak.SpecSet = SPECS
) -> ak.EncodeError:
    with pytest.raises(ak.EncodeError) as e:
        specs.encode(batch, name, version)
    assert str(e.value) == text
    with pytest.raises(ak.EncodeError):  # sizing checks the same things
        specs.encoded_size(batch, name, version)
    with pytest.raises(ak.EncodeError) as again:
        encode_specialised(specs, batch, name, version)
    assert str(again.value) == text
    return e.value


# ---- nulls the version cannot carry -----------------------------------------------------------


def test_null_in_a_fixed_width_field_names_row_and_path() -> None:
    batch = rows("ApiVersionsResponse", 0, [{}, {"error_code": None}])
    e = fails(
        batch,
        "ApiVersionsResponse",
        0,
        "null in non-nullable int16 field at $.error_code (row 1, ApiVersionsResponse v0)",
    )
    assert (e.row, e.path, e.message, e.version) == (1, "$.error_code", "ApiVersionsResponse", 0)


def test_null_deep_in_a_list_names_the_indices() -> None:
    keys = [
        {"api_key": 1, "min_version": 0, "max_version": 3},
        {"api_key": 2, "min_version": 0, "max_version": None},
    ]
    batch = rows("ApiVersionsResponse", 0, [{}, {"api_keys": keys}])
    fails(batch, "ApiVersionsResponse", 0,
          "null in non-nullable int16 field at $.api_keys[1].max_version (row 1, ApiVersionsResponse v0)")  # fmt: skip


def test_null_string_array_and_struct() -> None:
    batch = rows("MetadataRequest", 1, [{"topics": [{"name": None}]}])
    fails(
        batch,
        "MetadataRequest",
        1,
        "null in non-nullable string field at $.topics[0].name (row 0, MetadataRequest v1)",
    )
    batch = rows("MetadataRequest", 0, [{"topics": None}])
    fails(
        batch,
        "MetadataRequest",
        0,
        "null in non-nullable array field at $.topics (row 0, MetadataRequest v0)",
    )
    # a null array where the version allows it is written as the null count
    assert (
        SPECS.encode(rows("MetadataRequest", 1, [{"topics": None}]), "MetadataRequest", 1)[0].as_py()
        == b"\xff" * 4
    )
    batch = rows("NullableStructsRequest", 1, [{"cursor": None}], FEATURES)
    fails(batch, "NullableStructsRequest", 1,
          "null in non-nullable struct field at $.cursor (row 0, NullableStructsRequest v1)", FEATURES)  # fmt: skip
    # from v2 the struct is nullable: the KIP-893 marker -1, and nothing of the struct
    body = FEATURES.encode(
        rows("NullableStructsRequest", 2, [{"cursor": None}], FEATURES), "NullableStructsRequest", 2
    )
    assert body[0].as_py()[0] == 0xFF


def test_null_element_of_a_fixed_width_array() -> None:
    batch = rows("DescribeProducersRequest", 0, [{"topics": [{"name": "t", "partition_indexes": [1, None]}]}])
    fails(batch, "DescribeProducersRequest", 0,
          "null in non-nullable int32 field at $.topics[0].partition_indexes[1] (row 0, DescribeProducersRequest v0)")  # fmt: skip


def test_null_in_a_varint_field() -> None:
    batch = rows("VarintEncodingsResponse", 4, [{"error_code": None}], FEATURES)
    fails(batch, "VarintEncodingsResponse", 4,
          "null in non-nullable int16 field at $.error_code (row 0, VarintEncodingsResponse v4)", FEATURES)  # fmt: skip


# ---- values the wire width cannot hold --------------------------------------------------------


def test_kip625_fixed32_of_an_int64_is_range_checked() -> None:
    ok = rows("VarintEncodingsResponse", 0, [{"too_small": -(2**31)}, {"too_small": 2**31 - 1}], FEATURES)
    assert len(FEATURES.encode(ok, "VarintEncodingsResponse", 0)) == 2
    batch = rows("VarintEncodingsResponse", 0, [{"too_small": 2**31}], FEATURES)
    fails(batch, "VarintEncodingsResponse", 0,
          "2147483648 is out of range for fixed32 at $.too_small (row 0, VarintEncodingsResponse v0)", FEATURES)  # fmt: skip
    # the same value fits v2's fixed64 and v4's packed64
    for v in (2, 4):
        one = rows("VarintEncodingsResponse", v, [{"too_small": 2**31}], FEATURES)
        (body,) = FEATURES.encode(one, "VarintEncodingsResponse", v).to_pylist()
        assert ref.decode(FEATURES["VarintEncodingsResponse"], v, body)["too_small"] == 2**31


def test_string_over_32767_bytes_in_every_version() -> None:
    long = "x" * 32768
    batch = rows("MetadataRequest", 1, [{"topics": [{"name": "ok"}, {"name": long}]}])
    fails(
        batch,
        "MetadataRequest",
        1,
        "string of 32768 bytes is longer than 32767 at $.topics[1].name (row 0, MetadataRequest v1)",
    )
    # a compact string too: Kafka's generated code refuses a longer one in every version
    flexible = rows("MetadataRequest", 9, [{"topics": [{"name": "ok"}]}, {"topics": [{"name": long}]}])
    fails(
        flexible,
        "MetadataRequest",
        9,
        "string of 32768 bytes is longer than 32767 at $.topics[0].name (row 1, MetadataRequest v9)",
    )
    # 32767 bytes of UTF-8 (not characters) is the most
    edge = "\u00e9" * 16383 + "x"
    assert len(edge.encode()) == 32767
    (body,) = SPECS.encode(
        rows("MetadataRequest", 9, [{"topics": [{"name": edge}]}]), "MetadataRequest", 9
    ).to_pylist()
    assert ref.decode(SPECS["MetadataRequest"], 9, body)["topics"][0]["name"] == edge
    over = rows("MetadataRequest", 9, [{"topics": [{"name": edge + "\u00e9"}]}])
    fails(over, "MetadataRequest", 9,
          "string of 32769 bytes is longer than 32767 at $.topics[0].name (row 0, MetadataRequest v9)")  # fmt: skip


def test_values_no_row_reaches_are_not_checked() -> None:
    # a null list whose range still holds a short uuid and an int32-overflowing int64: never written
    inner = pa.struct([("topic_id", pa.binary()), ("name", pa.string())])
    topics = pa.ListArray.from_arrays(
        pa.array([0, 1, 1], pa.int32()),
        pa.array([{"topic_id": b"abc", "name": "t"}], inner),
        mask=pa.array([True, False]),
    )
    batch = pa.RecordBatch.from_arrays(
        [topics, pa.array([True, True]), pa.array([False, False])],
        names=["topics", "allow_auto_topic_creation", "include_topic_authorized_operations"],
    )
    spec = SPECS["MetadataRequest"]
    want = ref.encode(spec, 12, {**default_struct(spec, spec.root, 12), "topics": None})
    both = [want, ref.encode(spec, 12, {**default_struct(spec, spec.root, 12), "topics": []})]
    assert SPECS.encode(batch, "MetadataRequest", 12).to_pylist() == both
    # (the interpreter sizes this batch, as a value could fail; the generated kernel writes it)
    assert encode_specialised(SPECS, batch, "MetadataRequest", 12).to_pylist() == both


def test_a_wider_integer_column_is_range_checked_by_row() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "error_code": pa.array([0, 70000], pa.int64()),
            "api_keys": pa.array(
                [[], []],
                pa.list_(
                    pa.struct(
                        [("api_key", pa.int16()), ("min_version", pa.int16()), ("max_version", pa.int16())]
                    )
                ),
            ),
        }
    )
    fails(
        batch,
        "ApiVersionsResponse",
        0,
        "70000 is out of range for int16 at $.error_code (row 1, ApiVersionsResponse v0)",
    )


def test_uuid_of_the_wrong_width() -> None:
    t = pa.list_(pa.field("item", pa.struct([("topic_id", pa.binary()), ("name", pa.string())])))
    batch = rows("MetadataRequest", 10, [{"topics": [{"topic_id": b"short", "name": "t"}]}], topics=t)
    fails(
        batch,
        "MetadataRequest",
        10,
        "uuid must be 16 bytes, got 5 at $.topics[0].topic_id (row 0, MetadataRequest v10)",
    )
    good = rows("MetadataRequest", 10, [{"topics": [{"topic_id": bytes(range(16)), "name": "t"}]}], topics=t)
    (body,) = SPECS.encode(good, "MetadataRequest", 10).to_pylist()
    assert ref.decode(SPECS["MetadataRequest"], 10, body)["topics"][0]["topic_id"].bytes == bytes(range(16))


# ---- fields the target version lacks ----------------------------------------------------------


def test_a_field_the_version_lacks_must_hold_its_default() -> None:
    v4 = rows(
        "MetadataRequest",
        4,
        [{"topics": [], "allow_auto_topic_creation": True}, {"allow_auto_topic_creation": False}],
    )
    fails(v4, "MetadataRequest", 3,
          "allow_auto_topic_creation is not in version 3 and holds a non-default value (the field is not ignorable) "
          "at $.allow_auto_topic_creation (row 1, MetadataRequest v3)")  # fmt: skip
    # rows holding the default encode as v3 would
    (body,) = SPECS.encode(v4.slice(0, 1), "MetadataRequest", 3).to_pylist()
    assert body == ref.encode(SPECS["MetadataRequest"], 3, {"topics": []})


def test_an_ignorable_field_the_version_lacks_is_dropped() -> None:
    v3 = rows("ApiVersionsRequest", 3, [{"client_software_name": "cli", "client_software_version": "1.0"}])
    assert SPECS.encode(v3, "ApiVersionsRequest", 2).to_pylist() == [b""]


def test_unknown_tags_cannot_go_to_a_version_without_tag_sections() -> None:
    v3 = rows("ApiVersionsRequest", 3, [{"_unknown_tags": []}, {"_unknown_tags": [(9, b"z")]}])
    fails(v3, "ApiVersionsRequest", 2,
          "_unknown_tags is not in version 2 and holds unknown tagged fields at $._unknown_tags (row 1, ApiVersionsRequest v2)")  # fmt: skip


def test_a_column_the_spec_does_not_know() -> None:
    batch = pa.RecordBatch.from_pydict({"bogus": [1]})
    fails(
        batch,
        "ApiVersionsRequest",
        0,
        "ApiVersionsRequest has no field 'bogus' at $.bogus (row 0, ApiVersionsRequest v0)",
    )


def test_columns_the_input_lacks_are_written_as_defaults() -> None:
    batch = pa.RecordBatch.from_pydict(
        {"topics": pa.array([[]], pa.list_(pa.struct([("name", pa.string())])))}
    )
    spec = SPECS["MetadataRequest"]
    for v in (4, 8, 12):
        (body,) = SPECS.encode(batch, "MetadataRequest", v).to_pylist()
        assert body == ref.encode(spec, v, {**default_struct(spec, spec.root, v), "topics": []})


# ---- tagged fields ----------------------------------------------------------------------------


def fetch_request() -> pa.RecordBatch:
    return SPECS.decode([(SHARED / "vectors" / "fetch_request_v12.bin").read_bytes()], "FetchRequest", 12)


def test_a_tagged_field_equal_to_its_default_is_left_out() -> None:
    batch = fetch_request()
    (body,) = SPECS.encode(batch, "FetchRequest", 12).to_pylist()
    assert body.endswith(b"\x01\x00\x0f\x0fcluster-AbCdEf")  # one tag: 0, size 15, compact string
    assert batch.column("_tags_present").to_pylist() == [[0]]  # the decoder saw tag 0
    i = batch.schema.get_field_index("cluster_id")
    null = batch.set_column(i, batch.schema.field(i), pa.array([None], pa.string()))
    # listed in _tags_present, the tag is written even at its default (null: compact length 0)
    (listed,) = SPECS.encode(null, "FetchRequest", 12).to_pylist()
    assert listed == body[:-18] + b"\x01\x00\x01\x00"
    k = batch.schema.get_field_index("_tags_present")
    without = null.set_column(k, batch.schema.field(k), pa.array([[]], batch.schema.field(k).type))
    (short,) = SPECS.encode(without, "FetchRequest", 12).to_pylist()
    assert short == body[:-18] + b"\x00"  # count 1 -> 0, the entry's 17 bytes gone


def test_unknown_tags_are_merged_in_ascending_order() -> None:
    batch = fetch_request()
    i = batch.schema.get_field_index("_unknown_tags")
    tags = pa.array([[(7, b"seven"), (3, b"3")]], batch.schema.field(i).type)
    (body,) = SPECS.encode(batch.set_column(i, batch.schema.field(i), tags), "FetchRequest", 12).to_pylist()
    # the row's tags come out sorted, the known tag 0 first
    assert body.endswith(b"\x03" + b"\x00\x0f\x0fcluster-AbCdEf" + b"\x03\x013" + b"\x07\x05seven")
    again = SPECS.decode([body], "FetchRequest", 12).column("_unknown_tags").to_pylist()
    assert again == [[(3, b"3"), (7, b"seven")]]


def test_unknown_tags_that_would_not_read_back_the_same() -> None:
    batch = fetch_request()
    i = batch.schema.get_field_index("_unknown_tags")
    field = batch.schema.field(i)
    clash = batch.set_column(i, field, pa.array([[(0, b"x")]], field.type))
    fails(
        clash,
        "FetchRequest",
        12,
        "unknown tag 0 is a known tagged field's tag at $._unknown_tags (row 0, FetchRequest v12)",
    )
    twice = batch.set_column(i, field, pa.array([[(5, b"a"), (5, b"b")]], field.type))
    fails(
        twice, "FetchRequest", 12, "unknown tag 5 appears twice at $._unknown_tags (row 0, FetchRequest v12)"
    )


def test_draft_optional_buffer_limits() -> None:
    name = "OptionalFieldsResponse"
    foo = {"baz": 1, "bar": "hello world", "detail": {"code": 0, "note": None, "_unknown_tags": []}}
    big = rows(name, 1, [{"foos": [{**foo, "_unknown_tags": [(40000, b"x")]}]}], FEATURES)
    fails(
        big,
        name,
        1,
        "unknown optional field tag 40000 does not fit int16 at $.foos[0]._unknown_tags (row 0, OptionalFieldsResponse v1)",
        FEATURES,
    )
    empty = rows(name, 1, [{"foos": [{**foo, "_unknown_tags": [(9, b"")]}]}], FEATURES)
    fails(empty, name, 1,
          "unknown optional field 9 is empty (a zero length ends the buffer) at $.foos[0]._unknown_tags (row 0, OptionalFieldsResponse v1)", FEATURES)  # fmt: skip


# ---- shapes of input --------------------------------------------------------------------------


def metadata_batch() -> tuple[pa.RecordBatch, list[bytes]]:
    body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
    spec = SPECS["MetadataResponse"]
    value = ref.decode(spec, 12, body)
    bodies = [body] + [ref.encode(spec, 12, {**value, "throttle_time_ms": k}) for k in range(1, 200)]
    return SPECS.decode(bodies, "MetadataResponse", 12), bodies


def test_threads_slices_tables_and_chunks_give_the_same_bytes() -> None:
    batch, bodies = metadata_batch()
    assert SPECS.encode(batch, "MetadataResponse", 12, threads=2).to_pylist() == bodies
    assert SPECS.encode(batch.slice(17, 50), "MetadataResponse", 12).to_pylist() == bodies[17:67]
    table = pa.Table.from_batches([batch.slice(0, 80), batch.slice(80)])
    assert SPECS.encode(table, "MetadataResponse", 12).to_pylist() == bodies
    sizes = SPECS.encoded_size(table, "MetadataResponse", 12).to_numpy()
    assert np.array_equal(sizes, [len(b) for b in bodies])
    # (as plain Python, a few rows; test_encode_specialised runs the compiled kernel on threads)
    assert encode_specialised(SPECS, batch.slice(17, 2), "MetadataResponse", 12).to_pylist() == bodies[17:19]
    empty = pa.Table.from_batches([], schema=batch.schema)  # no chunks at all
    assert SPECS.encode(empty, "MetadataResponse", 12).to_pylist() == []
    with pytest.raises(TypeError, match="RecordBatch"):
        SPECS.encode([{"a": 1}], "MetadataResponse", 12)
