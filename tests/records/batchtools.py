"""Record batches for the tests, written with kafka-python (an implementation we did not write)
and read back by it: the oracle ``decode_records`` is checked against."""

from __future__ import annotations

import struct
import warnings
from dataclasses import dataclass
from typing import Any

import crc32c

with warnings.catch_warnings():  # kafka-python's package import uses a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int | None


def records_values(rows: Any, *, skip_empty: bool = False) -> list[bytes]:
    """Every ``records`` field's bytes in decoded message rows (``to_pylist()`` of a Produce
    request or Fetch response table), in order."""
    out: list[bytes] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for name, v in value.items():
                if name == "records" and isinstance(v, bytes):
                    if v or not skip_empty:
                        out.append(v)
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(rows)
    return out


def build(magic: int, codec: int, recs: list[Rec], *, offset: int = 0, **producer: Any) -> bytes:
    """One batch (magic 2) or a message set (magic 0/1; one wrapper when compressed)."""
    b = MemoryRecordsBuilder(magic, codec, batch_size=1 << 30, offset=offset, **producer)
    for r in recs:
        b.append(timestamp=r.timestamp if magic else None, key=r.key, value=r.value,
                 headers=r.headers if magic == 2 else [])  # fmt: skip
    b.close()
    return bytes(b.buffer())


def read(buf: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """kafka-python's view of ``buf``: batches, records, and the bytes left at the end."""
    mr = MemoryRecords(buf)
    batches: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    while (batch := mr.next_batch()) is not None:
        info: dict[str, Any] = {"magic": batch.magic, "codec": batch.compression_type}
        if batch.magic == 2:
            info |= {
                "base_offset": batch.base_offset,
                "last_offset": batch.last_offset,
                "producer_id": batch.producer_id,
                "producer_epoch": batch.producer_epoch,
                "base_sequence": batch.base_sequence,
                "transactional": batch.is_transactional,
                "control": batch.is_control_batch,
                "crc_ok": batch.validate_crc(),
            }
        for r in batch:
            ts = r.timestamp
            records.append(
                {
                    "batch": len(batches),
                    "offset": r.offset,
                    "timestamp": None if ts is None or ts == -1 else ts,
                    "key": None if r.key is None else bytes(r.key),
                    "value": None if r.value is None else bytes(r.value),
                    "headers": [(k, None if v is None else bytes(v)) for k, v in r.headers],
                }
            )
        batches.append(info)
    return batches, records, len(buf) - mr.valid_bytes()


def ours(result: Any) -> list[dict[str, Any]]:
    """``decode_records``'s records in the shape ``read`` gives."""
    out = []
    for r in result.records.to_pylist():
        ts = r["timestamp"]
        out.append(
            {
                "batch": r["batch"],
                "offset": r["record_offset"],
                "timestamp": None if ts is None else int(ts.timestamp() * 1000 + 0.5),
                "key": r["key"],
                "value": r["value"],
                "headers": [(h["key"], h["value"]) for h in r["headers"]],
            }
        )
    return out


def rewrap_v2(batch: bytes, *, attributes: int | None = None, records: bytes | None = None) -> bytes:
    """A magic 2 batch with its attributes or its records part replaced; length and CRC-32C
    written anew."""
    head = bytearray(batch[:61])
    body = batch[61:] if records is None else records
    if attributes is not None:
        struct.pack_into(">h", head, 21, attributes)
    struct.pack_into(">i", head, 8, 49 + len(body))
    struct.pack_into(">I", head, 17, crc32c.crc32c(bytes(head[21:]) + body))
    return bytes(head) + body
