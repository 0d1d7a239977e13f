"""The codec traps real producers leave (see RECORDS-NOTES): several gzip members, snappy in
xerial framing (version fields either byte order) and raw, Kafka's LZ4 frame with the magic 0
header checksum bug (KAFKA-3160), zstd frames without a content size, concatenated."""

from __future__ import annotations

import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.frame
import pytest
import zstandard
from batchtools import Rec, build, ours, read, rewrap_v2

import arrowkafka as ak

RECS = [
    Rec(f"k{i}".encode(), bytes([i]) * (i * 50), [("trace", b"t" * i)], 1_700_000_000_000 + i)
    for i in range(100)
]


@pytest.fixture(scope="module")
def plain() -> tuple[bytes, list]:
    batch = build(2, 0, RECS)
    return batch, ak.decode_records([batch]).records.to_pylist()


def _halves(data: bytes) -> tuple[bytes, bytes]:
    return data[: len(data) // 2], data[len(data) // 2 :]


def _xerial(data: bytes, order: str) -> bytes:
    head = b"\x82SNAPPY\x00" + struct.pack(order + "ii", 1, 1)
    return head + b"".join(
        struct.pack(">i", len(c)) + c for c in (bytes(cramjam.snappy.compress_raw(h)) for h in _halves(data))
    )


def _zstd_frames(data: bytes) -> bytes:
    c = zstandard.ZstdCompressor(write_content_size=False)
    return b"".join(c.compress(h) for h in _halves(data))


def _lz4_kafka3160(data: bytes) -> bytes:
    frame = bytearray(lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                         content_checksum=False, store_size=False))  # fmt: skip
    frame[6] ^= 0x5A  # the header checksum byte, computed over the magic as well by magic 0 writers
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(bytes(frame))  # a common binding refuses it
    return bytes(frame)


TRAPS = {
    "gzip members": (1, lambda d: b"".join(zlib.compress(h, wbits=31) for h in _halves(d))),
    "snappy xerial, big-endian version": (2, lambda d: _xerial(d, ">")),
    "snappy xerial, little-endian version": (2, lambda d: _xerial(d, "<")),
    "snappy raw": (2, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    "lz4 frame with a wrong header checksum": (3, _lz4_kafka3160),
    "lz4 frame with checksums and a content size": (
        3, lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX64KB, content_checksum=True,
                                        store_size=True, block_checksum=True)),
    "lz4 linked blocks": (3, lambda d: lz4.frame.compress(d, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=True)),
    "zstd frames without content size, concatenated": (4, _zstd_frames),
}  # fmt: skip


@pytest.mark.parametrize("trap", list(TRAPS))
def test_codec_trap_decodes_to_the_same_records(plain: tuple[bytes, list], trap: str) -> None:
    batch, records = plain
    codec, compress = TRAPS[trap]
    payload = compress(batch[61:])
    trapped = rewrap_v2(batch, attributes=codec, records=payload)
    got = ak.decode_records([trapped])
    assert got.records.to_pylist() == records
    row = got.batches.to_pylist()[0]
    assert (row["records_size"], row["uncompressed_size"]) == (len(payload), len(batch) - 61)


def test_magic0_lz4_from_kafka_python_has_the_wrong_checksum() -> None:
    # kafka-python writes magic 0 LZ4 the way Kafka 0.8/0.9 did; the frame's header checksum
    # is refused by the lz4 binding, read here
    buf = build(0, 3, RECS[:5])
    payload = buf[12 + 14 + 4 :]  # offset, size, crc+magic+attributes+key length (-1), value length
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(payload)
    assert ak.decode_records([buf]).records.column("key").to_pylist() == [r.key for r in RECS[:5]]


def test_lz4_linked_blocks_reach_back_across_blocks(plain: tuple[bytes, list]) -> None:
    # small linked blocks, the third matching the first: a match reaches two blocks back
    import os

    a, b = os.urandom(1024), os.urandom(1024)
    with lz4.frame.LZ4FrameCompressor(block_linked=True, auto_flush=True) as c:
        frame = c.begin() + c.compress(a) + c.compress(b) + c.compress(a) + c.flush()
    from arrowkafka.records.codecs import decompress

    assert decompress(3, memoryview(frame), 1 << 20) == a + b + a


def test_many_members_and_frames() -> None:
    # 50,000 empty gzip members, or zstd frames, before the one that holds data: read in pieces,
    # not by copying the rest of the payload after each (which took hours here)
    from arrowkafka.records.codecs import decompress

    empty = zlib.compress(b"", wbits=31)
    payload = empty * 50_000 + zlib.compress(b"end", wbits=31)
    assert decompress(1, memoryview(payload), 1 << 20) == b"end"
    frames = zstandard.ZstdCompressor().compress(b"") * 50_000
    assert decompress(4, memoryview(frames + zstandard.ZstdCompressor().compress(b"end")), 1 << 20) == b"end"


@pytest.mark.parametrize("guess", [1, 8])
def test_batches_that_decompress_past_the_buffer_first_reserved(
    monkeypatch: pytest.MonkeyPatch, guess: int
) -> None:
    # zeros compress ~1000:1, past what decode_records first reserves for the decompressed records;
    # a small walk group makes the counting walk run between the buffer's moves
    import arrowkafka.records.decode as decode_module

    zeros = [Rec(b"z%d" % i, bytes(20_000), [("h", b"v")], 1_700_000_000_000 + i) for i in range(20)]
    mixed = [
        build(2, codec, zeros if b % 2 else RECS, offset=1000 * b)
        for b, codec in enumerate([1, 0, 2, 3, 4, 1, 0, 4, 3, 2])
    ]
    monkeypatch.setattr(decode_module, "INNER_GUESS", guess)
    monkeypatch.setattr(decode_module, "WALK_GROUP", 30_000)
    _, want, _ = read(b"".join(mixed))
    for values in (mixed, [b"".join(mixed)]):
        got = ak.decode_records(values)
        assert ours(got) == want
        assert got.batches.column("error").null_count == len(mixed)


def test_zstd_context_is_reused_after_an_error_and_not_shared_by_threads() -> None:
    # a context per thread, made once: a frame that fails leaves nothing behind for the next
    from arrowkafka.records.codecs import CodecError, decompress

    good = [zstandard.ZstdCompressor(level=3).compress(b"%d " % i * (5000 + i)) for i in range(40)]
    with pytest.raises(CodecError):
        decompress(4, memoryview(good[0][: len(good[0]) // 2]), 1 << 20)
    assert decompress(4, memoryview(good[1]), 1 << 20) == b"1 " * 5001
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda z: decompress(4, memoryview(z), 1 << 20), good * 5))
    assert got == [b"%d " % i * (5000 + i) for i in range(40)] * 5
