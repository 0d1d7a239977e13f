"""Kafka record batches (magic 0, 1, 2; every codec) into Arrow tables and back:
``decode_records``, ``encode_records``."""

from __future__ import annotations

from arrowkafka.records.decode import MAX_UNCOMPRESSED, Records, decode_records
from arrowkafka.records.encode import encode_records

__all__ = ["MAX_UNCOMPRESSED", "Records", "decode_records", "encode_records"]
