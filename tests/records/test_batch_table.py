"""The batches table, whose columns one kernel writes with their validity bits packed eight
batches to a byte: a batch's row is the same wherever it falls among the others."""

from __future__ import annotations

import struct

from batchtools import Rec, build

import arrowkafka as ak

RECS = [Rec(b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else [], 1_700_000_000_000 + i) for i in range(5)]


def _mixed() -> list[bytes]:
    """Every magic and codec, a LogAppendTime batch, a
    transactional one, a CRC mismatch, an unknown magic, and a partial batch last."""
    out = []
    for _ in range(3):
        for magic in (0, 1, 2):
            for codec in (0, 1, 2) if magic < 2 else (0, 1, 3, 4):
                out.append(build(magic, codec, RECS, offset=100 * len(out)))
    out.append(build(2, 0, RECS, offset=5, producer_id=7, producer_epoch=1, base_sequence=0,
                     transactional=True))  # fmt: skip
    bad = bytearray(build(1, 0, RECS[:1]))
    bad[-1] ^= 1  # the message's last byte: its CRC-32 does not check
    out.append(bytes(bad))
    unknown = bytearray(build(2, 0, RECS))
    unknown[16] = 7
    out.append(bytes(unknown))
    return [*out, build(2, 0, RECS)[:40]]


def _entries(buf: bytes) -> list[bytes]:
    """``buf`` cut entry by entry (an uncompressed magic 0/1 set is one entry a message)."""
    out, pos = [], 0
    while pos < len(buf):
        n = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
        out.append(buf[pos : pos + n])
        pos += n
    return out


def _crc(entry: bytes) -> int:
    magic = entry[16]
    return struct.unpack_from(">I", entry, 17 if magic == 2 else 12)[0]


def test_each_batch_reads_alike_alone_and_among_others() -> None:
    entries = _entries(b"".join(_mixed()))
    together = ak.decode_records([b"".join(entries)], errors="null").batches.to_pylist()
    assert len(together) == len(entries) > 24
    alone = [ak.decode_records([e], errors="null").batches.to_pylist() for e in entries]
    for i, (row, [one]) in enumerate(zip(together, alone, strict=True)):
        assert row["position"] == sum(len(e) for e in entries[:i])
        assert {**row, "position": 0} == one, i
    assert together[-1]["partial"] and together[-1]["size"] == 40
    assert any(r["crc_ok"] is False for r in together) and any(r["transactional"] for r in together)
    # CRCs are uint32: those of 2**31 and more read as stored
    read = [
        (r, e) for r, e in zip(together, entries, strict=True) if r["magic"] in (0, 1, 2) and not r["partial"]
    ]
    crcs = [_crc(e) for _, e in read]
    assert [r["crc"] for r, _ in read] == crcs and max(crcs) >= 1 << 31
    assert [r["crc"] for r in together if r["magic"] == 7] == [None]


def test_no_batches_give_an_empty_table_of_the_schema() -> None:
    """Inputs with no batch (no element, an empty one, a null) give the batches table with no
    rows: its columns are slices of buffers of no bytes."""
    from arrowkafka.records.tables import BATCHES_SCHEMA

    for records in ([], [b""], [None], [b"", None]):
        got = ak.decode_records(records)
        assert got.batches.num_rows == 0 and got.records.num_rows == 0, records
        assert got.batches.schema.equals(BATCHES_SCHEMA), records
