"""Hostile input to the encoder: what Kafka refuses is refused with ``EncodeError`` naming the
row and field path, never another exception and never a guessed value. One test per fault the
fuzz campaign found (null array elements, strings over 32767 bytes in flexible versions,
foreign errors from the input checks, silent casts), the conversions ``input_rule`` does make
(each writing the same bytes as the exact type), and every wrong type fed to every column of a
few messages."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.encode import bad_offsets, input_rule, uuids_as_bytes
from arrowkafka.plan import with_indices
from arrowkafka.schema import default_struct, storage_type
from tests.codec.encode.pure_kernel import encode_specialised
from tests.conftest import SHARED, SPEC_FOLDERS

SPECS = ak.load_specs()
FEATURES = ak.load_specs(SPEC_FOLDERS["features"])
HB = "ConsumerGroupHeartbeatRequest"


def refused(specs: ak.SpecSet, data: Any, name: str, version: int) -> ak.EncodeError:
    """The EncodeError of encoding ``data`` (the same from the sizing pass and from the kernel
    generated for the plan)."""
    with pytest.raises(ak.EncodeError) as e:
        specs.encode(data, name, version)
    with pytest.raises(ak.EncodeError) as sized:
        specs.encoded_size(data, name, version)
    with pytest.raises(ak.EncodeError) as fast:
        encode_specialised(specs, data, name, version)
    assert str(sized.value) == str(fast.value) == str(e.value)
    return e.value


def heartbeat(**columns: Any) -> pa.Table:
    """Two ConsumerGroupHeartbeatRequest rows: the required columns, plus ``columns``."""
    base = {
        "group_id": pa.array(["g", "g"]),
        "member_id": pa.array(["m", "m"]),
        "member_epoch": pa.array([1, 2], pa.int32()),
    }
    return pa.table({**base, **columns})


# ---- 1. arrays never hold a null element ------------------------------------------------------


def test_null_string_element_the_fuzzer_found() -> None:
    names = pa.array([["x"], ["a", None]], pa.list_(pa.string()))
    e = refused(SPECS, heartbeat(subscribed_topic_names=names), HB, 0)
    assert (type(e), e.row, e.path) == (ak.EncodeError, 1, "$.subscribed_topic_names[1]")
    assert e.reason == "null in non-nullable string field"


ELEMENTS = {  # element type -> (a value, its Arrow type)
    "string": ("s", pa.string()),
    "bytes": (b"b", pa.binary()),
    "uuid": (bytes(range(16)), pa.binary(16)),
    "bool": (True, pa.bool_()),
    "int8": (1, pa.int8()),
    "int16": (1, pa.int16()),
    "int32": (1, pa.int32()),
    "int64": (1, pa.int64()),
    "uint16": (1, pa.uint16()),
    "uint32": (1, pa.uint32()),
    "float64": (1.5, pa.float64()),
}


@pytest.fixture(scope="module")
def arrays_spec(tmp_path_factory: pytest.TempPathFactory) -> ak.SpecSet:
    """A request with a nullable array of each element type: v0 classic, v1 flexible."""
    fields = [
        {"name": f"{e.title()}s", "type": f"[]{e}", "versions": "0+", "nullableVersions": "0+", "about": e}
        for e in ELEMENTS
    ]
    spec = {"apiKey": 9100, "type": "request", "name": "HostileArraysRequest", "validVersions": "0-1",
            "flexibleVersions": "1+", "fields": fields}  # fmt: skip
    folder = tmp_path_factory.mktemp("specs")
    (folder / "HostileArraysRequest.json").write_text(json.dumps(spec))
    return ak.load_specs(folder)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("element", list(ELEMENTS))
def test_a_null_element_of_every_array_type_is_refused(
    arrays_spec: ak.SpecSet, element: str, version: int
) -> None:
    value, t = ELEMENTS[element]
    column = f"{element}s"
    good = pa.table({column: pa.array([[value], [value, value]], pa.list_(t))})
    (_, body) = arrays_spec.encode(good, "HostileArraysRequest", version).to_pylist()
    assert ref.decode(arrays_spec["HostileArraysRequest"], version, body)[column] is not None
    holed = pa.table({column: pa.array([[value], [value, None]], pa.list_(t))})
    e = refused(arrays_spec, holed, "HostileArraysRequest", version)
    assert (e.row, e.path) == (1, f"$.{column}[1]")
    assert e.reason.startswith("null in non-nullable")
    # a null array is fine: the array is nullable, its elements are not
    nulls = pa.table({column: pa.array([None, [value]], pa.list_(t))})
    assert arrays_spec.encode(nulls, "HostileArraysRequest", version)[0].as_py() is not None


# ---- 2. strings over 32767 bytes, in every version ---------------------------------------------


def metadata_request(name: str) -> pa.Table:
    topics = pa.array([[{"topic_id": bytes(16), "name": "ok"}], [{"topic_id": bytes(16), "name": name}]],
                      pa.list_(pa.struct([("topic_id", pa.binary(16)), ("name", pa.string())])))  # fmt: skip
    return pa.table({"topics": topics})


def _offsets(*xs: int) -> pa.Buffer:
    return pa.array(xs, pa.int32()).buffers()[1]


# (pyarrow's own cheap check refuses a last offset past the values; these pass it)
@pytest.mark.parametrize("offsets", [(0, 3, 1), (0, 9, 4)], ids=["backwards", "past the bytes, then back"])
def test_string_offsets_arrow_would_refuse(offsets: tuple[int, ...]) -> None:
    """pyarrow checks an array built from buffers in full only when asked; the kernels copy by
    its offsets unchecked, so offsets that go backwards or past the bytes are refused first."""
    name = pa.Array.from_buffers(pa.string(), 2, [None, _offsets(*offsets), pa.py_buffer(b"java")])
    table = pa.table({"client_software_name": name, "client_software_version": ["1", "2"]})
    e = refused(SPECS, table, "ApiVersionsRequest", 3)
    assert "not a valid Arrow array" in e.reason and e.path == "$.client_software_name" and e.row < 2


@pytest.mark.parametrize("offsets", [(0, 1, 0), (0, 5, 1)], ids=["backwards", "past the values, then back"])
def test_list_offsets_arrow_would_refuse(offsets: tuple[int, ...]) -> None:
    one = pa.array([{"name": "a"}])  # (the topic id and tags: their defaults)
    topics = pa.Array.from_buffers(pa.list_(one.type), 2, [None, _offsets(*offsets)], children=[one])
    e = refused(SPECS, pa.table({"topics": topics}), "MetadataRequest", 12)
    assert "not a valid Arrow array" in e.reason and e.path == "$.topics" and e.row < 2


def test_the_first_bad_offset_is_the_one_named() -> None:
    """``bad_offsets`` checks the usual case (never backwards, within the values) in one pass;
    where that fails it names the first element any rule refuses, as the plain rule does."""
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(3000):
        n, limit = int(rng.integers(1, 8)), int(rng.integers(0, 12))
        offs = np.sort(rng.integers(-1, 14, n)).astype(np.int32)
        if rng.random() < 0.5:  # some backwards
            offs = rng.integers(-2, 14, n).astype(np.int32)
        bad = (offs[1:] < offs[:-1]) | (offs[1:] > limit) | (offs[:-1] < 0)
        want = int(np.argmax(bad)) if bad.any() else None
        assert bad_offsets(offs, limit) == want, (offs, limit)
        seen.add(want is None)
    assert seen == {True, False}
    assert bad_offsets(np.zeros(0, np.int32), 0) is None


def test_a_32768_byte_topic_name_in_metadata_v12() -> None:
    e = refused(SPECS, metadata_request("t" * 32768), "MetadataRequest", 12)
    assert (e.row, e.path) == (1, "$.topics[0].name")
    assert e.reason == "string of 32768 bytes is longer than 32767"
    (_, body) = SPECS.encode(metadata_request("t" * 32767), "MetadataRequest", 12).to_pylist()
    assert ref.decode(SPECS["MetadataRequest"], 12, body)["topics"][0]["name"] == "t" * 32767


def test_bytes_have_no_such_limit() -> None:
    big = bytes(range(256)) * 200  # 51,200 bytes
    rows = pa.table({"auth_bytes": pa.array([big], pa.binary())})
    (body,) = SPECS.encode(rows, "SaslAuthenticateRequest", 2).to_pylist()
    assert ref.decode(SPECS["SaslAuthenticateRequest"], 2, body)["auth_bytes"] == big


# ---- 3. no foreign error from the input checks -------------------------------------------------

NS = "NullableStructsRequest"


def assignment(**children: pa.Array) -> pa.StructArray:
    """NullableStructsRequest's tagged struct ``assignment`` (v1+), one row."""
    cols = {"error": pa.array([0], pa.int8()), "metadata": pa.array([None], pa.binary()),
            "epoch": pa.array([-1], pa.int32()), **children}  # fmt: skip
    return pa.StructArray.from_arrays(list(cols.values()), names=list(cols))


def nullable_structs(assign: pa.Array) -> pa.Table:
    cursor = pa.array([{"topic": "t", "partition": 0}])
    return pa.table({"cursor": cursor, "assignment": assign})


def test_a_uint64_child_of_a_tagged_struct() -> None:
    want = FEATURES.encode(nullable_structs(assignment(epoch=pa.array([7], pa.int32()))), NS, 1)
    got = FEATURES.encode(nullable_structs(assignment(epoch=pa.array([7], pa.uint64()))), NS, 1)
    assert got.to_pylist() == want.to_pylist()
    # at the default (-1 as int32) a uint64 cannot be: 2^63 is out of range, named
    e = refused(FEATURES, nullable_structs(assignment(epoch=pa.array([2**63], pa.uint64()))), NS, 1)
    assert (e.row, e.path, e.reason) == (
        0,
        "$.assignment.epoch",
        "9223372036854775808 is out of range for int32",
    )


@pytest.mark.parametrize(
    ("child", "got"),
    [(pa.array([True]), "bool"), (pa.array(["7"]), "string"), (pa.array([7.0]), "double")],
)
def test_a_bool_or_string_child_of_a_tagged_struct(child: pa.Array, got: str) -> None:
    e = refused(FEATURES, nullable_structs(assignment(epoch=child)), NS, 1)
    assert (e.row, e.path, e.reason) == (0, "$.assignment.epoch", f"expected int32, got {got}")


def test_a_list_where_a_struct_belongs() -> None:
    e = refused(FEATURES, nullable_structs(pa.array([[1, 2]])), NS, 1)
    assert (e.row, e.path, e.reason) == (0, "$.assignment", "expected struct, got list<int64>")


@pytest.mark.parametrize("tag", [2**40, -1])
def test_unknown_tags_keys_out_of_uint32(tag: int) -> None:
    tags = pa.array([[], [(3, b"ok"), (tag, b"x")]], pa.map_(pa.int64(), pa.binary()))
    e = refused(SPECS, heartbeat(_unknown_tags=tags), HB, 0)
    assert (e.row, e.path, e.reason) == (1, "$._unknown_tags[1].key", f"{tag} is out of range for uint32")


def test_unknown_tags_in_a_wider_key_type_are_written() -> None:
    tags = pa.array([[], [(3, b"ok")]], pa.map_(pa.int64(), pa.large_binary()))
    want = pa.array([[], [(3, b"ok")]], pa.map_(pa.uint32(), pa.binary()))
    assert (
        SPECS.encode(heartbeat(_unknown_tags=tags), HB, 0).to_pylist()
        == SPECS.encode(heartbeat(_unknown_tags=want), HB, 0).to_pylist()
    )


def test_a_null_unknown_tags_map_is_refused() -> None:
    tags = pa.array([[], None], pa.map_(pa.uint32(), pa.binary()))
    e = refused(SPECS, heartbeat(_unknown_tags=tags), HB, 0)
    assert (e.row, e.path, e.reason) == (1, "$._unknown_tags", "null in non-nullable _unknown_tags map")


def test_a_null_in_tags_present_is_refused() -> None:
    body = (SHARED / "vectors" / "fetch_request_v12.bin").read_bytes()
    batch = SPECS.decode([body, body], "FetchRequest", 12)
    assert "_tags_present" in batch.schema.names
    i = batch.schema.get_field_index("_tags_present")
    t = batch.schema.field(i).type
    holes = [
        (pa.array([[], None], t), "$._tags_present"),
        (pa.array([[], [None]], pa.list_(pa.uint32())), "$._tags_present[0]"),
    ]
    for holed, path in holes:
        e = refused(SPECS, batch.set_column(i, "_tags_present", holed), "FetchRequest", 12)
        assert (e.row, e.path, e.reason) == (1, path, "null in non-nullable _tags_present list")


# ---- 4. wrong column types: refused, naming both; lossless ones made ---------------------------


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("member_epoch", pa.array(["12", "13"]), "expected int32, got string"),
        ("group_id", pa.array([3, 4], pa.date32()), "expected string, got date32[day]"),
        ("group_id", pa.array([True, False]), "expected string, got bool"),
        ("group_id", pa.array([b"g", b"g"]), "expected string, got binary"),
        ("member_epoch", pa.array([1, 2], pa.timestamp("ms")), "expected int32, got timestamp[ms]"),
        ("member_epoch", pa.array([1.0, 2.0]), "expected int32, got double"),
        ("member_epoch", pa.array([True, False]), "expected int32, got bool"),
        (
            "subscribed_topic_names",
            pa.array([[1], [2]], pa.list_(pa.int32())),
            "expected list<string>, got list<int32>",
        ),
        ("subscribed_topic_names", pa.array(["a", "b"]), "expected list<string>, got string"),
        ("topic_partitions", pa.array([[1], [2]]), "expected list<struct>, got list<int64>"),
    ],
)
def test_a_wrong_column_type_is_refused(column: str, value: pa.Array, reason: str) -> None:
    e = refused(SPECS, heartbeat(**{column: value}), HB, 0)
    assert (e.row, e.path, e.reason) == (0, f"$.{column}", reason)


def test_an_integer_out_of_range_names_row_and_value() -> None:
    e = refused(SPECS, heartbeat(member_epoch=pa.array([1, 2**31], pa.int64())), HB, 0)
    assert (e.row, e.path, e.reason) == (1, "$.member_epoch", "2147483648 is out of range for int32")
    e = refused(SPECS, heartbeat(member_epoch=pa.array([1, 2**64 - 1], pa.uint64())), HB, 0)
    assert (e.row, e.reason) == (1, "18446744073709551615 is out of range for int32")


def test_the_rule_refuses_a_type_in_a_column_no_row_reaches() -> None:
    # every row's array is empty: the element type is still wrong
    names = pa.array([[], []], pa.list_(pa.date32()))
    e = refused(SPECS, heartbeat(subscribed_topic_names=names), HB, 0)
    assert e.path == "$.subscribed_topic_names" and e.reason == "expected list<string>, got list<date32[day]>"


UUIDS = [bytes(range(16)), bytes(range(16, 32))]
LOSSLESS: list[tuple[str, Any, Any]] = [  # column, the exact type's array, another accepted one
    ("member_epoch", pa.array([1, 2], pa.int32()), pa.array([1, 2], pa.uint8())),
    ("member_epoch", pa.array([-1, 2], pa.int32()), pa.array([-1, 2], pa.int64())),
    ("group_id", pa.array(["g", "é"]), pa.array(["g", "é"], pa.large_string())),
    ("group_id", pa.array(["g", "é"]), pa.array(["g", "é"], pa.string_view())),
    ("group_id", pa.array(["g", "h"]), pa.array(["g", "h"]).dictionary_encode()),
    ("instance_id", pa.array([None, None], pa.string()), pa.nulls(2)),
    ("subscribed_topic_names", pa.array([["a"], []], pa.list_(pa.string())),
     pa.array([["a"], []], pa.large_list(pa.large_string()))),
    ("subscribed_topic_names", pa.array([["a"], None], pa.list_(pa.string())),
     pa.array([["a"], None], pa.list_(pa.string())).cast(pa.list_(pa.dictionary(pa.int8(), pa.string())))),
]  # fmt: skip


@pytest.mark.parametrize(("column", "exact", "other"), LOSSLESS, ids=[str(x[2].type) for x in LOSSLESS])
def test_lossless_conversions_write_the_same_bytes(column: str, exact: pa.Array, other: pa.Array) -> None:
    want = SPECS.encode(heartbeat(**{column: exact}), HB, 0).to_pylist()
    assert SPECS.encode(heartbeat(**{column: other}), HB, 0).to_pylist() == want
    assert encode_specialised(SPECS, heartbeat(**{column: other}), HB, 0).to_pylist() == want


def test_uuid_columns_in_each_accepted_type() -> None:
    def parts(ids: pa.Array) -> pa.Array:
        t = pa.struct([("topic_id", ids.type), ("partitions", pa.list_(pa.int32()))])
        return pa.array([[{"topic_id": u, "partitions": [0]}] for u in ids.to_pylist()], pa.list_(t))

    want = SPECS.encode(heartbeat(topic_partitions=parts(pa.array(UUIDS, pa.binary(16)))), HB, 0).to_pylist()
    for t in (pa.binary(), pa.large_binary(), pa.binary_view()):
        got = SPECS.encode(heartbeat(topic_partitions=parts(pa.array(UUIDS, t))), HB, 0).to_pylist()
        assert got == want, t
    ext = pa.ExtensionArray.from_storage(pa.uuid(), pa.array(UUIDS, pa.binary(16)))
    storage = pa.array(
        [[{"topic_id": u, "partitions": [0]}] for u in UUIDS], parts(pa.array(UUIDS, pa.binary(16))).type
    )
    offs = pa.array([0, 1, 2], pa.int32())
    inner = pa.StructArray.from_arrays([ext, storage.values.field(1)], names=["topic_id", "partitions"])
    as_ext = pa.ListArray.from_arrays(offs, inner)
    assert SPECS.encode(heartbeat(topic_partitions=as_ext), HB, 0).to_pylist() == want
    e = refused(SPECS, heartbeat(topic_partitions=parts(pa.array(["x" * 16, "y" * 16]))), HB, 0)
    assert (e.row, e.path, e.reason) == (0, "$.topic_partitions[0].topic_id", "expected uuid, got string")


def test_input_rule_table() -> None:
    assert input_rule(pa.int64(), pa.int16()) == "int"
    assert input_rule(pa.float32(), pa.float64()) == "cast"
    assert input_rule(pa.int64(), pa.float64()) is None
    assert input_rule(pa.string(), pa.binary()) is None
    assert input_rule(pa.binary(), pa.string()) is None
    assert input_rule(pa.list_view(pa.string()), pa.list_(pa.string())) is None
    assert input_rule(pa.dictionary(pa.int8(), pa.date32()), pa.string()) is None
    assert input_rule(pa.null(), pa.struct([])) == "null"


# ---- every wrong type to every column of a few messages ----------------------------------------


def sample(t: pa.DataType) -> Any:
    """A value of Arrow type ``t`` with one element in every array and every struct present."""
    if pa.types.is_struct(t):
        return {t.field(i).name: sample(t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_map(t):
        return []
    if pa.types.is_list(t):
        return [] if t.value_type == pa.uint32() else [sample(t.value_type)]  # _tags_present: none
    if isinstance(t, pa.BaseExtensionType) or pa.types.is_fixed_size_binary(t):
        return bytes(range(16))
    if pa.types.is_string(t):
        return "s"
    if pa.types.is_binary(t):
        return b"b"
    if pa.types.is_boolean(t):
        return True
    if pa.types.is_floating(t):
        return 1.0
    return 1


WRONG: dict[str, Callable[[int], pa.Array]] = {  # a wrong column of n slots (typed even when empty)
    "string": lambda n: pa.array(["1"] * n, pa.string()),
    "bool": lambda n: pa.array([True] * n, pa.bool_()),
    "double": lambda n: pa.array([1.0] * n, pa.float64()),
    "date32": lambda n: pa.array([datetime.date(2024, 1, 1)] * n, pa.date32()),
    "timestamp": lambda n: pa.array([0] * n, pa.timestamp("us")),
    "binary": lambda n: pa.array([b"1"] * n, pa.binary()),
    "int64": lambda n: pa.array([1] * n, pa.int64()),
    "struct": lambda n: pa.array([{"a": 1}] * n, pa.struct([("a", pa.int64())])),
    "list<date32>": lambda n: pa.array([[datetime.date(2024, 1, 1)]] * n, pa.list_(pa.date32())),
    "list_view": lambda n: pa.array([["a"]] * n, pa.list_view(pa.string())),
}


def kind(t: pa.DataType) -> str:
    if isinstance(t, pa.BaseExtensionType) or pa.types.is_fixed_size_binary(t):
        return "uuid"
    if pa.types.is_list(t):
        return "list"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_integer(t):
        return "int"
    return str(t)


def wrong_for(t: pa.DataType) -> list[str]:
    """The wrong types to feed a column of type ``t``: every one ``input_rule`` refuses."""
    return [w for w, make in WRONG.items() if input_rule(make(1).type, t) is None]


def columns(t: pa.DataType, path: str = "$") -> list[tuple[str, pa.DataType]]:
    """Every column path under a struct type (``$.topics[].name``), maps left out."""
    out = []
    for i in range(t.num_fields):
        f = t.field(i)
        p = f"{path}.{f.name}"
        out.append((p, f.type))
        inner, q = f.type, p
        while pa.types.is_list(inner):
            inner, q = inner.value_type, q + "[]"
            out.append((q, inner))  # the elements: a column too
        if pa.types.is_struct(inner):
            out += columns(inner, q)
    return out


def replaced(arr: pa.Array, parts: list[str], make: Callable[[int], pa.Array]) -> pa.Array:
    """``arr`` with the column at ``parts`` (names; "[]" steps into a list) made by ``make``."""
    if not parts:
        return make(len(arr))
    head, rest = parts[0], parts[1:]
    if head == "[]":
        offsets = pa.array(arr.offsets.to_numpy() - arr.offsets[0].as_py(), pa.int32())
        return pa.ListArray.from_arrays(offsets, replaced(arr.flatten(), rest, make))
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    kids = [replaced(arr.field(n), rest, make) if n == head else arr.field(n) for n in names]
    return pa.StructArray.from_arrays(kids, names=names)


MESSAGES = [
    ("MetadataRequest", 12),
    ("MetadataResponse", 12),
    (HB, 0),
    ("DescribeConfigsRequest", 1),
    ("DescribeConfigsResponse", 1),
    ("CreateTopicsRequest", 7),
    ("CreateTopicsResponse", 7),
]


def steps(path: str) -> list[str]:
    out: list[str] = []
    for piece in path[2:].split("."):
        name = piece.replace("[]", "")
        out.append(name)
        out += ["[]"] * piece.count("[]")
    return out


CASES = [
    (name, version, path, w)
    for name, version in MESSAGES
    for path, t in columns(pa.struct(list(SPECS.arrow_schema(name, version))))
    if not path.endswith("._unknown_tags")
    for w in wrong_for(t)
]


@pytest.fixture(scope="module")
def samples() -> dict[tuple[str, int], pa.StructArray]:
    out = {}
    for name, version in MESSAGES:
        t = pa.struct([f.with_type(storage_type(f.type)) for f in SPECS.arrow_schema(name, version)])
        value = sample(t)
        if name == "MetadataResponse":  # a real body: every array holds something
            body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
            value = uuids_as_bytes(ref.decode(SPECS[name], version, body))
            value = {**default_struct(SPECS[name], SPECS[name].root, version), **value}
        arr = pa.array([value, value], t)
        assert len(SPECS.encode(arr, name, version)) == 2  # the sample itself is valid
        out[(name, version)] = arr
    return out


@pytest.mark.parametrize(
    ("name", "version", "path", "wrong"), CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES]
)
def test_every_wrong_type_in_every_column(
    samples: dict[tuple[str, int], pa.StructArray], name: str, version: int, path: str, wrong: str
) -> None:
    arr = replaced(samples[(name, version)], steps(path), WRONG[wrong])
    try:
        SPECS.encode(arr, name, version)
    except ak.EncodeError as e:
        depth = path.count("[]")
        where = [with_indices(path, [0] * depth), with_indices(path, [])]
        if path.endswith("[]"):  # wrong elements: named as the list's type
            where.append(with_indices(path[:-2], [0] * depth))
        assert e.path in where, e
        assert e.reason.startswith("expected ") and ", got " in e.reason, e
        assert e.row == 0
    else:
        raise AssertionError(f"{wrong} in {path} was written")


def test_the_cases_cover_every_kind_of_column() -> None:
    kinds = {
        kind(t)
        for name, version in MESSAGES
        for _, t in columns(pa.struct(list(SPECS.arrow_schema(name, version))))
    }
    assert {"int", "string", "bool", "uuid", "list", "struct"} <= kinds
    assert len(CASES) > 300
