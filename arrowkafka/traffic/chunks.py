"""The columnar capture path: a capture -> Kafka frames as arrays, by batch kernels, in
bounded chunks.

The layers of this package (``pcap`` -> ``packets`` -> ``tcp`` -> ``frames``) handle one
packet at a time in Python and know every rule of real traffic. Most connections need none
of those rules: every segment captured once, nothing ahead of what was seen (retransmitted
bytes are dropped, first seen wins), a SYN at the start, whole frames of sane sizes, one side
on a broker port. Such connections go through Numba kernels (``arrowkafka.kernels.capture``)
as whole arrays. Every other connection (loss, reordering, a capture picked up mid-stream, a
frame cut short, an odd size) is fed, packet by packet and in capture order, through the
Python layers, so the result is theirs.

Which is which is known only at the end of a connection, so the capture is read twice, a
chunk of packets at a time (memory is bounded by the chunk, not the capture):

1. the census: packet headers, a number per direction (a hash table kept across chunks) and
   a small state per direction that follows its TCP sequence and Kafka frame sizes; each
   segment's direction and retransmitted bytes go to a spill file (4 bytes a segment);
2. the frames: per chunk, each clean direction's new bytes after the bytes carried from the
   previous chunk (an unfinished frame), cut into frames; the other connections' packets go
   to one Python reassembler and framer that live for the whole capture.

Frames come out per chunk, in the order the capture completed them (the packet that carried a
frame's last byte), with the ``order`` of that packet; the Python layers' items get the index
of the packet that made them ready, and items made ready only at the end of the capture last.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from arrowkafka.assembly.blocks import array, block
from arrowkafka.kernels import capture as k
from arrowkafka.traffic.frames import (
    _MIN_SIZE,
    MAX_FRAME_SIZE,
    REQUEST,
    RESPONSE,
    CaptureStats,
    ConnKey,
    FrameItem,
    KafkaFrame,
    KafkaFramer,
)
from arrowkafka.traffic.packets import PacketStats, Segment, parse_packet
from arrowkafka.traffic.pcap import (
    _PCAP_MAGICS,
    MAX_RECORD,
    TAIL_KEEP,
    CaptureFormatError,
    CaptureReader,
    Packet,
)
from arrowkafka.traffic.tcp import TcpReassembler, invalid

__all__ = ["CHUNK_BYTES", "FrameArrays", "capture_frame_arrays", "capture_frame_chunks"]

CHUNK_BYTES = 32 << 20  # capture bytes read per chunk
# Both passes read in pieces this large, which stay in the CPU's cache from the read to the
# last kernel; the frames of consecutive pieces are then joined up to CHUNK_BYTES.
READ_BYTES = 4 << 20

_KIND_STAT = {
    k.K_NON_IP: "non_ip",
    k.K_NON_TCP: "non_tcp",
    k.K_FRAGMENT: "fragments",
    k.K_UNKNOWN_LINK: "unknown_linktype",
    k.K_MALFORMED: "malformed",
}
# census state columns (see kernels.capture.census)
_CLEAN, _STARTED, _FIN, _LEFT, _PREFIX_N = 0, 1, 3, 4, 6


def _smallest_frame(to_broker: np.ndarray) -> np.ndarray:
    """Per direction, the smallest frame size it may carry: a request's header or a response's
    (the Python framer's rule)."""
    return np.where(to_broker, _MIN_SIZE[REQUEST], _MIN_SIZE[RESPONSE]).astype(np.int64)


_COLUMNS = ("size", "conn", "request", "ts_first", "ts_last", "order")  # FrameArrays' per frame, after off


@dataclass
class FrameArrays:
    """Whole Kafka frames as arrays over one byte buffer; frame ``i`` is
    ``data[off[i] : off[i] + size[i]]`` (size prefix excluded)."""

    data: np.ndarray  # uint8
    off: np.ndarray  # int64
    size: np.ndarray  # int64
    conn: np.ndarray  # int64: index into ``conns``
    request: np.ndarray  # bool: client to broker
    ts_first: np.ndarray  # int64 ns
    ts_last: np.ndarray  # int64 ns
    order: np.ndarray  # int64: when the capture completed the frame
    conns: Sequence[ConnKey]  # every connection so far (shared by a capture's chunks)
    # Partial frames and skipped bytes, with their order: they become rejects.
    others: list[tuple[int, FrameItem]] = field(default_factory=list)
    position: int = 0  # capture file bytes read when this chunk was done (for progress)

    @classmethod
    def empty(cls, conns: Sequence[ConnKey]) -> FrameArrays:
        z = np.zeros(0, np.int64)
        return cls(np.zeros(0, np.uint8), z, z, z, np.zeros(0, np.bool_), z, z, z, conns)

    @classmethod
    def join(cls, parts: list[FrameArrays]) -> FrameArrays:
        """The frames of ``parts`` (of one capture, in order) in one ``FrameArrays``."""
        if len(parts) == 1:
            return parts[0]
        data = block(sum(len(p.data) for p in parts))
        offs, at = [], 0
        for p in parts:
            data[at : at + len(p.data)] = p.data
            offs.append(p.off + at)
            at += len(p.data)
        columns = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _COLUMNS}
        others = [item for p in parts for item in p.others]
        return cls(data=data, off=np.concatenate(offs), **columns, conns=parts[-1].conns, others=others,
                   position=parts[-1].position)  # fmt: skip

    def extend(self, data: bytes, rows: list[tuple[int, int, bool, int, int, int]]) -> None:
        """Append frames: their bytes, and (size, conn, request, ts_first, ts_last, order)."""
        if not rows:
            return
        cols = np.array(rows, np.int64).T
        offs = len(self.data) + np.cumsum(cols[0]) - cols[0]
        self.data = np.concatenate([self.data, np.frombuffer(data, np.uint8)])
        self.off = np.concatenate([self.off, offs])
        self.size = np.concatenate([self.size, cols[0]])
        self.conn = np.concatenate([self.conn, cols[1]])
        self.request = np.concatenate([self.request, cols[2].astype(np.bool_)])
        self.ts_first = np.concatenate([self.ts_first, cols[3]])
        self.ts_last = np.concatenate([self.ts_last, cols[4]])
        self.order = np.concatenate([self.order, cols[5]])


class Conns(Sequence[ConnKey]):
    """A capture's connections by number: first those the kernels take, as rows of the flow
    table (made into ``ConnKey``s only when asked for: a capture may have a great many), then
    those the Python layers find, in the order found."""

    def __init__(self, rows: np.ndarray) -> None:
        # (n, 37) uint8: client ip, broker ip (16 bytes each), ip version, client port, broker
        # port (big-endian): the flow table's layout, client to broker
        self.rows = rows
        self.extra: list[ConnKey] = []

    def __len__(self) -> int:
        return len(self.rows) + len(self.extra)

    def __getitem__(self, i: int) -> ConnKey:  # type: ignore[override]
        if i < 0:
            i += len(self)
        if 0 <= i < len(self.rows):
            r = self.rows[i]
            ip = 4 if r[32] == 4 else 16
            return ConnKey(r[0:ip].tobytes(), int(r[33]) << 8 | int(r[34]), r[16 : 16 + ip].tobytes(),
                           int(r[35]) << 8 | int(r[36]))  # fmt: skip
        return self.extra[i - len(self.rows)]

    def append(self, conn: ConnKey) -> None:
        self.extra.append(conn)


class _Chunk(NamedTuple):
    """A run of packets: records at ``rec_off`` in ``buf``; ``base``: index of the first."""

    buf: np.ndarray
    rec_off: np.ndarray
    caplen: np.ndarray
    ts: np.ndarray
    linktype: np.ndarray
    base: int


def _chunks(f: BinaryIO, stats: CaptureStats | None, strict: bool, chunk_bytes: int) -> Iterator[_Chunk]:
    """The packets of a capture file, a chunk at a time; ``stats`` gets the file's counts."""
    head = f.read(24)
    if len(head) >= 4 and struct.unpack_from("<I", head, 0)[0] in _PCAP_MAGICS:
        yield from _pcap_chunks(f, head, stats, strict, chunk_bytes)
        return
    # pcapng (and anything else, for its error): the Python reader, batched into arrays
    f.seek(-len(head), io.SEEK_CUR)  # the file is seekable (see _rereadable)
    reader = CaptureReader(f, strict=strict)
    base = 0
    batch: list[Packet] = []
    size = 0
    for pkt in reader:
        batch.append(pkt)
        size += len(pkt.data)
        if size >= chunk_bytes:
            yield _from_packets(batch, base)
            base += len(batch)
            batch, size = [], 0
    if batch:
        yield _from_packets(batch, base)
    if stats is not None:
        stats.reader_result(reader)


def _from_packets(packets: list[Packet], base: int) -> _Chunk:
    caplen = np.fromiter((len(p.data) for p in packets), np.int64, len(packets))
    rec_off = np.zeros(len(packets), np.int64)
    np.cumsum(caplen[:-1], out=rec_off[1:])
    buf = np.frombuffer(b"".join(p.data for p in packets), np.uint8)
    ts = np.fromiter((p.ts_ns for p in packets), np.int64, len(packets))
    linktype = np.fromiter((p.linktype for p in packets), np.int64, len(packets))
    return _Chunk(buf, rec_off, caplen, ts, linktype, base)


def _pcap_chunks(
    f: BinaryIO, head: bytes, stats: CaptureStats | None, strict: bool, chunk_bytes: int
) -> Iterator[_Chunk]:
    order, frac_ns = _PCAP_MAGICS[struct.unpack_from("<I", head, 0)[0]]
    if len(head) < 24:
        raise CaptureFormatError(0, "truncated pcap file header")
    snaplen, network = struct.unpack_from(order + "II", head, 16)
    limit = max(snaplen, MAX_RECORD)
    if stats is not None:
        stats.format = "pcap"
    rest = np.zeros(0, np.uint8)  # bytes of an unfinished record, carried to the next read
    at = 24  # file offset of rest[0]
    base = 0
    eof = False
    while not eof:
        buf = _read(f, rest, max(chunk_bytes, 1))
        eof = len(buf) == len(rest)
        if not len(buf):
            break
        most = len(buf) // 16 + 1
        rec_off, caplen, origlen, ts = array((4, most), np.int64)
        n, pos, status = k.pcap_records(buf, 0, order == ">", frac_ns, limit, rec_off, caplen, origlen, ts)
        if n:
            if stats is not None:
                stats.packets = base + n
            yield _Chunk(buf, rec_off[:n], caplen[:n], ts[:n], np.full(n, network & 0xFFFF, np.int64), base)
            base += n
        rest, at = buf[pos:], at + pos
        if status == 2:  # a broken record: the packets before it stand (CaptureReader's rule)
            incl = struct.unpack_from(order + "I", rest[8:12].tobytes())[0]
            reason = f"record length {incl} is implausible"
            if strict:
                raise CaptureFormatError(at, reason)
            kept = rest[:TAIL_KEEP].tobytes()
            total = len(rest)
            while got := f.read(READ_BYTES):  # the rest of the file: counted, its start kept
                kept += got[: TAIL_KEEP - len(kept)]
                total += len(got)
            if stats is not None:
                stats.broken_offset, stats.broken_reason = at, reason
                stats.broken_bytes, stats.tail = total, kept
            return
        if eof and len(rest):
            what = "pcap record header" if len(rest) < 16 else "pcap record"
            if strict:
                raise CaptureFormatError(at, f"truncated {what}: file ends {len(rest)} bytes into it")
            if stats is not None:
                stats.truncated_bytes, stats.truncated_offset = len(rest), at
                stats.tail = rest[:TAIL_KEEP].tobytes()


def _read(f: BinaryIO, rest: np.ndarray, n: int) -> np.ndarray:
    """The bytes ``rest`` (the end of the last read) followed by up to ``n`` more of ``f``, read
    in place, into a block kept from piece to piece. (Not a memory map of the file, though
    that is a little faster: a file truncated while mapped kills the reader.)"""
    out = block(len(rest) + n)
    out[: len(rest)] = rest
    got = f.readinto(out[len(rest) :].data)  # type: ignore[attr-defined]
    view = out[: len(rest) + (got or 0)]
    view.flags.writeable = False  # the kernels only read it: one signature for every source
    return view


class _Segments(NamedTuple):
    """The TCP segments of a chunk (rows ``tcp`` of per-packet arrays)."""

    buf: np.ndarray
    tcp: np.ndarray
    addr: np.ndarray
    seq: np.ndarray
    flags: np.ndarray
    pay_off: np.ndarray
    pay_len: np.ndarray
    wire_len: np.ndarray
    ts: np.ndarray


def _segments(c: _Chunk, link: PacketStats | None) -> _Segments:
    n = len(c.rec_off)
    # over blocks kept from chunk to chunk: fresh memory costs a page fault a page
    kind = array(n, np.int8)
    kind[:] = k.K_MALFORMED
    addr = array((n, 37), np.uint8)  # src ip, dst ip (16 each), ip version, sport, dport
    addr[:] = 0
    sport, dport, seq, flags, pay_off, pay_len, wire_len = array((7, n), np.int64)
    for column in (sport, dport, seq, flags, pay_off, pay_len, wire_len):
        column[:] = 0
    k.parse_packets(c.buf, c.rec_off, c.caplen, c.linktype, kind, addr, sport, dport, seq, flags, pay_off,
                    pay_len, wire_len)  # fmt: skip
    buf = c.buf
    if (kind == k.K_PYTHON).any():
        buf = _python_packets(buf, c.rec_off, c.caplen, c.ts, c.linktype, kind, addr, sport, dport, seq,
                              flags,                               pay_off, pay_len, wire_len)  # fmt: skip
    if link is not None:
        _count_packets(link, kind, pay_len, wire_len)
    addr[:, 33], addr[:, 34] = sport >> 8, sport & 0xFF
    addr[:, 35], addr[:, 36] = dport >> 8, dport & 0xFF
    return _Segments(buf, np.flatnonzero(kind == k.K_TCP), addr, seq, flags, pay_off, pay_len, wire_len, c.ts)


class _Flows:
    """Every direction seen, numbered by a hash table kept across chunks, with its census state."""

    FIRST_CAPACITY = 1024  # directions; doubled as needed

    def __init__(self, broker_ports: frozenset[int], max_frame_size: int) -> None:
        self.ports = np.array(sorted(broker_ports), np.int64)
        self.max_frame_size = max_frame_size
        self.count = np.zeros(1, np.int64)
        self.keys = np.zeros((0, 37), np.uint8)
        self.hashes = np.zeros(0, np.int64)
        self.state = np.zeros((0, 7), np.int64)
        self.min_size = np.zeros(0, np.int64)  # per flow: the smallest frame size it may carry
        self._grow(self.FIRST_CAPACITY)

    def _grow(self, cap: int) -> None:
        n = int(self.count[0])
        keys = np.zeros((cap, 37), np.uint8)
        hashes = np.zeros(cap, np.int64)
        state = np.zeros((cap, 7), np.int64)
        min_size = np.zeros(cap, np.int64)
        if n:
            keys[:n], hashes[:n], state[:n] = self.keys[:n], self.hashes[:n], self.state[:n]
            min_size[:n] = self.min_size[:n]
        self.keys, self.hashes, self.state, self.min_size = keys, hashes, state, min_size
        self.table = np.full(4 * cap, -1, np.int64)
        k.rehash(self.table, self.keys, self.hashes, n)

    def ids(self, seg: _Segments) -> np.ndarray:
        flow_of = np.empty(len(seg.tcp), np.int64)
        done = 0
        while True:
            start = int(self.count[0])
            done += k.flow_ids(seg.addr, seg.tcp[done:], self.table, self.keys, self.hashes, self.count,
                               flow_of[done:])  # fmt: skip
            new = slice(start, int(self.count[0]))
            self.state[new, _CLEAN] = 1
            self.state[new, _FIN] = -1
            self.min_size[new] = _smallest_frame(self.to_broker(new))
            if done == len(seg.tcp):
                return flow_of
            self._grow(2 * len(self.keys))

    def ports_of(self, flows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        keys = self.keys[flows]
        return (keys[:, 33].astype(np.int64) << 8) | keys[:, 34], (keys[:, 35].astype(np.int64) << 8) | keys[
            :, 36
        ]

    def to_broker(self, flows: np.ndarray | slice) -> np.ndarray:
        sport, dport = self.ports_of(flows)
        return np.isin(dport, self.ports) & ~np.isin(sport, self.ports)

    def census(self, seg: _Segments, flow_of: np.ndarray) -> np.ndarray:
        skip = np.zeros(len(seg.tcp), np.int64)
        k.census(seg.tcp, flow_of, seg.buf, seg.seq, seg.flags, seg.pay_off, seg.pay_len, seg.wire_len,
                 self.min_size, self.max_frame_size, self.state, skip)  # fmt: skip
        return skip

    def verdict(self) -> _Verdict:
        """What the frames pass needs of the census (the tables themselves can then go: for a
        capture of a million connections they hold half a gigabyte)."""
        n = int(self.count[0])
        st = self.state[:n]
        # the directions the kernels take: clean, ended on a whole frame, with a reverse that
        # is too, one side on a broker port; a direction whose every segment was invalid (SYN
        # with FIN or RST) never started, and the Python layers make nothing of it either
        fast = (st[:, _CLEAN] == 1) & (st[:, _STARTED] == 1) & (st[:, _LEFT] == 0) & (st[:, _PREFIX_N] == 0)
        sport, dport = self.ports_of(slice(0, n))
        fast &= np.isin(dport, self.ports) != np.isin(sport, self.ports)
        reverse = np.empty(n, np.int64)
        k.flow_reverse(self.table, self.keys, self.hashes, n, reverse, np.empty(self.keys.shape[1], np.uint8))
        fast &= reverse >= 0
        fast &= fast[np.maximum(reverse, 0)]
        to_broker = self.to_broker(slice(0, n))
        ends = np.flatnonzero(fast & to_broker)
        return _Verdict(fast, to_broker, ends, reverse[ends], self.keys[ends])


class _Verdict(NamedTuple):
    """The census's verdict, per direction: whether the kernels take it, whether it goes to a
    broker; and the kernels' connections, numbered by their client-to-broker direction
    (``ends``), with their other direction and their flow-table rows."""

    fast: np.ndarray
    to_broker: np.ndarray
    ends: np.ndarray
    back: np.ndarray
    rows: np.ndarray


def _rereadable(source: str | os.PathLike[str] | BinaryIO) -> tuple[BinaryIO, bool]:
    """(file, whether we opened it) that can be read from the start twice."""
    if isinstance(source, str | os.PathLike):
        return open(source, "rb"), True
    try:
        source.seek(source.tell())
        return source, False
    except (AttributeError, OSError, io.UnsupportedOperation):
        spool = tempfile.TemporaryFile()  # a pipe or socket: keep a copy on disk, not in memory
        shutil.copyfileobj(source, spool)
        spool.seek(0)
        return spool, True


def capture_frame_chunks(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    broker_ports: frozenset[int],
    max_frame_size: int = MAX_FRAME_SIZE,
    strict: bool = False,
    stats: CaptureStats | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[FrameArrays]:
    """The Kafka frames of a capture, one ``FrameArrays`` per chunk; see the module docs."""
    st = stats if stats is not None else CaptureStats()
    f, owned = _rereadable(source)
    spill: BinaryIO | None = None
    try:
        start = f.tell()
        flows = _Flows(broker_ports, max_frame_size)
        packets = 0
        # what pass 2 needs of each segment, kept on disk: 4 bytes a segment, not a second census
        spill = tempfile.TemporaryFile()
        for c in _chunks(f, None, strict, min(chunk_bytes, READ_BYTES)):  # 1: the census
            seg = _segments(c, None)
            flow_of = flows.ids(seg)
            skip = flows.census(seg, flow_of)
            _spill(spill, flow_of, skip)
            packets = c.base + len(c.rec_off)
        verdict = flows.verdict()
        del flows
        f.seek(start)
        spill.seek(0)
        pieces = _frames(f, verdict, spill, broker_ports, max_frame_size, strict, st,
                         min(chunk_bytes, READ_BYTES), packets)  # fmt: skip
        yield from _joined(pieces, chunk_bytes)
    finally:
        if owned:
            f.close()
        if spill is not None:
            spill.close()


def capture_frame_arrays(source: str | os.PathLike[str] | BinaryIO, **options: Any) -> FrameArrays:
    """All the frames of a capture in one ``FrameArrays`` (for tests and small captures);
    ``options`` as ``capture_frame_chunks`` takes them."""
    parts = list(capture_frame_chunks(source, **options))
    return FrameArrays.join(parts) if parts else FrameArrays.empty([])


def _joined(parts: Iterator[FrameArrays], nbytes: int) -> Iterator[FrameArrays]:
    """Consecutive parts joined until they hold ``nbytes`` of frames: the capture is read in
    pieces that stay in the CPU's cache, and the decoder still gets large batches."""
    held: list[FrameArrays] = []
    size = 0
    for part in parts:
        held.append(part)
        size += len(part.data)
        if size >= nbytes:
            yield FrameArrays.join(held)
            held, size = [], 0
    if held:
        yield FrameArrays.join(held)


def _spill(spill: BinaryIO, flow_of: np.ndarray, skip: np.ndarray) -> None:
    """A piece's census results to the spill file: each segment's direction (4 bytes), and
    the few segments with retransmitted bytes to skip, as (segment, bytes) pairs."""
    some = np.flatnonzero(skip)
    spill.write(np.array([len(some)], np.int32).tobytes())
    spill.write(flow_of.astype(np.int32).tobytes())
    spill.write(np.concatenate([some, skip[some]]).astype(np.int32).tobytes())


def _unspill(spill: BinaryIO, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The next piece's (direction, bytes to skip) per segment, for its ``n`` segments."""
    head = spill.read(4)
    flow_of = np.frombuffer(spill.read(4 * n), np.int32).astype(np.int64)
    if len(head) != 4 or len(flow_of) != n:
        raise AssertionError("the census saw other segments")  # a bug, never bad input
    some = int(np.frombuffer(head, np.int32)[0])
    pairs = np.frombuffer(spill.read(8 * some), np.int32).astype(np.int64)
    skip = np.zeros(n, np.int64)
    skip[pairs[:some]] = pairs[some:]
    return flow_of, skip


def _frames(
    f: BinaryIO,
    verdict: _Verdict,
    spill: BinaryIO,
    broker_ports: frozenset[int],
    max_frame_size: int,
    strict: bool,
    st: CaptureStats,
    chunk_bytes: int,
    census_packets: int,
) -> Iterator[FrameArrays]:
    """Pass 2: per chunk, the frames of the fast directions (kernels) and of the others (the
    Python layers, fed in capture order, alive across chunks). Only the packets the census saw:
    a capture still being written may have grown since."""
    fast, to_broker = verdict.fast, verdict.to_broker
    nflows = len(fast)
    flow_conn = np.full(nflows, -1, np.int64)
    conns = Conns(verdict.rows)
    flow_conn[verdict.ends] = flow_conn[verdict.back] = np.arange(len(verdict.ends))
    # the Python layers' connections (never a kernel's: a connection is one or the other)
    conn_id: dict[ConnKey, int] = {}
    carry = _Carry(nflows)
    slow = _SlowPath(broker_ports, max_frame_size, st, conns, conn_id)
    packets = 0
    for c in _chunks(f, st, strict, chunk_bytes):
        if c.base >= census_packets:
            break
        if c.base + len(c.rec_off) > census_packets:
            n = census_packets - c.base
            c = _Chunk(c.buf, c.rec_off[:n], c.caplen[:n], c.ts[:n], c.linktype[:n], c.base)
            st.packets = census_packets
        seg = _segments(c, st.link)
        flow_of, skip = _unspill(spill, len(seg.tcp))  # the same pieces, so the same segments
        packets = c.base + len(c.rec_off)
        is_fast = fast[flow_of]
        st.tcp.segments += int(is_fast.sum())
        fast_segs = seg.tcp[is_fast]
        ignored = invalid(seg.flags[fast_segs])  # the census skipped them, as the reassembler does
        if ignored.any():
            st.tcp.invalid_segments += int(ignored.sum())
            st.tcp.invalid_bytes += int(seg.pay_len[fast_segs[ignored]].sum())
        out = _fast_frames(seg, flow_of[is_fast], seg.tcp[is_fast], skip[is_fast], carry, max_frame_size,
                           c.base, conns, flow_conn, to_broker)  # fmt: skip
        st.frames.requests += int(out.request.sum())
        st.frames.responses += int((~out.request).sum())
        slow.feed(out, seg, seg.tcp[~is_fast], c.base)
        out.position = f.tell()
        yield out
    st.tcp.streams += int(fast.sum())
    last = FrameArrays.empty(conns)
    slow.finish(last, packets)
    last.position = f.tell()
    yield last


class _Carry:
    """Per direction, the bytes of its unfinished frame carried from chunk to chunk: how many
    and the times of the segments that brought them (arrays), and the bytes (few directions)."""

    def __init__(self, flows: int) -> None:
        self.length = np.zeros(flows, np.int64)
        self.ts = np.zeros((flows, 2), np.int64)  # earliest, latest
        self.data: dict[int, bytes] = {}
        self.place = np.zeros(flows, np.int64)  # scratch: a direction's place in a piece's


def _fast_frames(
    seg: _Segments,
    flow_of: np.ndarray,
    segs: np.ndarray,
    skip: np.ndarray,
    carry: _Carry,
    max_frame_size: int,
    base: int,
    conns: Conns,
    flow_conn: np.ndarray,
    to_broker: np.ndarray,
) -> FrameArrays:
    # local flows of this chunk, their segments grouped (capture order kept within each)
    local = np.unique(flow_of)
    carry.place[local] = np.arange(len(local))  # (not return_inverse: a second sort)
    inverse = carry.place[flow_of]
    by_flow = np.argsort(inverse, kind="stable")
    order = segs[by_flow]
    lstart = np.zeros(len(local) + 1, np.int64)
    np.cumsum(np.bincount(inverse, minlength=len(local)), out=lstart[1:])
    pay_off = seg.pay_off.copy()
    pay_len = seg.pay_len.copy()
    pay_off[segs] += skip  # retransmitted bytes dropped
    pay_len[segs] -= skip
    carry_len, carry_ts = carry.length[local], carry.ts[local]
    carry_off = np.cumsum(carry_len) - carry_len
    carry_buf = np.frombuffer(b"".join(carry.data.pop(fl) for fl in local[carry_len > 0].tolist()), np.uint8)
    out_len = carry_len + np.bincount(inverse, weights=pay_len[segs], minlength=len(local)).astype(np.int64)
    out_start = np.cumsum(out_len) - out_len
    data = block(int(out_len.sum()))  # kept from chunk to chunk: no page faults after the first
    seg_pos = np.zeros(len(order), np.int64)
    k.assemble(seg.buf, order, lstart, carry_buf, carry_off, carry_len, pay_off, pay_len, out_start, data,
               seg_pos)  # fmt: skip
    most = len(data) // 8 + 1
    f_flow, f_off, f_size, f_done = (np.empty(most, np.int64) for _ in range(4))
    f_ts = np.empty((most, 2), np.int64)
    tail = np.zeros((len(local), 4), np.int64)
    min_size = _smallest_frame(to_broker[local])
    nf = k.split_frames(data, order, lstart, out_start, out_len, seg_pos, pay_len, seg.ts, base, carry_len,
                        carry_ts, min_size, max_frame_size, f_flow, f_off, f_size, f_ts, f_done,
                        tail)  # fmt: skip
    if nf < 0:
        raise AssertionError("a frame size the census accepted is out of range")  # a kernel bug
    carry.length[local], carry.ts[local] = tail[:, 1], tail[:, 2:4]
    for j in np.flatnonzero(tail[:, 1]).tolist():
        a, m = int(tail[j, 0]), int(tail[j, 1])
        carry.data[int(local[j])] = data[a : a + m].tobytes()
    g = local[f_flow[:nf]]
    return FrameArrays(data, f_off[:nf], f_size[:nf], flow_conn[g], to_broker[g], f_ts[:nf, 0].copy(),
                       f_ts[:nf, 1].copy(), f_done[:nf], conns)  # fmt: skip


class _SlowPath:
    """The connections the kernels do not take, through the Python reassembler and framer."""

    def __init__(
        self,
        broker_ports: frozenset[int],
        max_frame_size: int,
        st: CaptureStats,
        conns: Conns,
        conn_id: dict[ConnKey, int],
    ) -> None:
        self.reasm = TcpReassembler()
        self.reasm.stats = st.tcp
        self.framer = KafkaFramer(broker_ports, max_frame_size=max_frame_size)
        self.framer.stats = st.frames
        self.conns, self.conn_id = conns, conn_id

    def _emit(self, out: FrameArrays, items: list[tuple[int, FrameItem]]) -> None:
        """Items with the order of the packet that made each ready, into ``out``."""
        data: list[bytes] = []
        rows = []
        for i, item in items:
            if not isinstance(item, KafkaFrame):
                out.others.append((i, item))
                continue
            if item.conn not in self.conn_id:
                self.conn_id[item.conn] = len(self.conns)
                self.conns.append(item.conn)
            data.append(bytes(item.data))
            rows.append((len(item.data), self.conn_id[item.conn], item.direction == "request",
                         item.ts_first_ns, item.ts_last_ns, i))  # fmt: skip
        out.extend(b"".join(data), rows)

    def feed(self, out: FrameArrays, seg: _Segments, segs: np.ndarray, base: int) -> None:
        items: list[tuple[int, FrameItem]] = []
        addr = seg.addr
        for i in segs.tolist():
            ip = 4 if addr[i, 32] == 4 else 16
            a = int(seg.pay_off[i])
            sport = (int(addr[i, 33]) << 8) | int(addr[i, 34])
            dport = (int(addr[i, 35]) << 8) | int(addr[i, 36])
            payload = seg.buf[a : a + int(seg.pay_len[i])].tobytes()
            s = Segment(int(seg.ts[i]), addr[i, 0:ip].tobytes(), sport, addr[i, 16 : 16 + ip].tobytes(),
                        dport, int(seg.seq[i]), int(seg.flags[i]), payload, int(seg.wire_len[i]))  # fmt: skip
            for ev in self.reasm.add(s):
                items += [(base + i, item) for item in self.framer.feed(ev)]
        self._emit(out, items)

    def finish(self, out: FrameArrays, packets: int) -> None:
        items = [(packets, item) for ev in self.reasm.finish() for item in self.framer.feed(ev)]
        items += [(packets, item) for item in self.framer.finish()]
        self._emit(out, items)


def _python_packets(
    buf: np.ndarray,
    rec_off: np.ndarray,
    caplen: np.ndarray,
    ts: np.ndarray,
    linktype: np.ndarray,
    kind: np.ndarray,
    addr: np.ndarray,
    sport: np.ndarray,
    dport: np.ndarray,
    seq: np.ndarray,
    flags: np.ndarray,
    pay_off: np.ndarray,
    pay_len: np.ndarray,
    wire_len: np.ndarray,
) -> np.ndarray:
    """Packets the kernel leaves to the Python parser (IPv6 extension headers); their payloads
    are appended to the buffer, which is returned."""
    extra: list[bytes] = []
    at = len(buf)
    for i in np.flatnonzero(kind == k.K_PYTHON).tolist():
        stats = PacketStats()  # one packet's outcome
        a, m = int(rec_off[i]), int(caplen[i])
        seg = parse_packet(Packet(int(ts[i]), int(linktype[i]), buf[a : a + m].tobytes(), 0), stats)
        if seg is None:
            counts = stats.as_dict()
            kind[i] = next(code for code, name in _KIND_STAT.items() if counts[name])
            continue
        kind[i] = k.K_TCP
        ip = len(seg.src)
        addr[i, 0:ip] = np.frombuffer(seg.src, np.uint8)
        addr[i, 16 : 16 + ip] = np.frombuffer(seg.dst, np.uint8)
        addr[i, 32] = 4 if ip == 4 else 6
        sport[i], dport[i], seq[i], flags[i] = seg.sport, seg.dport, seg.seq, seg.flags
        pay_off[i], pay_len[i], wire_len[i] = at, len(seg.payload), seg.wire_len
        extra.append(seg.payload)
        at += len(seg.payload)
    return np.concatenate([buf, np.frombuffer(b"".join(extra), np.uint8)]) if extra else buf


def _count_packets(link: PacketStats, kind: np.ndarray, pay_len: np.ndarray, wire_len: np.ndarray) -> None:
    counts = np.bincount(kind, minlength=7)
    link.tcp += int(counts[k.K_TCP])
    link.truncated += int(((kind == k.K_TCP) & (pay_len < wire_len)).sum())
    for code, name in _KIND_STAT.items():
        setattr(link, name, getattr(link, name) + int(counts[code]))
