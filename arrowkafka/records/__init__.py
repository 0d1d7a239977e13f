"""Kafka record batches (magic 0, 1, 2; every codec) into Arrow tables: ``decode_records``."""

from __future__ import annotations

from arrowkafka.records.decode import MAX_UNCOMPRESSED, Records, decode_records

__all__ = ["MAX_UNCOMPRESSED", "Records", "decode_records"]
