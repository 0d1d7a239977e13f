"""Captured Kafka traffic to tables, one module per step:

``pcap`` (packets from pcap/pcapng) -> ``packets`` (TCP segments) -> ``tcp`` (streams per
direction) -> ``frames`` (Kafka frames) -> ``headers`` (request and response headers) ->
``pairing`` (responses with their requests, frames grouped by message and version) ->
``decode`` (bodies to rows, rejects) -> ``topic_names`` (topics sent by id named) ->
``records`` (the records inside Produce and Fetch) -> ``parquet`` (the main job: ``decode_capture``).

The first four steps are written twice: in Python (one module each, streaming, the reference
for every rule of damaged traffic) and as kernels over 4 MB pieces of a file
(``chunks``, over ``kernels/capture.py``), which the job runs and the tests hold to the Python
steps. ``grouping`` is the pure-Python path to grouped frames; ``columns`` and ``summary``
hold the output tables' columns and counts.

>>> from arrowkafka.traffic import capture_frames, KafkaFrame
>>> from arrowkafka.traffic.frames import peek_request
>>> for item in capture_frames("traffic.pcap"):  # doctest: +SKIP
...     if isinstance(item, KafkaFrame) and item.direction == "request":
...         api_key, api_version, correlation_id = peek_request(item.data)
"""

from __future__ import annotations

from arrowkafka.traffic.columns import FRAME_COLUMNS, FRAMES_SCHEMA, REJECT_SCHEMA, TABLE_COLUMNS
from arrowkafka.traffic.decode import decode_frames
from arrowkafka.traffic.frames import (
    CaptureStats,
    KafkaFrame,
    MissingBytes,
    PartialFrame,
    SkippedBytes,
    capture_frames,
)
from arrowkafka.traffic.grouping import group_frames
from arrowkafka.traffic.pairing import frame_chunks, frames_table
from arrowkafka.traffic.parquet import decode_capture
from arrowkafka.traffic.summary import Summary

__all__ = [
    "FRAME_COLUMNS",
    "FRAMES_SCHEMA",
    "REJECT_SCHEMA",
    "TABLE_COLUMNS",
    "CaptureStats",
    "KafkaFrame",
    "MissingBytes",
    "PartialFrame",
    "SkippedBytes",
    "Summary",
    "capture_frames",
    "decode_capture",
    "decode_frames",
    "frame_chunks",
    "frames_table",
    "group_frames",
]
