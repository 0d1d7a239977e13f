"""Damaged captures: odd TCP flags, framing that breaks part-way, files cut mid-record. No
traceback, what was read before the damage is kept, and frames in = rows + rejects, in the
Python path (``group_frames``) and the kernel path (``frames_table``) alike."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from capwriters import epb, flag_mid_stream, idb, load, shb, tcp_of, write_pcap

import arrowkafka as ak
from arrowkafka.traffic import CaptureStats, Summary, capture_frames, frames_table, group_frames
from arrowkafka.traffic.chunks import capture_frame_arrays
from arrowkafka.traffic.packets import Segment
from arrowkafka.traffic.pcap import TAIL_KEEP, CaptureFormatError, CaptureReader, Packet
from arrowkafka.traffic.tcp import StreamData, StreamEnd, StreamOpen, TcpReassembler

COMMAND = Path(sys.executable).with_name("arrowkafka")  # the installed entry point
PORTS = frozenset({9092})

# SYN, SYN-ACK, then a segment with every flag bit set (0xff) on the client's ports
SYN_FIN_RST = bytes.fromhex(
    "d4c3b2a10200040000000000000000000000040001000000f850026bdf210e004a0000004a00000000000000"
    "000000000000000008004500003c6ca840004006d0117f0000017f000001830223844895088000000000a002"
    "ffd7fe3000000204ffd70402080a77360a1b000000000103030af850026bf4210e004a0000004a0000000000"
    "0000000000000000000008004500003c0000400040063cba7f0000017f00000123848302cd3d2f8648950881"
    "a012ffcbfe3000000204ffd70402080ab0f3153077360a1b01030301f950026bf14f00004200000042000000"
    "0000000000000000000000000800450000346cb140004006d0107f0000017f0000018302238448950970cd3d"
    "377880ff0055fe2800000101080a77360a79b0f3158e"
)


def _decode(capture: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMMAND), "decode", str(capture), "-o", str(out)], capture_output=True, text=True
    )


def _both(capture: bytes) -> list[tuple[int, int, int]]:
    """(frames in, rows, rejects) of the Python path, then of the kernel path."""
    specs = ak.load_specs()
    py = Summary()
    groups = group_frames([io.BytesIO(capture)], specs, summary=py, rejects=[])
    kernel = Summary()
    table, rejects = frames_table([io.BytesIO(capture)], specs, summary=kernel)
    assert len(rejects) == kernel.rejects
    return [
        (py.frames_in, sum(map(len, groups.values())), py.rejects),
        (kernel.frames_in, len(table), kernel.rejects),
    ]


def test_syn_fin_rst_capture_decodes(tmp_path: Path) -> None:
    capture = tmp_path / "flags.pcap"
    capture.write_bytes(SYN_FIN_RST)
    proc = _decode(capture, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "frames in 0 = rows 0 + rejects 0 (all accounted for)" in proc.stdout, proc.stdout
    assert f"TCP segments ignored in {capture}: 1 with SYN and FIN or RST (0 payload bytes)" in proc.stdout
    assert pq.read_table(tmp_path / "out" / "rejects.parquet").num_rows == 0


@pytest.mark.parametrize("flags", [0x03, 0x06, 0x07, 0xFF, 0x12 | 0x01])
def test_a_syn_with_fin_or_rst_is_ignored(flags: int) -> None:
    """It opens, ends and carries nothing: the stream goes on as if it had not come."""
    c, s = (b"\x0a\0\0\x01", 40000), (b"\x0a\0\0\x02", 9092)
    r = TcpReassembler(window_ns=None)
    events = r.add(Segment(1, c[0], c[1], s[0], s[1], 99, 0x02, b"", 0))
    events += r.add(Segment(2, c[0], c[1], s[0], s[1], 100, 0x18, b"abcd", 4))
    events += r.add(Segment(3, c[0], c[1], s[0], s[1], 5000, flags, b"junk", 4))
    events += r.add(Segment(4, c[0], c[1], s[0], s[1], 104, 0x18, b"efgh", 4))
    events += r.finish()
    assert [type(e) for e in events] == [StreamOpen, StreamData, StreamData, StreamEnd]
    assert b"".join(e.data for e in events if isinstance(e, StreamData)) == b"abcdefgh"
    assert events[-1].reason == "capture end"
    assert (r.stats.invalid_segments, r.stats.invalid_bytes, r.stats.streams) == (1, 4, 1)


def test_every_flag_value_in_the_middle_of_a_connection(shared: Path) -> None:
    pk = load(shared / "captures" / "noida_kafka_python.pcap")
    data = [i for i, p in enumerate(pk) if tcp_of(p).payload]
    i = data[len(data) // 2]  # the segment flag_mid_stream sets: data, connections open around it
    assert not tcp_of(pk[i]).flags & 0x07 and tcp_of(flag_mid_stream(pk, 0xFF)[i]).flags == 0x3F
    want = _both(write_pcap(pk))
    assert want[0][1] > 50  # something decoded to compare with
    for flags in range(256):
        got = _both(write_pcap(flag_mid_stream(pk, flags)))
        for frames_in, rows, rejects in got:
            assert frames_in == rows + rejects, flags
        assert got[0] == got[1], flags  # the kernel census agrees with the Python steps
        if flags & 0x02 and flags & 0x05:  # invalid: ignored, the capture reads as if it were not there
            assert got[0][1] <= want[0][1]


# -- framing that breaks part-way ------------------------------------------------------------
def _records(capture: bytes) -> list[int]:
    """File offsets of a little-endian classic pcap's records."""
    out, pos = [], 24
    while pos + 16 <= len(capture):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", capture, pos + 8)[0]
    return out


def _pcapng(pk: list[Packet]) -> tuple[bytes, list[int]]:
    """A pcapng capture of the packets and the file offset of each packet's block."""
    out = shb("<") + idb(1, tsresol=9)
    at = []
    for p in pk:
        at.append(len(out))
        out += epb(p, 0, units_per_s=10**9)
    return out, at


def _forged(shared: Path, form: str) -> tuple[bytes, int, int]:
    """A real capture with a forged length at packet 50: (file, where it breaks, packets before)."""
    pk = load(shared / "captures" / "tansu_confluent.pcap")
    if form == "pcap":
        raw = bytearray(write_pcap(pk))
        at = _records(bytes(raw))[50]
        struct.pack_into("<I", raw, at + 8, 0x7FFFFFF0)  # the record's captured length
    else:
        blob, offsets = _pcapng(pk)
        raw = bytearray(blob)
        at = offsets[50]
        struct.pack_into("<I", raw, at + 4, 0x7FFFFFF0)  # the block's total length
    return bytes(raw), at, 50


@pytest.mark.parametrize("form", ["pcap", "pcapng"])
def test_a_forged_length_keeps_what_came_before(form: str, shared: Path, tmp_path: Path) -> None:
    raw, at, before = _forged(shared, form)
    with pytest.raises(CaptureFormatError) as e:
        list(CaptureReader(io.BytesIO(raw), strict=True))
    assert e.value.offset == at
    reader = CaptureReader(io.BytesIO(raw))
    assert len(list(reader)) == before
    assert (reader.broken_offset, reader.broken_bytes, reader.tail) == (
        at,
        len(raw) - at,
        raw[at:][:TAIL_KEEP],
    )
    # the Python steps and the kernels read the same packets and stop at the same byte
    py, kern, small = CaptureStats(), CaptureStats(), CaptureStats()
    list(capture_frames(io.BytesIO(raw), stats=py))
    capture_frame_arrays(io.BytesIO(raw), broker_ports=PORTS, stats=kern)
    capture_frame_arrays(io.BytesIO(raw), broker_ports=PORTS, stats=small, chunk_bytes=1500)
    for st in (py, kern, small):
        assert (st.packets, st.broken_offset, st.broken_bytes, st.tail) == (
            before,
            at,
            len(raw) - at,
            raw[at:],
        )
        assert "implausible" in st.broken_reason or "length" in st.broken_reason
    counts = _both(raw)
    assert counts[0] == counts[1]
    frames_in, rows, rejects = counts[0]
    assert frames_in == rows + rejects and rows > 10
    # through the command: the frames before the break decoded, one reject for the rest, status 1
    capture = tmp_path / f"forged.{form}"
    capture.write_bytes(raw)
    proc = _decode(capture, tmp_path / "out")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"capture framing broken: the packet records break at byte {at} of {capture}" in proc.stdout
    assert "(all accounted for, but a capture file's framing broke)" in proc.stdout, proc.stdout
    table = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    broken = [r for r in table if r["error"] == "CaptureFormatError"]
    assert len(broken) == 1
    assert broken[0]["raw"] == raw[at:]
    assert f"the packet records break at byte {at} of {capture}" in broken[0]["reason"]
    assert f"the {len(raw) - at} bytes from there to the end of the file were not read" in broken[0]["reason"]
    assert any(p.name != "rejects.parquet" for p in (tmp_path / "out").glob("*Response.parquet"))


def test_the_unread_end_is_kept_up_to_the_cap(shared: Path) -> None:
    raw, at, _ = _forged(shared, "pcap")
    big = raw + bytes(TAIL_KEEP)  # more after the break than the cap
    summary, rejects = Summary(), []
    group_frames([io.BytesIO(big)], ak.load_specs(), summary=summary, rejects=rejects)
    row = next(r for r in rejects if r["error"] == "CaptureFormatError")
    assert row["raw"] == big[at : at + TAIL_KEEP]
    assert f"raw holds the first {TAIL_KEEP} (the cap: {TAIL_KEEP})" in row["reason"]


# -- a file cut inside a record ----------------------------------------------------------------
@pytest.mark.parametrize("chunk_bytes", [32 << 20, 1500])
def test_a_cut_record_is_the_cut_not_a_snaplen_packet(chunk_bytes: int, shared: Path, tmp_path: Path) -> None:
    whole = (shared / "captures" / "tansu_confluent.pcap").read_bytes()
    record = _records(whole)[120]
    n = record + 16 + 20  # head -c N: inside the 121st record's packet
    cut = whole[:n]
    st = CaptureStats()
    capture_frame_arrays(io.BytesIO(cut), broker_ports=PORTS, stats=st, chunk_bytes=chunk_bytes)
    assert (st.packets, st.truncated_offset, st.truncated_bytes) == (120, record, n - record)
    assert st.link.truncated == 0  # no packet counted as cut by the snaplen
    assert st.tail == cut[record:]
    py = CaptureStats()
    list(capture_frames(io.BytesIO(cut), stats=py))
    assert (py.packets, py.truncated_offset, py.truncated_bytes, py.link.truncated) == (
        120,
        record,
        n - record,
        0,
    )
    capture = tmp_path / "cut.pcap"
    capture.write_bytes(cut)
    proc = _decode(capture, tmp_path / "out")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        f"capture cut: the file ends {n - record} bytes into a packet record, at byte {n} of {capture}"
        in (proc.stdout)
    )
    table = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    truncated = [r for r in table if r["error"] == "Truncated"]
    assert len(truncated) == 1 and truncated[0]["raw"] == cut[record:]  # the cut record's bytes, once
    assert sum(r["raw"] == cut[record:] for r in table) == 1
