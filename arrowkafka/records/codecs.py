"""Record batch payloads compressed and decompressed: one place for each codec's framing.

Decompression (``decompress``): one function per codec, each capped.

Libraries (measured on batches of many small payloads, where per-call cost shows; see the
README): gzip by the standard library's zlib, snappy by cramjam (raw blocks; the xerial framing
Java writes is read here), lz4 blocks by python-lz4 (Kafka's frame is read here), zstd by
python-zstandard. Each function returns the bytes or raises ``CodecError`` with a reason; none
of them produces more than ``cap`` bytes: a payload that would is refused as soon as it passes
the cap, before more memory is taken.

Compression (``compress``, for ``encode_records``): as Kafka's Java client writes it, at each
codec's default level.
"""

from __future__ import annotations

import zlib

import cramjam
import lz4.block
import zstandard

__all__ = ["CODECS", "CodecError", "TooBig", "compress", "decompress"]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # attributes & 7


class CodecError(Exception):
    """The payload does not decompress; the text says why."""


class TooBig(CodecError):
    """The payload decompresses to more than the cap."""


def decompress(codec: int, payload: memoryview, cap: int) -> bytes:
    if codec == 1:
        return _gzip(payload, cap)
    if codec == 2:
        return _snappy(payload, cap)
    if codec == 3:
        return _lz4(payload, cap)
    if codec == 4:
        return _zstd(payload, cap)
    raise CodecError(f"unknown codec {codec}")


FEED = 1 << 16  # input handed to a streaming decompressor at a time: what it copies back stays small


def _gzip(payload: memoryview, cap: int) -> bytes:
    """Every gzip member in turn (a payload may hold several); bytes after the last member that
    do not start another one are ignored, as Java's GZIPInputStream does. Input goes in pieces,
    so many small members cost time in proportion to the payload, not its square."""
    out: list[bytes] = []
    total = 0
    pos = 0
    n = len(payload)
    while True:
        d = zlib.decompressobj(31)
        try:
            while not d.eof and pos < n:
                piece = payload[pos : pos + FEED]
                chunk = d.decompress(piece, cap + 1 - total)
                total += len(chunk)
                out.append(chunk)
                if total > cap:  # (output stops at cap + 1: nothing is left unconsumed below it)
                    raise TooBig(f"gzip data decompresses to more than {cap} bytes")
                pos += len(piece) - len(d.unused_data)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
        if not d.eof:
            raise CodecError("gzip: the data ends inside a member")
        if bytes(payload[pos : pos + 2]) != b"\x1f\x8b":
            return b"".join(out)


XERIAL_MAGIC = b"\x82SNAPPY\x00"  # then version and compat (int32 each; some writers swap bytes)


def _snappy_raw(block: bytes | memoryview, cap: int) -> bytes:
    size, _ = _uvarint(block)
    if size > cap:
        raise TooBig(f"snappy block claims {size} bytes, more than {cap}")
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CodecError(f"snappy: {e}") from None


def _snappy(payload: memoryview, cap: int) -> bytes:
    """Xerial framing, as Java writes it (matched on its 8-byte magic only), or one raw block."""
    if bytes(payload[:8]) != XERIAL_MAGIC:
        return _snappy_raw(payload, cap)
    if len(payload) < 16:
        raise CodecError("snappy (xerial): the header is cut short")
    out: list[bytes] = []
    total = 0
    pos = 16
    while pos < len(payload):
        if len(payload) - pos < 4:
            raise CodecError("snappy (xerial): a block length is cut short")
        n = int.from_bytes(payload[pos : pos + 4], "big")
        pos += 4
        if n > len(payload) - pos:
            raise CodecError(f"snappy (xerial): a block of {n} bytes with {len(payload) - pos} left")
        block = _snappy_raw(payload[pos : pos + n], cap - total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _uvarint(data: bytes | memoryview) -> tuple[int, int]:
    """Snappy's length preamble (little-endian base 128, at most 5 bytes)."""
    v = 0
    for i in range(min(5, len(data))):
        v |= (data[i] & 0x7F) << (7 * i)
        if data[i] < 0x80:
            return v, i + 1
    raise CodecError("snappy: bad length preamble")


LZ4_MAGIC = 0x184D2204
LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}


def _lz4(payload: memoryview, cap: int) -> bytes:
    """Kafka's LZ4 frames, read block by block. The frame header checksum is not checked:
    magic 0 writers computed it wrongly (KAFKA-3160), and the batch CRC already covers
    these bytes."""
    out: list[bytes] = []
    total = 0
    pos = 0
    n = len(payload)
    while pos < n:
        if n - pos < 7:
            raise CodecError("lz4: frame header cut short")
        magic = int.from_bytes(payload[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
            size = int.from_bytes(payload[pos + 4 : pos + 8], "little")
            if size > n - pos - 8:
                raise CodecError(f"lz4: a skippable frame of {size} bytes with {n - pos - 8} left")
            pos += 8 + size
            continue
        if magic != LZ4_MAGIC:
            raise CodecError(f"lz4: frame magic {magic:#010x}")
        flg, bd = payload[pos + 4], payload[pos + 5]
        if flg >> 6 != 1:
            raise CodecError(f"lz4: frame version {flg >> 6}")
        block_max = LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if block_max is None:
            raise CodecError(f"lz4: block size code {(bd >> 4) & 7}")
        independent = flg & 0x20
        block_sum = 4 if flg & 0x10 else 0
        history = b""  # linked blocks: the frame's last 64 KiB of output, what a match may reach
        pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # descriptor and its checksum
        while True:
            if n - pos < 4:
                raise CodecError("lz4: the data ends inside a frame")
            word = int.from_bytes(payload[pos : pos + 4], "little")
            pos += 4
            if word == 0:  # end mark
                pos += 4 if flg & 0x04 else 0  # content checksum
                break
            size = word & 0x7FFFFFFF
            if size > n - pos:
                raise CodecError(f"lz4: a block of {size} bytes with {n - pos} left")
            raw = payload[pos : pos + size]
            if word & 0x80000000:
                block = bytes(raw)
            else:
                want = min(block_max, cap - total + 1)
                try:
                    if independent or not history:
                        block = lz4.block.decompress(raw, uncompressed_size=want)
                    else:
                        block = lz4.block.decompress(raw, uncompressed_size=want, dict=history)
                except lz4.block.LZ4BlockError as e:
                    if total + block_max > cap:
                        raise TooBig(f"lz4 data decompresses to more than {cap} bytes") from None
                    raise CodecError(f"lz4: {e}") from None
            total += len(block)
            if total > cap:
                raise TooBig(f"lz4 data decompresses to more than {cap} bytes")
            out.append(block)
            if not independent:
                history = (history + block)[-65536:]
            pos += size + block_sum
        if pos > n:
            raise CodecError("lz4: the data ends inside a checksum")
    return b"".join(out)


ZSTD_MAX_RATIO = 1 << 15  # one 128 KiB block from a 4-byte RLE block: zstd's largest output per input byte


def _zstd(payload: memoryview, cap: int) -> bytes:
    """Every frame in turn (frames may lack a content size and may be concatenated). Input goes
    in pieces small enough that one piece cannot pass the cap by more than itself could."""
    out: list[bytes] = []
    total = 0
    pos = 0
    n = len(payload)
    zd = zstandard.ZstdDecompressor()  # one per call: a decompression context is not shared across threads
    while pos < n:
        d = zd.decompressobj()
        try:
            while not d.eof and pos < n:
                piece = payload[pos : pos + min(FEED, max(64, (cap + 1 - total) // ZSTD_MAX_RATIO))]
                chunk = d.decompress(piece)
                total += len(chunk)
                if total > cap:
                    raise TooBig(f"zstd data decompresses to more than {cap} bytes")
                out.append(chunk)
                pos += len(piece) - (len(d.unused_data) if d.eof else 0)
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        if not d.eof:
            raise CodecError("zstd: the data ends inside a frame")
    return b"".join(out)


# ---- compression, as Kafka's Java client writes it (encode_records) ----

SNAPPY_BLOCK = 32 << 10  # snappy-java's SnappyOutputStream default block
XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")  # version 1, compatible with 1
LZ4_BLOCK = 64 << 10
LZ4_MAGIC_BYTES = LZ4_MAGIC.to_bytes(4, "little")
LZ4_DESCRIPTOR = bytes([0x60, 0x40])  # version 1, independent blocks, no checksums or size; 64 KiB blocks


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (all an LZ4 frame descriptor checksum needs)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    assert len(data) < 16
    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i : i + 4], "little") * p3) & m, 17) * p4 & m
        i += 4
    for byte in data[i:]:
        h = rotl((h + byte * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


# The frame header: its checksum is byte 1 of the xxHash32 of the descriptor; magic 0 writers
# hashed the magic number too (KAFKA-3160), and Kafka keeps writing that for magic 0.
LZ4_HEADERS = {
    broken: LZ4_MAGIC_BYTES
    + LZ4_DESCRIPTOR
    + bytes([(_xxh32(LZ4_MAGIC_BYTES * broken + LZ4_DESCRIPTOR) >> 8) & 0xFF])
    for broken in (False, True)
}


def compress(codec: int, magic: int, data: memoryview, zstd: zstandard.ZstdCompressor | None = None) -> bytes:
    """A batch's records (or a wrapper's inner messages) compressed as Kafka's Java client does."""
    if codec == 1:
        return zlib.compress(data, -1, 31)  # a gzip member at zlib's default level, as java.util.zip
    if codec == 2:
        parts = [XERIAL_HEADER]
        for i in range(0, len(data), SNAPPY_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + SNAPPY_BLOCK]))
            parts += [len(block).to_bytes(4, "big"), block]
        return b"".join(parts)
    if codec == 3:
        parts = [LZ4_HEADERS[magic == 0]]
        for i in range(0, len(data), LZ4_BLOCK):
            chunk = data[i : i + LZ4_BLOCK]
            block = lz4.block.compress(chunk, store_size=False)
            if len(block) >= len(chunk):  # stored as it is, flagged by the length's high bit
                parts += [(len(chunk) | 0x80000000).to_bytes(4, "little"), bytes(chunk)]
            else:
                parts += [len(block).to_bytes(4, "little"), block]
        parts.append(bytes(4))  # end mark
        return b"".join(parts)
    if codec == 4:
        return (zstd or zstandard.ZstdCompressor(level=3)).compress(data)
    raise ValueError(f"unknown codec {codec}")
