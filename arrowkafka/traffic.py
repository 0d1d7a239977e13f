"""The main job: captured Kafka traffic -> one Parquet table per message type, and a summary.

capture (``arrowkafka.capture``, a chunk of frames at a time) -> headers (a kernel; the
``framing`` parsers where they are not plain) and request/response pairing -> bodies grouped
by (message, version), decoded where they lie in the chunk (``decoder.Ranges``) in the
all-versions schema -> frame columns added -> ``<Message>.parquet`` per message type and
``_rejects.parquet`` for everything that did not decode (with its reason, byte offset and raw
bytes). Every frame lands in exactly one place: frames in = rows + rejects. Memory is bounded
by the chunk, not the capture.

``frames_table`` and ``decode_frames`` are the same two stages with a frames table between
them (the Spark integration runs them as separate stages); ``group_frames`` is the pure-Python
path the tests check the kernels against.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .capture import CaptureStats, ConnKey, KafkaFrame, PartialFrame, SkippedBytes, capture_frames
from .capture.columnar import CHUNK_BYTES, Conns, FrameArrays, capture_frame_chunks
from .decoder import Ranges
from .errors import DecodeError
from .framing import parse_request, parse_response
from .kernels import capture as kc
from .kernels.tiers import expect
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
    # (api, version) -> requests, responses, bytes, rejects, and latency: a list of arrays of
    # ns, one per chunk (``latencies`` joins them)
    per_api: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    tables: dict[str, int] = field(default_factory=dict)  # message -> rows written
    capture_stats: list[CaptureStats] = field(default_factory=list)

    def latencies(self, api: str, version: int) -> np.ndarray:
        """Every response's latency (ns) for an API and version, in capture order."""
        parts = self.per_api.get((api, version), {}).get("latency", [])
        return np.concatenate([np.asarray(x, np.int64) for x in parts]) if parts else np.zeros(0, np.int64)

    def render(self) -> str:
        lines = [f"{'api':<28} {'ver':>3} {'requests':>8} {'responses':>9} {'bytes':>10} {'rejects':>7} "
                 f"{'p50 ms':>8} {'p99 ms':>8}"]  # fmt: skip
        for (api, version), s in sorted(self.per_api.items()):
            lat = self.latencies(api, version) / 1e6
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
    return f"{_ip(ip)}:{port}"


@lru_cache(maxsize=4096)
def _ip(ip: bytes) -> str:
    return ".".join(str(b) for b in ip) if len(ip) == 4 else f"[{ip.hex(':', 2)}]"


_OCTETS = pa.array([str(i) for i in range(256)], pa.string())


def _endpoints(conns: Sequence[ConnKey], start: int) -> tuple[pa.Array, pa.Array]:
    """The client and broker ``ip:port`` strings of connections ``start`` onwards: those the
    kernels took formatted as arrays (IPv4; IPv6 as ``_addr`` does), the others one by one."""
    out: tuple[list[pa.Array], list[pa.Array]] = ([], [])
    if isinstance(conns, Conns) and start < len(conns.rows):
        rows = conns.rows[start:]
        v6 = np.flatnonzero(rows[:, 32] != 4)
        for side, ip_at, port_at in ((0, 0, 33), (1, 16, 35)):
            port = (rows[:, port_at].astype(np.int64) << 8) | rows[:, port_at + 1]
            octets = [_OCTETS.take(rows[:, ip_at + j]) for j in range(4)]
            text = pc.binary_join_element_wise(
                pc.binary_join_element_wise(*octets, "."), pa.array(port).cast(pa.string()), ":"
            )
            if len(v6):
                mask = np.zeros(len(rows), np.bool_)
                mask[v6] = True
                py = [_addr(rows[i, ip_at : ip_at + 16].tobytes(), int(port[i])) for i in v6.tolist()]
                text = pc.replace_with_mask(text, pa.array(mask), pa.array(py, pa.string()))
            out[side].append(text)
        start = len(conns.rows)
    rest = [conns[i] for i in range(start, len(conns))]
    out[0].append(pa.array([_addr(c.client_ip, c.client_port) for c in rest], pa.string()))
    out[1].append(pa.array([_addr(c.server_ip, c.server_port) for c in rest], pa.string()))
    return pa.concat_arrays(out[0]), pa.concat_arrays(out[1])


def _ends(conn: ConnKey) -> dict[str, str]:
    """The client and broker columns of a _rejects row for a connection."""
    return {
        "client": _addr(conn.client_ip, conn.client_port),
        "broker": _addr(conn.server_ip, conn.server_port),
    }


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
        _reject(summary, rejects, capture, error, reason, raw, **_ends(item.conn), direction=item.direction,
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
            s["latency"].append([item.ts_first_ns - request_ts])
            groups[("response", spec.name, version)].append(
                _Frame(name, _addr(item.conn.client_ip, item.conn.client_port),
                       _addr(item.conn.server_ip, item.conn.server_port), item.ts_first_ns, item.ts_last_ns,
                       rheader.correlation_id, version, None, rheader.tags, rheader.body, request_ts)
            )  # fmt: skip
    return groups


def frames_table(
    captures: Sequence[str | Path | BinaryIO],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    summary: Summary | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[pa.Table, pa.Table]:
    """Every whole frame of the captures, header parsed and responses paired with their
    requests, as one row each (``FRAMES_SCHEMA``: where it was, what it is, its body),
    grouped by (direction, message, version) per capture, in the order the capture completed
    them within each group; and the rows of ``_rejects`` for what could not be framed, parsed
    or paired. Captures are paths or binary file objects."""
    summary = Summary() if summary is None else summary
    parts, bad = [], []
    chunks = frame_chunks(
        captures, specs, broker_ports=broker_ports, summary=summary, chunk_bytes=chunk_bytes
    )
    for frames, rejects in chunks:
        parts.append(frames)
        bad.append(rejects)
    table = pa.concat_tables(parts) if parts else FRAMES_SCHEMA.empty_table()
    if len(parts) > 1:  # chunks are grouped each: group the whole, keeping frame order

        def codes(name: str) -> np.ndarray:  # rank of each row's string among the column's
            values = table.column(name).to_numpy(zero_copy_only=False).astype(str)
            return np.unique(values, return_inverse=True)[1].ravel()

        table = table.take(
            np.lexsort((table.column("_version").to_numpy(), codes("_message"), codes("_direction")))
        )
    return table, pa.concat_tables(bad) if bad else REJECT_SCHEMA.empty_table()


def frame_chunks(
    captures: Sequence[str | Path | BinaryIO],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    summary: Summary | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """``frames_table`` a chunk of each capture at a time (memory bounded by the chunk): per
    chunk, its frames (grouped as ``frames_table`` groups them) and its rejects. A response is
    paired with its request across chunks. ``progress(capture, bytes read, file size or None)``
    is called after each chunk."""
    summary = Summary() if summary is None else summary
    for headers, rows, rejects in _row_chunks(captures, specs, broker_ports, summary, chunk_bytes, progress):
        yield headers.table(rows), rejects


def _row_chunks(
    captures: Sequence[str | Path | BinaryIO],
    specs: SpecSet,
    broker_ports: Iterable[int],
    summary: Summary,
    chunk_bytes: int,
    progress: Callable[[str, int, int | None], None] | None,
) -> Iterator[tuple[_Headers, _Rows, pa.Table]]:
    """Per chunk of each capture: its frames after their headers, and the rejects so far."""
    for capture in captures:
        name = str(capture) if isinstance(capture, str | Path) else str(getattr(capture, "name", "<stream>"))
        stats = CaptureStats()
        summary.capture_stats.append(stats)
        headers = _Headers(specs, name, summary)
        size = os.path.getsize(capture) if isinstance(capture, str | Path) else None
        for arrays in capture_frame_chunks(capture, broker_ports=frozenset(broker_ports), stats=stats,
                                           chunk_bytes=chunk_bytes):  # fmt: skip
            rows = headers.rows(arrays)
            yield headers, rows, pa.Table.from_pylist(headers.rejects, schema=REJECT_SCHEMA)
            headers.rejects = []
            if progress is not None:
                progress(name, arrays.position, size)


class _Pending(NamedTuple):
    """Requests not answered yet, carried from chunk to chunk (oldest first)."""

    conn: np.ndarray
    corr: np.ndarray
    order: np.ndarray
    key: np.ndarray
    ver: np.ndarray
    ts: np.ndarray


# Unanswered requests remembered per capture: a request that never gets an answer (a produce
# with acks=0) must not make memory grow without bound.
MAX_PENDING = 1 << 20


class _Rows(NamedTuple):
    """A chunk's frames after their headers: ``rows`` are the frames of ``a`` that are kept,
    grouped by (direction, message, version) in capture order within each group, group g
    being ``rows[bounds[g] : bounds[g + 1]]``; the other arrays are per frame of ``a``."""

    a: FrameArrays
    rows: np.ndarray
    key: np.ndarray
    ver: np.ndarray
    corr: np.ndarray
    cid_off: np.ndarray
    cid_len: np.ndarray  # -1: null
    client_ids: dict[int, str | None]  # the client ids of headers read by the Python parser
    tags: dict[int, list[tuple[int, bytes]]]
    body: np.ndarray  # where the body starts in ``a.data`` (it ends where the frame does)
    request_ts: np.ndarray
    bounds: list[int]


class _Headers:
    """One capture's ``FrameArrays`` -> rows of FRAMES_SCHEMA: headers read by a kernel where
    they are plain (by ``framing``'s parsers where not), responses paired with requests."""

    def __init__(self, specs: SpecSet, capture: str, summary: Summary):
        self.specs, self.capture, self.summary = specs, capture, summary
        self.rejects: list[dict[str, Any]] = []
        # per connection, as the _client and _broker columns show it
        self.clients, self.brokers = pa.array([], pa.string()), pa.array([], pa.string())
        self.request_hv, self.response_hv, self.names = _header_tables(specs)
        # each name's place in the sorted names (ordering rows by it is ordering them by name)
        everyone = np.concatenate(self.names).astype(str)
        place = np.unique(everyone, return_inverse=True)[1].ravel()
        self.ranks = (place[: len(self.names[0])], place[len(self.names[0]) :])
        z = np.zeros(0, np.int64)
        self.pending = _Pending(z, z, z, z, z, z)

    def reject(self, a: FrameArrays, i: int, error: str, reason: str, raw: bytes, **where: Any) -> None:
        """A frame of ``a`` to _rejects."""
        ends, direction = _ends(a.conns[int(a.conn[i])]), "request" if a.request[i] else "response"
        _reject(self.summary, self.rejects, self.capture, error, reason, raw, **ends, direction=direction,
                ts=int(a.ts_first[i]), **where)  # fmt: skip

    def table(self, r: _Rows) -> pa.Table:
        """A chunk's frames as rows of FRAMES_SCHEMA."""
        names = self.names_of(r, r.rows)
        ver = pa.array(r.ver[r.rows].astype(np.int16))
        direction = pa.array(["request", "response"], pa.string()).take(
            (~r.a.request[r.rows]).astype(np.int64)
        )
        body = _slices(r.a.data, r.body[r.rows], r.a.off[r.rows] + r.a.size[r.rows] - r.body[r.rows], None,
                       pa.binary())  # fmt: skip
        capture = pa.array([self.capture], pa.string()).take(np.zeros(len(r.rows), np.int64))
        columns = [capture, direction, names, ver, *self.frame_columns(r, r.rows), body]
        return pa.Table.from_arrays(columns, schema=FRAMES_SCHEMA)

    def rows(self, a: FrameArrays) -> _Rows:
        """The chunk's headers read and its responses paired: the frames that are kept,
        grouped by (direction, message, version); the rest to rejects. Counts go to the summary."""
        summary = self.summary
        for _, item in sorted(a.others, key=lambda x: x[0]):
            if isinstance(item, PartialFrame | SkippedBytes):
                summary.frames_in += 1
                reason = getattr(item, "reason", "partial frame")
                _reject(summary, self.rejects, self.capture, "Partial", reason, bytes(item.data),
                        **_ends(item.conn), direction=item.direction,
                        ts=getattr(item, "ts_first_ns", None))  # fmt: skip
        at = np.argsort(a.order, kind="stable")
        summary.frames_in += len(at)
        req = at[a.request[at]]
        resp = at[~a.request[at]]
        n = len(a.off)
        key, ver, corr = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        cid_off, cid_len, body = np.zeros(n, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64)
        ok = np.zeros(n, np.bool_)
        rk, rv, rc, ro, rl, rb, rs = (np.zeros(len(req), np.int64) for _ in range(7))
        kc.request_headers(a.data, a.off[req], a.size[req], self.request_hv, rk, rv, rc, ro, rl, rb, rs)
        key[req], ver[req], corr[req], cid_off[req], cid_len[req], body[req] = rk, rv, rc, ro, rl, rb
        ok[req] = rs == kc.H_OK
        client_ids: dict[int, str | None] = {}
        tags: dict[int, list[tuple[int, bytes]]] = {}
        for i in req[rs != kc.H_OK].tolist():
            frame = _frame_bytes(a, i)
            try:
                header = parse_request(frame, self.specs)
                self.specs.request(header.api_key).check_version(header.api_version)
            except (DecodeError, KeyError) as e:
                reason = e.args[0] if isinstance(e, KeyError) else str(e)
                self.reject(a, i, type(e).__name__, str(reason), frame)
                continue
            key[i], ver[i], corr[i] = header.api_key, header.api_version, header.correlation_id
            client_ids[i], tags[i] = header.client_id, header.tags
            body[i] = a.off[i] + a.size[i] - len(header.body)
            ok[i] = True
        good_req = req[ok[req]]
        # a response answers the latest request before it on its connection with its
        # correlation id, and only the first such response is taken
        word = a.data[a.off[resp][:, None] + np.arange(4)].astype(np.int64)  # responses have 4 bytes or more
        corr[resp] = ((word[:, 0] << 24) | (word[:, 1] << 16) | (word[:, 2] << 8) | word[:, 3]).astype(
            np.int32
        )
        # the requests a response may answer: those carried from earlier chunks, then this one's
        p = self.pending
        cand = _Pending(
            *(np.concatenate([old, new]) for old, new in zip(p, (a.conn[good_req], corr[good_req],
              a.order[good_req], key[good_req], ver[good_req], a.ts_first[good_req]), strict=True))
        )  # fmt: skip
        match = _pair(cand.conn, cand.corr, cand.order, a.conn[resp], corr[resp], a.order[resp])
        for j in resp[match < 0].tolist():
            self.reject(a, j, "Unmatched", "no request with this correlation id in the capture",
                        _frame_bytes(a, j))  # fmt: skip
        paired, m = resp[match >= 0], match[match >= 0]
        key[paired], ver[paired] = cand.key[m], cand.ver[m]
        request_ts = np.zeros(n, np.int64)
        request_ts[paired] = cand.ts[m]
        left = np.ones(len(cand.conn), np.bool_)
        left[m] = False
        self.pending = _Pending(*(col[left][-MAX_PENDING:] for col in cand))
        hv = self._response_hv(key[paired], ver[paired])
        plain = (hv == 0) | (
            (a.size[paired] >= 5) & (a.data[np.minimum(a.off[paired] + 4, len(a.data) - 1)] == 0)
        )
        body[paired] = a.off[paired] + 4 + hv
        ok[paired[plain]] = True
        for i in paired[~plain].tolist():
            frame = _frame_bytes(a, i)
            try:
                rheader = parse_response(frame, int(self._response_hv(key[i : i + 1], ver[i : i + 1])[0]))
            except DecodeError as e:
                self.reject(a, i, type(e).__name__, str(e), frame, message=self.names[1][int(key[i])],
                            version=int(ver[i]))  # fmt: skip
                continue
            tags[i] = rheader.tags
            body[i] = a.off[i] + a.size[i] - len(rheader.body)
            ok[i] = True
        rows = at[ok[at]]
        # grouped by (direction, message, version), frames in capture order within each
        rank = np.where(a.request[rows], self.ranks[0][key[rows]], self.ranks[1][key[rows]])
        group = (~a.request[rows]).astype(np.int64) << 40 | rank << 16 | ver[rows]
        by = np.argsort(group, kind="stable")
        rows, group = rows[by], group[by]
        bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(rows)]
        r = _Rows(a, rows, key, ver, corr, cid_off, cid_len, client_ids, tags, body, request_ts, bounds)
        self._count(r)
        return r

    def _response_hv(self, key: np.ndarray, ver: np.ndarray) -> np.ndarray:
        keys, versions = self.response_hv.shape
        inside = (key < keys) & (ver < versions)
        out = self.response_hv[np.where(inside, key, 0), np.where(inside, ver, 0)]
        for j in np.flatnonzero(~inside).tolist():
            out[j] = self.specs.response_header_version(int(key[j]), int(ver[j]))
        return out

    def _count(self, r: _Rows) -> None:
        """Per (api, version) in the summary: requests, responses, bytes, latencies."""
        a = r.a
        for lo, hi in zip(r.bounds[:-1], r.bounds[1:], strict=True):
            rows = r.rows[lo:hi]
            if not len(rows):
                continue
            first = int(rows[0])
            request = bool(a.request[first])
            name = self.names[0 if request else 1][int(r.key[first])]
            s = self.summary.per_api.setdefault(
                (name.removesuffix("Request").removesuffix("Response"), int(r.ver[first])),
                {"requests": 0, "responses": 0, "bytes": 0, "rejects": 0, "latency": []},
            )
            s["requests" if request else "responses"] += len(rows)
            s["bytes"] += int(a.size[rows].sum()) + 4 * len(rows)
            if not request:  # an int64 array per chunk (8 bytes a response; a list of ints would be 36)
                s["latency"].append(a.ts_first[rows] - r.request_ts[rows])

    def names_of(self, r: _Rows, rows: np.ndarray) -> pa.Array:
        """The message name of each of ``rows``: one string per (api key, direction), taken."""
        is_req = r.a.request[rows]
        codes, code_of = np.unique(r.key[rows] * 2 + ~is_req, return_inverse=True)
        names = pa.array([self.names[c % 2][c // 2] for c in codes.tolist()], pa.string())
        return names.take(code_of.ravel())

    def frame_columns(self, r: _Rows, rows: np.ndarray) -> list[pa.Array]:
        """The FRAME_COLUMNS of ``rows`` (frames of ``r.a``)."""
        a = r.a
        is_req = a.request[rows]
        req_ts = np.where(is_req, 0, r.request_ts[rows])
        latency = np.where(is_req, 0, a.ts_first[rows] - req_ts)
        if len(a.conns) > len(self.clients):  # connections new in this chunk
            clients, brokers = _endpoints(a.conns, len(self.clients))
            self.clients = pa.concat_arrays([self.clients, clients])
            self.brokers = pa.concat_arrays([self.brokers, brokers])
        conn = pa.array(a.conn[rows])
        cid_starts, cid_lens = r.cid_off[rows].copy(), r.cid_len[rows].copy()
        data = a.data
        if r.client_ids:  # headers the Python parser read: their client ids go after the data
            extra = bytearray()
            for j, i in enumerate(rows.tolist()):
                if i in r.client_ids:
                    cid = r.client_ids[i]
                    raw = b"" if cid is None else cid.encode()
                    cid_starts[j], cid_lens[j] = len(data) + len(extra), -1 if cid is None else len(raw)
                    extra += raw
            data = np.concatenate([data, np.frombuffer(bytes(extra), np.uint8)])
        cid_lens[~is_req] = -1
        ts_type = pa.timestamp("ns", "UTC")
        return [
            self.clients.take(conn),
            self.brokers.take(conn),
            pa.array(a.ts_first[rows]).cast(ts_type),
            pa.array(a.ts_last[rows]).cast(ts_type),
            pa.array(r.corr[rows].astype(np.int32)),
            pa.array(r.ver[rows].astype(np.int16)),
            _slices(data, cid_starts, np.maximum(cid_lens, 0), cid_lens >= 0, pa.string()),
            _tags_column(rows, r.tags),
            pa.array(req_ts, mask=is_req).cast(ts_type),
            pa.array(latency, mask=is_req),
        ]


def _frame_bytes(a: FrameArrays, i: int) -> bytes:
    return a.data[int(a.off[i]) : int(a.off[i] + a.size[i])].tobytes()


def _pair(
    conn: np.ndarray,
    corr: np.ndarray,
    order: np.ndarray,
    q_conn: np.ndarray,
    q_corr: np.ndarray,
    q_order: np.ndarray,
) -> np.ndarray:
    """For each response (``q_*``), the index of the request it answers (-1 if none): the
    latest before it with its connection and correlation id; a request answers one response
    only, the first."""
    requests = np.arange(len(conn))
    responses = np.arange(len(q_conn))
    out = np.full(len(responses), -1, np.int64)
    if not len(requests) or not len(responses):
        return out
    rkey = (conn << 32) + (corr & 0xFFFFFFFF)
    srt = np.lexsort((order, rkey))
    rkey, rord, rid = rkey[srt], order[srt], requests[srt]
    qkey = (q_conn << 32) + (q_corr & 0xFFFFFFFF)
    qord = q_order
    lo = np.searchsorted(rkey, qkey, "left")
    cand = np.searchsorted(rkey, qkey, "right") - 1
    # step back over requests completed after the response (a correlation id reused later)
    while True:
        late = (cand >= lo) & (rord[np.maximum(cand, 0)] > qord)
        if not late.any():
            break
        cand[late] -= 1
    found = cand >= lo
    # responses come in capture order: the first one to name a request takes it
    first = np.zeros(len(responses), np.bool_)
    _, at = np.unique(np.where(found, cand, -1), return_index=True)
    first[at] = True
    keep = found & first
    out[keep] = rid[cand[keep]]
    return out


def _slices(
    data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None, t: pa.DataType
) -> pa.Array:
    """A binary or string array of ``data[starts[i] : starts[i] + lengths[i]]`` (null where not
    ``valid``)."""
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    kc.gather(data, starts, starts + lengths, out)
    if offsets[-1] >= 2**31:
        t = pa.large_string() if t == pa.string() else pa.large_binary()
    else:
        offsets = offsets.astype(np.int32)
    bits = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = 0 if valid is None else int(len(valid) - valid.sum())
    array = pa.Array.from_buffers(
        t, len(starts), [bits, pa.py_buffer(offsets), pa.py_buffer(out)], null_count=nulls
    )
    if t == pa.large_binary() or t == pa.large_string():
        array = array.cast(pa.binary() if t == pa.large_binary() else pa.string())
    return array


def _tags_column(rows: np.ndarray, tags: dict[int, list[tuple[int, bytes]]]) -> pa.Array:
    if any(tags.values()):
        return pa.array([tags.get(i, []) for i in rows.tolist()], unknown_tags_type())
    t = unknown_tags_type()
    return pa.MapArray.from_arrays(
        pa.array(np.zeros(len(rows) + 1, np.int32)), pa.array([], t.key_type), pa.array([], t.item_type)
    )


# by id, with the SpecSet itself held so that its id cannot be reused by another
_TABLES: dict[int, tuple[SpecSet, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]] = {}


def _header_tables(specs: SpecSet) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Per (api key, version): the request header version (-1 where the specs have no such
    request) and the response header version; and the request and response names by key."""
    if id(specs) in _TABLES:
        return _TABLES[id(specs)][1:]
    apis = [s for s in specs.values() if s.api_key is not None and s.type in ("request", "response")]
    keys = max((s.api_key for s in apis if s.api_key is not None), default=0) + 1
    # versions past 255 (open-ended user specs) are left to the Python header parsers
    versions = min(max((s.valid_versions.hi for s in apis if not s.valid_versions.empty), default=0), 255) + 1
    req = np.full((keys, versions), -1, np.int64)
    resp = np.zeros((keys, versions), np.int64)
    names = (np.full(keys, "", object), np.full(keys, "", object))
    for s in apis:
        assert s.api_key is not None
        if s.type == "request":
            names[0][s.api_key] = s.name
            for v in range(s.valid_versions.lo, min(s.valid_versions.hi + 1, versions)):
                req[s.api_key, v] = specs.request_header_version(s.api_key, v)
        else:
            names[1][s.api_key] = s.name
            for v in range(s.valid_versions.lo, min(s.valid_versions.hi + 1, versions)):
                resp[s.api_key, v] = specs.response_header_version(s.api_key, v)
    _TABLES[id(specs)] = (specs, req, resp, names)
    return req, resp, names


def decode_frames(
    frames: pa.Table, specs: SpecSet, *, summary: Summary | None = None
) -> tuple[dict[str, pa.Table], pa.Table]:
    """Decode the bodies of a ``frames_table``, one batch per (message, version), into one
    table per message type (the all-versions schema after the frame columns); bodies that do
    not decode become rows of ``_rejects``."""
    summary = Summary() if summary is None else summary
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    rejects: list[pa.Table] = []
    expect(frames.column("_body").nbytes)  # many small batches of one big job
    if len(frames):
        # groups ordered as frames_table orders them (direction, message, version), rows in
        # frame order within each, so that its frames need no reordering; each group a slice
        names = frames.column("_message").combine_chunks().dictionary_encode()
        codes = np.asarray(names.indices)
        rank = np.argsort(np.argsort(np.asarray(names.dictionary.to_pylist(), object)))
        responses = pc.equal(frames.column("_direction"), "response").to_numpy(zero_copy_only=False)
        versions = frames.column("_version").to_numpy().astype(np.int64)
        key = (responses.astype(np.int64) * len(rank) + rank[codes]) * 65536 + versions
        if (np.diff(key) < 0).any():  # frames_table gives each capture's frames grouped
            order = np.argsort(key, kind="stable")
            frames, key, versions = frames.take(order), key[order], versions[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(key)], strict=True):
            group = frames.slice(lo, hi - lo)
            message, version = str(frames["_message"][lo]), int(versions[lo])
            # copies of the rows, not slices: a slice would keep the whole chunk's columns alive
            bodies, frame = (
                group.column("_body").combine_chunks(),
                group.select(["_capture", *FRAME_COLUMNS.names]),
            )
            _decode_group(specs, summary, message, version, bodies, frame, tables, rejects, copy=True)
    return (
        {message: pa.concat_tables(parts) for message, parts in tables.items()},
        pa.concat_tables(rejects) if rejects else REJECT_SCHEMA.empty_table(),
    )


def _decode_rows(
    headers: _Headers, r: _Rows, specs: SpecSet, summary: Summary
) -> tuple[dict[str, list[pa.Table]], list[pa.Table]]:
    """``decode_frames`` for a chunk's rows straight from their arrays: each group's bodies
    are decoded where they lie in the chunk's buffer, and no frames table is built."""
    a = r.a
    frame = pa.Table.from_arrays(headers.frame_columns(r, r.rows), schema=FRAME_COLUMNS)
    ends = a.off + a.size
    expect(int((ends[r.rows] - r.body[r.rows]).sum()))  # many small batches of one big job
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    rejects: list[pa.Table] = []
    for lo, hi in zip(r.bounds[:-1], r.bounds[1:], strict=True):
        if lo == hi:
            continue
        rows = r.rows[lo:hi]
        first = int(rows[0])
        message = headers.names[0 if a.request[first] else 1][int(r.key[first])]
        bodies = Ranges(a.data, r.body[rows], ends[rows])
        _decode_group(specs, summary, message, int(r.ver[first]), bodies, frame.slice(lo, hi - lo), tables,
                      rejects, copy=False, capture=headers.capture)  # fmt: skip
    return tables, rejects


def _decode_group(
    specs: SpecSet,
    summary: Summary,
    message: str,
    version: int,
    bodies: pa.Array | Ranges,
    frame: pa.Table,
    tables: dict[str, list[pa.Table]],
    rejects: list[pa.Table],
    *,
    copy: bool,
    capture: str | None = None,
) -> None:
    """Decode one (message, version) group of bodies, with ``frame`` their FRAME_COLUMNS (and
    ``_capture`` unless ``capture`` names it): rows to ``tables[message]``, bodies that do not
    decode to ``rejects``. ``copy``: the rows kept are copies even when all decode."""
    n = len(bodies.starts) if isinstance(bodies, Ranges) else len(bodies)
    work = [(version, np.arange(n))]
    while work:
        v, pos = work.pop(0)
        sub = bodies if len(pos) == n else bodies.take(pos)
        batch, bad = specs.decode(sub, message, v, errors="null", all_versions=True)
        body = pa.Table.from_batches([batch])
        if bad.num_rows:
            index = bad.column("index").to_numpy()
            if message == "ApiVersionsResponse" and v > 0:
                # A broker answers an ApiVersions version it does not know with an error in the
                # v0 layout, and clients read it so (Kafka's ApiVersionsResponse.parse): so do we.
                retry = np.array([_v0_error(specs, b) for b in bad.column("body").to_pylist()], np.bool_)
                if retry.any():
                    work.append((0, pos[index[retry]]))
            else:
                retry = np.zeros(len(index), np.bool_)
            if not retry.all():
                rejects.append(_body_rejects(summary, message, v, bad.filter(pa.array(~retry)),
                                             frame.take(pos[index[~retry]]), capture))  # fmt: skip
            good = np.ones(len(pos), np.bool_)
            good[index] = False
            body, pos = body.filter(pa.array(good)), pos[good]
        kept = frame.take(pos) if copy or len(pos) != n else frame
        body = body.cast(specs.arrow_schema(message))  # rows of rejected bodies are gone: not nullable
        summary.rows += kept.num_rows
        schema = pa.schema([*FRAME_COLUMNS, *body.schema], metadata=body.schema.metadata)
        tables[message].append(pa.Table.from_arrays([*kept.select(FRAME_COLUMNS.names).columns,
                                                     *body.columns], schema=schema))  # fmt: skip


def _body_rejects(
    summary: Summary, message: str, version: int, bad: pa.Table, frame: pa.Table, capture: str | None
) -> pa.Table:
    """Rows of _rejects for bodies that did not decode (``bad``: the decoder's rejects; ``frame``
    their frames' columns)."""
    n = bad.num_rows
    summary.rejects += n
    stat = summary.per_api.get((message.removesuffix("Request").removesuffix("Response"), version))
    if stat is not None:
        stat["rejects"] += n
    direction = "request" if message.endswith("Request") else "response"
    columns = [
        pa.repeat(pa.scalar(capture, pa.string()), n) if capture is not None else frame.column("_capture"),
        frame.column("_client"),
        frame.column("_broker"),
        pa.repeat(pa.scalar(direction, pa.string()), n),
        frame.column("_ts_first"),
        pa.repeat(pa.scalar(message, pa.string()), n),
        pa.repeat(pa.scalar(version, pa.int16()), n),
        *bad.select(["error", "reason", "path", "offset", "body"]).columns,
    ]
    return pa.Table.from_arrays(columns, schema=REJECT_SCHEMA)


# Decoded rows held, over all tables, before each table's are written as a row group, counted
# by the bytes of the frames they came from: few, large row groups, whose count is what the
# writers keep in memory until they close.
HELD_BYTES = 64 << 20


def decode_capture(
    captures: Sequence[str | Path | BinaryIO],
    outdir: str | Path | None,
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> Summary:
    """Decode captures into Parquet tables under ``outdir`` (nothing written if None): a chunk
    at a time, each chunk's rows appended to the tables as a row group, so memory is bounded
    by the chunk whatever the capture's size. ``progress``: see ``frame_chunks``."""
    summary = Summary()
    out = None if outdir is None else Path(outdir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    writers: dict[str, pq.ParquetWriter] = {}
    held: dict[str, list[pa.Table]] = defaultdict(list)  # rows not written yet, per message
    held_bytes = 0

    def write(message: str, schema: pa.Schema) -> None:
        # few, large row groups: each costs metadata kept in memory until the file is closed
        if out is not None and held[message]:
            if message not in writers:
                writers[message] = pq.ParquetWriter(
                    out / f"{message}.parquet", schema, **_writer_options(schema)
                )
            writers[message].write_table(pa.concat_tables(held[message]))
        held[message] = []

    try:
        chunks = _row_chunks(captures, specs, broker_ports, summary, chunk_bytes, progress)
        for headers, rows, rejects in chunks:
            tables, bad = _decode_rows(headers, rows, specs, summary)
            held["_rejects"] += [rejects, *bad]
            for message, parts in tables.items():
                summary.tables[message] = summary.tables.get(message, 0) + sum(t.num_rows for t in parts)
                held[message] += parts
            held_bytes += len(rows.a.data)
            if held_bytes >= HELD_BYTES:
                for message, parts in list(held.items()):
                    if parts:
                        write(message, parts[0].schema)
                held_bytes = 0
        for message, parts in list(held.items()):
            if parts:
                write(message, parts[0].schema)
        if out is not None and "_rejects" not in writers:
            pq.write_table(REJECT_SCHEMA.empty_table(), out / "_rejects.parquet")
    finally:
        for w in writers.values():
            w.close()
    return summary


def _writer_options(schema: pa.Schema) -> dict[str, Any]:
    """How a table is written: dictionaries for its strings and binaries only; statistics for
    its top-level columns only (what readers skip row groups by: times, ids, versions); values
    handed to the encoders 64K at a time, not 1K. (80 MB of capture: writing 254 to 230 ms.)"""
    return {
        "use_dictionary": _byte_array_columns(schema),
        "write_statistics": [f.name for f in schema if not pa.types.is_nested(f.type)],
        "write_batch_size": 1 << 16,
    }


def _byte_array_columns(schema: pa.Schema) -> list[str]:
    """The Parquet paths of the string and binary leaves of ``schema``: the columns worth a
    dictionary (hosts, topics, client ids repeat). Numbers are written plain: dictionaries for
    every leaf of the nested tables cost 15% of the writing, for little size."""
    out: list[str] = []

    def walk(path: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{path}.{f.name}", f.type)
        elif pa.types.is_map(t):
            walk(f"{path}.key_value.key", t.key_type)
            walk(f"{path}.key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{path}.list.element", t.value_type)
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            out.append(path)

    for f in schema:
        walk(f.name, f.type)
    return out


def bound_heap() -> None:
    """Fix glibc's mmap threshold at 4 MB: blocks that large come from the system and go back
    to it at once; smaller ones from the heap, whose freed memory the next chunk reuses. Left
    to itself glibc raises the threshold as large blocks are freed, after which each chunk's
    arrays come from a heap that fragments, and the process's memory grows with the capture
    though nothing is kept (measured: 80 -> 240 MB of capture, 630 -> 950 MB peak; fixed: 560
    -> 680, the growth being the connections'). A lower threshold (we had 128 KB) keeps memory
    as flat but maps every mid-sized array afresh, and this machine spends 4-5 microseconds on
    each page's first write: a fifth of the time (240 MB: 50 MB/s, against 63 at 4 MB). And
    the heap keeps up to 64 MB freed at its top, not 128 KB: each chunk's mid-sized arrays
    would otherwise fault in pages the last chunk gave back (80 MB of capture: a third fewer
    page faults, 5-10% faster; the peak as before). Process-wide settings, so the CLI makes
    them, not the library."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
    except OSError:
        pass  # not glibc: nothing to do


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
