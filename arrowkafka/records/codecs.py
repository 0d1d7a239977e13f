"""Record batch payloads compressed and decompressed: one place for each codec's framing.

Decompression (``decompress_into``): one function per codec, each capped, each writing at the
end of a ``Sink`` (one numpy buffer): the decoder walks the records where they land, with no
bytes object and no join in between. ``decompress`` returns bytes, for tests and tools.

Libraries (measured on batches of many small payloads, where per-call cost shows; see the
README): gzip by the standard library's zlib, snappy by cramjam (raw blocks, straight into the
sink; the xerial framing Java writes is read here), lz4 blocks by cramjam straight into the sink
(python-lz4 for a block linked to the one before it; Kafka's frame is read here), zstd by
python-zstandard. A run of lz4 batches is read by a kernel instead (``kernels/lz4.py``),
through python-lz4's own ``LZ4_decompress_safe`` (``LZ4_DECOMPRESS``), where its wheel
exports it; what that kernel leaves, and every error, is read here. Each function writes the
bytes or raises ``CodecError`` with a reason; none of them produces more than ``cap`` bytes: a
payload that would is refused as soon as it passes the cap, before more memory is taken.

Compression (``compress``, for ``encode_records``): as Kafka's Java client writes it, at each
codec's default level.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import zlib

import cramjam
import lz4.block
import numpy as np
import zstandard
from numba import config

from arrowkafka.assembly import blocks

__all__ = [
    "CODECS",
    "CodecError",
    "LZ4_DECOMPRESS",
    "Sink",
    "TooBig",
    "compress",
    "decompress",
    "decompress_into",
]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # attributes & 7


class CodecError(Exception):
    """The payload does not decompress; the text says why."""


class TooBig(CodecError):
    """The payload decompresses to more than the cap."""


class Sink:
    """Decompressed bytes, back to back in one numpy buffer; ``at`` is where the next go.

    A numpy array rather than bytes objects, from the blocks kept for reuse: on a VM a fresh
    4 KiB page costs microseconds to fault in, and the next call takes the same block again.
    Pages never written cost nothing, so ``size`` may be a generous guess."""

    def __init__(self, size: int = 1 << 16) -> None:
        self.buf = blocks.block(max(size, 1))
        self.at = 0

    def room(self, n: int) -> np.ndarray:
        """The next ``n`` bytes of the buffer (grown when short: a copy of what was written).
        A numpy array: cramjam fills one faster than a memoryview (numpy's type stubs do not
        declare its buffer protocol, hence the ignores where cramjam takes one)."""
        if self.at + n > len(self.buf):
            grown = blocks.block(max(2 * len(self.buf), self.at + n))
            grown[: self.at] = self.buf[: self.at]
            self.buf = grown
        return self.buf[self.at : self.at + n]

    def write(self, chunk: bytes | memoryview) -> None:
        self.room(len(chunk))[:] = np.frombuffer(chunk, np.uint8)
        self.at += len(chunk)

    def since(self, start: int) -> memoryview:
        return self.buf.data[start : self.at]


def decompress_into(codec: int, payload: memoryview, cap: int, sink: Sink) -> int:
    """Decompress ``payload`` at the end of ``sink`` -> the bytes written (at most ``cap``).
    On an error the sink's end stays where it was."""
    start = sink.at
    try:
        if codec == 1:
            _gzip(payload, cap, sink)
        elif codec == 2:
            _snappy(payload, cap, sink)
        elif codec == 3:
            _lz4(payload, cap, sink)
        elif codec == 4:
            _zstd(payload, cap, sink)
        else:
            raise CodecError(f"unknown codec {codec}")
    except CodecError:
        sink.at = start
        raise
    return sink.at - start


def decompress(codec: int, payload: memoryview, cap: int) -> bytes:
    sink = Sink(4 * len(payload))
    decompress_into(codec, payload, cap, sink)
    return bytes(sink.since(0))


FEED = 1 << 16  # input handed to a streaming decompressor at a time: what it copies back stays small


def _gzip(payload: memoryview, cap: int, sink: Sink) -> None:
    """Every gzip member in turn (a payload may hold several); bytes after the last member that
    do not start another one are ignored, as Java's GZIPInputStream does. Input goes in pieces,
    so many small members cost time in proportion to the payload, not its square."""
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
                if total > cap:  # (output stops at cap + 1: nothing is left unconsumed below it)
                    raise TooBig(f"gzip data decompresses to more than {cap} bytes")
                sink.write(chunk)
                pos += len(piece) - len(d.unused_data)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
        if not d.eof:
            raise CodecError("gzip: the data ends inside a member")
        if bytes(payload[pos : pos + 2]) != b"\x1f\x8b":
            return


_BE32 = struct.Struct(">I")
XERIAL_MAGIC = b"\x82SNAPPY\x00"  # then version and compat (int32 each; some writers swap bytes)


def _snappy_raw(block: bytes | memoryview, cap: int, sink: Sink) -> int:
    try:
        size = cramjam.snappy.decompress_raw_len(block)  # the length preamble (5 bytes at most)
        if size > cap:
            raise TooBig(f"snappy block claims {size} bytes, more than {cap}")
        n = cramjam.snappy.decompress_raw_into(block, sink.room(size))  # type: ignore[arg-type]
    except cramjam.DecompressionError as e:
        raise CodecError(f"snappy: {str(e).removeprefix('snappy: ')}") from None
    if n != size:
        raise CodecError(f"snappy: {n} bytes where the block claims {size}")
    sink.at += n
    return n


def _snappy(payload: memoryview, cap: int, sink: Sink) -> None:
    """Xerial framing, as Java writes it (matched on its 8-byte magic only), or one raw block."""
    if bytes(payload[:8]) != XERIAL_MAGIC:
        _snappy_raw(payload, cap, sink)
        return
    if len(payload) < 16:
        raise CodecError("snappy (xerial): the header is cut short")
    total = 0
    pos = 16
    while pos < len(payload):
        if len(payload) - pos < 4:
            raise CodecError("snappy (xerial): a block length is cut short")
        (n,) = _BE32.unpack_from(payload, pos)
        pos += 4
        if n > len(payload) - pos:
            raise CodecError(f"snappy (xerial): a block of {n} bytes with {len(payload) - pos} left")
        total += _snappy_raw(payload[pos : pos + n], cap - total, sink)
        pos += n


LZ4_MAGIC = 0x184D2204
_U32 = struct.Struct("<I")


def _lz4_decompress_safe() -> int:
    """The address of ``LZ4_decompress_safe`` in python-lz4's extension, once it has decoded a
    block right here; 0 where the wheel does not export it (its symbols are no API), or where
    the kernels run as Python (``NUMBA_DISABLE_JIT``): then every frame is read in Python."""
    if getattr(config, "DISABLE_JIT", False):
        return 0
    try:
        fn = ctypes.CDLL(lz4.block._block.__file__).LZ4_decompress_safe
    except (OSError, AttributeError):
        return 0
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    text = b"arrowkafka " * 40
    block = lz4.block.compress(text, store_size=False)
    out = ctypes.create_string_buffer(len(text))
    if fn(block, out, len(block), len(text)) != len(text) or out.raw != text:
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


LZ4_DECOMPRESS = _lz4_decompress_safe()
LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}


def _lz4(payload: memoryview, cap: int, sink: Sink) -> None:
    """Kafka's LZ4 frames, read block by block. The frame header checksum is not checked:
    magic 0 writers computed it wrongly (KAFKA-3160), and the batch CRC already covers
    these bytes."""
    total = 0
    pos = 0
    n = len(payload)
    while pos < n:
        if n - pos < 7:
            raise CodecError("lz4: frame header cut short")
        (magic,) = _U32.unpack_from(payload, pos)
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
        frame = sink.at  # linked blocks: a match may reach 64 KiB back into the frame's output
        pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # descriptor and its checksum
        while True:
            if n - pos < 4:
                raise CodecError("lz4: the data ends inside a frame")
            (word,) = _U32.unpack_from(payload, pos)
            pos += 4
            if word == 0:  # end mark
                pos += 4 if flg & 0x04 else 0  # content checksum
                break
            size = word & 0x7FFFFFFF
            if size > n - pos:
                raise CodecError(f"lz4: a block of {size} bytes with {n - pos} left")
            raw = payload[pos : pos + size]
            if word & 0x80000000:
                got = len(raw)
                if total + got > cap:
                    raise TooBig(f"lz4 data decompresses to more than {cap} bytes")
                sink.write(raw)
            else:
                want = min(block_max, cap - total + 1)
                try:
                    if independent or sink.at == frame:
                        got = cramjam.lz4.decompress_block_into(raw, sink.room(want))  # type: ignore[arg-type]
                    else:  # (python-lz4: cramjam takes no dictionary)
                        history = bytes(sink.since(max(frame, sink.at - 65536)))
                        block = lz4.block.decompress(raw, uncompressed_size=want, dict=history)
                        got = len(block)
                        if total + got <= cap:
                            sink.room(got)[:] = np.frombuffer(block, np.uint8)
                except (cramjam.DecompressionError, lz4.block.LZ4BlockError) as e:
                    if total + block_max > cap:
                        raise TooBig(f"lz4 data decompresses to more than {cap} bytes") from None
                    raise CodecError(f"lz4: {e}") from None
                if total + got > cap:
                    raise TooBig(f"lz4 data decompresses to more than {cap} bytes")
                sink.at += got
            total += got
            pos += size + block_sum
        if pos > n:
            raise CodecError("lz4: the data ends inside a checksum")


_THREAD = threading.local()
ZSTD_MAX_RATIO = 1 << 15  # one 128 KiB block from a 4-byte RLE block: zstd's largest output per input byte


def _zstd(payload: memoryview, cap: int, sink: Sink) -> None:
    """Every frame in turn (frames may lack a content size and may be concatenated). Input goes
    in pieces small enough that one piece cannot pass the cap by more than itself could."""
    total = 0
    pos = 0
    n = len(payload)
    zd = getattr(_THREAD, "zstd", None)
    if zd is None:  # a context per thread: one is not shared across threads, and costs 7 us to make
        zd = _THREAD.zstd = zstandard.ZstdDecompressor()
    while pos < n:
        d = zd.decompressobj()
        try:
            while not d.eof and pos < n:
                piece = payload[pos : pos + min(FEED, max(64, (cap + 1 - total) // ZSTD_MAX_RATIO))]
                chunk = d.decompress(piece)
                total += len(chunk)
                if total > cap:
                    raise TooBig(f"zstd data decompresses to more than {cap} bytes")
                sink.write(chunk)
                pos += len(piece) - (len(d.unused_data) if d.eof else 0)
        except zstandard.ZstdError as e:
            raise CodecError(f"zstd: {e}") from None
        if not d.eof:
            raise CodecError("zstd: the data ends inside a frame")


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
