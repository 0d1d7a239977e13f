"""Split reassembled TCP streams into Kafka frames (int32 big-endian size, then the bytes).

Every byte of every direction is accounted for by exactly one item, in stream order:

- :class:`KafkaFrame`: a whole frame (``data`` excludes the 4-byte size prefix).
- :class:`PartialFrame`: bytes of a frame cut by a gap or by the end of the stream. Kept, so
  a decoder can still read the header of a request whose body was lost.
- :class:`SkippedBytes`: bytes that could not be placed in a frame while re-synchronising
  (after a gap of unknown content, or in a stream picked up mid-way).
- :class:`MissingBytes`: bytes TCP reassembly says were never captured.

Which side is the client: the side talking to a broker port (default {9092}); else the side
that sent the SYN, when the handshake was captured; else the side whose first frame looks like
a request header; at the end of the capture, failing all that, the side with the higher port.

Re-synchronising (after a gap of unknown content, or where the capture picked a stream up): a
request frame starts at a size prefix followed by a plausible request header (api_key 0..100,
api_version 0..30, client id length -1..size-10), confirmed by the next frame being one too
with the same client id (a client sends one on a connection). Without that client id, the
start counts only if no later start can prove one: a Produce request's records field (before
v9) ends its frame and reads as a request with the next one after it. A request direction holds
its bytes (up to 1 MiB) until a start is proven, so torn bytes are skipped as one piece; a
response frame starts at a size prefix followed by the correlation id of a request on the same
connection not answered yet, confirmed by the next frame answering a later request (Kafka
answers in order). A stream picked up mid-way is first tried at its first byte. A response
direction holds its bytes, rather than skip them, while the requests they answer may still come.
"""

from __future__ import annotations

import ipaddress
import os
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import BinaryIO, NamedTuple

import numpy as np

from arrowkafka.ir.headers import has_client_id
from arrowkafka.traffic.packets import PacketStats, parse_packet
from arrowkafka.traffic.pcap import CaptureReader
from arrowkafka.traffic.tcp import (
    DEFAULT_WINDOW_NS,
    FlowKey,
    StreamData,
    StreamEnd,
    StreamEvent,
    StreamGap,
    StreamOpen,
    TcpReassembler,
    TcpStats,
)

__all__ = [
    "DEFAULT_BROKER_PORTS",
    "MAX_FRAME_SIZE",
    "CaptureStats",
    "ConnKey",
    "FrameItem",
    "FrameStats",
    "KafkaFrame",
    "KafkaFramer",
    "MissingBytes",
    "PartialFrame",
    "SkippedBytes",
    "capture_frames",
    "capture_items",
    "iter_frames",
    "peek_request",
    "peek_response",
]

DEFAULT_BROKER_PORTS: frozenset[int] = frozenset({9092})
# The broker refuses frames above socket.request.max.bytes, 100 MiB by default.
MAX_FRAME_SIZE = 100 << 20
MAX_API_KEY = 100
MAX_API_VERSION = 30
REQUEST, RESPONSE = "request", "response"

_MIN_SIZE = {REQUEST: 8, RESPONSE: 4}  # api_key+api_version+correlation_id / correlation_id
_REQ_HEAD = struct.Struct(">ihh")
_I32 = struct.Struct(">i")
_RESP_HEAD = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_HDR = struct.Struct(">hhi")
_CORR_KEEP = 4096  # unanswered correlation ids remembered per connection
# ... while its response direction still looks for a frame start: the ids are its proof, and
# a direction picked up mid-stream may be behind by many requests when it is searched
_CORR_KEEP_UNSYNCED = 1 << 18
_PROBE_LIMIT = 1 << 20  # bytes held per connection while looking for its first request
_ENDED_KEEP = 4096  # ended one-sided connections remembered, for a late other direction
_RESCAN = 4096  # new bytes before a waiting response direction is searched again


class ConnKey(NamedTuple):
    """A Kafka connection: client endpoint, then broker endpoint (IPs as raw 4/16 bytes)."""

    client_ip: bytes
    client_port: int
    server_ip: bytes
    server_port: int

    def __str__(self) -> str:
        c, s = ipaddress.ip_address(self.client_ip), ipaddress.ip_address(self.server_ip)
        return f"{c}:{self.client_port}->{s}:{self.server_port}"


class KafkaFrame(NamedTuple):
    """One whole Kafka frame.

    Attributes
    ----------
    conn : ConnKey
    direction : str
        ``"request"`` (client to broker) or ``"response"``.
    frame_index : int
        Position among the whole frames of this direction of this connection, from 0.
    offset : int
        Stream offset of the size prefix.
    ts_first_ns, ts_last_ns : int
        Earliest and latest capture time of the segments that carried the frame.
    data : bytes
        The frame without its size prefix: header then body.
    """

    conn: ConnKey
    direction: str
    frame_index: int  # not ``index``, which would hide tuple.index
    offset: int
    ts_first_ns: int
    ts_last_ns: int
    data: bytes

    @property
    def span(self) -> int:
        """Stream bytes covered (size prefix included)."""
        return 4 + len(self.data)


class PartialFrame(NamedTuple):
    """Bytes of a frame that a gap or the end of the stream cut.

    ``data`` are the raw stream bytes at ``offset`` (size prefix included when
    ``offset == frame_offset``); ``size`` is the declared frame size, or None if the prefix
    itself was cut. ``reason``: ``"gap"`` (bytes before a gap), ``"after gap"`` (the rest of a
    frame after a gap inside it), or how the stream ended (``"capture end"``, ``"fin"``, ...).
    """

    conn: ConnKey
    direction: str
    offset: int
    ts_first_ns: int
    ts_last_ns: int
    data: bytes
    reason: str
    frame_offset: int
    size: int | None

    @property
    def span(self) -> int:
        """Stream bytes covered."""
        return len(self.data)

    @property
    def header(self) -> bytes:
        """The frame's first bytes after the size prefix, if this piece holds them."""
        return self.data[4:] if self.offset == self.frame_offset else b""


class SkippedBytes(NamedTuple):
    """Bytes not placed in any frame while looking for a frame start. ``reason``:
    ``"resync"`` (after a gap or a mid-stream start) or ``"bad size"`` (a size prefix out of
    range where a frame should start; the stream is then re-synchronised)."""

    conn: ConnKey
    direction: str
    offset: int
    data: bytes
    reason: str

    @property
    def span(self) -> int:
        """Stream bytes covered."""
        return len(self.data)


class MissingBytes(NamedTuple):
    """Bytes never captured (a TCP gap); ``reason`` is ``"lost"`` or ``"snaplen"``."""

    conn: ConnKey
    direction: str
    offset: int
    length: int
    reason: str

    @property
    def span(self) -> int:
        """Stream bytes covered."""
        return self.length


FrameItem = KafkaFrame | PartialFrame | SkippedBytes | MissingBytes


@dataclass
class FrameStats:
    """Counts kept by :class:`KafkaFramer`; the byte counts include size prefixes."""

    connections: int = 0
    requests: int = 0
    responses: int = 0
    frame_bytes: int = 0
    partial_frames: int = 0
    partial_bytes: int = 0
    skipped_bytes: int = 0
    missing_bytes: int = 0
    resyncs: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def frame_pieces(data: bytes, direction: str, max_size: int = MAX_FRAME_SIZE) -> tuple[bytes, list[bytes]]:
    """``data`` (skipped bytes) as ``(head, frames)``: ``frames`` are the whole frames that
    walk, size prefix after size prefix, exactly to its end from the earliest byte they can
    start at (a stream picked up mid-way may skip many whole frames before the first start it
    can prove, often after the torn end of a frame whose start was not captured); ``head`` is
    what comes before them (all of ``data`` when no such walk exists). A first "frame" that
    holds record batches is the records field ending the torn frame: it stays in ``head``."""
    lo, n = _MIN_SIZE[direction], len(data)
    if n < 4 + lo:
        return data, []
    a = np.frombuffer(data, np.uint8).astype(np.int64)
    m = n - 3  # positions with a whole size prefix
    size = (a[:m] << 24) | (a[1 : m + 1] << 16) | (a[2 : m + 2] << 8) | a[3 : m + 3]  # >= 2**31: too big
    nxt = np.arange(m, dtype=np.int64) + 4 + size
    good = (size >= lo) & (size <= max_size) & (nxt <= n)
    # where a walk from each position leads: n (the end, where it stays) or n + 1 (nowhere);
    # doubling the steps reaches a walk's end in log2(n) rounds
    to = np.full(n + 2, n + 1, np.int64)
    to[n] = n
    to[:m][good] = nxt[good]
    for _ in range(n.bit_length()):
        to = to[to]
    ends = np.flatnonzero(to[:n] == n)
    if not len(ends):
        return data, []
    q = int(ends[0])
    end = q + 4 + int(_I32.unpack_from(data, q)[0])
    if _records_chain(data, q + 4, end, cut_tail=True):
        q = end  # a records field ending the torn frame (Fetch before v12), not a frame
    head, frames = data[:q], []
    while q < n:
        end = q + 4 + int(_I32.unpack_from(data, q)[0])
        frames.append(data[q:end])
        q = end
    return head, frames


def _records_chain(data: bytes | bytearray, p: int, end: int, cut_tail: bool = False) -> bool:
    """Whether ``data[p:end]`` is record batches or messages, one after another (offset, a
    length that the next one starts after, magic 0-2), exactly to ``end``: what a ``records``
    field holds. With ``cut_tail``, the last may be cut short after a whole one (a Fetch
    response's, at the fetch size limit). No Kafka request or response reads so."""
    whole = 0
    if end - p < 26:  # one magic 0 message at the least
        return False
    while p + 12 <= end:
        length = int(_I32.unpack_from(data, p + 8)[0])
        if length < 14 or (p + 17 <= end and data[p + 16] > 2):
            return False
        if p + 12 + length > end:
            return cut_tail and whole > 0
        p += 12 + length
        whole += 1
    return p == end or (cut_tail and whole > 0)


def peek_request(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)`` of a request frame (size prefix removed).

    These are the first 8 bytes in every request header version.
    """
    if len(frame) < 8:
        raise ValueError(f"request frame of {len(frame)} bytes is shorter than a request header")
    k, v, c = _HDR.unpack_from(frame, 0)
    return k, v, c


def peek_response(frame: bytes) -> int:
    """``correlation_id`` of a response frame (size prefix removed): its first 4 bytes."""
    if len(frame) < 4:
        raise ValueError(f"response frame of {len(frame)} bytes is shorter than a response header")
    return int(_I32.unpack_from(frame, 0)[0])


def _plausible_request(b: bytes | bytearray, p: int, max_size: int) -> bool:
    """Whether a request frame can start at ``b[p]`` (needs 12 bytes, uses 14 if there)."""
    if p + 12 > len(b):
        return False
    size, key, ver = _REQ_HEAD.unpack_from(b, p)
    if not (8 <= size <= max_size and 0 <= key <= MAX_API_KEY and 0 <= ver <= MAX_API_VERSION):
        return False
    # a nullable client id string follows, in every header but one
    if size >= 10 and p + 14 <= len(b) and has_client_id(key, ver):
        (cid,) = _I16.unpack_from(b, p + 12)
        return -1 <= cid <= size - 10
    return True


def _client_len(b: bytes | bytearray, p: int) -> int:
    """The client id's length in the request header at ``b[p]`` (0 when null or absent)."""
    if p + 14 > len(b) or not has_client_id(*_REQ_HEAD.unpack_from(b, p)[1:]):
        return 0
    return max(int(_I16.unpack_from(b, p + 12)[0]), 0)


def _same_client(b: bytes | bytearray, p: int, q: int) -> bool | None:
    """Whether the request headers at ``b[p]`` and ``b[q]`` name the same client id (a client
    sends one on every request of a connection); True where either header has none, None where
    the bytes end before ``q``'s client id does."""
    if q + 14 > len(b):
        return None
    (_, kp, vp), (_, kq, vq) = _REQ_HEAD.unpack_from(b, p), _REQ_HEAD.unpack_from(b, q)
    if not (has_client_id(kp, vp) and has_client_id(kq, vq)):
        return True
    (lp,), (lq,) = _I16.unpack_from(b, p + 12), _I16.unpack_from(b, q + 12)
    if q + 14 + max(lq, 0) > len(b):
        return None
    return lp == lq and b[p + 14 : p + 14 + max(lp, 0)] == b[q + 14 : q + 14 + max(lq, 0)]


class _Conn:
    __slots__ = (
        "ck",
        "client",
        "closed",
        "dirs",
        "held",
        "held_bytes",
        "key",
        "probe_at",
        "rank",
        "unanswered",
    )

    def __init__(self, ck: tuple[tuple[bytes, int], tuple[bytes, int]]) -> None:
        self.ck = ck
        self.client: tuple[bytes, int] | None = None
        self.key: ConnKey | None = None
        self.dirs: dict[FlowKey, _Dir] = {}
        self.held: list[StreamEvent] = []  # events kept until we know who is the client
        self.held_bytes = 0
        self.probe_at = 0  # held_bytes at which to look at the held bytes again
        self.closed: set[FlowKey] = set()  # directions that ended
        # Correlation ids of requests not answered yet -> their rank in sending order. Kafka
        # answers the requests of a connection in the order they were sent.
        self.unanswered: dict[int, int] = {}
        self.rank = 0


class _Dir:
    __slots__ = (
        "buf",
        "conn",
        "final",
        "index",
        "key",
        "moff",
        "mts",
        "need",
        "nowait",
        "other",
        "parked",
        "role",
        "scanned",
        "start",
        "synced",
        "tail",
        "unknown_start",
        "waiting",
    )

    def __init__(self, key: FlowKey, conn: _Conn, synced: bool) -> None:
        self.key = key
        self.conn = conn
        self.role = ""
        self.synced = synced
        # Picked up mid-stream: offset 0 is where our capture began, often a frame boundary.
        self.unknown_start = not synced
        self.buf: bytes | bytearray = b""
        self.start = 0  # stream offset of buf[0]
        # request resync, while bytes are held: candidates before ``scanned`` (a stream offset)
        # are decided; ``other`` (-1: none) is one whose next request names another client
        self.scanned = 0
        self.other = -1
        self.moff: list[int] = []  # segment marks: stream offsets and capture times
        self.mts: list[int] = []
        self.need = 0  # don't parse again before buf holds this many bytes
        self.index = 0
        self.final = False  # no more bytes before the next gap/end: accept unconfirmed starts
        self.tail: tuple[int, int | None, int] | None = None  # (frame offset, size, frame end) cut by a gap
        # Response resync waits (instead of skipping) for the requests its bytes may answer:
        self.waiting = False  # bytes are held for that now
        self.nowait = False  # must not wait (before a gap, or when the request side is over)
        self.parked: str | None = None  # ended while waiting: the end reason, kept for later


class KafkaFramer:
    """Turn TCP stream events into Kafka frame items; see the module docs for the rules.

    Parameters
    ----------
    broker_ports : collection of int
        Ports that identify the broker side. Empty to rely on the handshake or the headers.
    max_frame_size : int
        Largest size prefix believed.

    Notes
    -----
    :meth:`feed` returns the items each event makes ready; :meth:`finish` the rest. Memory is
    what the frames in progress need, plus events of connections whose client is not yet known.
    """

    def __init__(
        self, broker_ports: Collection[int] = DEFAULT_BROKER_PORTS, *, max_frame_size: int = MAX_FRAME_SIZE
    ) -> None:
        self.broker_ports = frozenset(broker_ports)
        self.max_frame_size = max_frame_size
        self.stats = FrameStats()
        self._conns: dict[tuple[tuple[bytes, int], tuple[bytes, int]], _Conn] = {}
        self._ended: dict[tuple[tuple[bytes, int], tuple[bytes, int]], _Conn] = {}  # one side seen
        self._dirs: dict[FlowKey, _Dir] = {}
        self._out: list[FrameItem] = []

    # -- public API --------------------------------------------------------------------
    def feed(self, ev: StreamEvent) -> list[FrameItem]:
        """Take one stream event; return the frame items it completed."""
        self._out = []
        if type(ev) is StreamOpen:
            self._open(ev)
            return self._out
        d = self._dirs.get(ev.key)
        if d is None:
            raise ValueError(f"stream event before StreamOpen for {ev.key!r}")
        if d.conn.client is None:
            conn = d.conn
            conn.held.append(ev)
            if type(ev) is StreamData:
                conn.held_bytes += len(ev.data)
            if conn.held_bytes > _PROBE_LIMIT:
                self._fallback(conn)  # holding more would cost memory for little certainty
            elif len(conn.held) <= 16 or conn.held_bytes >= conn.probe_at:
                # Looking is linear in what is held: look again only as that doubles.
                conn.probe_at = 2 * conn.held_bytes
                client = self._probe(conn, False)
                if client is not None:
                    self._decide(conn, client)
        else:
            self._process(d, ev)
        return self._out

    def finish(self) -> list[FrameItem]:
        """Decide the remaining connections and end every direction (end of capture)."""
        self._out = []
        # (with the connections that ports reused since left, but for a direction still open)
        conns = {id(c): c for c in [*self._conns.values(), *(d.conn for d in self._dirs.values())]}
        for conn in conns.values():
            if conn.client is None:
                self._fallback(conn)
            for d in list(conn.dirs.values()):
                self._close(d, "capture end")
        self._conns.clear()
        self._ended.clear()
        self._dirs.clear()
        return self._out

    # -- connections and roles -----------------------------------------------------------
    def _open(self, ev: StreamOpen) -> None:
        src, sport, dst, dport = ev.key
        a, b = (src, sport), (dst, dport)
        ck = (a, b) if a <= b else (b, a)
        conn = self._conns.get(ck)
        if conn is None:
            # One direction can open only after the other ended (it was held back for want of
            # its SYN): it still belongs to the same connection.
            conn = self._ended.pop(ck, None)
            if conn is not None and ev.key not in conn.closed:
                self._conns[ck] = conn
            else:
                conn = None
        elif ev.key in conn.dirs or ev.key in conn.closed:
            # Same ports again: a new connection. The old one's direction ends here; its other
            # direction, if still open, stays with it (TCP reassembly ends it on its own: at
            # its FIN, at the other side's new SYN, or at the end of the capture).
            if conn.client is None:
                self._fallback(conn)
            if ev.key in conn.dirs:
                self._close(conn.dirs[ev.key], "reused")
            if self._conns.get(ck) is conn:
                del self._conns[ck]
            conn = None
        if conn is None:
            conn = self._conns[ck] = _Conn(ck)
            self.stats.connections += 1
        d = _Dir(ev.key, conn, ev.syn)
        conn.dirs[ev.key] = self._dirs[ev.key] = d
        if conn.client is None:
            ports = self.broker_ports
            if dport in ports and sport not in ports:
                self._decide(conn, a)
            elif sport in ports and dport not in ports:
                self._decide(conn, b)
            elif ev.initiator is not None:
                self._decide(conn, a if ev.initiator else b)
        else:
            self._set_role(conn, d)

    def _set_role(self, conn: _Conn, d: _Dir) -> None:
        d.role = REQUEST if (d.key[0], d.key[1]) == conn.client else RESPONSE

    def _decide(self, conn: _Conn, client: tuple[bytes, int]) -> None:
        """Fix the client side, then replay what was held back."""
        conn.client = client
        k = next(iter(conn.dirs))
        server = (k[2], k[3]) if (k[0], k[1]) == client else (k[0], k[1])
        conn.key = ConnKey(client[0], client[1], server[0], server[1])
        for d in conn.dirs.values():
            self._set_role(conn, d)
        held, conn.held = conn.held, []
        for ev in held:
            self._process(self._dirs[ev.key], ev)

    def _probe(self, conn: _Conn, final: bool) -> tuple[bytes, int] | None:
        """The client endpoint, if the first bytes of the directions tell; ``final``: no more
        bytes will come, so decide on one direction alone if need be."""
        heads: dict[FlowKey, bytearray] = {}  # from offset 0 (a frame start, or likely one)
        later: dict[FlowKey, bytearray] = {}  # after a first gap
        gapped: set[FlowKey] = set()
        for ev in conn.held:
            if type(ev) is StreamData:
                (later if ev.key in gapped else heads).setdefault(ev.key, bytearray()).extend(ev.data)
            elif type(ev) is StreamGap:
                gapped.add(ev.key)
        max_size = self.max_frame_size

        def request(h: bytearray) -> bool:
            return len(h) >= 14 and _plausible_request(h, 0, max_size)

        found = list(heads.items())
        if len(found) == 2:
            # A response's correlation id can read as an api_key/api_version pair, so a response
            # may look like a request: first look for the reply to a request, in either order.
            for (k, h), (_, o) in (found, found[::-1]):
                if request(h) and len(o) >= 8 and h[8:12] == o[4:8]:
                    return (k[0], k[1])
            (ka, ha), (kb, hb) = found
            if len(ha) >= 14 and len(hb) >= 14 and (request(ha) or request(hb)):
                # One reads as a request: that side; both do: the side that spoke first.
                return (ka[0], ka[1]) if request(ha) else (kb[0], kb[1])
        elif len(found) == 1 and final and len(found[0][1]) >= 14:
            k, h = found[0]
            return (k[0], k[1]) if request(h) else (k[2], k[3])
        for k, data in later.items():  # after a gap only a confirmed request start counts
            start, need = self._find_request(data, 0, False)
            if start is not None and not need:
                return (k[0], k[1])
        return None

    def _fallback(self, conn: _Conn) -> None:
        """Decide now: from the bytes held if they tell, else the higher port is the client's
        (ephemeral ports are the high ones)."""
        client = self._probe(conn, True)
        if client is None:
            k = next(iter(conn.dirs))
            client = (k[0], k[1]) if k[1] > k[3] else (k[2], k[3])
        self._decide(conn, client)

    # -- per-direction processing -------------------------------------------------------
    def _process(self, d: _Dir, ev: StreamEvent) -> None:
        if type(ev) is StreamData:
            if ev.offset != d.start + len(d.buf):
                raise ValueError(f"stream data at {ev.offset}, expected {d.start + len(d.buf)}")
            if not d.buf:
                d.buf = ev.data  # common case: frame straight from the segment's bytes
            else:
                if type(d.buf) is bytes:
                    d.buf = bytearray(d.buf)
                d.buf += ev.data
            for o, t in ev.marks:
                d.moff.append(o)
                d.mts.append(t)
            if len(d.buf) >= d.need:
                self._drain(d)
        elif type(ev) is StreamGap:
            self._cut(d, "gap", ev)
        elif type(ev) is StreamEnd:
            self._cut(d, ev.reason, None)

    def _times(self, d: _Dir, a: int, b: int) -> tuple[int, int]:
        """Earliest and latest capture time of the segments covering stream bytes [a, b)."""
        moff = d.moff
        if moff and moff[-1] <= a:  # all in the latest segment, the usual case
            return d.mts[-1], d.mts[-1]
        i = max(bisect_right(d.moff, a) - 1, 0)
        j = max(bisect_left(d.moff, b), i + 1)
        ts = d.mts[i:j]
        return (min(ts), max(ts)) if ts else (0, 0)

    def _drain(self, d: _Dir) -> None:
        """Emit every whole frame in the buffer, re-synchronising where needed."""
        buf, pos, n = d.buf, 0, len(d.buf)
        out, stats, conn, role = self._out, self.stats, d.conn, d.role
        assert conn.key is not None
        max_size, min_size = self.max_frame_size, _MIN_SIZE[role]
        d.need = 0
        d.waiting = False
        requests = stats.requests
        while pos < n:
            if d.tail is not None:  # rest of a frame whose middle was lost
                f_off, f_size, f_end = d.tail
                stop = f_end - d.start
                if stop > n and not d.final:
                    d.need = stop
                    break
                stop = min(stop, n)
                self._partial(d, pos, stop, "after gap", f_off, f_size)
                pos = stop
                if f_end - d.start == stop:
                    d.tail = None
                continue
            if not d.synced:
                if role == REQUEST:
                    since = max(pos, d.scanned - d.start)
                    hint = d.other - d.start if d.other >= d.start + pos else None
                    start, need, resume, held = self._scan_requests(buf, pos, d.final, since, hint)
                    if (start is None or need) and not d.final and n - pos <= _PROBE_LIMIT:
                        # No start proven yet: hold the bytes, so that they are skipped as one
                        # piece once a start (or the end) tells where they stop; the next scan
                        # resumes where this one left undecided candidates.
                        d.scanned = d.start + resume
                        d.other = -1 if held is None else d.start + held
                        d.need = need or n + 1
                        break
                    d.scanned, d.other = 0, -1
                else:
                    chained: bool | None = False
                    if d.unknown_start:
                        # Hopping from frame to frame costs one step a frame, however many
                        # bytes are held: a long chain is no reason to skip its frames.
                        chained = self._chains(buf, pos, d.final, conn.unanswered)
                    if chained:
                        start, need = pos, 0
                    else:
                        # A response that answers a known request beats an unproven chain.
                        start, need = self._find_response(buf, pos, d.final, conn.unanswered)
                        if (
                            (start is None or need)
                            and n - pos <= _PROBE_LIMIT
                            and (chained is None or not d.nowait)
                        ):
                            # Skip nothing yet: the stream may still prove to start at a frame,
                            # and the requests these bytes answer may still come (the other
                            # direction can lag in event order when both were held back).
                            d.waiting = True
                            d.need = n + 1 if chained is None or need else n + _RESCAN
                            break
                    d.unknown_start = False
                # Without a candidate, keep the last bytes: a frame head may begin there.
                at = start if start is not None else n if d.final else max(pos, n - 13)
                if at > pos:
                    out.append(SkippedBytes(conn.key, role, d.start + pos, bytes(buf[pos:at]), "resync"))
                    stats.skipped_bytes += at - pos
                    pos = at
                if start is None or need:  # nothing yet, or a candidate to confirm: wait
                    d.need = need or n + 1
                    break
                d.synced = True
                stats.resyncs += 1
            if n - pos < 4:
                break
            (size,) = _I32.unpack_from(buf, pos)
            if not min_size <= size <= max_size:
                d.synced = False
                # Skip the bad prefix before resyncing: it has just failed the test.
                out.append(SkippedBytes(conn.key, role, d.start + pos, bytes(buf[pos : pos + 1]), "bad size"))
                stats.skipped_bytes += 1
                pos += 1
                continue
            end = pos + 4 + size
            if end > n:
                d.need = end
                break
            data = buf[pos + 4 : end] if isinstance(buf, bytes) else bytes(buf[pos + 4 : end])
            t0, t1 = self._times(d, d.start + pos, d.start + end)
            if role == REQUEST:
                (corr,) = _I32.unpack_from(data, 4)
                conn.unanswered.pop(corr, None)
                conn.rank += 1
                conn.unanswered[corr] = conn.rank
                if len(conn.unanswered) > _CORR_KEEP and (
                    len(conn.unanswered) > _CORR_KEEP_UNSYNCED
                    or not any(o.role == RESPONSE and not o.synced for o in conn.dirs.values())
                ):
                    del conn.unanswered[next(iter(conn.unanswered))]
                stats.requests += 1
            else:
                (corr,) = _I32.unpack_from(data, 0)
                conn.unanswered.pop(corr, None)
                stats.responses += 1
            stats.frame_bytes += 4 + size
            out.append(KafkaFrame(conn.key, role, d.index, d.start + pos, t0, t1, data))
            d.index += 1
            pos = end
        if pos:
            self._consume(d, pos)
        if stats.requests != requests:  # new correlation ids: a waiting response may now match
            for other in list(conn.dirs.values()):
                if other.waiting and other is not d:
                    self._wake(other)

    def _wake(self, d: _Dir) -> None:
        if d.parked is not None:
            d.final = True
            self._drain(d)
            d.final = False
        else:
            self._drain(d)

    def _close(self, d: _Dir, reason: str) -> None:
        """End a direction for good, including one parked while waiting for requests."""
        if d.key not in d.conn.dirs:
            return  # already closed as a side effect of closing its peer
        if d.parked is not None:
            reason = d.parked
        d.nowait = True
        self._cut(d, reason, None)

    def _consume(self, d: _Dir, n: int) -> None:
        d.buf = d.buf[n:]
        if d.need:
            d.need -= n
        d.start += n
        # Keep the mark of the segment holding the new first byte; drop those before it.
        i = bisect_right(d.moff, d.start) - 1
        if i > 0:
            del d.moff[:i]
            del d.mts[:i]

    def _partial(self, d: _Dir, a: int, b: int, reason: str, f_off: int, f_size: int | None) -> None:
        assert d.conn.key is not None
        t0, t1 = self._times(d, d.start + a, d.start + b)
        self._out.append(
            PartialFrame(d.conn.key, d.role, d.start + a, t0, t1, bytes(d.buf[a:b]), reason, f_off, f_size)
        )
        self.stats.partial_frames += 1
        self.stats.partial_bytes += b - a

    def _cut(self, d: _Dir, reason: str, gap: StreamGap | None) -> None:
        """The bytes stop here (a gap, or the end): flush the buffer as partial/skipped."""
        d.final = True
        d.nowait = d.nowait or gap is not None  # bytes before a gap are done for
        if d.buf:
            self._drain(d)
        d.final = False
        peer = (d.key[2], d.key[3], d.key[0], d.key[1])
        if d.waiting and gap is None and not d.nowait and peer not in d.conn.closed:
            d.parked = reason  # keep the bytes until the request side is over
            return
        d.nowait = False
        n = len(d.buf)
        key = d.conn.key
        assert key is not None
        frame: tuple[int, int | None, int | None] | None = None  # (offset, size, end) in progress
        if d.tail is not None:
            frame = d.tail
            if n:
                self._partial(d, 0, n, reason, d.tail[0], d.tail[1])
        elif n and d.synced:
            size = int(_I32.unpack_from(d.buf, 0)[0]) if n >= 4 else None
            frame = (d.start, size, d.start + 4 + size if size is not None else None)
            self._partial(d, 0, n, reason, d.start, size)
        elif n:
            self._out.append(SkippedBytes(key, d.role, d.start, bytes(d.buf), "resync"))
            self.stats.skipped_bytes += n
        if n:
            self._consume(d, n)
        d.tail = None
        if gap is None:  # this direction is over
            conn = d.conn
            del conn.dirs[d.key]
            conn.closed.add(d.key)
            if self._dirs.get(d.key) is d:
                del self._dirs[d.key]
            for other in list(conn.dirs.values()):
                if other.parked is not None:
                    self._close(other, other.parked)
            if not conn.dirs and self._conns.get(conn.ck) is conn:
                del self._conns[conn.ck]
                if len(conn.closed) == 1:  # the other direction may still open
                    self._ended[conn.ck] = conn
                    if len(self._ended) > _ENDED_KEEP:
                        del self._ended[next(iter(self._ended))]
            return
        self._out.append(MissingBytes(key, d.role, gap.offset, gap.length, gap.reason))
        self.stats.missing_bytes += gap.length
        after = gap.offset + gap.length
        d.start, d.need = after, 0
        d.moff.clear()
        d.mts.clear()
        # A frame whose size we read and that goes on past the gap tells where the next frame
        # starts; otherwise the gap may have held frame starts and we must search again.
        end = frame[2] if frame is not None else None
        if frame is not None and end is not None and end > after:
            d.tail = (frame[0], frame[1], end)
        d.synced = end is not None and end >= after

    # -- re-synchronisation ---------------------------------------------------------------
    def _find_request(self, b: bytes | bytearray, pos: int, final: bool) -> tuple[int | None, int]:
        """First request frame start in ``b[pos:]``: ``(index, 0)`` when confirmed by the next
        frame, ``(index, need)`` when ``len(b)`` must reach ``need`` to confirm it, ``(None, 0)``
        when there is no candidate (see ``_scan_requests``)."""
        start, need, _, _ = self._scan_requests(b, pos, final)
        return start, need

    def _scan_requests(
        self, b: bytes | bytearray, pos: int, final: bool, since: int | None = None, other: int | None = None
    ) -> tuple[int | None, int, int, int | None]:
        """``_find_request`` that can resume: candidates in ``b[pos:since]`` were decided by an
        earlier call (none is waiting for bytes; ``other``, if any, is the one whose next request
        names another client). Returns ``(start, need, resume, other)``: ``resume`` is where the
        next call must look again (the earliest candidate still waiting, or the end).

        A confirmed candidate beats an earlier unconfirmable one (a false start often claims a
        huge size); ``final`` accepts an unconfirmable one, first one whose frame ends the bytes
        exactly. A candidate whose next request names another client counts only if no later
        one can still be confirmed, and one whose bytes are record batches never does: both are
        a length-prefixed field that ends a torn frame (a Produce request's records, before
        v9), whose bytes read as a request header (base offset 0: Produce v0, correlation id 0)
        that the next request confirms."""
        n, max_size = len(b), self.max_frame_size
        since = pos if since is None else since
        if n - since < 12:
            if other is None:
                return None, 0, since, None
            return other, 0 if final else n + 1, since, other
        a = np.frombuffer(b, dtype=np.uint8, offset=since)
        m = n - since - 11  # positions with a whole 12-byte head
        # Cheap byte tests first (size < 2**24 * k, api_key and api_version < 256), vectorised.
        mask = (a[:m] <= max_size >> 24) & (a[4 : 4 + m] == 0) & (a[5 : 5 + m] <= MAX_API_KEY)
        mask &= (a[6 : 6 + m] == 0) & (a[7 : 7 + m] <= MAX_API_VERSION)
        del a  # a live view would stop the bytearray from being resized
        first: tuple[int | None, int] = (None, 0)  # earliest candidate we cannot check yet
        exact: int | None = None  # with ``final``: the earliest whose frame ends the bytes
        after = 0  # with ``other``: the bytes needed to check the earliest candidate after it
        for c in np.flatnonzero(mask).tolist():
            p = since + c
            if not _plausible_request(b, p, max_size):
                continue
            q = p + 4 + _I32.unpack_from(b, p)[0]
            if q + 12 <= n and not _plausible_request(b, q, max_size):
                continue  # the next frame disproves it
            if q <= n and _records_chain(b, p + 4, q):
                continue  # record batches, not a request
            same = _same_client(b, p, q) if q + 12 <= n else None
            if same:
                return p, 0, p, other
            if same is False:
                other = p if other is None else other
                continue
            # not checkable yet: the next frame, or its client id, is not all here
            need = q + 12 if q + 12 > n else q + 14 + _client_len(b, q)
            if first[0] is None:
                first = (p, 0 if final else need)
            if final and q == n and exact is None:
                exact = p  # a whole frame that ends the bytes
            if other is not None and not after:
                after = need
        resume = first[0] if first[0] is not None else max(since, n - 11)
        if exact is not None:  # at the end, a frame that ends exactly there beats the others
            return exact, 0, resume, other
        if other is not None:
            return other, 0 if final else (after or n + 1), resume, other
        return first[0], first[1], resume, None

    def _chains(self, b: bytes | bytearray, p: int, final: bool, ids: dict[int, int]) -> bool | None:
        """Whether responses chain from ``b[p]``: sane size prefixes, frame after frame, up to
        the end of the bytes or to a frame answering a known request. None: too few bytes yet.

        Used where the capture picked a stream up: the first response there usually answers a
        request sent before the capture began, so its correlation id cannot be known.
        """
        n, q = len(b), p
        while q + 4 <= n:
            (size,) = _I32.unpack_from(b, q)
            if not 4 <= size <= self.max_frame_size:
                return False
            if q + 8 <= n and _I32.unpack_from(b, q + 4)[0] in ids:
                return True
            q += 4 + size
        return True if q == n else False if final else None

    def _find_response(
        self, b: bytes | bytearray, pos: int, final: bool, ids: dict[int, int]
    ) -> tuple[int | None, int]:
        """Like :meth:`_find_request` for a response: a sane size prefix, then the correlation
        id of an unanswered request. Confirmed when the next frame (if its head is here) answers
        a later request, as Kafka answers in order; small ids are common in any data, so one
        match alone proves little."""
        n, max_size = len(b), self.max_frame_size
        if n - pos < 8 or not ids:
            return None, 0
        a = np.frombuffer(b, dtype=np.uint8, offset=pos).astype(np.int64)
        v = (a[:-3] << 24) | (a[1:-2] << 16) | (a[2:-1] << 8) | a[3:]  # uint32 at every offset
        del a
        v = np.where(v >= 1 << 31, v - (1 << 32), v)  # as int32, like the ids
        want = np.fromiter(ids, dtype=np.int64, count=len(ids))
        mask = np.isin(v[4:], want) & (v[:-4] >= 4) & (v[:-4] <= max_size)
        first: tuple[int | None, int] = (None, 0)  # earliest candidate we cannot check yet
        for c in np.flatnonzero(mask).tolist():
            p = pos + c
            size, corr = _RESP_HEAD.unpack_from(b, p)
            q = p + 4 + size
            if q + 8 <= n:
                nsize, ncorr = _RESP_HEAD.unpack_from(b, q)
                if 4 <= nsize <= max_size and ids.get(ncorr, -1) > ids[corr]:
                    return p, 0
            elif first[0] is None:
                # Before a gap or the end nothing more will come to check it by: take it then.
                first = (p, 0 if final else q + 8)
        return first


def iter_frames(
    events: Iterable[StreamEvent],
    *,
    broker_ports: Collection[int] = DEFAULT_BROKER_PORTS,
    max_frame_size: int = MAX_FRAME_SIZE,
    stats: FrameStats | None = None,
) -> Iterator[FrameItem]:
    """Yield the frame items of a stream of TCP events; see :class:`KafkaFramer`."""
    f = KafkaFramer(broker_ports, max_frame_size=max_frame_size)
    if stats is not None:
        f.stats = stats
    for ev in events:
        yield from f.feed(ev)
    yield from f.finish()


@dataclass
class CaptureStats:
    """Everything :func:`capture_frames` counted, layer by layer."""

    name: str = ""  #: the capture, as rejects name it (set by whoever reads it for tables)
    format: str = ""
    packets: int = 0
    truncated_bytes: int = 0  #: bytes of a record cut by the end of the file
    truncated_offset: int | None = None  #: file offset of that record
    broken_offset: int | None = None  #: file offset where the file's framing broke, if it did
    broken_reason: str = ""  #: how it broke
    broken_bytes: int = 0  #: bytes from there to the end of the file, not read
    tail: bytes = b""  #: the first ``pcap.TAIL_KEEP`` bytes of the cut record, or after the break
    link: PacketStats = field(default_factory=PacketStats)
    tcp: TcpStats = field(default_factory=TcpStats)
    frames: FrameStats = field(default_factory=FrameStats)

    def reader_result(self, reader: CaptureReader) -> None:
        """What a capture reader learnt of the file: its format, packets, and unread end."""
        self.format, self.packets = reader.format, reader.packets
        self.truncated_bytes, self.truncated_offset = reader.truncated_bytes, reader.truncated_offset
        self.broken_offset, self.broken_reason = reader.broken_offset, reader.broken_reason
        self.broken_bytes, self.tail = reader.broken_bytes, reader.tail


def capture_frames(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    broker_ports: Collection[int] = DEFAULT_BROKER_PORTS,
    window_ns: int | None = DEFAULT_WINDOW_NS,
    max_frame_size: int = MAX_FRAME_SIZE,
    strict: bool = False,
    stats: CaptureStats | None = None,
) -> Iterator[FrameItem]:
    """Read a pcap/pcapng capture and yield its Kafka frame items, streaming.

    Parameters
    ----------
    source : path or binary file object
        The capture.
    broker_ports : collection of int
        Ports that identify the broker side.
    window_ns : int or None
        TCP reassembly window, see :class:`~arrowkafka.traffic.tcp.TcpReassembler`.
    max_frame_size : int
        Largest size prefix believed.
    strict : bool
        Raise on a capture file cut mid-record instead of counting the bytes.
    stats : CaptureStats, optional
        Filled in as items are yielded (complete once the iterator is exhausted).

    Yields
    ------
    KafkaFrame, PartialFrame, SkippedBytes or MissingBytes
        Per direction in stream order; directions interleave in capture order.
    """
    for _, item in capture_items(
        source,
        broker_ports=broker_ports,
        window_ns=window_ns,
        max_frame_size=max_frame_size,
        strict=strict,
        stats=stats,
    ):
        yield item


def capture_items(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    broker_ports: Collection[int] = DEFAULT_BROKER_PORTS,
    window_ns: int | None = DEFAULT_WINDOW_NS,
    max_frame_size: int = MAX_FRAME_SIZE,
    strict: bool = False,
    stats: CaptureStats | None = None,
) -> Iterator[tuple[int, FrameItem]]:
    """``capture_frames``' items, each with the number of the packet that made it ready (the
    end of the capture: one past the last packet): the order the kernels' path pairs by."""
    st = stats if stats is not None else CaptureStats()
    reader = CaptureReader(source, strict=strict)
    reasm = TcpReassembler(window_ns=window_ns)
    reasm.stats = st.tcp
    framer = KafkaFramer(broker_ports, max_frame_size=max_frame_size)
    framer.stats = st.frames
    link = st.link
    add, feed = reasm.add, framer.feed
    n = 0
    try:
        for n, pkt in enumerate(reader):
            seg = parse_packet(pkt, link)
            if seg is None:
                continue
            for ev in add(seg):
                yield from ((n, item) for item in feed(ev))
        n += 1
        for ev in reasm.finish():
            yield from ((n, item) for item in feed(ev))
        yield from ((n, item) for item in framer.finish())
    finally:
        reader.close()
        st.reader_result(reader)
