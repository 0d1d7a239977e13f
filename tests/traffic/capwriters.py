"""Small capture writers and packet rewriters for the capture tests.

They turn the real loopback captures (Ethernet/IPv4/TCP) into other encodings and into damaged
captures. Header parsing here is deliberately minimal and independent of arrowkafka.traffic.
"""

from __future__ import annotations

import io
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

import arrowkafka as ak
from arrowkafka.traffic import CaptureStats, KafkaFrame, capture_frames
from arrowkafka.traffic.frames import FrameItem
from arrowkafka.traffic.pcap import CaptureReader, Packet
from tests.records.batchtools import Rec, build, rewrap_v2

ETH, SLL, SLL2, NULL, LOOP, RAW = 1, 113, 276, 0, 108, 101


def load(path: Path) -> list[Packet]:
    with CaptureReader(path) as r:
        return list(r)


# -- file writers --------------------------------------------------------------------------
def write_pcap(
    packets: Sequence[Packet], *, order: str = "<", nanos: bool = False, snaplen: int = 262144
) -> bytes:
    """Classic pcap; every packet must have the same link type."""
    linktype = packets[0].linktype if packets else ETH
    assert all(p.linktype == linktype for p in packets)
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    for p in packets:
        sec, ns = divmod(p.ts_ns, 1_000_000_000)
        frac = ns if nanos else ns // 1000
        out.append(struct.pack(order + "IIII", sec, frac, len(p.data), p.orig_len) + p.data)
    return b"".join(out)


def conversation(
    frames: Sequence[tuple[bool, bytes]], *, client: int = 40000, broker: int = 9092, t0_ns: int = 10**18
) -> list[Packet]:
    """One TCP connection over Ethernet/IPv4 on 127.0.0.1, handshake to FIN, carrying
    ``frames`` (to the broker?, size-prefixed Kafka frame) one segment each, 1 ms apart."""
    seq = {True: 1000, False: 5000}  # each side's next sequence number

    def packet(to_broker: bool, flags: int, payload: bytes, at: int) -> Packet:
        sport, dport = (client, broker) if to_broker else (broker, client)
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq[to_broker], seq[not to_broker], 5 << 4, flags,
                          65535, 0, 0) + payload  # fmt: skip
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                         b"\x7f\0\0\x01", b"\x7f\0\0\x01") + tcp  # fmt: skip
        seq[to_broker] = (seq[to_broker] + len(payload) + (1 if flags & 0x03 else 0)) % 2**32
        data = b"\0" * 12 + b"\x08\x00" + ip
        return Packet(t0_ns + at * 1_000_000, ETH, data, len(data))

    SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08
    out = [packet(True, SYN, b"", 0), packet(False, SYN | ACK, b"", 1), packet(True, ACK, b"", 2)]
    for i, (to_broker, frame) in enumerate(frames):
        out.append(packet(to_broker, PSH | ACK, frame, 3 + i))
    n = 3 + len(frames)
    out += [packet(True, FIN | ACK, b"", n), packet(False, FIN | ACK, b"", n + 1)]
    return out


def controller_fetch_capture(shared: Path) -> bytes:
    """A pcap of a controller's Fetch of the KRaft metadata log: a FetchRequest v12 (the shared
    vector's body, correlation id 7) and its FetchResponse v12, whose ``__cluster_metadata``
    partition 0 holds a control batch at offset 41 (LEADER_CHANGE, leader 3; KRAFT_VOTERS,
    voter 3 with a directory id) and a batch of two records at 43."""
    change = pa.table({"version": pa.array([0], pa.int16()), "leader_id": pa.array([3], pa.int32()),
                       "voters": [[{"voter_id": 3}]], "granting_voters": [[{"voter_id": 3}]]})  # fmt: skip
    voters = pa.Table.from_pylist([{"version": 0, "voters": [{
        "voter_id": 3, "voter_directory_id": bytes(range(16)),
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
        "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1}}]}])  # fmt: skip
    control = [
        Rec(struct.pack(">hh", 0, 2), ak.encode(change, "LeaderChangeMessage", 0)[0].as_py(), [], 0),
        Rec(struct.pack(">hh", 0, 6), ak.encode(voters, "VotersRecord", 0)[0].as_py(), [], 0),
    ]
    batches = rewrap_v2(build(2, 0, control, offset=41), attributes=0x20) + build(
        2, 0, [Rec(b"k", b"v1", [], 5), Rec(None, b"v2", [("h", b"x")], 6)], offset=43
    )
    topic = {"topic": "__cluster_metadata", "partitions": [{"partition_index": 0, "records": batches}]}
    response = pa.Table.from_pylist(
        [{"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [topic]}]
    )
    body = ak.encode(response, "FetchResponse", 12)[0].as_py()
    request = struct.pack(">hhih", 1, 12, 7, 10) + b"controller" + b"\0"
    request += (shared / "vectors" / "fetch_request_v12.bin").read_bytes()
    answer = struct.pack(">i", 7) + b"\0" + body
    frames = [(True, request), (False, answer)]
    frames = [(to_broker, struct.pack(">i", len(f)) + f) for to_broker, f in frames]
    return write_pcap(conversation(frames))


def _block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def shb(order: str = "<") -> bytes:
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(
    linktype: int,
    *,
    order: str = "<",
    tsresol: int | None = None,
    snaplen: int = 0,
    tsoffset: int | None = None,
) -> bytes:
    opts = b""
    if tsresol is not None:
        opts += struct.pack(order + "HHB3x", 9, 1, tsresol)
    if tsoffset is not None:
        opts += struct.pack(order + "HHq", 14, 8, tsoffset)
    if opts:
        opts += struct.pack(order + "HH", 0, 0)
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts)


def epb(p: Packet, iface: int, *, order: str = "<", units_per_s: int = 1_000_000, offset_s: int = 0) -> bytes:
    ts = (p.ts_ns - offset_s * 1_000_000_000) * units_per_s // 1_000_000_000
    head = struct.pack(order + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(p.data), p.orig_len)
    return _block(order, 6, head + p.data)


def spb(p: Packet, *, order: str = "<") -> bytes:
    return _block(order, 3, struct.pack(order + "I", p.orig_len) + p.data)


def custom_block(order: str = "<") -> bytes:
    """A block type readers must skip (here: a Name Resolution Block with no records)."""
    return _block(order, 4, struct.pack(order + "HH", 0, 0))


# -- packet rewriting -------------------------------------------------------------------------
def eth_payload(p: Packet) -> bytes:
    assert p.linktype == ETH and p.data[12:14] == b"\x08\x00"
    return p.data[14:]


def ip4_split(ip: bytes) -> tuple[bytes, bytes]:
    """(IPv4 header, TCP segment) cut at the IPv4 total length."""
    ihl = (ip[0] & 15) * 4
    (total,) = struct.unpack_from("!H", ip, 2)
    return ip[:ihl], ip[ihl:total]


def relink(p: Packet, kind: str) -> Packet:
    """Re-encode an Ethernet/IPv4 packet under another link layer."""
    ip = eth_payload(p)
    if kind == "sll":
        hdr = struct.pack("!HHH8sH", 0, 772, 6, b"\0" * 8, 0x0800)
        lt = SLL
    elif kind == "sll2":
        hdr = struct.pack("!HHIHBB8s", 0x0800, 0, 1, 772, 0, 6, b"\0" * 8)
        lt = SLL2
    elif kind == "null-le":
        hdr, lt = struct.pack("<I", 2), NULL
    elif kind == "null-be":
        hdr, lt = struct.pack(">I", 2), NULL
    elif kind == "loop":
        hdr, lt = struct.pack(">I", 2), LOOP
    elif kind == "raw":
        hdr, lt = b"", RAW
    elif kind == "vlan":
        hdr, lt = p.data[:12] + struct.pack("!HHH", 0x8100, 42, 0x0800), ETH
    elif kind == "qinq":
        hdr, lt = p.data[:12] + struct.pack("!HHHHH", 0x88A8, 7, 0x8100, 42, 0x0800), ETH
    else:
        raise ValueError(kind)
    data = hdr + ip
    return Packet(p.ts_ns, lt, data, p.orig_len - 14 + len(hdr))


def to_ipv6(p: Packet, *, ext: bool = True) -> Packet:
    """Ethernet/IPv6 copy of an Ethernet/IPv4 packet, with hop-by-hop and destination options."""
    h4, tcp = ip4_split(eth_payload(p))
    src6 = b"\xfd" + b"\0" * 11 + h4[12:16]
    dst6 = b"\xfd" + b"\0" * 11 + h4[16:20]
    padn = b"\x01\x04\0\0\0\0"  # PadN option filling an 8-byte extension header
    exts = (bytes([60, 0]) + padn + bytes([6, 0]) + padn) if ext else b""
    first = 0 if ext else 6
    h6 = struct.pack("!IHBB16s16s", 0x60000000, len(exts) + len(tcp), first, 64, src6, dst6)
    data = p.data[:12] + b"\x86\xdd" + h6 + exts + tcp
    return Packet(p.ts_ns, ETH, data, len(data))


def with_ip_options(p: Packet) -> Packet:
    """Same packet with 4 bytes of IPv4 options (NOP NOP NOP EOL)."""
    h4, tcp = ip4_split(eth_payload(p))
    h = bytearray(h4[:20] + b"\x01\x01\x01\x00")
    h[0] = 0x46
    struct.pack_into("!H", h, 2, len(h) + len(tcp))
    data = p.data[:14] + bytes(h) + tcp
    return Packet(p.ts_ns, ETH, data, len(data))


def fragment_tail(p: Packet) -> Packet:
    """A non-first IPv4 fragment made from a packet (offset 1480, same protocol)."""
    ip = bytearray(eth_payload(p))
    struct.pack_into("!H", ip, 6, 1480 // 8)
    return Packet(p.ts_ns, ETH, p.data[:14] + bytes(ip), p.orig_len)


def split_segments(packets: Sequence[Packet], at: int, dt_ns: int) -> list[Packet]:
    """Cut every TCP payload longer than ``at`` into two segments, the second ``dt_ns`` later."""
    out = []
    for p in packets:
        s = tcp_of(p)
        if len(s.payload) <= at:
            out.append(p)
            continue
        head = p.data[: s.payload_at]
        for part, seq, ts, last in (
            (s.payload[:at], s.seq, p.ts_ns, False),
            (s.payload[at:], s.seq + at, p.ts_ns + dt_ns, True),
        ):
            h = bytearray(head)
            struct.pack_into("!H", h, 16, len(h) - 14 + len(part))
            tcp = 14 + (h[14] & 15) * 4
            struct.pack_into("!I", h, tcp + 4, seq & 0xFFFFFFFF)
            if not last:
                h[tcp + 13] &= ~0x09 & 0xFF  # FIN and PSH belong to the last piece
            out.append(Packet(ts, p.linktype, bytes(h) + part, len(h) + len(part)))
    return out


@dataclass(frozen=True)
class Seg:
    """Minimal TCP view of an Ethernet/IPv4 packet."""

    flow: tuple[int, int]  # (sport, dport)
    seq: int
    flags: int
    payload_at: int  # offset of the TCP payload in the packet data
    payload: bytes


def tcp_of(p: Packet) -> Seg:
    ip = eth_payload(p)
    h4, tcp = ip4_split(ip)
    sport, dport, seq, _ack, offf = struct.unpack_from("!HHIIH", tcp)
    doff = (offf >> 12) * 4
    return Seg((sport, dport), seq, offf & 0x3F, 14 + len(h4) + doff, tcp[doff:])


def isns(packets: Sequence[Packet]) -> dict[tuple[int, int], int]:
    """Sequence number of stream offset 0 per flow (ISN + 1)."""
    out: dict[tuple[int, int], int] = {}
    for p in packets:
        s = tcp_of(p)
        if s.flags & 0x02:
            out.setdefault(s.flow, (s.seq + 1) & 0xFFFFFFFF)
    return out


def shift_seqs(packets: Sequence[Packet], target: int) -> list[Packet]:
    """Renumber every flow so that its ISN is ``target`` (acks follow the peer's shift)."""
    delta = {f: (target - (isn - 1)) & 0xFFFFFFFF for f, isn in isns(packets).items()}
    out = []
    for p in packets:
        d = bytearray(p.data)
        s = tcp_of(p)
        at = 14 + (d[14] & 15) * 4  # TCP header
        seq, ack = struct.unpack_from("!II", d, at + 4)
        rev = (s.flow[1], s.flow[0])
        struct.pack_into(
            "!II", d, at + 4, (seq + delta[s.flow]) & 0xFFFFFFFF, (ack + delta.get(rev, 0)) & 0xFFFFFFFF
        )
        out.append(Packet(p.ts_ns, p.linktype, bytes(d), p.orig_len))
    return out


def with_flags(p: Packet, flags: int) -> Packet:
    """The packet with its TCP flags byte set to ``flags`` (Ethernet/IPv4)."""
    d = bytearray(p.data)
    d[14 + (d[14] & 15) * 4 + 13] = flags
    return Packet(p.ts_ns, p.linktype, bytes(d), p.orig_len)


def flag_mid_stream(packets: Sequence[Packet], flags: int) -> list[Packet]:
    """The capture with ``flags`` set on a data segment half-way through its data segments."""
    data = [i for i, p in enumerate(packets) if tcp_of(p).payload]
    i = data[len(data) // 2]
    return [*packets[:i], with_flags(packets[i], flags), *packets[i + 1 :]]


def snap(packets: Sequence[Packet], snaplen: int) -> list[Packet]:
    return [Packet(p.ts_ns, p.linktype, p.data[:snaplen], p.orig_len) for p in packets]


def shuffle_windows(packets: Sequence[Packet], width: int, seed: int) -> list[Packet]:
    """Shuffle packets within consecutive windows (reordering, timestamps travel along)."""
    rng = random.Random(seed)
    out: list[Packet] = []
    for i in range(0, len(packets), width):
        w = list(packets[i : i + width])
        rng.shuffle(w)
        out += w
    return out


def duplicate(packets: Sequence[Packet], pick: Callable[[int], bool], later: int) -> list[Packet]:
    """Repeat each picked packet right away and once more ``later`` packets on."""
    out = list(packets)
    for i in sorted((i for i in range(len(packets)) if pick(i)), reverse=True):
        out.insert(min(i + 1 + later, len(out)), packets[i])
        out.insert(i + 1, packets[i])
    return out


# -- decoding helpers shared by the tests ----------------------------------------------------
def decode(capture: bytes | Sequence[Packet], **kw: object) -> tuple[list, CaptureStats]:
    """All frame items of a capture (bytes of a file, or packets written as classic pcap)."""
    data = capture if isinstance(capture, bytes) else write_pcap(capture)
    stats = CaptureStats()
    items = list(capture_frames(io.BytesIO(data), stats=stats, **kw))  # type: ignore[arg-type]
    return items, stats


def dir_key(item: FrameItem) -> tuple[int, int, str]:
    """(client port, server port, direction): the same whatever the IP version."""
    return (item.conn.client_port, item.conn.server_port, item.direction)


def whole_frames(items: Sequence[FrameItem]) -> dict[tuple[int, int, str], list[tuple[int, bytes]]]:
    out: dict[tuple[int, int, str], list[tuple[int, bytes]]] = {}
    for it in items:
        if isinstance(it, KafkaFrame):
            out.setdefault(dir_key(it), []).append((it.offset, it.data))
    return out


def tiling(items: Sequence[FrameItem]) -> dict[tuple[int, int, str], tuple[int, int]]:
    """Check the items of each direction cover its bytes once, in order; return the extents."""
    ext: dict[tuple[int, int, str], tuple[int, int]] = {}
    for it in items:
        k = dir_key(it)
        start, end = ext.get(k, (it.offset, it.offset))
        assert it.offset == end, f"{k}: item at {it.offset}, previous ended at {end}: {it!r:.200}"
        ext[k] = (start, end + it.span)
    return ext


def stream_extents(packets: Sequence[Packet]) -> dict[tuple[int, int], int]:
    """Independent per-flow stream length: highest sequence end (FIN excluded) minus ISN+1."""
    base = isns(packets)
    for p in packets:  # a flow seen without its SYN starts at its lowest sequence number
        s = tcp_of(p)
        if s.payload and s.flow not in base:
            base[s.flow] = min(t.seq for t in map(tcp_of, packets) if t.flow == s.flow and t.payload)
    top: dict[tuple[int, int], int] = {}
    for p in packets:
        s = tcp_of(p)
        if s.flow in base and s.payload:
            end = (s.seq + len(s.payload) - base[s.flow]) & 0xFFFFFFFF
            top[s.flow] = max(top.get(s.flow, 0), end)
    return top
