"""Per-direction TCP reassembly that reports what it could not see.

Each direction of a connection, keyed by ``(src, sport, dst, dport)``, becomes a stream of
events, in stream order:

- :class:`StreamOpen` once, before anything else: whether offset 0 is the first byte after a
  SYN, and which side opened the connection if the handshake was seen.
- :class:`StreamData`: a contiguous run of bytes at a stream offset, with the timestamp of
  every segment that contributed to it (so any byte range can be given first/last times).
- :class:`StreamGap`: bytes that were never captured (lost, or cut by the snaplen). A gap is
  reported, never glued over: the bytes after it do not follow the bytes before it.
- :class:`StreamEnd` once, last: the stream's final length and why it ended.

Reassembly rules: offsets are relative to the ISN (or, without a SYN, to the lowest sequence
number seen early in the stream); sequence numbers wrap at 2**32 but offsets keep counting;
the first bytes seen for a range win over later retransmissions or overlaps. Contiguous data
is passed on as soon as it is contiguous, so memory holds only out-of-order data. A hole
waits ``window_ns`` of capture time (or until ``max_pending`` bytes queue behind it) for a
retransmission before it is declared a gap; a stream seen without its SYN is likewise held
for ``window_ns`` in case earlier, reordered segments still arrive.

Odd flag combinations: a segment with SYN together with FIN or RST (a "Christmas tree" or
SYN-FIN probe, or a corrupt header) is one no TCP receiver accepts: Linux drops it in every
state, before its payload or its other flags are looked at. It is *invalid* here too:
counted (``TcpStats.invalid_segments``, its payload in ``invalid_bytes``) and otherwise
ignored: it opens, ends and carries nothing, so every direction still gets its events in
the order open, data and gaps, end. Every other combination is read bit by bit (SYN opens
or reopens, data is stored, FIN and RST end), whatever else is set (URG, PSH, ECE, CWR, NS).
The census kernel (``kernels.capture.census``) applies the same rule.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from arrowkafka.traffic.packets import ACK, FIN, RST, SYN, Segment

__all__ = [
    "DEFAULT_WINDOW_NS",
    "FlowKey",
    "StreamData",
    "StreamEnd",
    "StreamEvent",
    "StreamGap",
    "StreamOpen",
    "TcpReassembler",
    "TcpStats",
    "reassemble",
]

FlowKey = tuple[bytes, int, bytes, int]
"""One direction of a TCP connection: ``(src ip, src port, dst ip, dst port)``."""

# capture time a reassembler waits for reordered segments before it declares a gap
DEFAULT_WINDOW_NS = 30_000_000_000
_MASK = 0xFFFFFFFF
_HALF = 1 << 31


class StreamOpen(NamedTuple):
    """A direction starts. ``syn``: offset 0 is the first byte after the SYN (else the
    stream was picked up mid-way). ``initiator``: True if this side sent the SYN, False if it
    sent the SYN-ACK, None if the handshake was not seen."""

    key: FlowKey
    syn: bool
    initiator: bool | None


class StreamData(NamedTuple):
    """Contiguous bytes ``data`` at stream ``offset``.

    ``marks`` are ``(stream offset, ts_ns)`` pairs, ascending: the segment whose first
    kept byte is at that offset was captured at ``ts_ns``; the first mark is at ``offset``.
    """

    key: FlowKey
    offset: int
    data: bytes
    marks: tuple[tuple[int, int], ...]


class StreamGap(NamedTuple):
    """``length`` bytes at ``offset`` were not captured. ``reason``: ``"lost"`` (no segment
    carried them) or ``"snaplen"`` (a segment carried them but the capture cut it)."""

    key: FlowKey
    offset: int
    length: int
    reason: str


class StreamEnd(NamedTuple):
    """The direction ends at ``offset`` (its length). ``reason``: ``"fin"``, ``"rst"``,
    ``"idle"``, ``"reused"`` (a new SYN on the same ports) or ``"capture end"``."""

    key: FlowKey
    offset: int
    reason: str


StreamEvent = StreamOpen | StreamData | StreamGap | StreamEnd


def invalid(flags: Any) -> Any:
    """Whether a segment with these TCP flags is invalid (SYN with FIN or RST: see the module
    docs); for an int or, element by element, a numpy array of flags."""
    return ((flags & SYN) != 0) & ((flags & (FIN | RST)) != 0)


@dataclass
class TcpStats:
    """Counts kept by :class:`TcpReassembler`."""

    segments: int = 0
    streams: int = 0
    payload_bytes: int = 0  #: captured payload bytes received
    data_bytes: int = 0  #: bytes passed on in StreamData
    duplicate_bytes: int = 0  #: dropped: already received, or arrived after their range was passed
    gaps: int = 0
    gap_bytes: int = 0
    invalid_segments: int = 0  #: SYN with FIN or RST: ignored, as a receiver ignores them
    invalid_bytes: int = 0  #: their payload bytes

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class _Stream:
    __slots__ = (
        "base",
        "emitted",
        "ended",
        "fin",
        "first_ts",
        "hole_since",
        "initiator",
        "key",
        "last_ts",
        "lo",
        "opened",
        "origin",
        "pend",
        "pieces",
        "rst",
        "snap",
        "starts",
        "syn",
        "top",
    )

    def __init__(self, key: FlowKey, base: int, ts: int, syn: bool, initiator: bool | None) -> None:
        self.key = key
        self.base = base  # sequence number of stream offset 0 (before `origin` is applied)
        self.syn = syn
        self.initiator = initiator
        self.opened = False  # StreamOpen sent; from then on offsets before `emitted` are final
        self.origin = 0  # absolute offset that is reported as offset 0
        self.emitted = 0  # absolute offset up to which data/gaps were passed on
        self.lo: int | None = None  # lowest offset seen before opening (mid-stream start)
        self.top = 0  # highest end seen, counting bytes the snaplen cut
        self.pieces: list[tuple[int, bytes, int]] = []  # (start, data, ts), sorted, disjoint
        self.starts: list[int] = []  # pieces' starts, for bisect
        self.pend = 0  # bytes in pieces
        self.snap: dict[int, int] = {}  # start -> end of ranges known cut by the snaplen
        self.fin: int | None = None
        self.rst = False
        self.ended = False
        self.first_ts = ts
        self.last_ts = ts
        self.hole_since: int | None = None

    def unwrap(self, seq: int) -> int:
        """Absolute offset of ``seq``: the one congruent mod 2**32 nearest the data seen."""
        rel = (seq - self.base) & _MASK
        return self.top + ((rel - self.top + _HALF) & _MASK) - _HALF


class TcpReassembler:
    """Streaming reassembly of every TCP direction in a capture.

    Parameters
    ----------
    window_ns : int or None
        How long (capture time) a hole may wait for a retransmission, and a stream without
        SYN for earlier segments, before being given up on. None waits until :meth:`finish`
        (exact for files, unbounded memory if a hole never fills).
    max_pending : int
        Per-direction cap on out-of-order bytes held behind a hole; past it the hole is
        declared a gap at once. Together with ``window_ns`` this bounds memory.
    idle_ns : int or None
        End a direction that saw no segment for this long (None: never). Kafka connections
        idle for minutes, so the default keeps them; the state of an idle direction is small.

    Notes
    -----
    Feed segments in capture order with :meth:`add`; each call returns the events it made
    ready. Call :meth:`finish` at the end of the capture for the rest.
    """

    def __init__(
        self,
        *,
        window_ns: int | None = DEFAULT_WINDOW_NS,
        max_pending: int = 32 << 20,
        idle_ns: int | None = None,
    ) -> None:
        self.window_ns = window_ns
        self.max_pending = max_pending
        self.idle_ns = idle_ns
        self.stats = TcpStats()
        self.clock = 0  # latest capture timestamp seen
        self._streams: dict[FlowKey, _Stream] = {}
        self._out: list[StreamEvent] = []
        step = [w for w in (window_ns, idle_ns) if w is not None]
        self._sweep_every = max(min(step) // 4, 1) if step else None
        self._next_sweep: int | None = None

    @property
    def pending_bytes(self) -> int:
        """Out-of-order bytes currently held, over all directions."""
        return sum(st.pend for st in self._streams.values())

    # -- public API --------------------------------------------------------------------
    def add(self, seg: Segment) -> list[StreamEvent]:
        """Take one segment; return the events it made ready (often one StreamData)."""
        out: list[StreamEvent] = []
        self._out = out
        ts = seg.ts_ns
        if ts > self.clock:
            self.clock = ts
        self.stats.segments += 1
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        flags = seg.flags
        if invalid(flags):
            self.stats.invalid_segments += 1
            self.stats.invalid_bytes += len(seg.payload)
            return out
        st = self._streams.get(key)
        if flags & SYN:
            st = self._on_syn(key, st, seg)
        elif st is None:
            st = self._new(key, seg.seq, ts, False, None)
        st.last_ts = ts
        if st.ended:
            self.stats.duplicate_bytes += len(seg.payload)
        else:
            seq = seg.seq + 1 if flags & SYN else seg.seq  # the SYN takes one sequence number
            if seg.wire_len:
                self._store(st, st.unwrap(seq), seg.payload, seg.wire_len, ts)
            if flags & FIN:
                st.fin = st.unwrap(seq + seg.wire_len)
            if flags & RST:
                st.rst = True
            self._advance(st)
        if self._sweep_every is not None:
            if self._next_sweep is None:
                self._next_sweep = self.clock + self._sweep_every
            elif self.clock >= self._next_sweep:
                self._sweep()
                self._next_sweep = self.clock + self._sweep_every
        return out

    def finish(self) -> list[StreamEvent]:
        """End every direction still open (capture over); return the remaining events."""
        self._out = []
        for st in list(self._streams.values()):
            if not st.opened and not st.ended:
                self._release(st)
        # Oldest first: a connection's requests then come before the responses to them.
        for st in sorted(self._streams.values(), key=lambda s: s.first_ts):
            if not st.ended:
                self._end(st, "rst" if st.rst else "fin" if st.fin is not None else "capture end")
        self._streams.clear()
        return self._out

    # -- stream life -------------------------------------------------------------------
    def _new(self, key: FlowKey, base: int, ts: int, syn: bool, initiator: bool | None) -> _Stream:
        st = _Stream(key, base & _MASK, ts, syn, initiator)
        self._streams[key] = st
        self.stats.streams += 1
        return st

    def _on_syn(self, key: FlowKey, st: _Stream | None, seg: Segment) -> _Stream:
        base = (seg.seq + 1) & _MASK
        initiator = not seg.flags & ACK
        if st is None:
            return self._new(key, base, seg.ts_ns, True, initiator)
        if st.syn and st.base == base:
            return st  # retransmitted SYN
        if not st.syn and not st.opened:
            # Data overtook the SYN: re-express what we hold relative to the real ISN.
            delta = ((st.base - base + _HALF) & _MASK) - _HALF
            st.pieces = [(s + delta, d, t) for s, d, t in st.pieces]
            st.starts = [s + delta for s in st.starts]
            st.snap = {a + delta: b + delta for a, b in st.snap.items()}
            st.top += delta
            if st.fin is not None:
                st.fin += delta
            st.base, st.syn, st.initiator, st.lo = base, True, initiator, None
            return st
        # A different ISN on the same ports is a new connection.
        if not st.ended:
            self._end(st, "reused")
        return self._new(key, base, seg.ts_ns, True, initiator)

    def _open(self, st: _Stream) -> None:
        st.opened = True
        if not st.syn:
            # Picked up mid-stream: the lowest offset held is where the stream begins for us.
            st.origin = st.emitted = min(st.lo if st.lo is not None else st.top, st.top)
        self._out.append(StreamOpen(st.key, st.syn, st.initiator))

    def _release(self, st: _Stream) -> None:
        """Open a stream held for want of its SYN, together with the other direction of its
        connection if that is held too, and pass on what both hold in capture order.

        Passing one direction's held bytes all at once, then the other's, would put responses
        far from the requests they answer (seconds of traffic apart): a framer that
        re-synchronises a response stream on the requests seen so far would then have to
        remember every one of them. Interleaved, the events come as a live capture makes them.
        """
        rev = self._streams.get((st.key[2], st.key[3], st.key[0], st.key[1]))
        group = [st]
        if rev is not None and not rev.opened and not rev.ended and not rev.syn:
            group.append(rev)
        if len(group) == 1:
            self._flush(st, force=False)
            return
        runs: list[list[tuple[int, StreamEvent]]] = []
        for s in group:
            self._open(s)
            out, self._out = self._out, []
            self._flush(s, force=False)
            events, self._out = self._out, out
            runs.append(list(_by_segment(events)))
        # each direction keeps its order; between them, the earlier capture time first
        merged = [ev for _, ev in heapq.merge(*runs, key=lambda x: x[0])]
        i = 0
        while i < len(merged):  # consecutive segments of one direction: one event again
            ev, j = merged[i], i + 1
            if type(ev) is StreamData:
                while j < len(merged) and type(merged[j]) is StreamData and merged[j].key == ev.key:
                    j += 1
                if j > i + 1:
                    run = [e for e in merged[i:j] if type(e) is StreamData]
                    data = b"".join(e.data for e in run)
                    ev = StreamData(ev.key, ev.offset, data, tuple(m for e in run for m in e.marks))
            self._out.append(ev)
            i = j

    def _end(self, st: _Stream, reason: str) -> None:
        self._flush(st, force=True)
        self._out.append(StreamEnd(st.key, st.emitted - st.origin, reason))
        st.ended = True

    def _sweep(self) -> None:
        """Give up on holes and held streams older than the window; end idle streams."""
        now, win, idle = self.clock, self.window_ns, self.idle_ns
        for key, st in list(self._streams.items()):
            if st.ended:
                if win is None or now - st.last_ts > win:
                    del self._streams[key]  # late duplicates no longer expected
                continue
            if idle is not None and now - st.last_ts > idle:
                self._end(st, "idle")
                del self._streams[key]
                continue
            if win is None:
                continue
            if not st.opened and now - st.first_ts > win:
                self._release(st)
            if st.hole_since is not None and now - st.hole_since > win:
                self._flush(st, force=True)
            if (st.rst or st.fin is not None) and now - st.last_ts > win:
                self._end(st, "rst" if st.rst else "fin")

    # -- data --------------------------------------------------------------------------
    def _store(self, st: _Stream, start: int, payload: bytes, wire_len: int, ts: int) -> None:
        stats = self.stats
        n = len(payload)
        stats.payload_bytes += n
        end = start + n
        if wire_len > n:  # the snaplen cut this segment: remember the range we will never see
            st.snap[end] = max(st.snap.get(end, end), start + wire_len)
        if start + wire_len > st.top:
            st.top = start + wire_len
        if not st.opened and (st.lo is None or start < st.lo):
            st.lo = start
        if not n:
            return
        if st.opened:
            if end <= st.emitted:
                stats.duplicate_bytes += n
                return
            if start < st.emitted:
                cut = st.emitted - start
                stats.duplicate_bytes += cut
                payload, start = payload[cut:], st.emitted
            if start == st.emitted and not st.pieces and not st.snap:
                # In-order data, the common case: pass it on without queueing it.
                o = start - st.origin
                self._out.append(StreamData(st.key, o, payload, ((o, ts),)))
                stats.data_bytes += len(payload)
                st.emitted = end
                return
        pieces, starts = st.pieces, st.starts
        if not pieces or start >= starts[-1] + len(pieces[-1][1]):
            pieces.append((start, payload, ts))
            starts.append(start)
            st.pend += len(payload)
        else:
            self._insert(st, start, payload, ts)
        if st.pend > self.max_pending:
            if not st.opened and not st.syn:
                self._release(st)
            self._flush(st, force=True)

    def _insert(self, st: _Stream, start: int, payload: bytes, ts: int) -> None:
        """Queue the parts of ``payload`` not already held: first-seen bytes win."""
        pieces, starts = st.pieces, st.starts
        end = start + len(payload)
        i = bisect_right(starts, start) - 1
        pos = start
        if i >= 0:
            pos = max(pos, starts[i] + len(pieces[i][1]))
        i += 1
        new: list[tuple[int, bytes, int]] = []
        while pos < end:
            if i < len(pieces) and starts[i] < end:
                if starts[i] > pos:
                    new.append((pos, payload[pos - start : starts[i] - start], ts))
                pos = max(pos, starts[i] + len(pieces[i][1]))
                i += 1
            else:
                new.append((pos, payload[pos - start :], ts))
                pos = end
        kept = sum(len(d) for _, d, _ in new)
        self.stats.duplicate_bytes += len(payload) - kept
        st.pend += kept
        for p in new:
            insort(pieces, p, key=lambda q: q[0])
            insort(starts, p[0])

    def _advance(self, st: _Stream) -> None:
        """Pass on what is contiguous; end the stream when its FIN is reached."""
        if not st.opened:
            # A stream without SYN is held back for a while: reordered earlier segments may
            # still come, and once the first byte is passed on, the start is fixed.
            waited = self.window_ns is not None and self.clock - st.first_ts > self.window_ns
            if not (st.syn or waited or st.pend > self.max_pending):
                return
            if st.syn:
                self._flush(st, force=False)
            else:
                self._release(st)
        elif st.pieces or st.snap:
            self._flush(st, force=False)
        # After a RST, segments reordered before it may still arrive: the stream ends at the
        # next sweep past the window, or at the end of the capture, not here.
        if st.fin is not None and st.emitted >= st.fin and not st.pieces:
            self._end(st, "fin")

    def _flush(self, st: _Stream, *, force: bool) -> None:
        """Pass on queued pieces that are contiguous; with ``force``, declare holes gaps."""
        if not st.opened:
            self._open(st)
        out, stats, origin = self._out, self.stats, st.origin
        pieces = st.pieces
        i = 0
        run: list[bytes] = []
        marks: list[tuple[int, int]] = []
        run_start = st.emitted
        while True:
            if i < len(pieces) and pieces[i][0] <= st.emitted:
                s, d, t = pieces[i]
                if s < st.emitted:  # only when a gap was declared over part of it
                    stats.duplicate_bytes += min(len(d), st.emitted - s)
                    d, s = d[st.emitted - s :], st.emitted
                if d:
                    run.append(d)
                    marks.append((s - origin, t))
                    st.emitted = s + len(d)
                i += 1
                continue
            nxt = pieces[i][0] if i < len(pieces) else None
            reason = None
            hole_end = st.emitted
            for a, b in st.snap.items():
                if a <= st.emitted < b:
                    reason, hole_end = "snaplen", b
                    break
            if reason is None and force:
                if nxt is not None:
                    reason, hole_end = "lost", nxt
                elif st.top > st.emitted or (st.fin is not None and st.fin > st.emitted):
                    reason, hole_end = "lost", max(st.top, st.fin or 0)
            if reason is None:
                break
            if nxt is not None:
                hole_end = min(hole_end, nxt)
            if run:
                self._data(st, run_start, run, marks)
                run, marks = [], []
            out.append(StreamGap(st.key, st.emitted - origin, hole_end - st.emitted, reason))
            stats.gaps += 1
            stats.gap_bytes += hole_end - st.emitted
            st.emitted = run_start = hole_end
        if run:
            self._data(st, run_start, run, marks)
        if i:
            st.pend -= sum(len(p[1]) for p in pieces[:i])
            del pieces[:i]
            del st.starts[:i]
        if st.snap:
            st.snap = {a: b for a, b in st.snap.items() if b > st.emitted}
        if not pieces:
            st.hole_since = None
        elif st.hole_since is None:
            st.hole_since = self.clock  # a hole starts waiting for its retransmission now

    def _data(self, st: _Stream, start: int, run: list[bytes], marks: list[tuple[int, int]]) -> None:
        data = run[0] if len(run) == 1 else b"".join(run)
        self.stats.data_bytes += len(data)
        self._out.append(StreamData(st.key, start - st.origin, data, tuple(marks)))


def _by_segment(events: list[StreamEvent]) -> Iterator[tuple[int, StreamEvent]]:
    """Events with a capture time each, data cut back into the segments it was made of."""
    ts = -1
    for ev in events:
        if type(ev) is StreamData and len(ev.marks) > 1:
            offs = [o for o, _ in ev.marks] + [ev.offset + len(ev.data)]
            for i, (o, t) in enumerate(ev.marks):
                a, b = o - ev.offset, offs[i + 1] - ev.offset
                ts = max(ts, t)
                yield ts, StreamData(ev.key, o, ev.data[a:b], ((o, t),))
        else:
            if type(ev) is StreamData:
                ts = max(ts, ev.marks[0][1])
            yield ts, ev


def reassemble(
    segments: Iterable[Segment],
    *,
    window_ns: int | None = DEFAULT_WINDOW_NS,
    max_pending: int = 32 << 20,
    idle_ns: int | None = None,
    stats: TcpStats | None = None,
) -> Iterator[StreamEvent]:
    """Yield the stream events of all directions for segments in capture order.

    See :class:`TcpReassembler` for the parameters. ``stats``, if given, is filled in.
    """
    r = TcpReassembler(window_ns=window_ns, max_pending=max_pending, idle_ns=idle_ns)
    if stats is not None:
        r.stats = stats
    for seg in segments:
        yield from r.add(seg)
    yield from r.finish()
