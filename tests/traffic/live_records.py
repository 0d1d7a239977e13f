"""A small reader of Kafka record batches (magic 2) for the live broker test.

Written from the protocol's record-batch layout, independently of arrowkafka: it takes the
``records`` bytes a Produce request or Fetch response carries (zero or more batches back to
back), checks each batch's CRC-32C, and returns every record with its absolute offset. Only the
codecs the live workload uses (none, gzip) are read.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, field

HEADER = 61  # bytes of a v2 batch header, up to and including the record count
COUNT_AT = 57  # the int32 record count's byte offset in the header


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


@dataclass
class Record:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Batch:
    base_offset: int
    count: int  # the header's record count (byte 57)
    codec: int  # attributes & 7: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
    producer_id: int
    records: list[Record] = field(default_factory=list)


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's signed varint and varlong)."""
    shift = value = 0
    while True:
        byte = b[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _blob(b: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(b, pos)
    if n < 0:
        return None, pos
    if pos + n > len(b):
        raise ValueError("a key, value or header runs past the records")
    return b[pos : pos + n], pos + n


def _records(body: bytes, count: int, base_offset: int) -> list[Record]:
    out = []
    pos = 0
    for _ in range(count):
        size, pos = _varint(body, pos)
        end = pos + size
        pos += 1  # attributes (unused)
        _, pos = _varint(body, pos)  # timestamp delta
        delta, pos = _varint(body, pos)
        key, pos = _blob(body, pos)
        value, pos = _blob(body, pos)
        n_headers, pos = _varint(body, pos)
        headers = []
        for _ in range(n_headers):
            name, pos = _blob(body, pos)
            hv, pos = _blob(body, pos)
            headers.append(((name or b"").decode(), hv))
        if pos != end:
            raise ValueError(f"record at offset delta {delta}: {end - pos} bytes not read")
        out.append(Record(base_offset + delta, key, value, headers))
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last record")
    return out


def read_batches(records: bytes | None) -> list[Batch]:
    """Every batch in a ``records`` field, records read; raises ValueError on anything else
    (a partial last batch, a bad CRC, another magic or codec)."""
    out: list[Batch] = []
    data = records or b""
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER:
            raise ValueError(f"a partial batch header at byte {pos}")
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        magic = data[pos + 16]
        crc, attributes = struct.unpack_from(">Ih", data, pos + 17)
        producer_id = struct.unpack_from(">q", data, pos + 43)[0]
        (count,) = struct.unpack_from(">i", data, pos + COUNT_AT)
        if magic != 2 or end > len(data):
            raise ValueError(f"batch at byte {pos}: magic {magic}, ends at {end} of {len(data)}")
        if crc32c(data[pos + 21 : end]) != crc:
            raise ValueError(f"batch at byte {pos}: CRC-32C mismatch")
        codec = attributes & 7
        body = data[pos + HEADER : end]
        if codec == 1:
            body = gzip.decompress(body)
        elif codec != 0:
            raise ValueError(f"batch at byte {pos}: codec {codec} is not read here")
        out.append(Batch(base_offset, count, codec, producer_id, _records(body, count, base_offset)))
        pos = end
    return out
