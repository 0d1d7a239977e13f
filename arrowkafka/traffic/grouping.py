"""The pure-Python path from captures to grouped frames: the Python framer (``frames``), the
Python header parsers (``headers``) and pairing by a dict. Slow; it is the reference the
kernel path (``chunks`` -> ``pairing``) is tested against, frame for frame."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from arrowkafka.api import SpecSet
from arrowkafka.errors import DecodeError
from arrowkafka.schema import unknown_tags_type
from arrowkafka.traffic.columns import addr, ends_of
from arrowkafka.traffic.frames import (
    DEFAULT_BROKER_PORTS,
    CaptureStats,
    KafkaFrame,
    PartialFrame,
    SkippedBytes,
    capture_items,
)
from arrowkafka.traffic.headers import parse_request, parse_response
from arrowkafka.traffic.summary import UNMATCHED, Summary, add_item_rejects, add_reject, add_truncation_reject

__all__ = ["group_frames", "frame_columns"]


@dataclass
class _Frame:
    capture: str
    client: str
    broker: str
    ts_first: int
    ts_last: int
    size: int  # on the wire: the size prefix's 4 bytes, then the frame
    correlation_id: int
    api_version: int
    client_id: str | None
    header_tags: list[tuple[int, bytes]]
    body: bytes
    request_ts: int | None = None


def group_frames(
    captures: Sequence[str | Path],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    summary: Summary | None = None,
    rejects: list[dict[str, Any]] | None = None,
) -> dict[tuple[str, str, int], list[_Frame]]:
    """Every frame of the captures, headers parsed and responses paired with their requests,
    grouped by (direction, message, version); what cannot be framed or paired goes to
    ``rejects`` (rows of the rejects table) and is counted in ``summary``."""
    summary = Summary() if summary is None else summary
    rejects = [] if rejects is None else rejects
    groups: dict[tuple[str, str, int], list[_Frame]] = defaultdict(list)

    def stat(api: str, version: int) -> dict[str, Any]:
        return summary.per_api.setdefault(
            (api, version), {"requests": 0, "responses": 0, "bytes": 0, "rejects": 0, "latency": []}
        )

    def item_reject(capture: str, item: Any, error: str, reason: str, raw: bytes, **where: Any) -> None:
        ts = getattr(item, "ts_first_ns", None)
        where = {**ends_of(item.conn), "direction": item.direction, "ts": ts, **where}
        add_reject(summary, rejects, capture, error, reason, raw, **where)

    for capture in captures:
        name = str(capture)
        stats = CaptureStats(name=name)
        summary.capture_stats.append(stats)
        # (conn, corr) -> [order, key, ver, ts, answered] per request, in capture order: a response
        # answers the latest request made ready by its packet or before with its connection and
        # correlation id, and a request answers one response only, the first (as ``pairing.pair``
        # on the kernels' path; the order is the number of the packet that made the frame ready)
        pending: dict[tuple[Any, int], list[list[int]]] = {}
        responses: list[tuple[int, KafkaFrame]] = []
        for seq, item in capture_items(capture, broker_ports=set(broker_ports), stats=stats):
            if isinstance(item, PartialFrame | SkippedBytes):
                add_item_rejects(summary, rejects, name, item)
                continue
            if not isinstance(item, KafkaFrame):
                continue  # MissingBytes: nothing captured to keep
            summary.frames_in += 1
            if item.direction == "response":
                responses.append((seq, item))
                continue
            frame = bytes(item.data)
            try:
                header = parse_request(frame, specs)
                spec = specs.request(header.api_key)
                spec.check_version(header.api_version)
            except (DecodeError, KeyError) as e:
                reason = e.args[0] if isinstance(e, KeyError) else str(e)
                item_reject(name, item, type(e).__name__, str(reason), frame)
                continue
            pending.setdefault((item.conn, header.correlation_id), []).append(
                [seq, header.api_key, header.api_version, item.ts_first_ns, 0]
            )
            s = stat(spec.name.removesuffix("Request"), header.api_version)
            s["requests"] += 1
            s["bytes"] += len(frame) + 4
            groups[("request", spec.name, header.api_version)].append(
                _Frame(name, addr(item.conn.client_ip, item.conn.client_port),
                       addr(item.conn.server_ip, item.conn.server_port), item.ts_first_ns, item.ts_last_ns,
                       len(frame) + 4, header.correlation_id, header.api_version, header.client_id,
                       header.tags, header.body)
            )  # fmt: skip
        add_truncation_reject(summary, rejects, name, stats)
        for seq, item in responses:
            frame = bytes(item.data)
            corr = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
            asked = pending.get((item.conn, corr), []) if corr is not None else []
            at = bisect.bisect_right(asked, seq, key=lambda r: r[0]) - 1  # the latest at or before it
            if at < 0 or asked[at][4]:
                item_reject(name, item, "Unmatched", UNMATCHED, frame)
                continue
            asked[at][4] = 1
            _, api_key, version, request_ts, _ = asked[at]
            spec = specs.response(api_key)
            try:
                rheader = parse_response(frame, specs.response_header_version(api_key, version))
            except DecodeError as e:
                item_reject(name, item, type(e).__name__, str(e), frame, message=spec.name, version=version)
                continue
            s = stat(spec.name.removesuffix("Response"), version)
            s["responses"] += 1
            s["bytes"] += len(frame) + 4
            s["latency"].append([item.ts_first_ns - request_ts])
            groups[("response", spec.name, version)].append(
                _Frame(name, addr(item.conn.client_ip, item.conn.client_port),
                       addr(item.conn.server_ip, item.conn.server_port), item.ts_first_ns, item.ts_last_ns,
                       len(frame) + 4, rheader.correlation_id, version, None, rheader.tags, rheader.body,
                       request_ts)
            )  # fmt: skip
    return groups


def frame_columns(frames: list[_Frame]) -> list[pa.Array]:
    """The FRAME_COLUMNS of frames, in order."""
    latency = [None if f.request_ts is None else f.ts_first - f.request_ts for f in frames]
    return [
        pa.array([f.client for f in frames], pa.string()),
        pa.array([f.broker for f in frames], pa.string()),
        pa.array([f.ts_first for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array([f.ts_last for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array([f.size for f in frames], pa.int32()),
        pa.array([f.correlation_id for f in frames], pa.int32()),
        pa.array([f.api_version for f in frames], pa.int16()),
        pa.array([f.client_id for f in frames], pa.string()),
        pa.array([f.header_tags for f in frames], unknown_tags_type()),
        pa.array([f.request_ts for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array(latency, pa.int64()),
    ]
