"""decode_records against kafka-python's record readers, on batches kafka-python wrote: every
magic and codec, record for record."""

from __future__ import annotations

import pyarrow as pa
import pytest
from batchtools import CODEC_IDS, Rec, build, ours, read
from hypothesis import given
from hypothesis import strategies as st

import arrowkafka as ak

T0 = 1_700_000_000_000
FORMATS = [(m, c) for m in (0, 1, 2) for c in CODEC_IDS if not (c == "zstd" and m < 2)]


def _recs(n: int) -> list[Rec]:
    return [
        Rec(
            key=None if i % 3 == 0 else b"key-%d" % i,
            value=None if i % 7 == 6 else b"v" * (i * 13 % 300),
            headers=[(f"h{j}", None if j == 1 else b"x" * j) for j in range(i % 4)],
            timestamp=T0 + i * 5,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(("magic", "codec"), FORMATS, ids=[f"magic{m}-{c}" for m, c in FORMATS])
def test_every_magic_and_codec_reads_as_kafka_python_reads_it(magic: int, codec: str) -> None:
    # three batches back to back (magic 0/1 uncompressed: one message each), offsets continuing
    bufs = [build(magic, CODEC_IDS[codec], _recs(n), offset=o) for n, o in ((40, 0), (1, 40), (25, 41))]
    buf = b"".join(bufs)
    theirs_batches, theirs, left = read(buf)
    got = ak.decode_records([buf])
    assert left == 0
    assert len(theirs) == 66
    assert ours(got) == [r | {"batch": r["batch"]} for r in theirs]
    b = got.batches
    assert b.num_rows == len(theirs_batches)
    assert b.column("crc_ok").to_pylist() == [True] * b.num_rows
    assert b.column("magic").to_pylist() == [magic] * b.num_rows
    # kafka-python leaves a batch uncompressed when compressing does not shrink it
    names = list(CODEC_IDS)
    assert b.column("codec").to_pylist() == [names[kp["codec"]] for kp in theirs_batches]
    assert codec in b.column("codec").to_pylist()
    assert set(b.column("partial").to_pylist()) == {False}
    assert b.column("error").null_count == b.num_rows
    assert sum(b.column("size").to_pylist()) == len(buf)
    assert got.rejects.num_rows == 0
    if magic == 2:
        for mine, kp in zip(b.to_pylist(), theirs_batches, strict=True):
            for f in ("base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence"):
                assert mine[f] == kp[f], f
        assert b.column("record_count").to_pylist() == [40, 1, 25]
    # every record lies in a batch whose offsets it is between
    first = pa.compute.take(b.column("base_offset"), got.records.column("batch")).to_pylist()
    last = pa.compute.take(b.column("last_offset"), got.records.column("batch")).to_pylist()
    offsets = got.records.column("record_offset").to_pylist()
    assert all(f <= o <= la for f, o, la in zip(first, offsets, last, strict=True))


def test_producer_fields_of_a_transactional_batch() -> None:
    buf = build(2, 0, _recs(3), offset=100, transactional=True, producer_id=4242, producer_epoch=7,
                base_sequence=31)  # fmt: skip
    row = ak.decode_records([buf]).batches.to_pylist()[0]
    assert (row["producer_id"], row["producer_epoch"], row["base_sequence"]) == (4242, 7, 31)
    assert row["transactional"] is True and row["control"] is False
    # kafka-python writes base offset 0 and the offsets as deltas
    assert (row["base_offset"], row["last_offset"], row["record_count"]) == (0, 102, 3)


def test_sizes_and_payloads_false() -> None:
    recs = _recs(30)
    buf = build(2, CODEC_IDS["gzip"], recs)
    full = ak.decode_records([buf]).records
    bare = ak.decode_records([buf], payloads=False).records
    assert "key" not in bare.column_names and "value" not in bare.column_names
    assert bare.column("key_size").to_pylist() == [None if r.key is None else len(r.key) for r in recs]
    assert bare.column("value_size").to_pylist() == [None if r.value is None else len(r.value) for r in recs]
    assert bare.column("headers").equals(full.column("headers"))
    assert full.drop_columns(["key", "value"]).equals(bare)


_bytes = st.one_of(st.none(), st.binary(max_size=200))
_rec = st.builds(
    Rec,
    key=_bytes,
    value=_bytes,
    headers=st.lists(st.tuples(st.text(max_size=10), _bytes), max_size=4),
    timestamp=st.integers(0, 2**41),
)


@given(
    fmt=st.sampled_from(FORMATS),
    batches=st.lists(st.lists(_rec, min_size=1, max_size=12), min_size=1, max_size=4),
    base=st.integers(0, 2**31 - 100),  # kafka-python writes magic 2 offsets as int32 deltas from 0
)
def test_any_records_read_as_kafka_python_reads_them(
    fmt: tuple[int, str], batches: list[list[Rec]], base: int
) -> None:
    magic, codec = fmt
    bufs, o = [], base
    for recs in batches:
        bufs.append(build(magic, CODEC_IDS[codec], recs, offset=o))
        o += len(recs)
    buf = b"".join(bufs)
    _, theirs, _ = read(buf)
    assert ours(ak.decode_records([buf, b"", buf])) == theirs + [
        r | {"batch": r["batch"] + len(bufs if magic == 2 or codec != "none" else theirs)} for r in theirs
    ]
