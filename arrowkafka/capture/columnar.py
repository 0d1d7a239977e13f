"""The columnar capture path: a whole capture -> Kafka frames as arrays, by batch kernels.

The layers of this package (``pcap`` -> ``packets`` -> ``tcp`` -> ``frames``) handle one
packet at a time in Python and know every rule of real traffic. Most connections need none
of those rules: every segment captured once and in order, a SYN at the start, one side on a
broker port. Here such connections go through Numba kernels (``arrowkafka.kernels.capture``)
as whole arrays: records, packet headers, a check that each direction is textbook TCP,
payloads gathered into one stream buffer, streams cut into frames. Every other connection
(loss, reordering, a capture picked up mid-stream, a frame cut short, an odd header) is fed,
packet by packet and in capture order, through the Python layers, so the result is theirs.

Frames come out in the order the capture completed them (the packet that carried a frame's
last byte), with the ``order`` of that packet; the Python layers' items get the index of the
packet that made them ready, and items made ready only at the end of the capture come last.
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from arrowkafka.kernels import capture as k

from .frames import (
    MAX_FRAME_SIZE,
    CaptureStats,
    ConnKey,
    FrameItem,
    KafkaFrame,
    KafkaFramer,
)
from .packets import PacketStats, Segment, parse_packet
from .pcap import _PCAP_MAGICS, MAX_RECORD, CaptureFormatError, CaptureReader, Packet
from .tcp import TcpReassembler

__all__ = ["FrameArrays", "capture_frame_arrays"]

_KIND_STAT = {
    k.K_NON_IP: "non_ip",
    k.K_NON_TCP: "non_tcp",
    k.K_FRAGMENT: "fragments",
    k.K_UNKNOWN_LINK: "unknown_linktype",
    k.K_MALFORMED: "malformed",
}


@dataclass
class FrameArrays:
    """The whole Kafka frames of a capture, as arrays over one byte buffer; frame ``i`` is
    ``data[off[i] : off[i] + size[i]]`` (size prefix excluded)."""

    data: np.ndarray  # uint8
    off: np.ndarray  # int64
    size: np.ndarray  # int64
    conn: np.ndarray  # int64: index into ``conns``
    request: np.ndarray  # bool: client to broker
    ts_first: np.ndarray  # int64 ns
    ts_last: np.ndarray  # int64 ns
    order: np.ndarray  # int64: when the capture completed the frame
    conns: list[ConnKey]
    # Partial frames and skipped bytes, with their order: they become rejects.
    others: list[tuple[int, FrameItem]] = field(default_factory=list)


def _read(source: str | os.PathLike[str] | BinaryIO) -> bytes:
    if isinstance(source, str | os.PathLike):
        with open(source, "rb") as f:
            return f.read()
    return source.read()


def _packets(raw: bytes, stats: CaptureStats, strict: bool) -> tuple[np.ndarray, ...]:
    """(buffer, record offsets, captured lengths, timestamps, link types) of every packet."""
    if len(raw) >= 4 and struct.unpack_from("<I", raw, 0)[0] in _PCAP_MAGICS:
        order, frac_ns = _PCAP_MAGICS[struct.unpack_from("<I", raw, 0)[0]]
        if len(raw) < 24:
            raise CaptureFormatError(0, "truncated pcap file header")
        snaplen, network = struct.unpack_from(order + "II", raw, 16)
        buf = np.frombuffer(raw, np.uint8)
        most = (len(raw) - 24) // 16 + 1
        rec_off, caplen = np.empty(most, np.int64), np.empty(most, np.int64)
        origlen, ts = np.empty(most, np.int64), np.empty(most, np.int64)
        limit = max(snaplen, MAX_RECORD)
        n, pos, status = k.pcap_records(buf, 24, order == ">", frac_ns, limit, rec_off, caplen, origlen, ts)
        if status == 2:
            incl = struct.unpack_from(order + "I", raw, pos + 8)[0]
            raise CaptureFormatError(pos, f"record length {incl} is implausible")
        if status == 1:
            what = "pcap record header" if len(raw) - pos < 16 else "pcap record"
            if strict:
                raise CaptureFormatError(pos, f"truncated {what}: file ends {len(raw) - pos} bytes into it")
            stats.truncated_bytes = len(raw) - pos
        stats.format, stats.packets = "pcap", n
        linktype = np.full(n, network & 0xFFFF, np.int64)
        return buf, rec_off[:n], caplen[:n], ts[:n], linktype
    # pcapng (and anything else, for its error): the Python reader, into the same arrays
    reader = CaptureReader(io.BytesIO(raw), strict=strict)
    pkts = list(reader)
    stats.format, stats.packets, stats.truncated_bytes = reader.format, reader.packets, reader.truncated_bytes
    caplen = np.fromiter((len(p.data) for p in pkts), np.int64, len(pkts))
    rec_off = np.zeros(len(pkts), np.int64)
    np.cumsum(caplen[:-1], out=rec_off[1:])
    buf = np.frombuffer(b"".join(p.data for p in pkts), np.uint8)
    ts = np.fromiter((p.ts_ns for p in pkts), np.int64, len(pkts))
    linktype = np.fromiter((p.linktype for p in pkts), np.int64, len(pkts))
    return buf, rec_off, caplen, ts, linktype


def capture_frame_arrays(
    source: str | os.PathLike[str] | BinaryIO,
    *,
    broker_ports: frozenset[int],
    max_frame_size: int = MAX_FRAME_SIZE,
    strict: bool = False,
    stats: CaptureStats | None = None,
) -> FrameArrays:
    """The Kafka frames of a capture; see the module docs."""
    st = stats if stats is not None else CaptureStats()
    buf, rec_off, caplen, ts, linktype = _packets(_read(source), st, strict)
    n = len(rec_off)
    kind = np.full(n, k.K_MALFORMED, np.int8)
    addr = np.zeros((n, 37), np.uint8)  # src ip, dst ip (16 each), ip version, sport, dport
    sport, dport = np.zeros(n, np.int64), np.zeros(n, np.int64)
    seq, flags = np.zeros(n, np.int64), np.zeros(n, np.int64)
    pay_off, pay_len, wire_len = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    k.parse_packets(buf, rec_off, caplen, linktype, kind, addr, sport, dport, seq, flags, pay_off, pay_len,
                    wire_len)  # fmt: skip
    if (kind == k.K_PYTHON).any():
        buf = _python_packets(buf, rec_off, caplen, ts, linktype, kind, addr, sport, dport, seq, flags,
                              pay_off, pay_len, wire_len)  # fmt: skip
    _count_packets(st.link, kind, pay_len, wire_len)
    tcp = np.flatnonzero(kind == k.K_TCP)
    addr[:, 33], addr[:, 34] = sport >> 8, sport & 0xFF
    addr[:, 35], addr[:, 36] = dport >> 8, dport & 0xFF

    # directions (flows), each with its reverse, and their segments grouped flow by flow
    flow_of = np.empty(len(tcp), np.int64)
    first, reverse = np.empty(len(tcp) + 1, np.int64), np.empty(len(tcp) + 1, np.int64)
    nflows = k.flows(addr, tcp, flow_of, first, reverse)
    first, reverse = first[:nflows], reverse[:nflows]
    rows = addr[first]
    fsport, fdport = sport[first], dport[first]
    ports = np.array(sorted(broker_ports), np.int64)
    to_broker = np.isin(fdport, ports) & ~np.isin(fsport, ports)
    from_broker = np.isin(fsport, ports) & ~np.isin(fdport, ports)
    order = np.empty(len(tcp), np.int64)
    fstart = np.zeros(nflows + 1, np.int64)
    k.group_by_flow(tcp, flow_of, nflows, order, fstart)
    clean = np.zeros(nflows, np.bool_)
    nbytes = np.zeros(nflows, np.int64)
    skip = np.zeros(n, np.int64)
    k.clean_flows(order, fstart, seq, flags, pay_len, wire_len, clean, nbytes, skip)
    new_off, new_len = pay_off + skip, pay_len - skip  # retransmitted bytes dropped
    has_rev = reverse >= 0
    fast = clean & has_rev & (to_broker | from_broker)
    fast &= np.where(has_rev, fast[np.maximum(reverse, 0)], False)

    take = np.flatnonzero(fast)
    out_start = np.zeros(nflows, np.int64)
    out_start[take] = np.cumsum(nbytes[take]) - nbytes[take]
    data = np.empty(int(nbytes[take].sum()), np.uint8)
    seg_pos = np.zeros(n, np.int64)
    k.gather_streams(buf, order, fstart, take, new_off, new_len, out_start, data, seg_pos)
    min_size = np.where(to_broker, 8, 4).astype(np.int64)
    most = int(nbytes[take].sum() // 8) + 1
    f_flow, f_off, f_size = np.empty(most, np.int64), np.empty(most, np.int64), np.empty(most, np.int64)
    f_ts0, f_ts1, f_done = np.empty(most, np.int64), np.empty(most, np.int64), np.empty(most, np.int64)
    bad = np.zeros(nflows, np.bool_)
    nf = k.split_frames(data, order, fstart, take, out_start, nbytes, seg_pos, new_len, ts, min_size,
                        max_frame_size, f_flow, f_off, f_size, f_ts0, f_ts1, f_done, bad)  # fmt: skip
    if bad.any():  # a connection with a bad direction goes to the Python layers whole
        gone = bad | bad[np.maximum(reverse, 0)]
        keep = ~gone[f_flow[:nf]]
        f_flow, f_off, f_size = f_flow[:nf][keep], f_off[:nf][keep], f_size[:nf][keep]
        f_ts0, f_ts1, f_done = f_ts0[:nf][keep], f_ts1[:nf][keep], f_done[:nf][keep]
        fast &= ~gone
        nf = len(f_flow)

    # connections of the fast path: the client is the side that talks to a broker port
    conns: list[ConnKey] = []
    conn_id: dict[ConnKey, int] = {}
    flow_conn = np.full(nflows, -1, np.int64)
    for f in np.flatnonzero(fast & to_broker):
        r = rows[f]
        ip = 4 if r[32] == 4 else 16
        ck = ConnKey(r[0:ip].tobytes(), int(fsport[f]), r[16 : 16 + ip].tobytes(), int(fdport[f]))
        conn_id[ck] = flow_conn[f] = flow_conn[reverse[f]] = len(conns)
        conns.append(ck)
    st.tcp.segments += int(np.isin(flow_of, take).sum())
    st.tcp.streams += len(take)
    out = FrameArrays(
        data, f_off[:nf], f_size[:nf], flow_conn[f_flow[:nf]], to_broker[f_flow[:nf]], f_ts0[:nf],
        f_ts1[:nf], f_done[:nf], conns,
    )  # fmt: skip
    st.frames.requests += int(out.request.sum())
    st.frames.responses += nf - int(out.request.sum())
    slow = tcp[~fast[flow_of]]
    if len(slow):
        _python_frames(out, conn_id, slow, buf, ts, addr, sport, dport, seq, flags, pay_off, pay_len,
                       wire_len, broker_ports, max_frame_size, st, n)  # fmt: skip
    return out


def _python_frames(
    out: FrameArrays,
    conn_id: dict[ConnKey, int],
    segments: np.ndarray,
    buf: np.ndarray,
    ts: np.ndarray,
    addr: np.ndarray,
    sport: np.ndarray,
    dport: np.ndarray,
    seq: np.ndarray,
    flags: np.ndarray,
    pay_off: np.ndarray,
    pay_len: np.ndarray,
    wire_len: np.ndarray,
    broker_ports: frozenset[int],
    max_frame_size: int,
    st: CaptureStats,
    packets: int,
) -> None:
    """The segments of the other connections through the Python layers, in capture order."""
    reasm = TcpReassembler()
    reasm.stats = st.tcp
    framer = KafkaFramer(broker_ports, max_frame_size=max_frame_size)
    framer.stats = st.frames
    frames: list[tuple[int, KafkaFrame]] = []

    def take(i: int, items: list[FrameItem]) -> None:
        for item in items:
            if isinstance(item, KafkaFrame):
                frames.append((i, item))
            else:
                out.others.append((i, item))

    raw = buf.tobytes()
    for i in segments.tolist():
        ip = 4 if addr[i, 32] == 4 else 16
        a = int(pay_off[i])
        seg = Segment(int(ts[i]), addr[i, 0:ip].tobytes(), int(sport[i]), addr[i, 16 : 16 + ip].tobytes(),
                      int(dport[i]), int(seq[i]), int(flags[i]), raw[a : a + int(pay_len[i])],
                      int(wire_len[i]))  # fmt: skip
        for ev in reasm.add(seg):
            take(i, list(framer.feed(ev)))
    for ev in reasm.finish():
        take(packets, list(framer.feed(ev)))
    take(packets, list(framer.finish()))
    if not frames:
        return
    extra = b"".join(f.data for _, f in frames)
    sizes = np.fromiter((len(f.data) for _, f in frames), np.int64, len(frames))
    offs = len(out.data) + np.cumsum(sizes) - sizes
    ids = []
    for _, f in frames:
        if f.conn not in conn_id:
            conn_id[f.conn] = len(out.conns)
            out.conns.append(f.conn)
        ids.append(conn_id[f.conn])
    out.data = np.concatenate([out.data, np.frombuffer(extra, np.uint8)])
    out.off = np.concatenate([out.off, offs])
    out.size = np.concatenate([out.size, sizes])
    out.conn = np.concatenate([out.conn, np.asarray(ids, np.int64)])
    out.request = np.concatenate([out.request, np.array([f.direction == "request" for _, f in frames])])
    out.ts_first = np.concatenate([out.ts_first, np.array([f.ts_first_ns for _, f in frames], np.int64)])
    out.ts_last = np.concatenate([out.ts_last, np.array([f.ts_last_ns for _, f in frames], np.int64)])
    out.order = np.concatenate([out.order, np.array([i for i, _ in frames], np.int64)])


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
    stats = PacketStats()
    for i in np.flatnonzero(kind == k.K_PYTHON).tolist():
        a, m = int(rec_off[i]), int(caplen[i])
        seg = parse_packet(Packet(int(ts[i]), int(linktype[i]), buf[a : a + m].tobytes(), 0), stats)
        if seg is None:
            outcome = next(name for name, v in stats.as_dict().items() if v)
            kind[i] = next(code for code, name in _KIND_STAT.items() if name == outcome)
            stats = PacketStats()
            continue
        stats = PacketStats()
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
