"""encode_records, the inverse of decode_records: real captures and kafka-python's batches written
back byte for byte where the format is deterministic (and by value where a codec is not),
decode(encode(t)) == t over generated tables of every magic and codec, kafka-python reading what
we write, and every value the format cannot carry refused with its row and field."""

from __future__ import annotations

import itertools
import struct
import warnings
import zlib
from typing import Any

import cramjam
import lz4.frame
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from batchtools import CODEC_IDS, Rec, build, ours, read
from hypothesis import given
from hypothesis import strategies as st
from test_real_records import EXPECTED, decoded  # noqa: F401  (a fixture: the captures' records values)

import arrowkafka as ak
from arrowkafka import EncodeError
from arrowkafka.records import codecs
from arrowkafka.records import encode as enc
from arrowkafka.records.codecs import decompress
from arrowkafka.records.tables import BATCHES_SCHEMA, RECORDS_SCHEMA

T0 = 1_700_000_000_000
FORMATS = [(m, c) for m in (0, 1, 2) for c in CODEC_IDS if not (c == "zstd" and m < 2)]
# what decode(encode(t)) must give back: every field the writer does not compute
BATCH_COLS = ["row", "magic", "codec", "timestamp_type", "transactional", "control", "base_offset", "last_offset",
              "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp", "delete_horizon",
              "producer_id", "producer_epoch", "base_sequence", "record_count"]  # fmt: skip
RECORD_COLS = ["batch", "record_offset", "timestamp", "key", "value", "headers"]
TS = pa.timestamp("ms", "UTC")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
MARKER_KEY = struct.pack(">hh", 0, 1)


def _rows(t: pa.Table, cols: list[str]) -> list[dict[str, Any]]:
    """Rows of ``cols``, timestamps as int milliseconds."""
    t = t.select(cols)
    for i, f in enumerate(t.schema):
        if pa.types.is_timestamp(f.type):
            t = t.set_column(i, f.name, t.column(i).cast(pa.int64()))
    return t.to_pylist()


def _same_values(a: ak.records.Records, b: ak.records.Records) -> None:
    """Every record and header field, and every batch field but where the bytes lie and what
    they hash to."""
    assert _rows(a.records, [*RECORD_COLS, "size", "key_size", "value_size"]) == _rows(
        b.records, [*RECORD_COLS, "size", "key_size", "value_size"]
    )
    cols = [*BATCH_COLS, "uncompressed_size", "crc_ok", "partial", "error"]
    assert _rows(a.batches, cols) == _rows(b.batches, cols)
    assert a.markers.equals(b.markers)


def _payloads(values: list[bytes], batches: pa.Table) -> list[bytes]:
    """The records of every compressed batch, decompressed."""
    out = []
    for b in batches.to_pylist():
        if b["codec"] != "none":
            batch = values[b["row"]][b["position"] : b["position"] + b["size"]]
            at = 61  # magic 2: the records follow the header
            if b["magic"] < 2:  # a wrapper: its key length (-1: null), value length, value
                at = 18 + 8 * b["magic"]
                assert struct.unpack_from(">i", batch, at)[0] == -1
                at += 8
            out.append(decompress(CODEC_IDS[b["codec"]], memoryview(batch[at:]), 1 << 30))
    return out


# ---- round trips of batches others wrote ------------------------------------------------------

# (capture, message) -> (values written back byte for byte, uncompressed batches, compressed ones)
EXACT = {
    ("tansu_confluent", "ProduceRequest"): (14, 14, 4),
    ("tansu_confluent", "FetchResponse"): (28, 15, 4),
    ("noida_kafka_python", "ProduceRequest"): (0, 0, 2),
    ("noida_kafka_python", "FetchResponse"): (1, 0, 2),
    ("kafka091_legacy", "ProduceRequest"): (2, 150, 2),
    ("kafka091_legacy", "FetchResponse"): (2, 150, 2),
}


@pytest.mark.parametrize("case", list(EXPECTED), ids=["-".join(c) for c in EXPECTED])
def test_real_records_are_written_back(decoded: dict, case: tuple[str, str]) -> None:  # noqa: F811
    # uncompressed: the same bytes, CRCs included; compressed: the same records, and the same
    # records once decompressed (only the codec's own output differs)
    values = decoded[case]
    got = ak.decode_records(values)
    out = ak.encode_records(got.batches, got.records, num_values=len(values))
    again = ak.decode_records(out)
    _same_values(again, got)
    codecs: list[set[str]] = [set() for _ in values]
    for row, codec in zip(
        got.batches.column("row").to_pylist(), got.batches.column("codec").to_pylist(), strict=True
    ):
        codecs[row].add(codec)
    mine = out.to_pylist()
    exact = [i for i, c in enumerate(codecs) if c <= {"none"}]
    assert [mine[i] for i in exact] == [values[i] for i in exact]
    plain = 0
    for a, b in zip(got.batches.to_pylist(), again.batches.to_pylist(), strict=True):
        if a["codec"] == "none":  # every uncompressed batch, also beside compressed ones
            assert (
                mine[b["row"]][b["position"] : b["position"] + b["size"]]
                == values[a["row"]][a["position"] : a["position"] + a["size"]]
            )
            plain += 1
    theirs = _payloads(values, got.batches)
    assert (len(exact), plain, len(theirs)) == EXACT[case]
    assert _payloads(mine, again.batches) == theirs


def _recs(n: int, seed: int) -> list[Rec]:
    return [
        Rec(
            key=None if (i + seed) % 3 == 0 else b"key-%d" % i,
            value=None if (i + seed) % 7 == 6 else bytes([i % 256]) * ((i * 37 + seed) % 400),
            headers=[(f"h{j}", None if j == 1 else b"x" * j) for j in range((i + seed) % 4)],
            timestamp=T0 + 5 * i - 3 * (i % 2),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(("magic", "codec"), FORMATS, ids=[f"magic{m}-{c}" for m, c in FORMATS])
def test_kafka_python_batches_are_written_back(magic: int, codec: str) -> None:
    recs = [r if magic == 2 else Rec(r.key, r.value, [], r.timestamp) for r in _recs(40, magic)]
    values = [
        b"".join(build(magic, CODEC_IDS[codec], recs[a:b], offset=o) for a, b, o in ((0, 30, 7), (30, 31, 37), (31, 40, 38))),
        b"",
        build(magic, CODEC_IDS[codec], recs[:3], offset=1 << 20, **({"producer_id": 77, "producer_epoch": 2, "base_sequence": 9} if magic == 2 else {})),
    ]  # fmt: skip
    got = ak.decode_records(values)
    out = ak.encode_records(got.batches, got.records, num_values=3)
    again = ak.decode_records(out)
    _same_values(again, got)
    if codec == "none":
        assert out.to_pylist() == values
    elif magic == 2:  # the same records inside; magic 0/1 inner offsets are written as Kafka's producer does
        assert _payloads(out.to_pylist(), again.batches) == _payloads(values, got.batches)


# ---- generated tables -------------------------------------------------------------------------

_BYTES = st.one_of(st.none(), st.binary(max_size=30), st.binary(min_size=60, max_size=300))
_TS = st.one_of(st.none(), st.integers(0, 1 << 41))
_HEADERS = st.lists(
    st.fixed_dictionaries(
        {"key": st.text(max_size=8), "value": st.one_of(st.none(), st.binary(max_size=20))}
    ),
    max_size=3,
)
_DELTA = st.one_of(st.integers(0, 300), st.integers(0, (1 << 31) - 1))


@st.composite
def _batch(draw: st.DrawFn, row: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One batch as decode_records gives it, and its records."""
    magic = draw(st.sampled_from([0, 1, 2]))
    codec = draw(st.sampled_from([c for c in CODEC_IDS if magic == 2 or c != "zstd"]))
    log_append = magic > 0 and draw(st.booleans())
    none = dict.fromkeys(BATCH_COLS)
    if magic < 2:
        n = 1 if codec == "none" else draw(st.integers(1, 5))
        gaps = draw(st.lists(st.integers(1, 5), min_size=n - 1, max_size=n - 1))
        offsets = list(itertools.accumulate(gaps, initial=draw(st.integers(0, 1 << 50))))
        stamp = draw(_TS) if magic else None
        ts = (
            [stamp] * n
            if log_append and codec != "none"
            else [draw(_TS) if magic else None for _ in range(n)]
        )
        keys = ("record_offset", "timestamp", "key", "value", "headers")
        recs = [dict(zip(keys, (o, t, draw(_BYTES), draw(_BYTES), []), strict=True)) for o, t in zip(offsets, ts, strict=True)]  # fmt: skip
        batch = none | {"row": row, "magic": magic, "codec": codec, "transactional": False, "control": False,
                        "timestamp_type": ("LogAppendTime" if log_append else "CreateTime") if magic else None,
                        "base_offset": offsets[0], "last_offset": offsets[-1], "record_count": n,
                        "max_timestamp": (stamp if codec != "none" else ts[0]) if magic else None}  # fmt: skip
        return batch, recs
    control = draw(st.integers(0, 9)) == 0
    n = draw(st.integers(0 if codec == "none" else 1, 6))
    base = draw(st.integers(0, 1 << 50))
    deltas = sorted(draw(st.lists(_DELTA, min_size=n, max_size=n, unique=True)))
    stamp = draw(_TS)
    ts = [stamp] * n if log_append else [draw(_TS) for _ in range(n)]
    horizon = draw(st.one_of(st.none(), st.integers(0, 1 << 41))) if draw(st.integers(0, 4)) == 0 else None
    recs = []
    for d, t in zip(deltas, ts, strict=True):
        if control:  # a transaction marker: key version 0 and type; value version 0, coordinator epoch
            kind, epoch = draw(st.integers(0, 1)), draw(st.integers(0, (1 << 31) - 1))
            recs.append({"record_offset": base + d, "timestamp": t, "key": struct.pack(">hh", 0, kind),
                         "value": struct.pack(">hi", 0, epoch), "headers": []})  # fmt: skip
        else:
            recs.append({"record_offset": base + d, "timestamp": t, "key": draw(_BYTES), "value": draw(_BYTES),
                         "headers": draw(_HEADERS)})  # fmt: skip
    # a batch keeps its last offset delta when compaction removes its last records
    last = min((deltas[-1] if n else 0) + draw(st.sampled_from([0, 0, 1, 1000])), (1 << 31) - 1)
    batch = {
        "row": row, "magic": 2, "codec": codec, "timestamp_type": "LogAppendTime" if log_append else "CreateTime",
        "transactional": control or draw(st.booleans()), "control": control, "base_offset": base,
        "last_offset": base + last, "partition_leader_epoch": draw(st.integers(-1, (1 << 31) - 1)),
        "last_offset_delta": last, "base_timestamp": horizon if horizon is not None else draw(_TS),
        "max_timestamp": stamp, "delete_horizon": horizon, "producer_id": draw(st.integers(-1, (1 << 63) - 1)),
        "producer_epoch": draw(st.integers(-1, (1 << 15) - 1)), "base_sequence": draw(st.integers(-1, (1 << 31) - 1)),
        "record_count": n,
    }  # fmt: skip
    return batch, recs


@st.composite
def _tables(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Batches (in any row order) and their records, and how many values they go into."""
    rows = draw(st.lists(st.integers(0, 2), min_size=1, max_size=4))
    batches, records = [], []
    for i, row in enumerate(rows):
        batch, recs = draw(_batch(row))
        batches.append(batch)
        records += [r | {"batch": i} for r in recs]
    return batches, records, max(rows) + 1 + draw(st.integers(0, 1))


def _table(rows: list[dict[str, Any]], schema: pa.Schema, cols: list[str]) -> pa.Table:
    return pa.Table.from_pylist(rows, pa.schema([schema.field(c) for c in cols]))


def _kafka_python_reads_the_same(out: pa.BinaryArray, got: ak.records.Records) -> None:
    mine = [r | {"batch": 0} for r in ours(got)]
    at = 0
    for value in out.to_pylist():
        _, theirs, left = read(value)
        assert left == 0
        assert mine[at : at + len(theirs)] == [r | {"batch": 0} for r in theirs]
        at += len(theirs)
    assert at == len(mine)


@given(_tables())
def test_decoding_what_is_written_gives_the_tables_back(tables: tuple[list, list, int]) -> None:
    batches, records, nv = tables
    out = ak.encode_records(_table(batches, BATCHES_SCHEMA, BATCH_COLS), _table(records, RECORDS_SCHEMA, RECORD_COLS),
                            num_values=nv)  # fmt: skip
    assert len(out) == nv
    got = ak.decode_records(out)
    # decoding lists batches by value: the same order as a stable sort by row
    order = sorted(range(len(batches)), key=lambda i: batches[i]["row"])
    place = {b: i for i, b in enumerate(order)}
    want = sorted((r | {"batch": place[r["batch"]]} for r in records), key=lambda r: r["batch"])
    assert _rows(got.batches, BATCH_COLS) == [batches[i] for i in order]
    assert _rows(got.records, RECORD_COLS) == want
    assert got.batches.column("crc_ok").to_pylist() == [True] * len(batches)
    # written again from what decoding gives (every column present): the same bytes
    assert ak.encode_records(got.batches, got.records, num_values=nv).equals(out)
    _kafka_python_reads_the_same(out, got)


@pytest.mark.parametrize(("magic", "codec"), FORMATS, ids=[f"magic{m}-{c}" for m, c in FORMATS])
def test_kafka_python_reads_every_format_we_write(magic: int, codec: str) -> None:
    n = 1 if codec == "none" and magic < 2 else 300  # several snappy and lz4 blocks
    rng = np.random.default_rng(magic)
    values = [bytes(rng.integers(0, 256 if i % 2 else 4, 400, dtype=np.uint8)) for i in range(n)]
    records = pa.table({
        "record_offset": pa.array(range(1000, 1000 + n), pa.int64()),
        "timestamp": pa.array([T0 + i if magic else None for i in range(n)], pa.timestamp("ms", "UTC")),
        "key": [b"k%d" % i for i in range(n)], "value": values,
        "headers": [[{"key": "trace", "value": b"t" * (i % 5)}] if magic == 2 else [] for i in range(n)],
    })  # fmt: skip
    out = ak.encode_records(pa.table({"magic": pa.array([magic], pa.int8()), "codec": [codec]}), records)
    got = ak.decode_records(out)
    assert got.records.num_rows == n
    assert got.batches.column("codec").to_pylist() == [codec]
    _kafka_python_reads_the_same(out, got)


# ---- defaults, order, control batches ------------------------------------------------------------


def test_defaults_are_what_kafkas_producer_writes() -> None:
    ts = pa.array([T0 + 5, T0, T0 + 9], pa.timestamp("ms", "UTC"))
    out = ak.encode_records(
        pa.table({"codec": ["none"]}), pa.table({"timestamp": ts, "value": [b"a", None, b"c"]})
    )
    got = ak.decode_records(out)
    batch = _rows(got.batches, BATCH_COLS)[0]
    assert batch == {"row": 0, "magic": 2, "codec": "none", "timestamp_type": "CreateTime", "transactional": False,
                     "control": False, "base_offset": 0, "last_offset": 2, "partition_leader_epoch": -1,
                     "last_offset_delta": 2, "base_timestamp": T0 + 5, "max_timestamp": T0 + 9, "delete_horizon": None,
                     "producer_id": -1, "producer_epoch": -1, "base_sequence": -1, "record_count": 3}  # fmt: skip
    assert _rows(got.records, ["record_offset", "timestamp", "key", "value", "headers"]) == [
        {"record_offset": 0, "timestamp": T0 + 5, "key": None, "value": b"a", "headers": []},
        {"record_offset": 1, "timestamp": T0, "key": None, "value": None, "headers": []},
        {"record_offset": 2, "timestamp": T0 + 9, "key": None, "value": b"c", "headers": []},
    ]
    # offsets count up from a given base offset; an empty batch is a header alone
    out = ak.encode_records(
        pa.table({"base_offset": [500, 9], "row": [0, 1]}), pa.table({"batch": [0, 0], "value": [b"x", b"y"]})
    )
    got = ak.decode_records(out)
    assert got.records.column("record_offset").to_pylist() == [500, 501]
    assert got.batches.column("record_count").to_pylist() == [2, 0]
    assert len(out[1].as_py()) == 61


def test_batches_go_into_their_rows_in_the_order_given() -> None:
    batches = pa.table({"row": [2, 0, 2, 0], "base_offset": [10, 20, 30, 40]})
    records = pa.table({"batch": [3, 2, 1, 0, 2], "value": [b"d", b"c1", b"b", b"a", b"c2"]})
    out = ak.encode_records(batches, records, num_values=4)
    assert [len(v) for v in out.to_pylist()][1::2] == [0, 0]
    got = ak.decode_records(out)
    assert got.batches.select(["row", "base_offset"]).to_pylist() == [
        {"row": 0, "base_offset": 20}, {"row": 0, "base_offset": 40},
        {"row": 2, "base_offset": 10}, {"row": 2, "base_offset": 30},
    ]  # fmt: skip
    assert got.records.column("value").to_pylist() == [b"b", b"d", b"a", b"c1", b"c2"]
    assert got.records.column("record_offset").to_pylist() == [20, 40, 10, 30, 31]
    # records in any order, tables in chunks or slices: the same bytes
    shuffled = records.take([3, 0, 2, 1, 4])  # each batch's records still in their order
    chunked = pa.concat_tables([shuffled.slice(0, 2), shuffled.slice(2)])
    assert ak.encode_records(batches.to_batches()[0], chunked, num_values=4).equals(out)
    assert ak.encode_records(batches.slice(0, 0), records.slice(0, 0)).equals(pa.array([], pa.binary()))


def test_num_values_is_a_count() -> None:
    for wrong in (True, -1, 2.0, "2"):
        with pytest.raises(ValueError, match="num_values must be an int"):
            ak.encode_records(pa.table({"magic": [2]}), pa.table({"value": [b"v"]}), num_values=wrong)  # type: ignore[arg-type]


def test_headers_need_a_key_and_a_value_field() -> None:
    """A headers struct whose value field is named otherwise wrote every value as null."""
    for fields in (("key", "Value"), ("key", "val"), ("Key", "value")):
        headers = pa.array([[dict(zip(fields, ("trace-id", b"abc"), strict=True))]])
        with pytest.raises(EncodeError, match=r"needs struct<key string, value binary>") as e:
            ak.encode_records(pa.table({"magic": [2]}), pa.table({"value": [b"v"], "headers": headers}))
        assert str(e.value).endswith("at records.headers (records)")  # a column's mistake: no row


def test_headers_are_read_where_their_lists_point() -> None:
    # a sliced list, and a null list over a segment holding a null key: no record refers to it
    items = pa.array([{"key": "a", "value": b"1"}, {"key": None, "value": b"2"}, {"key": "b", "value": None},
                      {"key": "c", "value": b"3"}, {"key": "d", "value": b""}], HEADERS.value_type)  # fmt: skip
    lists = pa.ListArray.from_arrays(
        pa.array([0, 1, 2, 4, 5], pa.int32()), items, mask=pa.array([False, True, False, False])
    )
    records = pa.table({"headers": lists.slice(1)})
    got = ak.decode_records(ak.encode_records(pa.table({"codec": ["none"]}), records))
    assert got.records.column("headers").to_pylist() == [
        [],
        [{"key": "b", "value": None}, {"key": "c", "value": b"3"}],
        [{"key": "d", "value": b""}],
    ]


def test_control_batches_round_trip() -> None:
    voters = pa.table({"version": pa.array([0], pa.int16()), "leader_id": pa.array([3], pa.int32()),
                       "voters": [[{"voter_id": v} for v in (1, 2, 3)]], "granting_voters": [[{"voter_id": 3}]]})  # fmt: skip
    leader_change = ak.encode(voters, "LeaderChangeMessage", 0)[0].as_py()
    batches = pa.table({"base_offset": [0, 1, 2, 3], "control": [False, True, True, True],
                        "transactional": [True, True, True, False], "producer_id": [9, 9, 9, -1],
                        "producer_epoch": pa.array([1, 1, 1, -1], pa.int16()), "base_sequence": [0, -1, -1, -1]})  # fmt: skip
    records = pa.table({
        "batch": [0, 1, 2, 3],
        "key": [b"k", struct.pack(">hh", 0, 1), struct.pack(">hh", 0, 0), struct.pack(">hh", 0, 2)],
        "value": [b"v", struct.pack(">hi", 0, 17), struct.pack(">hi", 0, 18), leader_change],
        "timestamp": pa.array([T0] * 4, pa.timestamp("ms", "UTC")),
    })  # fmt: skip
    out = ak.encode_records(batches, records)
    got = ak.decode_records(out)
    assert [(m["record_offset"], m["type"], m["coordinator_epoch"]) for m in got.markers.to_pylist()] == [
        (1, "COMMIT", 17), (2, "ABORT", 18), (3, "LEADER_CHANGE", None),
    ]  # fmt: skip
    assert got.control["LeaderChangeMessage"].column("leader_id").to_pylist() == [3]
    assert ak.encode_records(got.batches, got.records).equals(out)
    _, theirs, _ = read(out[0].as_py())
    assert [r["key"] for r in theirs] == records.column("key").to_pylist()


def test_extreme_offsets_and_timestamps() -> None:
    # deltas at the ends of their types, base fields at theirs
    lo, hi = -(1 << 63), (1 << 63) - 1
    batches = pa.table(
        {"base_offset": [0], "base_timestamp": pa.array([-(1 << 62)], pa.timestamp("ms", "UTC"))}
    )
    records = pa.table({"record_offset": pa.array([0, (1 << 31) - 1, -(1 << 31)], pa.int64()),
                        "timestamp": pa.array([None, (1 << 62) - 1, -(1 << 62)], pa.timestamp("ms", "UTC"))})  # fmt: skip
    got = ak.decode_records(ak.encode_records(batches, records))
    cols = ["record_offset", "timestamp"]
    assert _rows(got.records, cols) == _rows(records, cols)
    out = ak.encode_records(pa.table({"base_offset": [lo]}), pa.table({"record_offset": [lo, lo + 5]}))
    assert ak.decode_records(out).records.column("record_offset").to_pylist() == [lo, lo + 5]
    out = ak.encode_records(pa.table({"magic": pa.array([1], pa.int8()), "codec": ["gzip"]}),
                            pa.table({"record_offset": [hi - 1, hi]}))  # fmt: skip
    assert ak.decode_records(out).records.column("record_offset").to_pylist() == [hi - 1, hi]


# ---- the codecs as Kafka's Java client writes them ----------------------------------------------


def test_lz4_frame_header_checksums() -> None:
    for data in (b"", b"a", b"abcd", b"abcdefghijklmno", bytes(range(7))):
        assert codecs._xxh32(data) == xxhash.xxh32_intdigest(data)
    for magic in (0, 1):
        frame = codecs.compress(3, magic, memoryview(b"kafka " * 30000))
        hashed = frame[0:6] if magic == 0 else frame[4:6]  # KAFKA-3160: magic 0 hashed the magic number too
        assert frame[:6] == b"\x04\x22\x4d\x18\x60\x40"  # independent 64 KiB blocks, no checksums, no size
        assert frame[6] == xxhash.xxh32(hashed).digest()[2]
        if magic == 1:
            assert lz4.frame.decompress(frame) == b"kafka " * 30000
        else:
            with pytest.raises(RuntimeError):
                lz4.frame.decompress(frame)
    noise = np.random.default_rng(1).integers(0, 256, 70_000, dtype=np.uint8).tobytes()
    frame = codecs.compress(3, 1, memoryview(noise))
    assert struct.unpack_from("<I", frame, 7)[0] == 0x80000000 | 65536  # stored as it is: it does not shrink
    assert lz4.frame.decompress(frame) == noise


def test_snappy_in_xerial_blocks_and_gzip() -> None:
    data = b"".join(b"record %d; " % i for i in range(10_000))
    framed = codecs.compress(2, 2, memoryview(data))
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert [len(b) for b in blocks[:-1]] == [32768] * (len(data) // 32768)
    assert b"".join(blocks) == data
    gz = codecs.compress(1, 2, memoryview(data))
    assert gz[:2] == b"\x1f\x8b" and zlib.decompress(gz, 47) == data


def test_kafka_python_reads_our_magic0_lz4_as_kafka_0_9_wrote_it() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.codec import lz4_decode_old_kafka
    data = b"old kafka " * 1000
    assert lz4_decode_old_kafka(codecs.compress(3, 0, memoryview(data))) == data


# ---- bad input ------------------------------------------------------------------------------------


# (batches, records, path, row, what the message says)
BAD = {
    "control key of one byte": ({"control": [True]}, {"key": [b"\x00"], "value": [b"\x00" * 6]}, "records[0].key", 0, "a key of 1 bytes on a control record (needs 4: version int16, type int16)"),
    "control key null": ({"control": [True]}, {"key": pa.array([None], pa.binary())}, "records[0].key", 0, "a null key on a control record"),
    "control key version": ({"control": [True]}, {"key": [b"\xff\xff\x00\x01"], "value": [b"\x00" * 6]}, "records[0].key", 0, "control record key version -1"),
    "marker value short": ({"control": [True, True]}, {"batch": [0, 1], "key": [MARKER_KEY] * 2, "value": [b"\x00" * 6, b"\x00"]}, "records[1].value", 1, "a COMMIT marker value of 1 bytes"),
    "raft value short": ({"control": [True]}, {"key": [struct.pack(">hh", 0, 3)], "value": [b""]}, "records[0].value", 0, "a SnapshotHeaderRecord value of 0 bytes"),
    "offset delta over int32": ({"base_offset": [5]}, {"record_offset": [5, 5 + (1 << 31)]}, "records[1].record_offset", 1, "offset 2147483653 is 2147483648 from its batch's base_offset 5: the delta must fit int32"),
    "offset delta under int32": ({"base_offset": [5]}, {"record_offset": [5 - (1 << 31) - 1]}, "records[0].record_offset", 0, "the delta must fit int32"),
    "offset delta overflows": ({"base_offset": [-(1 << 63)]}, {"record_offset": [(1 << 63) - 1]}, "records[0].record_offset", 0, "the delta must fit int32"),
    "timestamp delta overflows": ({"base_timestamp": pa.array([-(1 << 62)], TS)}, {"timestamp": pa.array([0, (1 << 63) - 1], TS)}, "records[1].timestamp", 1, "too far from its batch's base timestamp"),
    "last offset delta": ({"last_offset_delta": [1 << 31]}, {"value": [b""]}, "batches[0].last_offset_delta", 0, "last_offset_delta 2147483648 does not fit int32"),
    "zstd in magic 1": ({"magic": pa.array([1], pa.int8()), "codec": ["zstd"]}, {"value": [b""]}, "batches[0].codec", 0, "codec zstd does not exist in magic 1 (it needs magic 2)"),
    "unknown codec": ({"codec": ["none", "brotli"]}, {"batch": [0]}, "batches[1].codec", 1, "unknown codec 'brotli'"),
    "unknown magic": ({"magic": pa.array([2, 3], pa.int8())}, {"batch": [0]}, "batches[1].magic", 1, "unknown magic 3"),
    "null header key": ({}, {"headers": pa.array([[{"key": "a", "value": b""}, {"key": None, "value": b"x"}]], HEADERS)}, "records[0].headers[1].key", 0, "a null header key"),
    "null header": ({}, {"headers": pa.array([[], [None]], HEADERS)}, "records[1].headers[0]", 1, "a null header"),
    "headers in magic 1": ({"magic": pa.array([1], pa.int8())}, {"headers": pa.array([[{"key": "a", "value": None}]], HEADERS)}, "records[0].headers", 0, "magic 1 messages have no headers"),
    "timestamp in magic 0": ({"magic": pa.array([0], pa.int8())}, {"timestamp": pa.array([T0], TS)}, "records[0].timestamp", 0, "magic 0 messages have no timestamp"),
    "two records, one message": ({"magic": pa.array([0], pa.int8())}, {"value": [b"a", b"b"]}, "batches[0].records", 0, "an uncompressed magic 0 message holds exactly one record, not 2"),
    "raft value of an unknown version": ({"control": [True]}, {"key": [struct.pack(">hh", 0, 2)], "value": [b"\x00\x63\x00"]}, "records[0].value", 0, "LeaderChangeMessage version 99 is not one of"),
    "raft value cut short": ({"control": [True]}, {"key": [struct.pack(">hh", 0, 2)], "value": [b"\x00\x00"]}, "records[0].value", 0, "LeaderChangeMessage v0"),
    "an empty compressed batch": ({"codec": ["zstd"]}, {"value": pa.array([], pa.binary())}, "batches[0].records", 0, "a compressed batch holds at least one record"),
    "an empty wrapper": ({"magic": pa.array([1], pa.int8()), "codec": ["gzip"]}, {"value": pa.array([], pa.binary())}, "batches[0].records", 0, "a compressed magic 0/1 message holds at least one record"),
    "LogAppendTime record timestamps": ({"timestamp_type": ["LogAppendTime"], "max_timestamp": pa.array([T0], TS)}, {"timestamp": pa.array([T0, T0 + 1], TS)}, "records[1].timestamp", 1, "differs from its LogAppendTime batch's max_timestamp"),
    "LogAppendTime in magic 0": ({"magic": pa.array([0], pa.int8()), "timestamp_type": ["LogAppendTime"]}, {"value": [b""]}, "batches[0].timestamp_type", 0, "magic 0 messages have no timestamp type"),
    "transactional magic 1": ({"magic": pa.array([1], pa.int8()), "transactional": [True]}, {"value": [b""]}, "batches[0].transactional", 0, "magic 1 batches cannot be transactional"),
    "producer id in magic 0": ({"magic": pa.array([0], pa.int8()), "producer_id": [7]}, {"value": [b""]}, "batches[0].producer_id", 0, "magic 0 batches have no producer_id"),
    "producer epoch over int16": ({"producer_epoch": [1 << 15]}, {"value": [b""]}, "batches[0].producer_epoch", 0, "producer_epoch 32768 is out of range"),
    "delete horizon in magic 1": ({"magic": pa.array([1], pa.int8()), "delete_horizon": pa.array([T0], TS)}, {"value": [b""]}, "batches[0].delete_horizon", 0, "magic 1 batches have no delete horizon"),
    "base offset of a magic 0 message": ({"magic": pa.array([0], pa.int8()), "base_offset": [7]}, {"record_offset": [9]}, "batches[0].base_offset", 0, "base_offset 7 is not what the records of this magic 0 message make (9)"),
    "base offset of a wrapper": ({"magic": pa.array([1], pa.int8()), "codec": ["gzip"], "base_offset": [3]}, {"record_offset": [4, 5]}, "batches[0].base_offset", 0, "base_offset 3 is not what the records of this magic 1 message make (4)"),
    "last offset delta in magic 1": ({"magic": pa.array([1], pa.int8()), "last_offset_delta": [0]}, {"value": [b""]}, "batches[0].last_offset_delta", 0, "a magic 1 message has no last_offset_delta (leave it null)"),
    "base timestamp in magic 0": ({"magic": pa.array([0], pa.int8()), "base_timestamp": pa.array([T0], TS)}, {"value": [b""]}, "batches[0].base_timestamp", 0, "a magic 0 message has no base_timestamp"),
    "max timestamp in magic 0": ({"magic": pa.array([0], pa.int8()), "max_timestamp": pa.array([T0], TS)}, {"value": [b""]}, "batches[0].max_timestamp", 0, "a magic 0 message has no max_timestamp"),
    "max timestamp of a magic 1 message": ({"magic": pa.array([1], pa.int8()), "max_timestamp": pa.array([T0 + 5], TS)}, {"timestamp": pa.array([T0], TS)}, "batches[0].max_timestamp", 0, "is not what the records of this magic 1 message make"),
    "partial batch": ({"partial": [False, True]}, {"batch": [0]}, "batches[1].partial", 1, "a partial batch"),
    "failed batch": ({"error": [None, "CRC-32C mismatch"]}, {"batch": [0]}, "batches[1].error", 1, "a batch that did not decode (CRC-32C mismatch) cannot be written"),
    "batch out of range": ({"codec": ["none"]}, {"batch": [0, 1]}, "records[1].batch", 1, "batch 1 is not a row of batches (1 rows)"),
    "offset, the old name": ({}, {"offset": [1, 2]}, "records[0].offset", 0, "read from record_offset"),
    "null offset": ({}, {"record_offset": pa.array([1, None], pa.int64())}, "records[1].record_offset", 1, "null record_offset"),
    "null row": ({"row": pa.array([None], pa.int64())}, {"value": [b""]}, "batches[0].row", 0, "null row"),
    "row past the values one call writes": ({"row": [1 << 40]}, {"value": [b""]}, "batches[0].row", 0, "past the 268435456 values"),
    "negative offset in a wrapper": ({"magic": pa.array([1], pa.int8()), "codec": ["gzip"]}, {"record_offset": [-10, -5]}, "records[0].record_offset", 0, "offset -10 is negative"),
    "row past num_values": ({"row": [0, 3]}, {"batch": [0]}, "batches[1].row", 1, "row 3 is past the output's 2 values"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_named(case: str) -> None:
    batches, records, path, row, reason = BAD[case]
    b = pa.table(batches) if batches else pa.table({"codec": ["none"]})
    with pytest.raises(EncodeError) as e:
        ak.encode_records(b, pa.table(records), num_values=2 if case == "row past num_values" else None)
    assert (e.value.path, e.value.row) == (path, row)
    assert reason in e.value.reason
    assert f"at {path} (row {row}," in str(e.value)


def test_lengths_past_int32_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # the int32 limits, lowered so that a test can reach them
    monkeypatch.setattr(enc, "MAX_LENGTH", 100)
    with pytest.raises(EncodeError) as e:
        ak.encode_records(
            pa.table({"codec": ["none"]}), pa.table({"key": [b"k", b"k"], "value": [b"v", b"v" * 101]})
        )
    assert (e.value.path, e.value.row) == ("records[1].value", 1)
    assert "a record of 109 bytes (key 1, value 101) is longer than 100" in str(e.value)
    with pytest.raises(EncodeError) as e:
        ak.encode_records(pa.table({"magic": pa.array([0], pa.int8())}), pa.table({"key": [b"k" * 90]}))
    assert (e.value.path, e.value.row) == ("records[0].key", 0)
    with pytest.raises(EncodeError) as e:
        ak.encode_records(
            pa.table({"row": [0, 0]}), pa.table({"batch": [0, 1, 1], "value": [b"", b"v" * 20, b"v" * 20]})
        )
    assert (e.value.path, e.value.row) == ("batches[1].records", 1)
    assert "its records take 54 bytes: the batch would be longer than 100" in str(e.value)


def test_columns_of_the_wrong_type_are_named() -> None:
    for batches, records, path in (
        ({"producer_id": ["x"]}, {"value": [b""]}, "batches.producer_id"),
        ({"codec": ["none"]}, {"value": [1]}, "records.value"),
        ({"codec": ["none"]}, {"headers": [[1]]}, "records.headers"),
        (
            {"codec": ["none"]},
            {"headers": pa.array([[{"key": b"\xff", "value": b""}]])},
            "records.headers.key",
        ),
        ({"codec": ["none"]}, {"timestamp": pa.array([1_500], pa.timestamp("us"))}, "records.timestamp"),
        ({"codec": ["none"]}, {"value_size": [3]}, "records.value"),
    ):
        with pytest.raises(EncodeError) as e:
            ak.encode_records(pa.table(batches), pa.table(records))
        assert e.value.path == path
    twice = pa.table([pa.array([b"a"]), pa.array([b"b"])], names=["value", "value"])
    with pytest.raises(EncodeError, match=r"2 columns named value at records\.value"):
        ak.encode_records(pa.table({"codec": ["none"]}), twice)
    with pytest.raises(TypeError, match=r"must be a pa\.Table or pa\.RecordBatch"):
        ak.encode_records({"codec": ["none"]}, pa.table({}))


def test_offsets_arrow_would_refuse_are_named() -> None:
    """Arrays built from buffers are checked in full by pyarrow only when asked; offsets that go
    backwards or past their values are refused before the kernel copies by them."""
    offsets = pa.array([0, 30, 20, 40], pa.int32()).buffers()[1]  # the second value goes backwards
    value = pa.Array.from_buffers(pa.binary(), 3, [None, offsets, pa.py_buffer(bytes(40))])
    items = pa.array([{"key": "k", "value": b"v"}] * 2, HEADERS.value_type)
    headers = pa.Array.from_buffers(
        HEADERS, 2, [None, pa.array([0, 2, 1], pa.int32()).buffers()[1]], children=[items]
    )
    for records, path in (({"value": value}, "records.value"), ({"headers": headers}, "records.headers")):
        with pytest.raises(EncodeError, match="not a valid Arrow array") as e:
            ak.encode_records(pa.table({"codec": ["none"]}), pa.table(records))
        assert e.value.path == path
