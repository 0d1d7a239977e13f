"""Read Kafka traffic from packet captures: pcap/pcapng -> TCP segments -> streams -> frames.

Each layer streams and can be used alone:

- :mod:`.pcap`: :class:`CaptureReader` yields :class:`Packet` (classic pcap and pcapng).
- :mod:`.packets`: :func:`parse_packet` turns a packet into a TCP :class:`Segment`.
- :mod:`.tcp`: :class:`TcpReassembler` turns segments into per-direction stream events.
- :mod:`.frames`: :class:`KafkaFramer` splits streams into Kafka frames.

>>> from arrowkafka.capture import capture_frames, KafkaFrame, peek_request
>>> for item in capture_frames("traffic.pcap"):  # doctest: +SKIP
...     if isinstance(item, KafkaFrame) and item.direction == "request":
...         api_key, api_version, correlation_id = peek_request(item.data)
"""

from __future__ import annotations

from .frames import (
    DEFAULT_BROKER_PORTS,
    MAX_FRAME_SIZE,
    CaptureStats,
    ConnKey,
    FrameItem,
    FrameStats,
    KafkaFrame,
    KafkaFramer,
    MissingBytes,
    PartialFrame,
    SkippedBytes,
    capture_frames,
    iter_frames,
    peek_request,
    peek_response,
)
from .packets import PacketStats, Segment, iter_segments, parse_packet
from .pcap import CaptureFormatError, CaptureReader, Packet, read_packets
from .tcp import (
    FlowKey,
    StreamData,
    StreamEnd,
    StreamEvent,
    StreamGap,
    StreamOpen,
    TcpReassembler,
    TcpStats,
    reassemble,
)

__all__ = [
    "DEFAULT_BROKER_PORTS",
    "MAX_FRAME_SIZE",
    "CaptureFormatError",
    "CaptureReader",
    "CaptureStats",
    "ConnKey",
    "FlowKey",
    "FrameItem",
    "FrameStats",
    "KafkaFrame",
    "KafkaFramer",
    "MissingBytes",
    "Packet",
    "PacketStats",
    "PartialFrame",
    "Segment",
    "SkippedBytes",
    "StreamData",
    "StreamEnd",
    "StreamEvent",
    "StreamGap",
    "StreamOpen",
    "TcpReassembler",
    "TcpStats",
    "capture_frames",
    "iter_frames",
    "iter_segments",
    "parse_packet",
    "peek_request",
    "peek_response",
    "read_packets",
    "reassemble",
]
