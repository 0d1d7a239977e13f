"""Bad input: exact typed errors naming message, offset and path; errors="null" keeps every
bad body as a reject row; forged lengths never allocate; every accepted input form works."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.decode import Ranges
from tests.conftest import SHARED, SPEC_FOLDERS

FETCH_REQUEST = (SHARED / "vectors" / "fetch_request_v12.bin").read_bytes()
METADATA = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
FEATURES = ak.load_specs(SPEC_FOLDERS["features"])


def error_of(bodies: list[bytes], name: str, version: int, specs: ak.SpecSet | None = None) -> ak.DecodeError:
    with pytest.raises(ak.DecodeError) as e:
        (specs or ak.load_specs()).decode(bodies, name, version)
    return e.value


def test_truncated_names_message_offset_and_path() -> None:
    e = error_of([METADATA, METADATA[:57]], "MetadataResponse", 12)
    assert type(e) is ak.Truncated
    assert str(e) == (
        "reading string: needs 20 bytes, 10 left at $.brokers[1].host (message 1, byte 46/57, MetadataResponse v12)"
    )
    assert (e.message_index, e.offset, e.size, e.path) == (1, 46, 57, "$.brokers[1].host")


@pytest.mark.jit
def test_paths_and_classes_agree_with_the_reference() -> None:
    """Cut the Metadata vector at many points: the kernel's path is the reference's path (the
    reference names the element of a primitive array too, the kernel the array)."""
    spec = ak.load_specs()["MetadataResponse"]
    for cut in range(0, len(METADATA), 97):
        e = error_of([METADATA[:cut]], "MetadataResponse", 12)
        with pytest.raises(ak.DecodeError) as r:
            ref.decode(spec, 12, METADATA[:cut])
        assert type(e) is type(r.value) is ak.Truncated
        assert r.value.path == e.path or r.value.path.startswith(e.path + "["), (cut, e.path, r.value.path)
        assert e.offset <= r.value.offset <= cut
    e = error_of([METADATA[:20000]], "MetadataResponse", 12)
    assert e.path.startswith("$.topics[0].partitions[")


CASES = [
    # (body, message, version, spec folder, class, exact text)
    (b"\x00\x00", "ApiVersionsRequest", 0, None, ak.Corrupt,
     "2 bytes left over after the last field at $ (message 0, byte 0/2, ApiVersionsRequest v0)"),
    (b"\xff\xfe", "SaslHandshakeRequest", 0, None, ak.Corrupt,
     "reading string: negative length -2 at $.mechanism (message 0, byte 0/2, SaslHandshakeRequest v0)"),
    (b"\xff\xff", "SaslHandshakeRequest", 1, None, ak.Corrupt,
     "reading string: null in a field that is not nullable in this version at $.mechanism "
     "(message 0, byte 0/2, SaslHandshakeRequest v1)"),
    (b"\x00\x02\xc3\x28", "SaslHandshakeRequest", 1, None, ak.Corrupt,
     "reading string: invalid UTF-8 at $.mechanism (message 0, byte 0/4, SaslHandshakeRequest v1)"),
    (b"\x80\x80\x80\x80\x80\x01", "ApiVersionsRequest", 3, None, ak.Corrupt,
     "reading string: varint too long at $.client_software_name (message 0, byte 0/6, ApiVersionsRequest v3)"),
    (b"\xff\xff\xff\xff\x7f", "ApiVersionsRequest", 3, None, ak.Corrupt,
     "reading string: varint too big for its type at $.client_software_name "
     "(message 0, byte 0/5, ApiVersionsRequest v3)"),
    (b"\x05", "NullableStructsRequest", 2, "features", ak.Corrupt,
     "reading Cursor: bad nullable-struct marker 5 at $.cursor (message 0, byte 0/1, NullableStructsRequest v2)"),
    (b"\x01\x01\x02\x01\x00\x00\x00", "ApiVersionsRequest", 3, None, ak.Corrupt,
     "reading tagged fields: tag 0 after tag 1 (tags must ascend) at $ (message 0, byte 5/7, ApiVersionsRequest v3)"),
    (b"\x01\x00\x00\x00\x00\x00\x01\x00\x01\x01", "NullableStructsRequest", 1, "features", ak.Corrupt,
     "reading int8: a tagged field's value does not fill its size at $.assignment.error "
     "(message 0, byte 10/10, NullableStructsRequest v1)"),
    (b"\x00" * 16 + b"\x7f\xff\xff\xff", "FetchRequest", 3, None, ak.Truncated,
     "reading []FetchTopic: 2147483647 elements cannot fit in the 0 bytes left at $.topics "
     "(message 0, byte 16/20, FetchRequest v3)"),
    (b"\x00\x02a", "SaslHandshakeRequest", 1, None, ak.Truncated,
     "reading string: needs 2 bytes, 1 left at $.mechanism (message 0, byte 0/3, SaslHandshakeRequest v1)"),
    (b"\x01\x01", "ApiVersionsRequest", 3, None, ak.Truncated,
     "reading tagged fields: varint cut short: needs more than the 0 bytes left at $ "
     "(message 0, byte 2/2, ApiVersionsRequest v3)"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "name", "version", "folder", "cls", "text"), CASES)
def test_exact_errors(body: bytes, name: str, version: int, folder: str | None, cls: type, text: str) -> None:
    specs = ak.load_specs(SPEC_FOLDERS[folder]) if folder else ak.load_specs()
    e = error_of([body], name, version, specs)
    assert type(e) is cls
    assert str(e) == text
    # The reference decoder agrees on the class and the field.
    with pytest.raises(cls) as ref_e:
        ref.decode(specs[name], version, body)
    assert ref_e.value.path.split(".")[:2] == e.path.split(".")[:2] or ref_e.value.path == "$"


def test_errors_null_keeps_every_body() -> None:
    bodies = [FETCH_REQUEST, FETCH_REQUEST[:100], b"", FETCH_REQUEST + b"\x00", FETCH_REQUEST]
    batch, rejects = ak.decode(bodies, "FetchRequest", 12, errors="null")
    batch.validate(full=True)
    assert batch.num_rows == 5
    assert all(f.nullable for f in batch.schema)
    valid = [batch.column("topics")[i].is_valid for i in range(5)]
    assert valid == [True, False, False, False, True]
    assert (
        batch.to_pylist()[0]
        == batch.to_pylist()[4]
        == ref.decode(ak.load_specs()["FetchRequest"], 12, FETCH_REQUEST)
    )
    assert rejects.column("index").to_pylist() == [1, 2, 3]
    assert rejects.column("error").to_pylist() == ["Truncated", "Truncated", "Corrupt"]
    assert rejects.column("body").to_pylist() == bodies[1:4]
    assert rejects.column("reason").to_pylist()[2] == "1 bytes left over after the last field"
    assert rejects.column("byte_offset").to_pylist()[2] == len(FETCH_REQUEST)
    # the same bodies, one at a time, raise the same errors
    for i, body in zip([1, 2, 3], bodies[1:4], strict=True):
        e = error_of([body], "FetchRequest", 12)
        assert type(e).__name__ == rejects.column("error")[[1, 2, 3].index(i)].as_py()


def test_errors_null_without_rejects_keeps_the_schema_nullable() -> None:
    batch, rejects = ak.decode([FETCH_REQUEST], "FetchRequest", 12, errors="null")
    assert rejects.num_rows == 0 and all(f.nullable for f in batch.schema)


def test_null_body() -> None:
    bodies = pa.array([FETCH_REQUEST, None], pa.binary())
    e = error_of(bodies, "FetchRequest", 12)  # type: ignore[arg-type]
    assert str(e) == "a null body at $ (message 1, byte 0/0, FetchRequest v12)"
    batch, rejects = ak.decode(bodies, "FetchRequest", 12, errors="null")
    assert batch.num_rows == 2 and rejects.column("reason").to_pylist() == ["a null body"]


@pytest.mark.jit
def test_forged_count_does_not_allocate() -> None:
    import tracemalloc

    body = b"\x00" * 16 + b"\x7f\xff\xff\xff"
    tracemalloc.start()
    with pytest.raises(ak.Truncated):
        ak.decode([body] * 100, "FetchRequest", 3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5_000_000


@pytest.mark.parametrize("form", ["list", "binary", "large_binary", "chunked", "sliced"])
def test_input_forms(form: str) -> None:
    bodies = [METADATA, FETCH_REQUEST[:0] + METADATA[:0] + METADATA]
    if form == "list":
        data: object = bodies
    elif form == "binary":
        data = pa.array(bodies, pa.binary())
    elif form == "large_binary":
        data = pa.array(bodies, pa.large_binary())
    elif form == "chunked":
        data = pa.chunked_array(
            [pa.array(bodies[:1], pa.binary()), pa.array(bodies[1:], pa.large_binary()).cast(pa.binary())]
        )
    else:
        data = pa.array([b"junk", *bodies, b"junk"], pa.binary()).slice(1, 2)
    batch = ak.decode(data, "MetadataResponse", 12)
    assert batch.num_rows == 2
    assert batch.to_pylist()[1] == ref.decode(ak.load_specs()["MetadataResponse"], 12, METADATA)


def test_message_without_fields_still_has_rows() -> None:
    batch = ak.decode([b"", b"", b""], "ApiVersionsRequest", 0)
    assert batch.num_rows == 3 and batch.num_columns == 0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="errors must be one of"):
        ak.decode([], "FetchRequest", 12, errors="ignore")
    with pytest.raises(KeyError, match="FetchRequest has no version 99"):
        ak.decode([], "FetchRequest", 99)
    with pytest.raises(TypeError, match="message bodies must be binary"):
        ak.decode(pa.array([1]), "FetchRequest", 12)


def test_empty_batch() -> None:
    batch = ak.decode([], "FetchRequest", 12)
    assert batch.num_rows == 0 and batch.schema == ak.arrow_schema("FetchRequest", 12)


def test_ranges_decode_where_bodies_lie() -> None:
    """Bodies named as ranges of one buffer (the capture path) decode as the same bodies in
    an array: rows, rejects (index, reason, offset within the body, raw bytes) alike."""
    bodies = [FETCH_REQUEST, FETCH_REQUEST[:100], FETCH_REQUEST + b"\x00", FETCH_REQUEST]
    # each body behind a few bytes of something else, as frames' bodies lie behind headers
    buf, starts, ends = b"", [], []
    for i, body in enumerate(bodies):
        buf += bytes([0xEE] * (i + 3))
        starts.append(len(buf))
        buf += body
        ends.append(len(buf))
    data = np.frombuffer(buf + b"\xee" * 5, np.uint8).copy()  # writable: the decoder takes a view
    ranges = Ranges(data, np.array(starts, np.int64), np.array(ends, np.int64))
    got, got_rejects = ak.decode(ranges, "FetchRequest", 12, errors="null")
    want, want_rejects = ak.decode(bodies, "FetchRequest", 12, errors="null")
    assert got.equals(want) and got_rejects.equals(want_rejects)
    offsets = got_rejects.column("byte_offset").to_pylist()
    assert got_rejects.column("index").to_pylist() == [1, 2] and offsets[1] == len(FETCH_REQUEST)
    assert ak.decode(ranges.take(np.array([3, 0])), "FetchRequest", 12).equals(
        ak.decode([FETCH_REQUEST] * 2, "FetchRequest", 12)
    )
    with pytest.raises(ak.Truncated) as e:
        ak.decode(ranges, "FetchRequest", 12)
    assert e.value.message_index == 1 and e.value.offset == offsets[0]
    for bad_starts, bad_ends in (([0], [len(data) + 1]), ([-1], [3]), ([5], [4])):
        with pytest.raises(ValueError, match="outside their data"):
            ak.decode(Ranges(data, np.array(bad_starts), np.array(bad_ends)), "FetchRequest", 12)
