"""Bad record batches: each failure is a typed error naming the input row, the batch and the
byte, or with errors="null" a batch row saying why and a reject row keeping the raw bytes. A
partial batch at the end of a value is not an error."""

from __future__ import annotations

import random
import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import zstandard
from batchtools import Rec, build, rewrap_v2

import arrowkafka as ak
from arrowkafka import Corrupt

RECS = [Rec(b"k%d" % i, b"value-%d" % i * 3, [("h", b"x")], 1_700_000_000_000 + i) for i in range(20)]


@pytest.fixture(scope="module")
def good() -> bytes:
    # a gzip batch, an uncompressed one, a zstd one: 20 records each
    return b"".join(build(2, c, RECS, offset=20 * i) for i, c in enumerate((1, 0, 4)))


def _batch_sizes(buf: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        n = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
        out.append(n)
        pos += n
    return out


def test_a_crc_mismatch_raises_with_where(good: bytes) -> None:
    bad = bytearray(good)
    first = _batch_sizes(good)[0]
    bad[first + 70] ^= 0x01  # a byte inside the second batch's records
    with pytest.raises(Corrupt) as e:
        ak.decode_records([good, bytes(bad)])
    assert e.value.message_index == 1
    assert e.value.path == f"batch 1 (byte {first})"
    assert e.value.offset == first + 17  # the CRC field
    assert "CRC-32C mismatch" in str(e.value)


def test_a_crc_mismatch_is_named_before_what_the_records_hold(good: bytes) -> None:
    """An uncompressed batch's CRC is checked by the record walk, just before it reads the
    records: damaged records whose CRC does not check are named by the CRC, as when the read
    of the batch headers checked it."""
    bad = bytearray(good)
    first = _batch_sizes(good)[0]
    bad[first + 61] = 0x7F  # the first record's length varint: 63 bytes more than are there
    got = ak.decode_records([bytes(bad)], errors="null")
    row = got.batches.to_pylist()[1]
    assert row["crc_ok"] is False and row["error"].startswith("CRC-32C mismatch")
    # the same damage with its CRC made good again fails in the records
    fixed = rewrap_v2(bytes(bad[first : first + _batch_sizes(good)[1]]))
    row = ak.decode_records([fixed], errors="null").batches.to_pylist()[0]
    assert row["crc_ok"] is True and row["error"] is not None and "CRC" not in row["error"]


def test_a_crc_mismatch_is_a_batch_row_and_a_reject(good: bytes) -> None:
    bad = bytearray(good)
    first = _batch_sizes(good)[0]
    bad[first + 70] ^= 0x01
    got = ak.decode_records([bytes(bad)], errors="null")
    rows = got.batches.to_pylist()
    assert [r["crc_ok"] for r in rows] == [True, False, True]
    assert rows[1]["error"].startswith("CRC-32C mismatch: stored")
    assert got.records.num_rows == 40  # the other two batches' records
    assert got.rejects.num_rows == 1
    reject = got.rejects.to_pylist()[0]
    assert (reject["row"], reject["batch"], reject["position"]) == (0, 1, first)
    assert reject["raw"] == bytes(bad[first : first + _batch_sizes(good)[1]])
    # without payloads, not the batch's bytes either: they hold its keys and values
    assert ak.decode_records([bytes(bad)], errors="null", payloads=False).rejects.to_pylist() == [
        {**reject, "raw": None}]  # fmt: skip
    # told not to check, the batch decodes (the damage is inside a value)
    assert ak.decode_records([bytes(bad)], verify_crc=False).records.num_rows == 60


def test_every_cut_is_a_partial_batch_never_an_error(good: bytes) -> None:
    sizes = _batch_sizes(good)
    for cut in range(len(good) + 1):
        got = ak.decode_records([good[:cut]])
        whole = sum(1 for i in range(len(sizes)) if sum(sizes[: i + 1]) <= cut)
        partial = got.batches.column("partial").to_pylist()
        assert partial == [False] * whole + ([True] if cut > sum(sizes[:whole]) else []), cut
        assert got.records.num_rows == 20 * whole
        assert sum(got.batches.column("size").to_pylist()) == cut


def test_random_damage_gives_typed_errors_only(good: bytes) -> None:
    rng = random.Random(7)
    for _ in range(600):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        for verify in (True, False):
            try:
                ak.decode_records([bytes(bad)], verify_crc=verify)
            except Corrupt:
                pass
            got = ak.decode_records([bytes(bad)], verify_crc=verify, errors="null")
            errors = got.batches.column("error").to_pylist()
            assert got.rejects.num_rows == sum(e is not None for e in errors)
            assert sum(got.batches.column("size").to_pylist()) == len(bad)


def _v2_records(recs: list[Rec]) -> tuple[bytes, bytes]:
    """(an uncompressed batch, its records part)."""
    batch = build(2, 0, recs)
    return batch, batch[61:]


@pytest.mark.parametrize(
    ("patch", "reason"),
    [
        (lambda b: b[:57] + struct.pack(">i", 21) + b[61:], "the batch claims 21 records and holds 20"),
        (lambda b: b[:57] + struct.pack(">i", 19) + b[61:], "bytes after the last record"),
        (lambda b: b[:57] + struct.pack(">i", -5) + b[61:], "a negative length or count (-5)"),
        (lambda b: b[:21] + struct.pack(">h", 5) + b[23:], "unknown compression codec 5 for magic 2"),
        (
            lambda b: b[:61] + b"\xfe\x7f" + b[62:],
            "a length of 8191 runs past the end of its record or batch",
        ),
        (
            lambda b: b[:61] + b"\xff\xff\xff\xff\xff\x01" + b[62:],
            "a varint longer or larger than its type allows",
        ),
    ],
)
def test_forged_fields_are_named(patch, reason: str) -> None:  # type: ignore[no-untyped-def]
    batch, _ = _v2_records(RECS)
    forged = patch(batch)
    head = bytearray(forged[:61])
    struct.pack_into(">i", head, 8, len(forged) - 12)
    with pytest.raises(Corrupt, match=reason.replace("(", r"\(").replace(")", r"\)")):
        ak.decode_records(
            [rewrap_v2(bytes(head) + forged[61:], attributes=struct.unpack_from(">h", forged, 21)[0])]
        )


def test_unknown_magic_and_short_lengths() -> None:
    batch, _ = _v2_records(RECS[:2])
    with pytest.raises(Corrupt, match="unknown magic 7") as raised:
        ak.decode_records([batch[:16] + b"\x07" + batch[17:]])
    assert str(raised.value).endswith(", records)")  # no format, so no version of one (not "v7")
    short = struct.pack(">qi", 0, 30) + bytes(30)
    short = short[:16] + b"\x02" + short[17:]
    with pytest.raises(Corrupt, match="batch length 30 is below the 49 bytes"):
        ak.decode_records([short])
    negative = struct.pack(">qi", 0, -3) + bytes(20)
    got = ak.decode_records([negative + batch], errors="null")
    assert got.batches.num_rows == 1  # nothing after a negative length can be found
    assert got.rejects.to_pylist()[0]["raw"] == negative + batch


def test_bytes_that_cannot_start_a_batch_are_no_partial_batch(good: bytes) -> None:
    """A row's tail too short for its length is a partial batch only where its magic byte could
    be one: text after the batches (a file that is no segment) is an unknown magic."""
    text = b"this is a text file, not a Kafka segment\n"
    got = ak.decode_records([good + text], errors="null")
    last = got.batches.to_pylist()[-1]
    assert (last["partial"], last["magic"], last["error"]) == (False, text[16], f"unknown magic {text[16]}")
    assert got.rejects.to_pylist()[0]["raw"] == text and got.records.num_rows == 60
    with pytest.raises(Corrupt, match=f"unknown magic {text[16]}"):
        ak.decode_records([good + text])
    # a tail of 16 bytes or fewer says no magic: partial, as before
    assert ak.decode_records([good + text[:16]]).batches.column("partial").to_pylist()[-1]


def test_inputs_decode_records_takes_and_refuses(good: bytes) -> None:
    want = ak.decode_records([good, None]).records
    # binary_view: what decode(..., views=True) gives a records field as
    assert ak.decode_records(pa.array([good, None], pa.binary_view())).records.equals(want)
    assert ak.decode_records([bytearray(good), memoryview(b"")]).records.equals(want)
    with pytest.raises(TypeError, match="not one bytes object"):
        ak.decode_records(good)  # each byte would have been a body of that many zero bytes
    with pytest.raises(TypeError, match="element 1 is int"):
        ak.decode_records([good, 7])
    for nothing in (None, 5):
        with pytest.raises(TypeError, match="must be a sequence of bytes or a binary array"):
            ak.decode_records(nothing)
    # numpy's fixed-width bytes drop each value's trailing zero bytes (a batch ending in one
    # came back partial, with no error)
    with pytest.raises(TypeError, match="trailing zero bytes"):
        ak.decode_records(np.array([good + b"\0"]))
    with pytest.raises(TypeError, match="max_uncompressed must be an int"):
        ak.decode_records([good], max_uncompressed=1e6)


@pytest.mark.parametrize("views", [False, True])
def test_a_null_element_is_empty_whatever_its_slot_spans(good: bytes, views: bool) -> None:
    """Arrow lets a null's slot span bytes, and pc.if_else leaves such slots: they are not its
    value (its batches were decoded as the element's)."""
    both = pa.array([good, good])
    masked = pc.if_else(pa.array([True, False]), pa.scalar(None, pa.binary()), both)
    spans = np.frombuffer(masked.buffers()[1], np.int32)[masked.offset + 1]
    assert masked.null_count == 1 and spans > 0  # the null's slot spans a batch
    for array in (masked, masked.cast(pa.large_binary())):
        got = ak.decode_records(array, views=views)
        assert set(got.batches.column("row").to_pylist()) == {1}
        assert got.records.num_rows == ak.decode_records([good]).records.num_rows
    # the message decoder reads such a slot as a null body too (a reject), not as its bytes
    change = pa.table({"version": pa.array([0], pa.int16()), "leader_id": pa.array([3], pa.int32()),
                       "voters": [[]], "granting_voters": [[]]})  # fmt: skip
    body = ak.encode(change, "LeaderChangeMessage", 0)[0].as_py()
    masked = pc.if_else(pa.array([True, False]), pa.scalar(None, pa.binary()), pa.array([body, body]))
    rows, rejects = ak.decode(masked, "LeaderChangeMessage", 0, errors="null")
    assert rejects.column("index").to_pylist() == [0] and rows.column("leader_id").to_pylist() == [None, 3]


def test_an_offset_or_time_past_int64_is_an_error() -> None:
    """A base plus a delta past int64 wrapped into another offset or time, with no error."""
    top = 2**63 - 1
    for field, at in (("record_offset", 64), ("timestamp", 63)):  # the record's delta varint
        batch = bytearray(ak.encode_records(pa.table({"magic": [2]}), pa.table({field: [top]}))[0].as_py())
        assert batch[at] == 0  # a zero delta; 2 is +1
        batch[at] = 2
        batch = rewrap_v2(bytes(batch))  # (its CRC again: the batch is well formed but for this)
        what = "offset" if field == "record_offset" else "timestamp"
        with pytest.raises(Corrupt, match=f"{what} delta 1 takes the base {what} past int64"):
            ak.decode_records([batch])
        got = ak.decode_records([batch], errors="null")
        assert got.records.num_rows == 0 and got.rejects.column("raw").to_pylist() == [batch]
    # magic 1: a compressed wrapper's inner offsets count back from its own (not CRC-covered)
    wrapper = build(1, 1, [Rec(b"k", b"v%d" % i, [], 1_700_000_000_000) for i in range(3)], offset=10)
    assert ak.decode_records([wrapper]).records.column("record_offset").to_pylist() == [10, 11, 12]
    forged = struct.pack(">q", -(2**63)) + wrapper[8:]  # 0, 1, 2 shifted back from the lowest
    with pytest.raises(Corrupt, match="past int64"):
        ak.decode_records([forged])


def test_a_header_key_must_be_utf8() -> None:
    batch = build(2, 0, [Rec(b"k", b"v", [("\u00e9", b"x")], 0)])
    at = batch.index("\u00e9".encode())
    bad = batch[:at] + b"\xc3\x28" + batch[at + 2 :]
    with pytest.raises(Corrupt, match="header key of 2 bytes that is not UTF-8"):
        ak.decode_records([rewrap_v2(bad)])


def test_a_decompression_bomb_stops_at_the_cap() -> None:
    _, records = _v2_records([Rec(None, bytes(4 << 20), [], 0)])
    for codec, payload in (
        (1, zlib.compress(records, wbits=31)),
        (4, zstandard.ZstdCompressor(write_content_size=False).compress(records)),
    ):
        batch = rewrap_v2(build(2, 0, [Rec(None, bytes(4 << 20), [], 0)]), attributes=codec, records=payload)
        assert ak.decode_records([batch]).records.column("value_size").to_pylist() == [4 << 20]
        with pytest.raises(Corrupt, match=r"decompress to more than 1048576 bytes"):
            ak.decode_records([batch], max_uncompressed=1 << 20)


@pytest.mark.parametrize(
    ("codec", "payload", "reason"),
    [
        (1, b"\x1f\x8b\x08\x00garbage", "gzip data does not decompress"),
        (2, b"\x05\x00\x00", "snappy data does not decompress"),
        (3, b"\x04\x22\x4d\x18\x60\x40\x82\x10\x00\x00\x00zzzz", "lz4 data does not decompress"),
        (4, b"\x28\xb5\x2f\xfd\x00\x00", "zstd data does not decompress"),
    ],
)
def test_corrupt_compressed_data_is_named(codec: int, payload: bytes, reason: str) -> None:
    batch = rewrap_v2(build(2, 0, RECS[:1]), attributes=codec, records=payload)
    with pytest.raises(Corrupt, match=reason):
        ak.decode_records([batch])
    got = ak.decode_records([batch, batch], errors="null")
    assert got.rejects.column("raw").to_pylist() == [batch, batch]
    assert got.rejects.column("row").to_pylist() == [0, 1]
