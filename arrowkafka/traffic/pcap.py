"""Streaming readers for classic pcap and pcapng capture files.

Both formats are read in fixed-size chunks with ``struct.unpack_from`` on the chunk, so a
capture of any size is read in bounded memory and without one system call per packet.

- classic pcap: either byte order, microsecond (``a1b2c3d4``) or nanosecond (``a1b23c4d``)
  timestamps, one link type for the whole file.
- pcapng: sections (SHB) of either byte order, interfaces (IDB) each with its own link type,
  ``if_tsresol`` and ``if_tsoffset``; packets from Enhanced (EPB), Simple (SPB) and obsolete
  Packet (PB) blocks. Other blocks (name resolution, statistics, secrets, custom) are skipped.

A file cut in the middle of its last record is the normal result of stopping a capture by
force: the reader yields every complete packet and then sets ``truncated_bytes`` and
``truncated_offset`` instead of raising (unless ``strict=True``). A record whose framing is
broken further on (a forged record length, a bad block length or trailer) ends the reading
there the same way: every packet before it is yielded, then ``broken_offset``,
``broken_reason`` and ``broken_bytes`` (the bytes from there to the end of the file, not
read) are set, unless ``strict=True``, which raises :class:`CaptureFormatError` naming the
byte offset. Either way ``tail`` keeps the first ``TAIL_KEEP`` bytes of what was not read.
A file whose header is not a capture's raises in both modes.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from arrowkafka.errors import ArrowKafkaError

__all__ = ["TAIL_KEEP", "CaptureFormatError", "CaptureReader", "Packet", "read_packets"]

# Largest record we believe: real link layers stay far below this; a bigger length means
# the file is corrupt, and trusting it would make us buffer gigabytes before noticing.
MAX_RECORD = 64 << 20
_CHUNK = 1 << 20
# Bytes kept of a capture's unread end (a record cut by the end of the file, or what follows a
# broken record): any real packet record fits, and a forged length costs no more than this.
TAIL_KEEP = 1 << 20

_PCAP_MAGICS = {  # magic as read little-endian -> (byte order, fraction-to-ns multiplier)
    0xA1B2C3D4: ("<", 1000),
    0xA1B23C4D: ("<", 1),
    0xD4C3B2A1: (">", 1000),
    0x4D3CB2A1: (">", 1),
}
_SHB = 0x0A0D0D0A


def looks_like_capture(head: bytes) -> bool:
    """Whether a file's first 4 bytes are a pcap magic (either byte order, us or ns) or a
    pcapng section header."""
    return len(head) == 4 and (
        struct.unpack("<I", head)[0] in _PCAP_MAGICS or struct.unpack("<I", head)[0] == _SHB
    )


_IDB, _PB, _SPB, _EPB = 1, 2, 3, 6
_BOM = 0x1A2B3C4D


class CaptureFormatError(ArrowKafkaError, ValueError):
    """A capture file is not pcap/pcapng, or a record in it is corrupt.

    Attributes
    ----------
    offset : int
        Byte offset in the file of the record (or header) at fault.
    reason : str
        What is wrong, in words.
    """

    def __init__(self, offset: int, reason: str) -> None:
        self.offset = offset
        self.reason = reason
        super().__init__(f"capture byte offset {offset}: {reason}")


class Packet(NamedTuple):
    """One captured packet.

    Attributes
    ----------
    ts_ns : int
        Capture time in nanoseconds since the Unix epoch. A pcapng Simple Packet Block has
        no timestamp of its own; it gets the previous packet's (0 if first).
    linktype : int
        LINKTYPE_* value of the interface it was captured on (1 = Ethernet, ...).
    data : bytes
        The captured bytes (possibly fewer than ``orig_len`` when a snaplen applied).
    orig_len : int
        Length of the packet on the wire.
    """

    ts_ns: int
    linktype: int
    data: bytes
    orig_len: int


class _Iface(NamedTuple):
    linktype: int
    snaplen: int
    mul: int  # ts_ns = ts * mul // div + off_ns: exact for 10^-n and 2^-n resolutions
    div: int
    off_ns: int


def _tsresol(code: int) -> tuple[int, int]:
    """(mul, div) turning ``if_tsresol`` units into nanoseconds."""
    if code & 0x80:  # 2^-n seconds
        return 1_000_000_000, 1 << (code & 0x7F)
    if code <= 9:
        return 10 ** (9 - code), 1
    return 1, 10 ** (code - 9)


class CaptureReader:
    """Iterate over the packets of a pcap or pcapng capture, streaming.

    Parameters
    ----------
    source : str, os.PathLike or binary file object
        A path (opened and closed by the reader) or an object with ``read(n)``; it is read
        forward only, so pipes and sockets work.
    strict : bool
        Raise :class:`CaptureFormatError` for a record cut by the end of the file instead of
        counting it in ``truncated_bytes``.
    chunk_size : int
        How many bytes to read at a time.

    Attributes
    ----------
    format : str
        ``"pcap"`` or ``"pcapng"``, known once iteration starts.
    packets : int
        Packets yielded so far.
    truncated_bytes : int
        Bytes after the last complete record (0 for a well-closed file).
    truncated_offset : int or None
        File offset of the incomplete record, if any.
    broken_offset : int or None
        File offset of the record whose framing is broken, if any (not with ``strict``).
    broken_reason : str
        What is wrong with it, in words ("" if nothing).
    broken_bytes : int
        Bytes from ``broken_offset`` to the end of the file, none of them read as packets.
    tail : bytes
        The first ``TAIL_KEEP`` bytes of the cut record, or from ``broken_offset`` on.

    Examples
    --------
    >>> with CaptureReader("cap.pcap") as reader:  # doctest: +SKIP
    ...     for pkt in reader:
    ...         ...
    ...     print(reader.truncated_bytes)
    """

    def __init__(
        self, source: str | os.PathLike[str] | BinaryIO, *, strict: bool = False, chunk_size: int = _CHUNK
    ) -> None:
        if isinstance(source, str | os.PathLike):
            self._file: BinaryIO = open(source, "rb")
            self._owns = True
        else:
            self._file = source
            self._owns = False
        self.strict = strict
        self._chunk = max(chunk_size, 4096)
        self.format = ""
        self.packets = 0
        self.truncated_bytes = 0
        self.truncated_offset: int | None = None
        self.broken_offset: int | None = None
        self.broken_reason = ""
        self.broken_bytes = 0
        self.tail = b""
        self._header = 0  # bytes of the file's header (pcap) or first block (pcapng), once read
        self._buf = b""
        self._pos = 0
        self._base = 0  # file offset of self._buf[0]
        self._eof = False
        self._started = False

    # -- resource handling -------------------------------------------------------------
    def close(self) -> None:
        """Close the file if the reader opened it."""
        if self._owns:
            self._file.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- buffering ---------------------------------------------------------------------
    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available at ``_pos``; False at end of file."""
        have = len(self._buf) - self._pos
        if have >= need:
            return True
        parts = [self._buf[self._pos :]]
        self._base += self._pos
        self._pos = 0
        while have < need and not self._eof:
            # Raw files and pipes may return short reads: keep reading until satisfied.
            got = self._file.read(max(self._chunk, need - have))
            if not got:
                self._eof = True
                break
            parts.append(got)
            have += len(got)
        self._buf = b"".join(parts)
        return have >= need

    def _tail(self, offset: int, what: str) -> None:
        """Record (or, when strict, raise for) a record cut by the end of the file."""
        # Only called after _fill hit end of file, so the buffer holds all that is left.
        rest = len(self._buf) - self._pos
        if rest == 0:
            return
        if self.strict:
            raise CaptureFormatError(offset, f"truncated {what}: file ends {rest} bytes into it")
        self.truncated_bytes = rest
        self.truncated_offset = offset
        self.tail = self._buf[self._pos : self._pos + TAIL_KEEP]

    def _broken(self, e: CaptureFormatError) -> None:
        """Stop at a record whose framing is broken: keep the first bytes from it, count the
        rest of the file (read forward, bounded memory: a pipe has no size to ask)."""
        at = e.offset - self._base  # where the bad record starts in the buffer
        at = min(max(at, 0), len(self._buf))
        self.broken_offset, self.broken_reason = self._base + at, e.reason
        kept = self._buf[at : at + TAIL_KEEP]
        total = len(self._buf) - at
        self._buf, self._pos = b"", 0
        while not self._eof:
            got = self._file.read(self._chunk)
            if not got:
                break
            if len(kept) < TAIL_KEEP:
                kept += got[: TAIL_KEEP - len(kept)]
            total += len(got)
        self._eof = True
        self.tail, self.broken_bytes = kept, total

    # -- iteration ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[Packet]:
        if self._started:
            raise RuntimeError("a CaptureReader can be iterated only once")
        self._started = True
        try:
            if not self._fill(4):
                raise CaptureFormatError(0, "file too short for a capture header")
            (magic,) = struct.unpack_from("<I", self._buf, 0)
            if magic in _PCAP_MAGICS:
                self.format = "pcap"
                packets = self._pcap(*_PCAP_MAGICS[magic])
            elif magic == _SHB:
                self.format = "pcapng"
                packets = self._pcapng()
            else:
                raise CaptureFormatError(0, f"bad magic 0x{magic:08x} (not pcap or pcapng)")
            try:
                yield from packets
            except CaptureFormatError as e:
                if self.strict or not self._header or e.offset < self._header:
                    raise  # not a capture at all, or asked to stop at any fault
                self._broken(e)
        finally:
            self.close()

    def _pcap(self, order: str, frac_ns: int) -> Iterator[Packet]:
        if not self._fill(24):
            raise CaptureFormatError(0, "truncated pcap file header")
        snaplen, network = struct.unpack_from(order + "II", self._buf, 16)
        linktype = network & 0xFFFF  # upper bits carry FCS flags, not the link type
        limit = max(snaplen, MAX_RECORD)
        self._pos = self._header = 24
        rec = struct.Struct(order + "IIII")
        unpack = rec.unpack_from
        while True:
            buf, pos = self._buf, self._pos
            if len(buf) - pos < 16:
                if not self._fill(16):
                    self._tail(self._base + self._pos, "pcap record header")
                    return
                buf, pos = self._buf, self._pos
            sec, frac, incl, orig = unpack(buf, pos)
            if incl > limit:
                raise CaptureFormatError(self._base + pos, f"record length {incl} is implausible")
            end = pos + 16 + incl
            if end > len(buf):
                if not self._fill(16 + incl):
                    self._tail(self._base + self._pos, "pcap record")
                    return
                buf, pos = self._buf, self._pos
                end = pos + 16 + incl
            self._pos = end
            self.packets += 1
            yield Packet(sec * 1_000_000_000 + frac * frac_ns, linktype, buf[pos + 16 : end], orig)

    def _pcapng(self) -> Iterator[Packet]:
        order = "<"
        ifaces: list[_Iface] = []
        last_ts = 0
        while True:
            if not self._fill(12):
                self._tail(self._base + self._pos, "pcapng block header")
                return
            buf, pos = self._buf, self._pos
            at = self._base + pos
            btype, blen = struct.unpack_from(order + "II", buf, pos)
            if btype == _SHB:
                # A new section may switch byte order; its BOM says which.
                (bom,) = struct.unpack_from("<I", buf, pos + 8)
                if bom == _BOM:
                    order = "<"
                elif bom == 0x4D3C2B1A:
                    order = ">"
                else:
                    raise CaptureFormatError(at + 8, f"bad pcapng byte-order magic 0x{bom:08x}")
                (blen,) = struct.unpack_from(order + "I", buf, pos + 4)
                ifaces = []  # interface ids are per section
            if blen < 12 or blen % 4:
                raise CaptureFormatError(at, f"bad pcapng block length {blen}")
            if blen > MAX_RECORD:
                raise CaptureFormatError(at, f"pcapng block length {blen} is implausible")
            if not self._fill(blen):
                self._tail(at, "pcapng block")
                return
            buf, pos = self._buf, self._pos
            (trail,) = struct.unpack_from(order + "I", buf, pos + blen - 4)
            if trail != blen:
                raise CaptureFormatError(at, f"pcapng block length {blen} but trailer says {trail}")
            self._pos = pos + blen
            self._header = self._header or at + blen  # the first section header: the file's
            if btype == _EPB or btype == _PB:
                if btype == _EPB:
                    if_id, tsh, tsl, cap, orig = struct.unpack_from(order + "IIIII", buf, pos + 8)
                else:  # obsolete Packet Block: 16-bit interface id and drop count
                    if_id, _drops, tsh, tsl, cap, orig = struct.unpack_from(order + "HHIIII", buf, pos + 8)
                if cap > blen - 32:
                    raise CaptureFormatError(at, f"packet length {cap} overruns its block")
                if if_id >= len(ifaces):
                    raise CaptureFormatError(at, f"packet names undeclared interface {if_id}")
                ifc = ifaces[if_id]
                last_ts = ((tsh << 32) | tsl) * ifc.mul // ifc.div + ifc.off_ns
                self.packets += 1
                yield Packet(last_ts, ifc.linktype, buf[pos + 28 : pos + 28 + cap], orig)
            elif btype == _SPB:
                if not ifaces:
                    raise CaptureFormatError(at, "simple packet block before any interface")
                (orig,) = struct.unpack_from(order + "I", buf, pos + 8)
                ifc = ifaces[0]
                # SPB has no captured-length field: it is the smaller of the wire length,
                # the snaplen and the room in the block.
                cap = min(orig, blen - 16, ifc.snaplen or orig)
                self.packets += 1
                yield Packet(last_ts, ifc.linktype, buf[pos + 12 : pos + 12 + cap], orig)
            elif btype == _IDB:
                ifaces.append(self._idb(order, buf, pos, blen, at))

    @staticmethod
    def _idb(order: str, buf: bytes, pos: int, blen: int, at: int) -> _Iface:
        if blen < 20:
            raise CaptureFormatError(at, "interface description block too short")
        linktype, _res, snaplen = struct.unpack_from(order + "HHI", buf, pos + 8)
        mul, div, off_ns = 1000, 1, 0  # default resolution is microseconds
        opt, end = pos + 16, pos + blen - 4
        while opt + 4 <= end:
            code, olen = struct.unpack_from(order + "HH", buf, opt)
            if code == 0:
                break
            if opt + 4 + olen > end:
                raise CaptureFormatError(at, f"interface option {code} overruns its block")
            if code == 9 and olen >= 1:
                mul, div = _tsresol(buf[opt + 4])
            elif code == 14 and olen >= 8:
                (secs,) = struct.unpack_from(order + "q", buf, opt + 4)
                off_ns = secs * 1_000_000_000
            opt += 4 + ((olen + 3) & ~3)
        return _Iface(linktype, snaplen, mul, div, off_ns)


def read_packets(source: str | os.PathLike[str] | BinaryIO, *, strict: bool = False) -> Iterator[Packet]:
    """Yield the packets of a capture; see :class:`CaptureReader` for the details.

    Use :class:`CaptureReader` directly to learn ``truncated_bytes`` afterwards.
    """
    yield from CaptureReader(source, strict=strict)
