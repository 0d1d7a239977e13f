"""pcap / pcapng reading: formats, timestamps, interfaces, errors, truncated files, streaming."""

from __future__ import annotations

import io
import re
import struct

import pytest
from capwriters import custom_block, epb, idb, shb, spb, write_pcap

from arrowkafka.errors import ArrowKafkaError
from arrowkafka.traffic.pcap import CaptureFormatError, CaptureReader, Packet, read_packets

T0 = 1_795_313_606_175_982_000  # a real capture's first timestamp (a whole microsecond)
PKTS = [Packet(T0 + i * 1_001_000, 1, bytes(range(i, i + 20 + i)), 20 + i + (i % 2) * 7) for i in range(5)]


def read(data: bytes, **kw: object) -> tuple[list[Packet], CaptureReader]:
    r = CaptureReader(io.BytesIO(data), **kw)  # type: ignore[arg-type]
    return list(r), r


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_classic_pcap(order: str, nanos: bool) -> None:
    pkts = [p._replace(ts_ns=p.ts_ns + (123 if nanos else 0)) for p in PKTS]
    got, r = read(write_pcap(pkts, order=order, nanos=nanos))
    assert got == pkts
    assert (r.format, r.packets, r.truncated_bytes, r.truncated_offset) == ("pcap", 5, 0, None)


def test_classic_linktype_ignores_fcs_bits() -> None:
    data = bytearray(write_pcap(PKTS[:1]))
    struct.pack_into("<I", data, 20, 0x1000_0000 | 113)  # FCS length 1 in the high bits
    got, _ = read(bytes(data))
    assert got[0].linktype == 113


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_interfaces_and_resolutions(order: str) -> None:
    p = PKTS[0]
    blocks = [
        shb(order),
        idb(1, order=order),  # default: microseconds
        idb(113, order=order, tsresol=9),  # nanoseconds
        idb(276, order=order, tsresol=3, tsoffset=1000),  # milliseconds, 1000 s offset
        idb(0, order=order, tsresol=0x80 | 20),  # 2**-20 s
        custom_block(order),  # skipped
        epb(p, 0, order=order),
        epb(p._replace(ts_ns=T0 + 7), 1, order=order, units_per_s=10**9),
        epb(p._replace(ts_ns=(T0 // 10**6) * 10**6), 2, order=order, units_per_s=1000, offset_s=1000),
    ]
    ts_units = 3 << 20  # 3 seconds in 2**-20 s units
    blocks.append(_epb_raw(order, 3, ts_units, p.data, p.orig_len))
    got, r = read(b"".join(blocks))
    assert r.format == "pcapng" and r.packets == 4
    assert [(g.linktype, g.ts_ns) for g in got] == [
        (1, T0),
        (113, T0 + 7),
        (276, (T0 // 10**6) * 10**6),
        (0, 3_000_000_000),
    ]
    assert all(g.data == p.data and g.orig_len == p.orig_len for g in got)


def _epb_raw(order: str, iface: int, ts: int, data: bytes, orig: int) -> bytes:
    body = struct.pack(order + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), orig) + data
    body += b"\0" * (-len(body) % 4)
    return struct.pack(order + "II", 6, len(body) + 12) + body + struct.pack(order + "I", len(body) + 12)


def test_pcapng_simple_and_obsolete_packet_blocks() -> None:
    p = PKTS[3]
    pb_body = struct.pack("<HHIIII", 0, 0, 0, 5_000_000, len(p.data), p.orig_len) + p.data
    pb_body += b"\0" * (-len(pb_body) % 4)
    pb = struct.pack("<II", 2, len(pb_body) + 12) + pb_body + struct.pack("<I", len(pb_body) + 12)
    data = shb() + idb(1, snaplen=10) + pb + spb(p)
    got, _ = read(data)
    # The PB has a timestamp (5 s); the SPB has none and takes the previous packet's; its
    # captured length is capped by the interface snaplen.
    assert got == [
        Packet(5_000_000_000, 1, p.data, p.orig_len),
        Packet(5_000_000_000, 1, p.data[:10], p.orig_len),
    ]


def test_pcapng_sections_reset_interfaces() -> None:
    p = PKTS[1]
    data = shb("<") + idb(1) + epb(p, 0) + shb(">") + idb(101, order=">") + epb(p, 0, order=">")
    got, _ = read(data)
    assert [g.linktype for g in got] == [1, 101]
    bad = shb() + idb(1) + epb(p, 0) + shb() + epb(p, 1)
    with pytest.raises(CaptureFormatError, match="undeclared interface 1") as e:
        read(bad, strict=True)
    at = len(shb() + idb(1) + epb(p, 0) + shb())
    assert e.value.offset == at
    got, r = read(bad)  # not strict: the packets before it, and where and why it stopped
    assert [g.data for g in got] == [p.data]
    assert (r.broken_offset, r.broken_reason, r.broken_bytes, r.tail) == (
        at,
        "packet names undeclared interface 1",
        len(bad) - at,
        bad[at:],
    )


@pytest.mark.parametrize(
    ("data", "offset", "match"),
    [
        (b"", 0, "too short"),
        (b"GIF89a" + bytes(40), 0, "bad magic 0x38464947"),
        (shb()[:8] + b"\x01\x02\x03\x04" + shb()[12:], 8, "byte-order magic"),
        (shb() + struct.pack("<II", 1, 13) + bytes(8), 28, "bad pcapng block length 13"),
        (shb() + struct.pack("<III", 1, 12, 16), 28, "trailer says 16"),
    ],
)
def test_format_errors(data: bytes, offset: int, match: str) -> None:
    with pytest.raises(CaptureFormatError, match=match) as e:
        read(data, strict=True)
    assert e.value.offset == offset
    assert isinstance(e.value, ValueError) and isinstance(e.value, ArrowKafkaError)
    assert str(e.value).startswith(f"capture byte offset {offset}: ")
    if offset < len(shb()):  # the file's header: not a capture, strict or not
        with pytest.raises(CaptureFormatError, match=match):
            read(data)
    else:  # after it: the reader stops there and says where
        got, r = read(data)
        assert (got, r.broken_offset, r.broken_bytes, r.tail) == (
            [],
            offset,
            len(data) - offset,
            data[offset:],
        )
        assert re.search(match, r.broken_reason)


def test_implausible_record_length() -> None:
    data = bytearray(write_pcap(PKTS[:2]))
    second = 24 + 16 + len(PKTS[0].data)
    struct.pack_into("<I", data, second + 8, 0x7FFF_FFFF)
    with pytest.raises(CaptureFormatError, match="record length 2147483647 is implausible") as e:
        read(bytes(data), strict=True)
    assert e.value.offset == second
    got, r = read(bytes(data))
    assert got == PKTS[:1] and r.packets == 1
    assert (r.broken_offset, r.broken_reason) == (second, "record length 2147483647 is implausible")
    assert (r.broken_bytes, r.tail, r.truncated_bytes) == (len(data) - second, bytes(data[second:]), 0)


@pytest.mark.parametrize("extra", [5, 16, 30])
def test_truncated_tail_classic(extra: int) -> None:
    full = write_pcap(PKTS)
    cut = len(write_pcap(PKTS[:4]))
    got, r = read(full[: cut + extra])
    assert got == PKTS[:4]
    assert (r.truncated_bytes, r.truncated_offset) == (extra, cut)
    with pytest.raises(CaptureFormatError, match=f"file ends {extra} bytes into it") as e:
        read(full[: cut + extra], strict=True)
    assert e.value.offset == cut


def test_truncated_tail_pcapng() -> None:
    head = shb() + idb(1) + epb(PKTS[0], 0)
    got, r = read(head + epb(PKTS[1], 0)[:-9])
    assert got == PKTS[:1]
    assert r.truncated_offset == len(head) and r.truncated_bytes == len(epb(PKTS[1], 0)) - 9
    got, r = read(head + b"\x06\x00")  # not even a block header
    assert (len(got), r.truncated_bytes) == (1, 2)


class Trickle(io.RawIOBase):
    """A non-seekable stream that returns at most 7 bytes per read, like a slow pipe."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        chunk = self.data[self.pos : self.pos + min(7, n if n >= 0 else 7)]
        self.pos += len(chunk)
        return chunk


def test_streams_from_short_reads() -> None:
    data = write_pcap(PKTS * 300)
    r = CaptureReader(Trickle(data), chunk_size=100)  # type: ignore[arg-type]
    assert list(r) == PKTS * 300
    ng = shb() + idb(1) + b"".join(epb(p, 0) for p in PKTS * 300)
    assert list(CaptureReader(Trickle(ng), chunk_size=100)) == PKTS * 300  # type: ignore[arg-type]


def test_path_source_is_closed(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "x.pcap"
    path.write_bytes(write_pcap(PKTS))
    r = CaptureReader(path)
    it = iter(r)
    assert next(it) == PKTS[0]
    it.close()  # abandoning the iteration closes the file it opened
    assert r._file.closed
    assert list(read_packets(str(path))) == PKTS
    with pytest.raises(RuntimeError, match="only once"):
        list(r)
