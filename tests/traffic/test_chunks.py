"""The columnar capture path against the per-packet Python layers, its reference.

For the real captures and for damaged, re-encoded and renumbered copies of them, both paths
must give the same whole frames (bytes, connection, direction, capture times), in the same
order within each direction, and the same partial frames and skipped bytes. Most of the
damage sends connections to the Python layers; the clean ones go through the kernels. Then
``frames_table`` (kernels for headers and pairing) is checked against ``group_frames`` (the
Python header parsers).
"""

from __future__ import annotations

import io
import struct
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from capwriters import (
    duplicate,
    epb,
    flag_mid_stream,
    fragment_tail,
    idb,
    load,
    relink,
    shb,
    shift_seqs,
    shuffle_windows,
    snap,
    split_segments,
    tcp_of,
    to_ipv6,
    with_flags,
    with_ip_options,
    write_pcap,
)

import arrowkafka as ak
from arrowkafka.traffic import (
    FRAMES_SCHEMA,
    REJECT_SCHEMA,
    CaptureStats,
    KafkaFrame,
    MissingBytes,
    Summary,
    capture_frames,
    frames_table,
    group_frames,
)
from arrowkafka.traffic.chunks import CHUNK_BYTES, capture_frame_arrays
from arrowkafka.traffic.grouping import frame_columns
from arrowkafka.traffic.pcap import Packet

CAPTURES = ["tansu_confluent.pcap", "noida_kafka_python.pcap", "kafka091_legacy.pcap"]
PORTS = frozenset({9092})


@pytest.fixture(autouse=True)
def small_flow_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start the direction table small, so that every capture makes it grow."""
    from arrowkafka.traffic import chunks as columnar

    monkeypatch.setattr(columnar._Flows, "FIRST_CAPACITY", 2)


@pytest.fixture(scope="module")
def packets(shared: Path) -> dict[str, list[Packet]]:
    return {name: load(shared / "captures" / name) for name in CAPTURES}


def _pcapng(pk: list[Packet]) -> bytes:
    half = len(pk) // 2
    out = [shb("<"), idb(1, tsresol=6), idb(276, tsresol=9)]
    out += [
        epb(relink(p, "sll2"), 1, units_per_s=10**9) if i % 2 else epb(p, 0) for i, p in enumerate(pk[:half])
    ]
    out += [shb(">"), idb(1, order=">", tsresol=8)]
    out += [epb(p, 0, order=">", units_per_s=10**8) for p in pk[half:]]
    return b"".join(out)


def _drop_data(pk: list[Packet], every: int) -> list[Packet]:
    data = [i for i, p in enumerate(pk) if tcp_of(p).payload]
    gone = set(data[5::every])
    return [p for i, p in enumerate(pk) if i not in gone]


def _forge_length(capture: bytes, index: int) -> bytes:
    """A classic pcap (little-endian) whose record ``index`` claims an implausible length."""
    pos = 24
    for _ in range(index):
        pos += 16 + struct.unpack_from("<I", capture, pos + 8)[0]
    return capture[: pos + 8] + struct.pack("<I", 0x7FFFFFF0) + capture[pos + 12 :]


# name -> (packets -> capture file bytes)
DAMAGE: dict[str, Callable[[list[Packet]], bytes]] = {
    "as is": write_pcap,
    "big-endian ns": lambda pk: write_pcap(pk, order=">", nanos=True),
    "pcapng, SLL2 and Ethernet": _pcapng,
    **{kind: (lambda pk, kind=kind: write_pcap([relink(p, kind) for p in pk]))  # type: ignore[misc]
       for kind in ("sll", "sll2", "null-le", "null-be", "loop", "raw", "vlan", "qinq")},
    "ipv6": lambda pk: write_pcap([to_ipv6(p, ext=False) for p in pk]),
    "ipv6 extension headers": lambda pk: write_pcap([to_ipv6(p) for p in pk]),
    "ip options": lambda pk: write_pcap([with_ip_options(p) for p in pk]),
    "a fragment": lambda pk: write_pcap([*pk[:9], fragment_tail(pk[9]), *pk[9:]]),
    "segments split": lambda pk: write_pcap(split_segments(pk, 7, 1000)),
    "sequence wraparound": lambda pk: write_pcap(shift_seqs(pk, (1 << 32) - 150)),
    "snaplen 120": lambda pk: write_pcap(snap(pk, 120), snaplen=120),
    "reordered": lambda pk: write_pcap(shuffle_windows(pk, 7, 1)),
    "duplicated": lambda pk: write_pcap(duplicate(pk, lambda i: i % 3 == 0, later=5)),
    "data lost": lambda pk: write_pcap(_drop_data(pk, 17)),
    "starts mid-stream": lambda pk: write_pcap(split_segments(pk, 7, 1000)[41:]),
    "cut mid-record": lambda pk: write_pcap(pk)[: len(write_pcap(pk)) * 2 // 3],
    # a segment half-way with every flag bit set (SYN with FIN and RST: invalid, ignored), or a
    # SYN alone (a new connection on the same ports, one direction first)
    "flags 0xff mid-stream": lambda pk: write_pcap(flag_mid_stream(pk, 0xFF)),
    "a SYN mid-stream": lambda pk: write_pcap(flag_mid_stream(pk, 0x02)),
    # a copy of every fifth packet with SYN, FIN and RST set, right after it: ignored by both,
    # so clean connections stay with the kernels, which drop the copies' payload
    "invalid copies": lambda pk: write_pcap([q for i, p in enumerate(pk)
                                             for q in ([p, with_flags(p, 0x07)] if i % 5 == 0 else [p])]),
    "framing broken at packet 50": lambda pk: _forge_length(write_pcap(pk), 50),
}  # fmt: skip


def _python(capture: bytes) -> tuple[dict, Counter, CaptureStats]:
    stats = CaptureStats()
    frames: dict[tuple, list] = defaultdict(list)
    others: Counter = Counter()
    for item in capture_frames(io.BytesIO(capture), stats=stats):
        if isinstance(item, KafkaFrame):
            frames[(item.conn, item.direction)].append((item.ts_first_ns, item.ts_last_ns, bytes(item.data)))
        elif not isinstance(item, MissingBytes):
            others[(item.conn, item.direction, item.offset, bytes(item.data), item.reason)] += 1
    return dict(frames), others, stats


def _columnar(
    capture: bytes, chunk_bytes: int, on_disk: Path | None = None
) -> tuple[dict, Counter, CaptureStats]:
    """The columnar path's frames, read from memory, or from a file at ``on_disk``."""
    stats = CaptureStats()
    source: Path | io.BytesIO = io.BytesIO(capture)
    if on_disk is not None:
        on_disk.write_bytes(capture)
        source = on_disk
    a = capture_frame_arrays(source, broker_ports=PORTS, stats=stats, chunk_bytes=chunk_bytes)
    frames: dict[tuple, list] = defaultdict(list)
    for i in np.argsort(a.order, kind="stable").tolist():
        key = (a.conns[a.conn[i]], "request" if a.request[i] else "response")
        body = a.data[a.off[i] : a.off[i] + a.size[i]].tobytes()
        frames[key].append((int(a.ts_first[i]), int(a.ts_last[i]), body))
    others: Counter = Counter()
    for _, item in a.others:
        if not isinstance(item, MissingBytes):
            others[(item.conn, item.direction, item.offset, bytes(item.data), item.reason)] += 1
    return dict(frames), others, stats


# (shift_seqs needs every flow's SYN, which the legacy capture lacks for some)
CASES = [
    (n, d)
    for n in CAPTURES
    for d in sorted(DAMAGE)
    if (n, d) != ("kafka091_legacy.pcap", "sequence wraparound")
]


# one chunk read from memory, and chunks of a few packets read from a file: frames then span
# chunks, carried from one to the next
@pytest.mark.parametrize("chunk_bytes", [CHUNK_BYTES, 1500])
@pytest.mark.parametrize(("name", "damage"), CASES)
def test_same_frames_as_the_python_layers(
    name: str, damage: str, chunk_bytes: int, packets: dict, tmp_path: Path
) -> None:
    capture = DAMAGE[damage](packets[name])
    want_frames, want_others, want = _python(capture)
    on_disk = tmp_path / "capture.pcap" if chunk_bytes < CHUNK_BYTES else None
    got_frames, got_others, got = _columnar(capture, chunk_bytes, on_disk)
    assert sum(map(len, want_frames.values())) > 10  # the damage left something to compare
    assert got_frames == want_frames
    assert got_others == want_others
    assert (got.format, got.packets, got.truncated_bytes) == (want.format, want.packets, want.truncated_bytes)
    assert (got.truncated_offset, got.broken_offset, got.broken_bytes, got.tail) == (
        want.truncated_offset,
        want.broken_offset,
        want.broken_bytes,
        want.tail,
    )
    assert got.link == want.link
    # segments with SYN and FIN or RST, ignored by both: counted alike, for the summary
    assert (got.tcp.invalid_segments, got.tcp.invalid_bytes) == (
        want.tcp.invalid_segments,
        want.tcp.invalid_bytes,
    )
    if damage == "invalid copies":
        assert got.tcp.invalid_segments > 10 and got.tcp.invalid_bytes > 0


def test_clean_connections_take_the_kernels(packets: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """On undamaged traffic only what needs the Python rules goes there (a check that the
    comparisons above exercise the kernels, not only the fallback)."""
    from arrowkafka.traffic import chunks as columnar

    slow: list[int] = []
    real = columnar._SlowPath.feed

    def spy(self, out, seg, segs, base):  # type: ignore[no-untyped-def]
        slow.append(len(segs))
        return real(self, out, seg, segs, base)

    monkeypatch.setattr(columnar._SlowPath, "feed", spy)
    for name in ("tansu_confluent.pcap", "noida_kafka_python.pcap"):
        slow.clear()
        capture_frame_arrays(io.BytesIO(write_pcap(packets[name])), broker_ports=PORTS)
        assert slow == [0]  # retransmissions included (tansu has some): the kernels drop them
    slow.clear()
    noida = packets["noida_kafka_python.pcap"]
    capture_frame_arrays(io.BytesIO(DAMAGE["invalid copies"](noida)), broker_ports=PORTS)
    assert slow == [0]  # segments with SYN and FIN or RST are ignored by the census, not sent here
    slow.clear()
    capture_frame_arrays(io.BytesIO(write_pcap(shuffle_windows(packets["tansu_confluent.pcap"], 7, 1))),
                         broker_ports=PORTS)  # fmt: skip
    assert slow and slow[0] > 0


class _Growing(io.BytesIO):
    """A capture still being written: more packets are there by the time it is read again."""

    def __init__(self, first: bytes, more: bytes) -> None:
        super().__init__(first)
        self.more = more

    def seek(self, pos: int, whence: int = 0) -> int:
        if self.more and (pos, whence) == (0, 0) and self.tell() == len(self.getbuffer()):
            self.write(self.more)  # the writer appended while the first pass read to the end
            self.more = b""
        return super().seek(pos, whence)


def test_a_capture_that_grows_between_the_passes(packets: dict) -> None:
    """The frames pass stops at the packets the census saw."""
    pk = packets["tansu_confluent.pcap"]
    half = write_pcap(pk[: len(pk) // 2])
    rest = write_pcap(pk[len(pk) // 2 :])[24:]  # records only, no file header
    want_frames, _, want = _columnar(half, CHUNK_BYTES)
    stats = CaptureStats()
    a = capture_frame_arrays(_Growing(half, rest), broker_ports=PORTS, stats=stats)
    got = sorted(a.data[o : o + n].tobytes() for o, n in zip(a.off.tolist(), a.size.tolist(), strict=True))
    assert got == sorted(body for frames in want_frames.values() for _, _, body in frames)
    assert (stats.packets, stats.format) == (want.packets, "pcap") == (len(pk) // 2, "pcap")


def _old_table(path: Path) -> tuple[pa.Table, pa.Table, Summary]:
    summary, rejects = Summary(), []
    groups = group_frames([path], ak.load_specs(), summary=summary, rejects=rejects)
    keys = [key for key, fs in sorted(groups.items()) for _ in fs]
    frames = [f for _, fs in sorted(groups.items()) for f in fs]
    columns = [
        pa.array([f.capture for f in frames], pa.string()),
        pa.array([k[0] for k in keys], pa.string()),
        pa.array([k[1] for k in keys], pa.string()),
        pa.array([k[2] for k in keys], pa.int16()),
        *frame_columns(frames),
        pa.array([f.body for f in frames], pa.binary()),
    ]
    return (
        pa.Table.from_arrays(columns, schema=FRAMES_SCHEMA),
        pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA),
        summary,
    )


@pytest.mark.parametrize("chunk_bytes", [CHUNK_BYTES, 3000])
@pytest.mark.parametrize("name", CAPTURES)
def test_frames_table_matches_group_frames(name: str, chunk_bytes: int, shared: Path) -> None:
    path = shared / "captures" / name
    want, want_rejects, want_summary = _old_table(path)
    summary = Summary()
    got, got_rejects = frames_table([path], ak.load_specs(), summary=summary, chunk_bytes=chunk_bytes)
    assert got.schema == want.schema
    assert got.to_pylist() == want.to_pylist()  # same rows in the same order
    assert got_rejects.to_pylist() == want_rejects.to_pylist()
    assert (summary.frames_in, summary.rejects) == (want_summary.frames_in, want_summary.rejects)
    assert summary.per_api.keys() == want_summary.per_api.keys()
    for key, stat in summary.per_api.items():
        assert {k: v for k, v in stat.items() if k != "latency"} == {
            k: v for k, v in want_summary.per_api[key].items() if k != "latency"
        }
        assert summary.latencies(*key).tolist() == want_summary.latencies(*key).tolist()


def test_connections_of_the_kernels_as_rows() -> None:
    """The kernels' connections are flow-table rows (``Conns``), made into ConnKeys only when
    asked; their ip:port strings, formatted as arrays, are those ``_addr`` gives one by one."""
    from arrowkafka.traffic.chunks import Conns
    from arrowkafka.traffic.columns import addr as _addr
    from arrowkafka.traffic.columns import endpoints as _endpoints
    from arrowkafka.traffic.frames import ConnKey

    rows = np.zeros((3, 37), np.uint8)  # client ip, broker ip (16 bytes each), version, ports
    rows[0, 0:4], rows[0, 16:20], rows[0, 32] = (127, 0, 0, 1), (10, 1, 2, 255), 4
    rows[0, 33:37] = (0xC3, 0x50, 0x23, 0x84)  # 50000 -> 9092
    rows[1, 0:16], rows[1, 16:32], rows[1, 32] = range(16), range(16, 32), 6
    rows[1, 33:37] = (0, 1, 0x23, 0x84)
    rows[2] = rows[0]
    rows[2, 0] = 192
    conns = Conns(rows)
    conns.append(ConnKey(bytes([1, 2, 3, 4]), 5, bytes([5, 6, 7, 8]), 9092))
    assert len(conns) == 4 and conns[-1] == conns[3]
    assert conns[0] == ConnKey(bytes([127, 0, 0, 1]), 50000, bytes([10, 1, 2, 255]), 9092)
    assert conns[1] == ConnKey(bytes(range(16)), 1, bytes(range(16, 32)), 9092)
    with pytest.raises(IndexError):
        conns[4]
    for start in range(5):
        clients, brokers = _endpoints(conns, start)
        assert clients.to_pylist() == [_addr(c.client_ip, c.client_port) for c in list(conns)[start:]]
        assert brokers.to_pylist() == [_addr(c.server_ip, c.server_port) for c in list(conns)[start:]]
    assert _endpoints(conns, 0)[0].to_pylist()[:2] == [
        "127.0.0.1:50000",
        "[0001:0203:0405:0607:0809:0a0b:0c0d:0e0f]:1",
    ]


def _again(pk: list[Packet], shift_ns: int, move: int) -> list[Packet]:
    """The packets once more, later by ``shift_ns``, on the same ports, every TCP sequence and
    acknowledgement number moved by ``move``: the connections open and close again (ports
    reused), their correlation ids starting over."""
    out = []
    for p in pk:
        d = bytearray(p.data)
        if len(d) >= 34 and d[12:14] == b"\x08\x00" and d[23] == 6:  # Ethernet, IPv4, TCP
            tcp = 14 + (d[14] & 15) * 4
            for at in (tcp + 4, tcp + 8):
                d[at : at + 4] = ((int.from_bytes(d[at : at + 4], "big") + move) % 2**32).to_bytes(4, "big")
        out.append(p._replace(ts_ns=p.ts_ns + shift_ns, data=bytes(d)))
    return out


def test_correlation_ids_that_come_back_on_reused_ports_pair_alike(
    packets: dict, tmp_path: Path, shared: Path
) -> None:
    """The Python steps pair a response with the latest request before it (as the kernels do),
    not with the last request of the capture with its connection and correlation id."""
    pk = packets["tansu_confluent.pcap"]
    span = pk[-1].ts_ns - pk[0].ts_ns + 1
    path = tmp_path / "twice.pcap"
    path.write_bytes(write_pcap(pk + _again(pk, span, 0x9E3779B1)))
    want, want_rejects, _ = _old_table(path)
    got, got_rejects = frames_table([path], ak.load_specs())
    assert got.to_pylist() == want.to_pylist()
    assert got_rejects.to_pylist() == want_rejects.to_pylist()
    once, once_rejects, _ = _old_table(shared / "captures" / "tansu_confluent.pcap")
    responses = [r for r in want.to_pylist() if r["_direction"] == "response"]
    assert len(responses) == 2 * sum(r["_direction"] == "response" for r in once.to_pylist())
    assert all(r["_latency_ns"] >= 0 for r in responses)
    assert want_rejects.num_rows == 2 * once_rejects.num_rows  # (its one torn frame, twice)
