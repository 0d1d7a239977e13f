"""The ``_size`` frame column: a frame's bytes on the wire, its 4-byte size prefix included.

Checked against the real captures framed here independently (pcap records, Ethernet, IPv4,
TCP, then the int32 size prefixes of each direction's bytes, with no arrowkafka code): every
row's ``_size`` must be 4 + the size prefix of a frame of its direction with its correlation
id. Through each path that fills it: ``decode_capture`` (what ``arrowkafka decode`` writes),
``frames_table`` and ``decode_frames`` (the kernels), ``group_frames`` (the Python path), and
a reordered copy of each capture, whose connections the kernels leave to the Python layers.
"""

from __future__ import annotations

import io
import struct
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from capwriters import load, shuffle_windows, write_pcap

import arrowkafka as ak
from arrowkafka.traffic import (
    FRAME_COLUMNS,
    FRAMES_SCHEMA,
    TABLE_COLUMNS,
    Summary,
    decode_capture,
    decode_frames,
    frames_table,
    group_frames,
)
from arrowkafka.traffic.chunks import CHUNK_BYTES
from arrowkafka.traffic.grouping import frame_columns

CAPTURES = ["tansu_confluent.pcap", "noida_kafka_python.pcap", "kafka091_legacy.pcap"]
BROKER_PORT = 9092
SPECS = ak.load_specs()

# (client, broker, direction, correlation id) -> the sizes on the wire of such frames
Key = tuple[str, str, str, int]


def _tcp_payloads(capture: bytes) -> dict[tuple[str, str], list[tuple[int, int, bytes]]]:
    """Per direction (source, destination as ip:port): (seq, flags, payload) of its segments.
    Classic pcap of Ethernet and IPv4 only, as the real captures are."""
    magic = struct.unpack("<I", capture[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D)
    assert struct.unpack("<I", capture[20:24])[0] == 1  # Ethernet
    flows: dict[tuple[str, str], list[tuple[int, int, bytes]]] = defaultdict(list)
    p = 24
    while p + 16 <= len(capture):
        incl, orig = struct.unpack("<II", capture[p + 8 : p + 16])
        packet = capture[p + 16 : p + 16 + incl]
        p += 16 + incl
        assert incl == orig  # nothing cut by a snaplen
        if packet[12:14] != b"\x08\x00":
            continue
        ip = packet[14:]
        ihl, total = (ip[0] & 15) * 4, struct.unpack(">H", ip[2:4])[0]
        if ip[9] != 6:
            continue
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        src, dst = ".".join(map(str, ip[12:16])), ".".join(map(str, ip[16:20]))
        flows[(f"{src}:{sport}", f"{dst}:{dport}")].append((seq, tcp[13], tcp[(tcp[12] >> 4) * 4 :]))
    return flows


def _stream(segments: list[tuple[int, int, bytes]]) -> tuple[bytes, bool]:
    """A direction's bytes in sequence order (first seen wins), and whether it had a SYN."""
    syn = [seq for seq, flags, _ in segments if flags & 0x02]
    base = (syn[0] + 1) if syn else min(seq for seq, _, data in segments if data)
    out = bytearray()
    seen = bytearray()
    for seq, flags, data in segments:
        at = ((seq + (1 if flags & 0x02 else 0)) - base) & 0xFFFFFFFF
        if not data or at >= 1 << 31:  # nothing, or before the first byte (data with a SYN)
            continue
        if len(out) < at + len(data):
            out.extend(bytes(at + len(data) - len(out)))
            seen.extend(bytes(at + len(data) - len(seen)))
        for i, b in enumerate(data):
            if not seen[at + i]:
                out[at + i], seen[at + i] = b, 1
    assert all(seen), "a hole in the stream"
    return bytes(out), bool(syn)


def _frame_starts(data: bytes, start: int) -> list[int] | None:
    """Where the frames start, walking size prefixes from ``start``; None if they do not tile
    the bytes to the end (a partial frame may end them)."""
    starts, p = [], start
    while len(data) - p >= 4:
        size = struct.unpack(">i", data[p : p + 4])[0]
        if not 0 <= size < 1 << 27:
            return None
        if p + 4 + size > len(data):
            break
        starts.append(p)
        p += 4 + size
    return starts


def wire_frames(capture: bytes) -> dict[Key, Counter[int]]:
    """The frames of the capture's Kafka connections, framed here, by (client, broker,
    direction, correlation id): how many of each size on the wire (4 + the size prefix)."""
    out: dict[Key, Counter[int]] = defaultdict(Counter)
    for (src, dst), segments in _tcp_payloads(capture).items():
        request = dst.endswith(f":{BROKER_PORT}")
        data, syn = _stream(segments)
        if not data:
            continue
        if syn:
            starts = _frame_starts(data, 0)
        else:  # picked up mid-stream: the first place from which size prefixes tile the rest
            starts = next(s for s in (_frame_starts(data, x) for x in range(len(data))) if s)
        assert starts is not None, (src, dst)
        for p in starts:
            (size,) = struct.unpack(">i", data[p : p + 4])
            corr_at = p + (8 if request else 4)
            (corr,) = struct.unpack(">i", data[corr_at : corr_at + 4])
            client, broker = (src, dst) if request else (dst, src)
            out[(client, broker, "request" if request else "response", corr)][4 + size] += 1
    return out


def _keyed(tables: dict[str, pa.Table]) -> dict[Key, Counter[int]]:
    """The rows of message tables by the keys of ``wire_frames``: how many of each ``_size``."""
    out: dict[Key, Counter[int]] = defaultdict(Counter)
    for name, table in tables.items():
        direction = "request" if name.endswith("Request") else "response"
        assert name.endswith(("Request", "Response"))
        cols = table.select(["_client", "_broker", "_correlation_id", "_size"]).to_pydict()
        for client, broker, corr, size in zip(*cols.values(), strict=True):
            out[(client, broker, direction, corr)][size] += 1
    return out


def _check(got: dict[Key, Counter[int]], want: dict[Key, Counter[int]], rows: int) -> None:
    """Every row is a frame on the wire of its direction and correlation id, of that size."""
    assert sum(sum(c.values()) for c in got.values()) == rows > 0
    for key, sizes in got.items():
        assert not sizes - want.get(key, Counter()), (key, sizes, want.get(key))


def _by_message(frames: pa.Table) -> dict[str, pa.Table]:
    names = frames.column("_message").to_pylist()
    return {m: frames.filter(pa.array([n == m for n in names])) for m in set(names)}


def _python_path(capture: Path | io.BytesIO) -> dict[str, pa.Table]:
    """``group_frames`` and its ``frame_columns``: one table of FRAME_COLUMNS per message."""
    groups = group_frames([capture], SPECS, rejects=[])
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    for (_, message, _), frames in groups.items():
        tables[message].append(pa.Table.from_arrays(frame_columns(frames), schema=FRAME_COLUMNS))
    return {m: pa.concat_tables(ts) for m, ts in tables.items()}


def test_the_size_column() -> None:
    field = FRAME_COLUMNS.field("_size")
    assert field.type == pa.int32() and not field.nullable
    assert field.metadata == {b"about": b"the frame's bytes on the wire, its 4-byte size prefix included"}
    assert FRAME_COLUMNS.names.index("_size") == FRAME_COLUMNS.names.index("_ts_last") + 1
    assert "_size" in TABLE_COLUMNS.names and "_size" in FRAMES_SCHEMA.names


@pytest.fixture(scope="module", params=CAPTURES)
def capture(request: pytest.FixtureRequest, shared: Path) -> Path:
    return shared / "captures" / request.param


def test_wire_frames_see_every_frame(capture: Path) -> None:
    """The framing here finds every whole frame the decoder counts: it can check them all."""
    want = wire_frames(capture.read_bytes())
    summary = Summary()
    frames_table([capture], SPECS, summary=summary)
    whole = summary.frames_in - summary.capture_stats[0].frames.partial_frames
    assert sum(sum(c.values()) for c in want.values()) == whole > 0


def test_decode_capture_writes_the_wire_size(capture: Path, tmp_path: Path) -> None:
    """What ``arrowkafka decode`` writes: the kernel path, chunk by chunk, through Parquet."""
    want = wire_frames(capture.read_bytes())
    for chunk_bytes in (CHUNK_BYTES, 3000):
        out = tmp_path / f"out{chunk_bytes}"
        summary = decode_capture([capture], out, SPECS, chunk_bytes=chunk_bytes)
        tables = {
            p.stem: pq.read_table(p)
            for p in out.glob("*.parquet")
            if p.stem.endswith(("Request", "Response"))
        }
        for table in tables.values():
            assert table.schema.field("_size").type == pa.int32()
            assert table.schema.names.index("_size") == table.schema.names.index("_ts_last") + 1
        _check(_keyed(tables), want, summary.rows)


def test_kernel_and_python_paths_give_the_wire_size(capture: Path) -> None:
    """``frames_table`` (its headers and pairing by the kernels), ``decode_frames`` after it,
    and ``group_frames`` (the Python path): the same sizes, row for row, all on the wire."""
    want = wire_frames(capture.read_bytes())
    frames, _ = frames_table([capture], SPECS)
    decoded, undecoded = decode_frames(frames, SPECS)  # bodies that do not decode are no rows
    python = _python_path(capture)
    assert len(frames) == sum(map(len, python.values())) == sum(map(len, decoded.values())) + len(undecoded)
    _check(_keyed(_by_message(frames)), want, len(frames))
    _check(_keyed(decoded), want, len(frames) - len(undecoded))
    _check(_keyed(python), want, len(frames))
    by_message = _by_message(frames)
    columns = ["_client", "_broker", "_ts_first", "_correlation_id", "_size"]
    for message, table in python.items():
        kernel = by_message[message].select(columns)
        assert sorted(kernel.to_pylist(), key=repr) == sorted(table.select(columns).to_pylist(), key=repr)


def test_reordered_capture_gives_the_wire_size(capture: Path) -> None:
    """Reordered segments send the connections to the Python reassembler inside the kernel
    path (``chunks``): its frames carry their size too, as ``group_frames`` gives it."""
    packets = shuffle_windows(load(capture), 6, seed=7)
    data = write_pcap(packets)
    want = wire_frames(data)
    frames, _ = frames_table([io.BytesIO(data)], SPECS)
    python = _python_path(io.BytesIO(data))
    _check(_keyed(_by_message(frames)), want, len(frames))
    _check(_keyed(python), want, sum(map(len, python.values())))


def test_sizes_add_up_to_the_framed_bytes(capture: Path) -> None:
    """Over a connection whose every frame is a row, the ``_size`` of its rows add up to
    the bytes its directions carried (size prefixes included)."""
    data = capture.read_bytes()
    flows = _tcp_payloads(data)
    frames, rejects = frames_table([capture], SPECS)
    rejected = set(
        zip(rejects.column("client").to_pylist(), rejects.column("broker").to_pylist(), strict=True)
    )
    sums = Counter[tuple[str, str, str]]()
    for row in frames.select(["_client", "_broker", "_direction", "_size"]).to_pylist():
        sums[(row["_client"], row["_broker"], row["_direction"])] += row["_size"]
    checked = 0
    for (src, dst), segments in flows.items():
        request = dst.endswith(f":{BROKER_PORT}")
        client, broker = (src, dst) if request else (dst, src)
        stream, syn = _stream(segments)
        if not syn or (client, broker) in rejected or not stream:
            continue
        assert sums[(client, broker, "request" if request else "response")] == len(stream), (src, dst)
        checked += 1
    assert checked
