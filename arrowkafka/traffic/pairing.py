"""Frames to rows: each chunk's request headers read (``headers``), responses paired with the
requests they answer (carried from chunk to chunk), and the frames kept grouped by
(direction, message, version), as the frames table or straight for ``decode``.

A response answers the latest request before it on its connection with its correlation id,
and a request answers one response only, the first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import pyarrow as pa

from arrowkafka.api import SpecSet
from arrowkafka.traffic.chunks import CHUNK_BYTES, FrameArrays, capture_frame_chunks
from arrowkafka.traffic.columns import FRAMES_SCHEMA, REJECT_SCHEMA, endpoints, ends_of, slices, tags_column
from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS, CaptureStats, PartialFrame, SkippedBytes
from arrowkafka.traffic.headers import (
    FrameHeaders,
    frame_bytes,
    header_tables,
    read_request_headers,
    read_response_headers,
)
from arrowkafka.traffic.summary import UNMATCHED, Summary, add_item_rejects, add_reject, add_truncation_reject

__all__ = ["frames_table", "frame_chunks", "row_chunks", "Pairing", "Rows", "pair"]


def frames_table(
    captures: Sequence[str | Path | BinaryIO],
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    summary: Summary | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> tuple[pa.Table, pa.Table]:
    """Every whole frame of the captures, header parsed and responses paired with their
    requests, as one row each (``FRAMES_SCHEMA``: where it was, what it is, its body),
    grouped by (direction, message, version) per capture, in the order the capture completed
    them within each group; and the rows of ``rejects`` for what could not be framed, parsed
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
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    summary: Summary | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """``frames_table`` a chunk of each capture at a time (memory bounded by the chunk): per
    chunk, its frames (grouped as ``frames_table`` groups them) and its rejects. A response is
    paired with its request across chunks. ``progress(capture, bytes read, file size or None)``
    is called after each chunk."""
    summary = Summary() if summary is None else summary
    for headers, rows, rejects in row_chunks(captures, specs, broker_ports, summary, chunk_bytes, progress):
        yield headers.table(rows), rejects


def row_chunks(
    captures: Sequence[str | Path | BinaryIO],
    specs: SpecSet,
    broker_ports: Iterable[int],
    summary: Summary,
    chunk_bytes: int,
    progress: Callable[[str, int, int | None], None] | None,
) -> Iterator[tuple[Pairing, Rows, pa.Table]]:
    """Per chunk of each capture: its frames after their headers, and the rejects so far."""
    for capture in captures:
        name = str(capture) if isinstance(capture, str | Path) else str(getattr(capture, "name", "<stream>"))
        stats = CaptureStats(name=name)
        summary.capture_stats.append(stats)
        headers = Pairing(specs, name, summary)
        size = os.path.getsize(capture) if isinstance(capture, str | Path) else None
        chunks = capture_frame_chunks(capture, broker_ports=frozenset(broker_ports), stats=stats,
                                      chunk_bytes=chunk_bytes)  # fmt: skip
        for arrays in chunks:
            rows = headers.rows(arrays)
            yield headers, rows, pa.Table.from_pylist(headers.rejects, schema=REJECT_SCHEMA)
            headers.rejects = []
            if progress is not None:
                progress(name, arrays.position, size)
        if stats.truncated_bytes or stats.broken_offset is not None:
            # the file was cut, or its framing broke: known once it is read; a chunk of no frames says so
            rows = headers.rows(FrameArrays.empty([]))
            add_truncation_reject(summary, headers.rejects, name, stats)
            yield headers, rows, pa.Table.from_pylist(headers.rejects, schema=REJECT_SCHEMA)
            headers.rejects = []


class Pending(NamedTuple):
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


class Rows(NamedTuple):
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


class Pairing:
    """One capture's ``FrameArrays`` -> rows of FRAMES_SCHEMA: headers read by a kernel where
    they are plain (by ``headers``' parsers where not), responses paired with requests."""

    def __init__(self, specs: SpecSet, capture: str, summary: Summary):
        self.specs, self.capture, self.summary = specs, capture, summary
        self.rejects: list[dict[str, Any]] = []
        # per connection, as the _client and _broker columns show it
        self.clients, self.brokers = pa.array([], pa.string()), pa.array([], pa.string())
        self.request_hv, self.response_hv, self.names = header_tables(specs)
        # each name's place in the sorted names (ordering rows by it is ordering them by name)
        everyone = np.concatenate(self.names).astype(str)
        place = np.unique(everyone, return_inverse=True)[1].ravel()
        self.ranks = (place[: len(self.names[0])], place[len(self.names[0]) :])
        z = np.zeros(0, np.int64)
        self.pending = Pending(z, z, z, z, z, z)

    def reject(self, a: FrameArrays, i: int, error: str, reason: str, raw: bytes, **where: Any) -> None:
        """A frame of ``a`` to rejects."""
        ends, direction = ends_of(a.conns[int(a.conn[i])]), "request" if a.request[i] else "response"
        where = {**ends, "direction": direction, "ts": int(a.ts_first[i]), **where}
        add_reject(self.summary, self.rejects, self.capture, error, reason, raw, **where)

    def table(self, r: Rows) -> pa.Table:
        """A chunk's frames as rows of FRAMES_SCHEMA."""
        names = self.names_of(r, r.rows)
        ver = pa.array(r.ver[r.rows].astype(np.int16))
        direction = pa.array(["request", "response"], pa.string()).take(
            (~r.a.request[r.rows]).astype(np.int64)
        )
        ends = r.a.off[r.rows] + r.a.size[r.rows]
        body = slices(r.a.data, r.body[r.rows], ends - r.body[r.rows], None, pa.binary())
        capture = pa.array([self.capture], pa.string()).take(np.zeros(len(r.rows), np.int64))
        columns = [capture, direction, names, ver, *self.frame_columns(r, r.rows), body]
        return pa.Table.from_arrays(columns, schema=FRAMES_SCHEMA)

    def rows(self, a: FrameArrays) -> Rows:
        """The chunk's headers read and its responses paired: the frames that are kept,
        grouped by (direction, message, version); the rest to rejects. Counts go to the summary."""
        summary = self.summary
        for _, item in sorted(a.others, key=lambda x: x[0]):
            if isinstance(item, PartialFrame | SkippedBytes):
                add_item_rejects(summary, self.rejects, self.capture, item)
        at = np.argsort(a.order, kind="stable")
        summary.frames_in += len(at)
        req = at[a.request[at]]
        resp = at[~a.request[at]]
        h = FrameHeaders(len(a.off))
        read_request_headers(a, req, h, self.specs, self.request_hv, self.reject)
        key, ver, corr, ok = h.key, h.ver, h.corr, h.ok
        good_req = req[ok[req]]
        # a response answers the latest request before it on its connection with its
        # correlation id, and only the first such response is taken
        word = a.data[a.off[resp][:, None] + np.arange(4)].astype(np.int64)  # responses have 4 bytes or more
        corr[resp] = ((word[:, 0] << 24) | (word[:, 1] << 16) | (word[:, 2] << 8) | word[:, 3]).astype(
            np.int32
        )
        # the requests a response may answer: those carried from earlier chunks, then this one's
        p = self.pending
        cand = Pending(
            *(np.concatenate([old, new]) for old, new in zip(p, (a.conn[good_req], corr[good_req],
              a.order[good_req], key[good_req], ver[good_req], a.ts_first[good_req]), strict=True))
        )  # fmt: skip
        match = pair(cand.conn, cand.corr, cand.order, a.conn[resp], corr[resp], a.order[resp])
        for j in resp[match < 0].tolist():
            self.reject(a, j, "Unmatched", UNMATCHED,
                        frame_bytes(a, j))  # fmt: skip
        paired, m = resp[match >= 0], match[match >= 0]
        key[paired], ver[paired] = cand.key[m], cand.ver[m]
        request_ts = np.zeros(len(a.off), np.int64)
        request_ts[paired] = cand.ts[m]
        left = np.ones(len(cand.conn), np.bool_)
        left[m] = False
        self.pending = Pending(*(col[left][-MAX_PENDING:] for col in cand))
        hv = self._response_hv(key[paired], ver[paired])
        read_response_headers(a, paired, hv, h, self.reject, self.names[1])
        rows = at[ok[at]]
        # grouped by (direction, message, version), frames in capture order within each
        rank = np.where(a.request[rows], self.ranks[0][key[rows]], self.ranks[1][key[rows]])
        group = (~a.request[rows]).astype(np.int64) << 40 | rank << 16 | ver[rows]
        by = np.argsort(group, kind="stable")
        rows, group = rows[by], group[by]
        bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(rows)]
        r = Rows(
            a, rows, key, ver, corr, h.cid_off, h.cid_len, h.client_ids, h.tags, h.body, request_ts, bounds
        )
        self._count(r)
        return r

    def _response_hv(self, key: np.ndarray, ver: np.ndarray) -> np.ndarray:
        keys, versions = self.response_hv.shape
        inside = (key < keys) & (ver < versions)
        out = self.response_hv[np.where(inside, key, 0), np.where(inside, ver, 0)]
        for j in np.flatnonzero(~inside).tolist():
            out[j] = self.specs.response_header_version(int(key[j]), int(ver[j]))
        return out

    def _count(self, r: Rows) -> None:
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

    def names_of(self, r: Rows, rows: np.ndarray) -> pa.Array:
        """The message name of each of ``rows``: one string per (api key, direction), taken."""
        is_req = r.a.request[rows]
        codes, code_of = np.unique(r.key[rows] * 2 + ~is_req, return_inverse=True)
        names = pa.array([self.names[c % 2][c // 2] for c in codes.tolist()], pa.string())
        return names.take(code_of.ravel())

    def frame_columns(self, r: Rows, rows: np.ndarray) -> list[pa.Array]:
        """The FRAME_COLUMNS of ``rows`` (frames of ``r.a``)."""
        a = r.a
        is_req = a.request[rows]
        req_ts = np.where(is_req, 0, r.request_ts[rows])
        latency = np.where(is_req, 0, a.ts_first[rows] - req_ts)
        if len(a.conns) > len(self.clients):  # connections new in this chunk
            clients, brokers = endpoints(a.conns, len(self.clients))
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
            pa.array((a.size[rows] + 4).astype(np.int32)),  # the size prefix, then the frame
            pa.array(r.corr[rows].astype(np.int32)),
            pa.array(r.ver[rows].astype(np.int16)),
            slices(data, cid_starts, np.maximum(cid_lens, 0), cid_lens >= 0, pa.string()),
            tags_column(rows, r.tags),
            pa.array(req_ts, mask=is_req).cast(ts_type),
            pa.array(latency, mask=is_req),
        ]


def pair(
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
