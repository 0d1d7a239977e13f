"""Runs of lz4 batches are read by a kernel calling python-lz4's own block decoder; anything
but the plain case is left to the Python reader. Both ways give the same tables, errors
and rejects included."""

from __future__ import annotations

import random

import lz4.frame
import pytest
from batchtools import Rec, build, rewrap_v2

import arrowkafka as ak
from arrowkafka.records import decode
from arrowkafka.records.codecs import LZ4_DECOMPRESS, _xxh32

RECS = [Rec(b"k%d" % i, b"%d-" % i * (i % 40), [("h", b"v")], 1_700_000_000_000 + i) for i in range(300)]


def _inputs() -> list[bytes]:
    rng = random.Random(5)
    plain = [build(2, 3, RECS[: rng.randint(1, 300)], offset=1000 * i) for i in range(30)]
    batch = build(2, 0, RECS)
    frame = lz4.frame.compress(batch[61:], block_linked=True, block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    linked = rewrap_v2(batch, attributes=3, records=frame)
    damaged = []
    for batch in plain[:10]:
        for _ in range(3):
            b = bytearray(batch)
            b[rng.randrange(61, len(b))] ^= 1 << rng.randrange(8)
            damaged.append(bytes(b))
    legacy = [build(m, 3, RECS[:50]) for m in (0, 1)]
    # a row of every kind, and rows mixing them with uncompressed and gzip batches
    return [*plain, linked, *damaged, *legacy, b"".join([*plain[:5], build(2, 0, RECS), linked,
            build(2, 1, RECS), *plain[5:9], *damaged[:4]])]  # fmt: skip


@pytest.mark.skipif(
    not LZ4_DECOMPRESS, reason="no lz4 kernel here: NUMBA_DISABLE_JIT, or a wheel with no LZ4_decompress_safe"
)
@pytest.mark.parametrize("cap", [decode.MAX_UNCOMPRESSED, 3000])
@pytest.mark.parametrize("views", [False, True])
def test_the_kernel_and_python_read_alike(monkeypatch: pytest.MonkeyPatch, cap: int, views: bool) -> None:
    rows = _inputs()
    kw = {"errors": "null", "max_uncompressed": cap, "views": views, "verify_crc": False}
    fast = ak.decode_records(rows, **kw)
    monkeypatch.setattr(decode, "LZ4_DECOMPRESS", 0)
    slow = ak.decode_records(rows, **kw)
    for name in ("batches", "records", "rejects"):
        assert getattr(fast, name).equals(getattr(slow, name)), name
    errors = fast.batches.column("error").to_pylist()
    assert fast.records.num_rows > (300 if cap == 3000 else 3000)
    if cap == 3000:
        assert any(e and "max_uncompressed" in e for e in errors)
    else:  # damaged frames were read, and named, in Python
        assert any(e and e.startswith("lz4 data does not decompress") for e in errors)


@pytest.mark.skipif(
    not LZ4_DECOMPRESS, reason="no lz4 kernel here: NUMBA_DISABLE_JIT, or a wheel with no LZ4_decompress_safe"
)
@pytest.mark.parametrize("views", [False, True])
def test_frames_of_4_mib_blocks_are_read_by_the_kernel(monkeypatch: pytest.MonkeyPatch, views: bool) -> None:
    """Frames that allow blocks of 4 MiB (pierrec/lz4's default, so franz-go's and sarama's
    batches) are read by the kernel when their blocks fit the output, not handed to Python
    because a block could be that long."""
    batch = build(2, 0, RECS)
    frame = bytearray(lz4.frame.compress(batch[61:], block_linked=False, store_size=False))
    # (LZ4F shrinks a small input's block maximum: the descriptor says 4 MiB, as a streaming
    # writer's does, with its header checksum)
    frame[5] = 7 << 4
    frame[6] = _xxh32(bytes(frame[4:6])) >> 8 & 0xFF
    frame = bytes(frame)
    rows = [rewrap_v2(build(2, 0, RECS, offset=1000 * i), attributes=3, records=frame) for i in range(40)]
    kw = {"errors": "null", "views": views}
    monkeypatch.setattr(decode, "LZ4_DECOMPRESS", 0)
    slow = ak.decode_records(rows, **kw)  # (the Python reader)
    read_in_python = []
    python_way = decode.decompress_into
    monkeypatch.setattr(decode, "decompress_into", lambda *a: read_in_python.append(a[0]) or python_way(*a))
    monkeypatch.setattr(decode, "LZ4_DECOMPRESS", LZ4_DECOMPRESS)
    fast = ak.decode_records(rows, **kw)
    assert read_in_python == []
    assert fast.records.num_rows == 40 * len(RECS) and not any(fast.batches.column("error").to_pylist())
    for name in ("batches", "records", "rejects"):
        assert getattr(fast, name).equals(getattr(slow, name)), name
