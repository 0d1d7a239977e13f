"""From captured packets to TCP segments: link layer, IPv4/IPv6, TCP header.

Link layers: Ethernet (with any number of 802.1Q / 802.1ad / QinQ tags), Linux cooked
capture v1 (SLL) and v2 (SLL2), BSD loopback/null (address family in either byte order),
OpenBSD loop, and raw IP. Anything else, and every non-TCP packet, is counted in
:class:`PacketStats` and dropped: a capture reader must not stop on traffic it does not need.

The TCP payload is cut at the end the IP header declares, not at the end of the captured
bytes, because Ethernet pads short frames and some captures carry a trailing FCS.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import NamedTuple

from arrowkafka.traffic.pcap import Packet

__all__ = [
    "FIN",
    "RST",
    "SYN",
    "ACK",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "PacketStats",
    "Segment",
    "iter_segments",
    "parse_packet",
]

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
# DLT_RAW is 12 on most systems and 14 on OpenBSD; files written with the DLT value exist.
_RAW_TYPES = frozenset({LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6})

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10

_ETH_IPV4, _ETH_IPV6 = 0x0800, 0x86DD
_VLAN_TYPES = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})
# Address families for IPv6 in the null/loop header: Linux, NetBSD/OpenBSD, FreeBSD, Darwin.
_AF_INET6 = frozenset({10, 24, 28, 30})
# IPv6 extension headers that use the generic (next header, length in 8-octet units) layout.
_IPV6_EXT = frozenset({0, 43, 60, 135, 139, 140, 253, 254})

_TCP_HDR = struct.Struct("!HHIIH")
_IP4 = struct.Struct("!BxHxxHxB")  # version/IHL, total length, flags/fragment offset, protocol
_U16 = struct.Struct("!H")


class Segment(NamedTuple):
    """One TCP segment as captured.

    Attributes
    ----------
    ts_ns : int
        Capture timestamp (ns).
    src, dst : bytes
        IP addresses, 4 bytes (IPv4) or 16 bytes (IPv6).
    sport, dport : int
        TCP ports.
    seq : int
        Sequence number of the segment (of the SYN itself when SYN is set).
    flags : int
        TCP flag bits (``FIN``, ``SYN``, ``RST``, ``ACK`` ...).
    payload : bytes
        The payload bytes that were captured.
    wire_len : int
        Payload length on the wire, from the IP header; more than ``len(payload)`` when the
        snaplen cut the packet.
    """

    ts_ns: int
    src: bytes
    sport: int
    dst: bytes
    dport: int
    seq: int
    flags: int
    payload: bytes
    wire_len: int

    @property
    def key(self) -> tuple[bytes, int, bytes, int]:
        """The direction this segment travels: ``(src, sport, dst, dport)``."""
        return (self.src, self.sport, self.dst, self.dport)

    @property
    def truncated(self) -> bool:
        """Whether fewer payload bytes were captured than were sent."""
        return len(self.payload) < self.wire_len

    @property
    def syn(self) -> bool:
        """SYN flag: the segment opens the direction (its seq is the ISN)."""
        return bool(self.flags & SYN)

    @property
    def fin(self) -> bool:
        """FIN flag: the direction ends after this segment's payload."""
        return bool(self.flags & FIN)

    @property
    def rst(self) -> bool:
        """RST flag: the connection is aborted."""
        return bool(self.flags & RST)


@dataclass
class PacketStats:
    """What :func:`parse_packet` saw, by outcome. Every packet lands in exactly one count."""

    tcp: int = 0  #: TCP segments produced
    truncated: int = 0  #: of those, how many had payload cut by the snaplen
    non_ip: int = 0  #: link-layer frames that carry no IP (ARP, LLDP, ...)
    non_tcp: int = 0  #: IP packets that carry no TCP
    fragments: int = 0  #: non-first IP fragments, skipped (TCP header is in the first)
    unknown_linktype: int = 0
    malformed: int = 0  #: too short or inconsistent headers, headers cut by the snaplen

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _network_offset(data: bytes, linktype: int) -> tuple[int, int]:
    """(offset of the IP header, IP version 4/6), or (-1, reason code) when not IP.

    Reason codes: 0 not IP, 1 unknown link type, 2 malformed.
    """
    n = len(data)
    if linktype == LINKTYPE_ETHERNET:
        off, etype_at = 14, 12
    elif linktype == LINKTYPE_LINUX_SLL:
        off, etype_at = 16, 14
    elif linktype == LINKTYPE_LINUX_SLL2:
        off, etype_at = 20, 0
    elif linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
        if n < 5:
            return -1, 2
        # The family is in the capturing host's byte order (LOOP: network order), which the
        # file does not tell: a value above 0xFFFF can only be the other byte order.
        (af,) = struct.unpack_from("<I", data, 0)
        if af > 0xFFFF:
            af = int.from_bytes(data[:4], "big")
        if af == 2:
            return 4, 4
        if af in _AF_INET6:
            return 4, 6
        return -1, 0
    elif linktype in _RAW_TYPES:
        if n < 1:
            return -1, 2
        ver = data[0] >> 4
        return (0, ver) if ver in (4, 6) else (-1, 2)
    else:
        return -1, 1
    if n < off:
        return -1, 2
    etype = (data[etype_at] << 8) | data[etype_at + 1]
    while etype in _VLAN_TYPES:  # each tag: 2 bytes TCI then the inner type
        if n < off + 4:
            return -1, 2
        etype = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if etype == _ETH_IPV4:
        return off, 4
    if etype == _ETH_IPV6:
        return off, 6
    return -1, 0


def parse_packet(pkt: Packet, stats: PacketStats) -> Segment | None:
    """Decode one packet down to its TCP segment.

    Parameters
    ----------
    pkt : Packet
        A captured packet.
    stats : PacketStats
        Incremented with the outcome.

    Returns
    -------
    Segment or None
        None for anything that is not a (first-fragment) TCP segment.
    """
    data = pkt.data
    if pkt.linktype == LINKTYPE_ETHERNET and data[12:14] == b"\x08\x00":
        off, ver = 14, 4  # untagged Ethernet/IPv4, by far the most common: skip the dispatch
    else:
        off, ver = _network_offset(data, pkt.linktype)
        if off < 0:
            if ver == 0:
                stats.non_ip += 1
            elif ver == 1:
                stats.unknown_linktype += 1
            else:
                stats.malformed += 1
            return None
    n = len(data)
    if ver == 4:
        if n < off + 20:
            stats.malformed += 1
            return None
        vihl, total, frag, proto = _IP4.unpack_from(data, off)
        if vihl >> 4 != 4:
            stats.malformed += 1
            return None
        if proto != 6:
            stats.non_tcp += 1
            return None
        if frag & 0x1FFF:
            stats.fragments += 1
            return None
        ihl = (vihl & 0x0F) * 4
        src, dst = data[off + 12 : off + 16], data[off + 16 : off + 20]
        # total == 0 is what TCP segmentation offload leaves in captures: trust the capture.
        ip_end = off + total if total else max(n, off + ihl)
        if ihl < 20 or (total and total < ihl):
            stats.malformed += 1
            return None
        tcp = off + ihl
    else:
        if n < off + 40 or data[off] >> 4 != 6:
            stats.malformed += 1
            return None
        (plen,) = _U16.unpack_from(data, off + 4)
        nxt = data[off + 6]
        src, dst = data[off + 8 : off + 24], data[off + 24 : off + 40]
        ip_end = off + 40 + plen if plen else n  # 0 = jumbogram or offload: trust the capture
        tcp = off + 40
        while nxt != 6:
            if tcp + 8 > n:
                stats.malformed += 1
                return None
            if nxt in _IPV6_EXT:
                nxt, tcp = data[tcp], tcp + (data[tcp + 1] + 1) * 8
            elif nxt == 44:  # fragment header: only the first fragment has the TCP header
                if _U16.unpack_from(data, tcp + 2)[0] & 0xFFF8:
                    stats.fragments += 1
                    return None
                nxt, tcp = data[tcp], tcp + 8
            elif nxt == 51:  # authentication header counts its length in 4-octet units
                nxt, tcp = data[tcp], tcp + (data[tcp + 1] + 2) * 4
            else:  # ESP, no-next-header, UDP, ICMPv6, ...
                stats.non_tcp += 1
                return None
    if n < tcp + 20:
        stats.malformed += 1
        return None
    sport, dport, seq, _ack, off_flags = _TCP_HDR.unpack_from(data, tcp)
    start = tcp + (off_flags >> 12) * 4
    wire_len = ip_end - start
    if wire_len < 0 or start < tcp + 20:
        stats.malformed += 1
        return None
    end = ip_end if ip_end < n else n
    payload = data[start:end] if end > start else b""
    stats.tcp += 1
    if len(payload) < wire_len:
        stats.truncated += 1
    return Segment(pkt.ts_ns, src, sport, dst, dport, seq, off_flags & 0x1FF, payload, wire_len)


def iter_segments(packets: Iterable[Packet], stats: PacketStats | None = None) -> Iterator[Segment]:
    """Yield the TCP segment of every packet that has one; outcomes go to ``stats``."""
    st = stats if stats is not None else PacketStats()
    for pkt in packets:
        seg = parse_packet(pkt, st)
        if seg is not None:
            yield seg
