"""The records table in chunks. ``decode_records`` walks each record once, writing it into
columns given room ahead of time: a batch that does not fit what is left closes the chunk, and
one that fits no empty chunk is counted first and gets a chunk of its own. However the room is
cut, and however the decompressed records are grouped and kept, the tables hold the same rows."""

from __future__ import annotations

import numpy as np
import pytest
from batchtools import CODEC_IDS, Rec, build

import arrowkafka as ak
import arrowkafka.records.decode as decode_module
from arrowkafka.records import tables
from arrowkafka.records.codecs import CodecError, Sink, decompress_into

FORMATS = [(m, c) for m in (0, 1, 2) for c in CODEC_IDS if m == 2 or c != "zstd"]  # zstd: magic 2 only


def _recs(j: int, magic: int) -> list[Rec]:
    out = []
    for i in range(7):
        key = None if i == 3 else b"k%d" % i * (i + j)
        value = None if i == 5 else bytes([i]) * (30 * i + j)
        headers = [(f"h{h}", b"v" * h) for h in range(i % 3)] if magic == 2 else []
        out.append(Rec(key, value, headers, 1_700_000_000_000 + i))
    return out


def _values(magic: int, codec: str) -> list[bytes]:
    c = CODEC_IDS[codec]
    batches = [build(magic, c, _recs(j, magic), offset=100 * j) for j in range(6)]
    damaged = bytearray(batches[2])
    damaged[-1] ^= 0xFF  # a CRC that does not check: the batch fails, its neighbours do not
    return [b"".join(batches[:2]), b"", bytes(damaged) + b"".join(batches[3:]), batches[0][:-5]]


def _tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_module, "CHUNK_BLOCK", 64)  # room for one record: every batch counted
    monkeypatch.setattr(decode_module, "WALK_GROUP", 1)  # a group per batch
    monkeypatch.setattr(decode_module, "SEGMENT", 1)  # views: a buffer of decompressed records per group


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize(("magic", "codec"), FORMATS)
def test_chunks_of_any_size_hold_the_same_rows(
    monkeypatch: pytest.MonkeyPatch, magic: int, codec: str, views: bool
) -> None:
    values = _values(magic, codec)
    whole = ak.decode_records(values, views=views, errors="null")
    _tiny(monkeypatch)
    cut = ak.decode_records(values, views=views, errors="null")
    assert cut.records.column("record_offset").num_chunks >= 5  # a chunk a good batch
    assert whole.records.num_rows >= 5 * 7 and whole.rejects.num_rows == 1
    assert cut.records.equals(whole.records)
    assert cut.batches.equals(whole.batches) and cut.rejects.equals(whole.rejects)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_offsets_of_compressed_wrappers_are_counted_once_when_a_batch_is_walked_again(
    monkeypatch: pytest.MonkeyPatch, magic: int
) -> None:
    # a batch that does not fit is walked again in a new chunk: magic 1's relative inner
    # offsets are made absolute at the end of a batch's walk, so only once
    values = [
        b"".join(build(magic, CODEC_IDS["gzip"], _recs(j, magic), offset=50 + 10 * j) for j in range(3))
    ]
    _tiny(monkeypatch)
    got = ak.decode_records(values).records.column("record_offset").to_pylist()
    assert got == [50 + 10 * j + i for j in range(3) for i in range(7)]


def test_payloads_off_sizes_chunks_without_keys_and_values() -> None:
    values = _values(2, "lz4")
    with_payloads = ak.decode_records(values, errors="null").records
    without = ak.decode_records(values, errors="null", payloads=False).records
    assert without.drop_columns([]).equals(with_payloads.drop_columns(["key", "value"]))


def test_decompress_into_appends_and_leaves_the_sink_as_it_was_on_an_error() -> None:
    import zlib

    sink = Sink(4)
    sink.write(b"head")
    n = decompress_into(1, memoryview(zlib.compress(b"body" * 1000, 6, 31)), 1 << 20, sink)
    assert n == 4000 and bytes(sink.since(0)) == b"head" + b"body" * 1000
    with pytest.raises(CodecError):
        decompress_into(1, memoryview(zlib.compress(b"x" * 100, 6, 31)[:-12]), 1 << 20, sink)
    assert sink.at == 4004 and bytes(sink.since(4000)) == b"body"
    assert np.frombuffer(sink.since(0), np.uint8).sum() == sum(b"head" + b"body" * 1000)


def test_records_unlike_the_first_ones_do_not_cut_the_table_into_many_chunks() -> None:
    # no keys or headers in the first 100,000 records, then long ones: the room given to keys
    # and headers follows what the last chunk held, so a few chunks hold them all
    plain = b"".join(build(2, 0, [Rec(None, b"x" * 10, [], 1)] * 200, offset=200 * j) for j in range(500))
    keyed = b"".join(
        build(2, 0, [Rec(b"k" * 200, b"x", [("h", b"v" * 50)] * 3, 1)] * 10, offset=10**6 + 10 * j)
        for j in range(2000)
    )
    got = ak.decode_records([plain + keyed]).records
    assert got.num_rows == 120_000 and got.column("key").null_count == 100_000
    assert got.column("key").num_chunks <= 5


@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("magic", [1, 2])
def test_a_chunk_with_no_nulls_has_no_validity_and_one_with_nulls_has_them_where_they_are(
    monkeypatch: pytest.MonkeyPatch, magic: int, views: bool
) -> None:
    # the walk tells which chunks hold no null and no negative timestamp (their columns need no
    # validity, and none is worked out); a negative timestamp other than -1 is a time, not a null
    plain = [Rec(b"k%d" % i, b"v" * i, [("h", b"x")] if magic == 2 else [], 1_700_000_000_000 + i)
             for i in range(4)]  # fmt: skip
    # each kind in a batch (a chunk) of its own: a walk that missed one would mark its chunk valid
    nulls = [
        Rec(None, b"v", [], 1_700_000_000_000),
        Rec(b"k", None, [], 1_700_000_000_001),
        Rec(b"k", b"v", [("h", None)] if magic == 2 else [], 1_700_000_000_002),
        Rec(b"k", b"v", [], -5),
        Rec(b"k", b"v", [], -1),
    ]
    values = [build(magic, 0, plain), *(build(magic, 0, [r], offset=10 + i) for i, r in enumerate(nulls))]
    _tiny(monkeypatch)  # a chunk a batch (magic 1: a chunk a record)
    got = ak.decode_records(values, views=views).records
    assert got.column("key").num_chunks >= 2
    for name in ("key", "value", "timestamp", "key_size", "value_size"):
        for chunk in got.column(name).chunks:
            assert (chunk.buffers()[0] is None) == (chunk.null_count == 0), name
    rows = got.to_pylist()[4:]
    assert [r["key"] for r in rows] == [None, b"k", b"k", b"k", b"k"]
    assert [r["value"] for r in rows] == [b"v", None, b"v", b"v", b"v"]
    assert [r["key_size"] for r in rows] == [None, 1, 1, 1, 1]
    assert [r["value_size"] for r in rows] == [1, None, 1, 1, 1]
    ts = got.column("timestamp").cast("int64").to_pylist()[4:]
    assert ts == [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002, -5, None]
    if magic == 2:
        assert [h["value"] for r in got.to_pylist() for h in r["headers"]] == [b"x"] * 4 + [None]
    # and where the walk saw no null and no negative timestamp, no column is searched for one

    def searched(*args: object) -> None:
        raise AssertionError("a column searched for nulls")

    monkeypatch.setattr(tables, "_valid_where", searched)
    alone = ak.decode_records(values[:1], views=views).records
    assert alone.num_rows == 4 and alone.column("key").null_count == 0
