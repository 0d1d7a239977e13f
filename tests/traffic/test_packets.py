"""Link layers, IPv4/IPv6 and the TCP header, on packets built here byte by byte."""

from __future__ import annotations

import struct

import pytest

from arrowkafka.traffic.packets import PacketStats, Segment, iter_segments, parse_packet
from arrowkafka.traffic.pcap import Packet

SRC4, DST4 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
SRC6, DST6 = bytes.fromhex("20010db8" + "00" * 11 + "01"), bytes.fromhex("20010db8" + "00" * 11 + "02")
PAYLOAD = b"\x00\x00\x00\x0a" + b"kafka-data"
TS = 1_700_000_000_123_456_789


def tcp(payload: bytes = PAYLOAD, flags: int = 0x18, options: bytes = b"") -> bytes:
    doff = (20 + len(options)) // 4
    head = struct.pack("!HHIIBBHHH", 40000, 9092, 0xFFFFFFF0, 7, doff << 4, flags, 512, 0, 0)
    return head + options + payload


def ipv4(seg: bytes, *, options: bytes = b"", frag: int = 0, proto: int = 6) -> bytes:
    ihl = 5 + len(options) // 4
    return (
        struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(seg), 1, frag, 64, proto, 0, SRC4, DST4)
        + options
        + seg
    )


def ipv6(seg: bytes, *, exts: bytes = b"", first: int = 6) -> bytes:
    return struct.pack("!IHBB16s16s", 0x60000000, len(exts) + len(seg), first, 64, SRC6, DST6) + exts + seg


def eth(ip: bytes, etype: int = 0x0800, tags: bytes = b"") -> bytes:
    return b"\x02" * 6 + b"\x04" * 6 + tags + struct.pack("!H", etype) + ip


def parse(data: bytes, linktype: int = 1, orig_len: int | None = None) -> tuple[Segment | None, PacketStats]:
    st = PacketStats()
    seg = parse_packet(Packet(TS, linktype, data, len(data) if orig_len is None else orig_len), st)
    return seg, st


EXPECT4 = Segment(TS, SRC4, 40000, DST4, 9092, 0xFFFFFFF0, 0x18, PAYLOAD, len(PAYLOAD))
EXPECT6 = EXPECT4._replace(src=SRC6, dst=DST6)

LINKS = {
    "ethernet": (1, eth(ipv4(tcp()))),
    "802.1Q": (1, eth(ipv4(tcp()), tags=struct.pack("!HH", 0x8100, 5))),
    "QinQ": (1, eth(ipv4(tcp()), tags=struct.pack("!HHHH", 0x88A8, 100, 0x8100, 5))),
    "sll": (113, struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x0800) + ipv4(tcp())),
    "sll-vlan": (113, struct.pack("!HHH8sHHH", 0, 1, 6, b"\x02" * 8, 0x8100, 5, 0x0800) + ipv4(tcp())),
    "sll2": (276, struct.pack("!HHIHBB8s", 0x0800, 0, 3, 1, 4, 6, b"\x02" * 8) + ipv4(tcp())),
    "null-le": (0, struct.pack("<I", 2) + ipv4(tcp())),
    "null-be": (0, struct.pack(">I", 2) + ipv4(tcp())),
    "loop": (108, struct.pack(">I", 2) + ipv4(tcp())),
    "raw": (101, ipv4(tcp())),
    "raw-dlt12": (12, ipv4(tcp())),
    "ipv4-linktype": (228, ipv4(tcp())),
}


@pytest.mark.parametrize("name", sorted(LINKS))
def test_link_layers_ipv4(name: str) -> None:
    linktype, data = LINKS[name]
    seg, st = parse(data, linktype)
    assert seg == EXPECT4
    assert st.as_dict() == {**PacketStats().as_dict(), "tcp": 1}


@pytest.mark.parametrize(
    ("linktype", "head"),
    [
        (1, b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd"),
        (276, struct.pack("!HHIHBB8s", 0x86DD, 0, 3, 1, 4, 6, b"\x02" * 8)),
        *[(0, struct.pack(o + "I", af)) for af in (10, 24, 28, 30) for o in "<>"],
        (229, b""),
    ],
)
def test_link_layers_ipv6(linktype: int, head: bytes) -> None:
    seg, _ = parse(head + ipv6(tcp()), linktype)
    assert seg == EXPECT6


def test_ipv6_extension_headers() -> None:
    padn = b"\x01\x04\0\0\0\0"
    hbh = bytes([60, 0]) + padn  # hop-by-hop -> destination options
    dst = bytes([44, 0]) + padn  # -> fragment
    frag = struct.pack("!BBHI", 51, 0, 0x0001, 99)  # first fragment (offset 0, more follow) -> AH
    ah = bytes([6, 1]) + b"\0" * 6  # AH length counts 4-octet units minus 2: 12 bytes
    ah += b"\0" * 4
    seg, _ = parse(eth(ipv6(tcp(), exts=hbh + dst + frag + ah, first=0), 0x86DD))
    assert seg == EXPECT6
    later = struct.pack("!BBHI", 6, 0, 185 << 3, 99)  # a later fragment: no TCP header in it
    seg, st = parse(eth(ipv6(tcp(), exts=later, first=44), 0x86DD))
    assert seg is None and st.fragments == 1
    seg, st = parse(eth(ipv6(b"\0" * 8, first=17), 0x86DD))  # UDP
    assert seg is None and st.non_tcp == 1


def test_ipv4_options_padding_and_fragments() -> None:
    seg, _ = parse(eth(ipv4(tcp(), options=b"\x01\x01\x01\x00")))
    assert seg == EXPECT4
    # Ethernet pads short frames: the padding is not payload.
    seg, _ = parse(eth(ipv4(tcp(b"ab"))) + b"\0" * 12)
    assert seg is not None and seg.payload == b"ab" and seg.wire_len == 2
    seg, st = parse(eth(ipv4(tcp(), frag=0x2000)))  # first fragment: kept
    assert seg is not None and st.fragments == 0
    seg, st = parse(eth(ipv4(tcp(), frag=185)))  # later fragment: skipped and counted
    assert seg is None and st.fragments == 1


def test_snaplen_and_flags() -> None:
    full = eth(ipv4(tcp(flags=0x03)))
    seg, st = parse(full[:-5], orig_len=len(full))
    assert seg is not None
    assert seg.payload == PAYLOAD[:-5] and seg.wire_len == len(PAYLOAD) and seg.truncated
    assert (seg.syn, seg.fin, seg.rst) == (True, True, False)
    assert seg.key == (SRC4, 40000, DST4, 9092)
    assert st.truncated == 1
    # A TCP header the snaplen cut is not a segment we can place.
    seg, st = parse(full[: 14 + 20 + 10])
    assert seg is None and st.malformed == 1
    # Options cut by the snaplen: header fields read, payload all missing.
    seg, _ = parse(eth(ipv4(tcp(options=b"\x01" * 12)))[: 14 + 20 + 24])
    assert seg is not None and seg.payload == b"" and seg.wire_len == len(PAYLOAD)


@pytest.mark.parametrize(
    ("linktype", "data", "counter"),
    [
        (1, eth(b"\0" * 28, 0x0806), "non_ip"),  # ARP
        (1, eth(ipv4(b"\0" * 8, proto=17)), "non_tcp"),
        (147, ipv4(tcp()), "unknown_linktype"),
        (1, b"\0" * 10, "malformed"),
        (1, eth(ipv4(tcp()))[:30], "malformed"),
        (0, struct.pack("<I", 7) + ipv4(tcp()), "non_ip"),
        (101, b"\x50" + bytes(30), "malformed"),
        (1, eth(b"\x45" + bytes(19)), "non_tcp"),
    ],
)
def test_outcomes_are_counted(linktype: int, data: bytes, counter: str) -> None:
    seg, st = parse(data, linktype)
    assert seg is None
    assert st.as_dict() == {**PacketStats().as_dict(), counter: 1}


def test_iter_segments() -> None:
    st = PacketStats()
    frame = eth(ipv4(tcp()))
    pkts = [Packet(TS, 1, frame, len(frame)), Packet(TS, 1, eth(b"", 0x0806), 14)]
    assert list(iter_segments(pkts, st)) == [EXPECT4]
    assert (st.tcp, st.non_ip) == (1, 1)
