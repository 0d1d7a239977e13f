"""The main job: captured Kafka traffic -> one Parquet table per message type, and a summary.

capture (``arrowkafka.capture``) -> frames -> headers (``framing``) -> bodies grouped by
(message, version) -> batch decode in the all-versions schema -> frame columns added ->
``<Message>.parquet`` per message type and ``_rejects.parquet`` for everything that did not
decode (with its reason, byte offset and raw bytes). Every frame lands in exactly one place:
frames in = rows + rejects.

This first version holds one capture's frames in memory; streaming in bounded chunks is the
capture issue's work.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .capture import CaptureStats, KafkaFrame, PartialFrame, SkippedBytes, capture_frames
from .errors import DecodeError
from .framing import parse_request, parse_response
from .schema import unknown_tags_type
from .specset import SpecSet

__all__ = [
    "Summary",
    "decode_capture",
    "decode_frames",
    "frames_table",
    "FRAME_COLUMNS",
    "FRAMES_SCHEMA",
    "REJECT_SCHEMA",
]

FRAME_COLUMNS = pa.schema(
    [
        pa.field("_client", pa.string(), nullable=False, metadata={"about": "client ip:port"}),
        pa.field("_broker", pa.string(), nullable=False, metadata={"about": "broker ip:port"}),
        pa.field("_ts_first", pa.timestamp("ns", "UTC"), nullable=False),
        pa.field("_ts_last", pa.timestamp("ns", "UTC"), nullable=False),
        pa.field("_correlation_id", pa.int32(), nullable=False),
        pa.field(
            "_api_version", pa.int16(), nullable=False, metadata={"about": "the request header's api version"}
        ),
        pa.field("_client_id", pa.string()),
        pa.field("_header_tags", unknown_tags_type(), nullable=False),
        pa.field("_request_ts", pa.timestamp("ns", "UTC")),
        # int64 ns, not duration: Parquet has no duration type and readers see a bare int64
        pa.field(
            "_latency_ns", pa.int64(), metadata={"about": "response first segment - request first segment"}
        ),
    ]
)
# One row per whole frame, before its body is decoded (``frames_table``).
FRAMES_SCHEMA = pa.schema(
    [
        pa.field("_capture", pa.string(), nullable=False),
        pa.field("_direction", pa.string(), nullable=False, metadata={"about": "request or response"}),
        pa.field("_message", pa.string(), nullable=False, metadata={"about": "the body's message type"}),
        pa.field("_version", pa.int16(), nullable=False, metadata={"about": "the body's version"}),
        *FRAME_COLUMNS,
        pa.field("_body", pa.binary(), nullable=False, metadata={"about": "the frame after its header"}),
    ]
)
REJECT_SCHEMA = pa.schema(
    [
        pa.field("capture", pa.string(), nullable=False),
        pa.field("client", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("ts", pa.timestamp("ns", "UTC")),
        pa.field("message", pa.string()),
        pa.field("version", pa.int16()),
        pa.field("error", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("raw", pa.binary()),
    ]
)


@dataclass
class _Frame:
    capture: str
    client: str
    broker: str
    ts_first: int
    ts_last: int
    correlation_id: int
    api_version: int
    client_id: str | None
    header_tags: list[tuple[int, bytes]]
    body: bytes
    request_ts: int | None = None


@dataclass
class Summary:
    """What the job saw and wrote."""

    frames_in: int = 0
    rows: int = 0
    rejects: int = 0
    per_api: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)  # message -> rows written
    capture_stats: list[CaptureStats] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"{'api':<28} {'ver':>3} {'requests':>8} {'responses':>9} {'bytes':>10} {'rejects':>7} "
                 f"{'p50 ms':>8} {'p99 ms':>8}"]  # fmt: skip
        for (api, version), s in sorted(self.per_api.items()):
            lat = np.asarray(s["latency"], dtype=np.float64) / 1e6
            p50, p99 = (
                (f"{np.percentile(lat, 50):8.2f}", f"{np.percentile(lat, 99):8.2f}")
                if lat.size
                else ("-", "-")
            )
            lines.append(f"{api:<28} {version:>3} {s['requests']:>8} {s['responses']:>9} {s['bytes']:>10} "
                         f"{s['rejects']:>7} {p50:>8} {p99:>8}")  # fmt: skip
        lines.append(
            f"\nframes in {self.frames_in} = rows {self.rows} + rejects {self.rejects}"
            f" ({'all accounted for' if self.frames_in == self.rows + self.rejects else 'MISMATCH'})"
        )
        return "\n".join(lines)


def _addr(ip: bytes, port: int) -> str:
    if len(ip) == 4:
        return f"{'.'.join(str(b) for b in ip)}:{port}"
    return f"[{ip.hex(':', 2)}]:{port}"


def _reject(
    summary: Summary,
    rejects: list[dict[str, Any]],
    capture: str,
    error: str,
    reason: str,
    raw: bytes,
    **where: Any,
) -> None:
    """One row of _rejects; ``where`` holds the REJECT_SCHEMA columns that are known."""
    summary.rejects += 1
    rejects.append({"capture": capture, "error": error, "reason": reason, "raw": raw, **where})


def group_frames(
    captures: Sequence[str | Path],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    summary: Summary | None = None,
    rejects: list[dict[str, Any]] | None = None,
) -> dict[tuple[str, str, int], list[_Frame]]:
    """Every frame of the captures, headers parsed and responses paired with their requests,
    grouped by (direction, message, version); what cannot be framed or paired goes to
    ``rejects`` (rows of the _rejects table) and is counted in ``summary``."""
    summary = Summary() if summary is None else summary
    rejects = [] if rejects is None else rejects
    groups: dict[tuple[str, str, int], list[_Frame]] = defaultdict(list)

    def stat(api: str, version: int) -> dict[str, Any]:
        return summary.per_api.setdefault(
            (api, version), {"requests": 0, "responses": 0, "bytes": 0, "rejects": 0, "latency": []}
        )

    def item_reject(capture: str, item: Any, error: str, reason: str, raw: bytes, **where: Any) -> None:
        conn = item.conn
        _reject(summary, rejects, capture, error, reason, raw, client=_addr(conn.client_ip, conn.client_port),
               broker=_addr(conn.server_ip, conn.server_port), direction=item.direction,
               ts=getattr(item, "ts_first_ns", None), **where)  # fmt: skip

    for capture in captures:
        name = str(capture)
        stats = CaptureStats()
        summary.capture_stats.append(stats)
        pending: dict[tuple[Any, int], tuple[int, int, int]] = {}  # (conn, corr) -> (key, ver, ts)
        responses: list[KafkaFrame] = []
        for item in capture_frames(capture, broker_ports=set(broker_ports), stats=stats):
            if isinstance(item, PartialFrame | SkippedBytes):
                summary.frames_in += 1
                item_reject(name, item, "Partial", getattr(item, "reason", "partial frame"), bytes(item.data))
                continue
            if not isinstance(item, KafkaFrame):
                continue  # MissingBytes: nothing captured to keep
            summary.frames_in += 1
            if item.direction == "response":
                responses.append(item)
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
            pending[(item.conn, header.correlation_id)] = (
                header.api_key,
                header.api_version,
                item.ts_first_ns,
            )
            s = stat(spec.name.removesuffix("Request"), header.api_version)
            s["requests"] += 1
            s["bytes"] += len(frame) + 4
            groups[("request", spec.name, header.api_version)].append(
                _Frame(name, _addr(item.conn.client_ip, item.conn.client_port),
                       _addr(item.conn.server_ip, item.conn.server_port), item.ts_first_ns, item.ts_last_ns,
                       header.correlation_id, header.api_version, header.client_id, header.tags, header.body)
            )  # fmt: skip
        for item in responses:
            frame = bytes(item.data)
            corr = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
            match = pending.pop((item.conn, corr), None) if corr is not None else None
            if match is None:
                item_reject(
                    name, item, "Unmatched", "no request with this correlation id in the capture", frame
                )
                continue
            api_key, version, request_ts = match
            spec = specs.response(api_key)
            try:
                rheader = parse_response(frame, specs.response_header_version(api_key, version))
            except DecodeError as e:
                item_reject(name, item, type(e).__name__, str(e), frame, message=spec.name, version=version)
                continue
            s = stat(spec.name.removesuffix("Response"), version)
            s["responses"] += 1
            s["bytes"] += len(frame) + 4
            s["latency"].append(item.ts_first_ns - request_ts)
            groups[("response", spec.name, version)].append(
                _Frame(name, _addr(item.conn.client_ip, item.conn.client_port),
                       _addr(item.conn.server_ip, item.conn.server_port), item.ts_first_ns, item.ts_last_ns,
                       rheader.correlation_id, version, None, rheader.tags, rheader.body, request_ts)
            )  # fmt: skip
    return groups


def frames_table(
    captures: Sequence[str | Path],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    summary: Summary | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Every whole frame of the captures, header parsed and responses paired with their
    requests, as one row each (``FRAMES_SCHEMA``: where it was, what it is, its body), and
    the rows of ``_rejects`` for what could not be framed, parsed or paired."""
    summary = Summary() if summary is None else summary
    rejects: list[dict[str, Any]] = []
    groups = group_frames(captures, specs, broker_ports=broker_ports, summary=summary, rejects=rejects)
    keys = [key for key, fs in sorted(groups.items()) for _ in fs]
    frames = [f for _, fs in sorted(groups.items()) for f in fs]
    columns = [
        pa.array([f.capture for f in frames], pa.string()),
        pa.array([k[0] for k in keys], pa.string()),
        pa.array([k[1] for k in keys], pa.string()),
        pa.array([k[2] for k in keys], pa.int16()),
        *_frame_columns(frames),
        pa.array([f.body for f in frames], pa.binary()),
    ]
    table = pa.Table.from_arrays(columns, schema=FRAMES_SCHEMA)
    return table, pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA)


def decode_frames(
    frames: pa.Table, specs: SpecSet, *, summary: Summary | None = None
) -> tuple[dict[str, pa.Table], pa.Table]:
    """Decode the bodies of a ``frames_table``, one batch per (message, version), into one
    table per message type (the all-versions schema after the frame columns); bodies that do
    not decode become rows of ``_rejects``."""
    summary = Summary() if summary is None else summary
    rejects: list[dict[str, Any]] = []
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    messages = frames.column("_message").to_numpy(zero_copy_only=False)
    versions = frames.column("_version").to_numpy()
    work = []
    if len(frames):
        # groups in (message, version) order, rows in frame order within each
        names, codes = np.unique(messages.astype(str), return_inverse=True)
        uniq, inverse = np.unique(codes.astype(np.int64) * 65536 + versions, return_inverse=True)
        for k, key in enumerate(uniq):
            rows = np.flatnonzero(inverse == k)
            work.append((str(names[key // 65536]), int(key % 65536), frames.take(rows)))
    while work:
        message, version, group = work.pop(0)
        bodies = group.column("_body").combine_chunks()
        batch, bad = specs.decode(bodies, message, version, errors="null", all_versions=True)
        good = np.ones(len(group), dtype=bool)
        retry: list[int] = []
        for row in bad.to_pylist():
            i = row["index"]
            good[i] = False
            body = bodies[i].as_py()
            if message == "ApiVersionsResponse" and version > 0 and _v0_error(specs, body):
                # A broker answers an ApiVersions version it does not know with an error in the
                # v0 layout, and clients read it so (Kafka's ApiVersionsResponse.parse): so do we.
                retry.append(i)
                continue
            stat = summary.per_api.get((message.removesuffix("Request").removesuffix("Response"), version))
            if stat is not None:
                stat["rejects"] += 1
            direction = "request" if message.endswith("Request") else "response"
            f = group.slice(i, 1).to_pylist()[0]
            _reject(summary, rejects, f["_capture"], row["error"], row["reason"], body, client=f["_client"],
                    broker=f["_broker"], ts=f["_ts_first"], direction=direction, message=message,
                    version=version, path=row["path"], offset=row["offset"])  # fmt: skip
        if retry:
            work.append((message, 0, group.take(retry)))
        body = pa.Table.from_batches([batch]).filter(pa.array(good))
        body = body.cast(specs.arrow_schema(message))  # rows of rejected bodies are gone: not nullable
        kept = group.filter(pa.array(good)).select(FRAME_COLUMNS.names).cast(FRAME_COLUMNS)
        summary.rows += kept.num_rows
        out = kept
        for i, name in enumerate(body.column_names):
            out = out.append_column(body.schema.field(i), body.column(name))
        tables[message].append(out.replace_schema_metadata(body.schema.metadata))
    return (
        {message: pa.concat_tables(parts) for message, parts in tables.items()},
        pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA),
    )


def decode_capture(
    captures: Sequence[str | Path],
    outdir: str | Path | None,
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
) -> Summary:
    """Decode captures into Parquet tables under ``outdir`` (nothing written if None)."""
    summary = Summary()
    frames, rejects = frames_table(captures, specs, broker_ports=broker_ports, summary=summary)
    tables, bad = decode_frames(frames, specs, summary=summary)
    for message, table in tables.items():
        summary.tables[message] = table.num_rows
        if outdir is not None:
            Path(outdir).mkdir(parents=True, exist_ok=True)
            pq.write_table(table, Path(outdir) / f"{message}.parquet")
    if outdir is not None:
        Path(outdir).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables([rejects, bad]), Path(outdir) / "_rejects.parquet")
    return summary


def _v0_error(specs: SpecSet, body: bytes) -> bool:
    """Does the body read as an ApiVersionsResponse v0 carrying an error?"""
    try:
        batch = specs.decode([body], "ApiVersionsResponse", 0)
    except DecodeError:
        return False
    assert isinstance(batch, pa.RecordBatch)
    return bool(batch.column("error_code")[0].as_py())


def _frame_columns(frames: list[_Frame]) -> list[pa.Array]:
    """The FRAME_COLUMNS of frames, in order."""
    latency = [None if f.request_ts is None else f.ts_first - f.request_ts for f in frames]
    return [
        pa.array([f.client for f in frames], pa.string()),
        pa.array([f.broker for f in frames], pa.string()),
        pa.array([f.ts_first for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array([f.ts_last for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array([f.correlation_id for f in frames], pa.int32()),
        pa.array([f.api_version for f in frames], pa.int16()),
        pa.array([f.client_id for f in frames], pa.string()),
        pa.array([f.header_tags for f in frames], unknown_tags_type()),
        pa.array([f.request_ts for f in frames], pa.int64()).cast(pa.timestamp("ns", "UTC")),
        pa.array(latency, pa.int64()),
    ]
