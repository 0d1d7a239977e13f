"""Captures picked up in the middle of a long, busy connection: no whole frame after the first
provable frame start is lost, however far the response direction lags, and what goes to
rejects is counted in frames."""

from __future__ import annotations

import io
import struct
from pathlib import Path

from capwriters import decode, load, split_segments, write_pcap

from arrowkafka import default_specs
from arrowkafka.traffic import KafkaFrame, SkippedBytes
from arrowkafka.traffic.frames import ConnKey, frame_pieces, iter_frames
from arrowkafka.traffic.grouping import group_frames
from arrowkafka.traffic.pairing import frames_table
from arrowkafka.traffic.pcap import Packet
from arrowkafka.traffic.summary import UNMATCHED, Summary, add_item_rejects
from arrowkafka.traffic.tcp import StreamData, StreamEnd, StreamOpen

LO = bytes([127, 0, 0, 1])
PAIRS = 15_000  # responses of 78 bytes: more than 1 MiB of them, more than 4096 requests


def _pkt(ts: int, sport: int, dport: int, seq: int, payload: bytes) -> Packet:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, 0, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, LO, LO)
    data = b"\0" * 12 + b"\x08\x00" + ip + tcp + payload
    return Packet(ts, 1, data, len(data))


def _frames(n: int) -> tuple[list[bytes], list[bytes]]:
    reqs, resps = [], []
    for i in range(n):
        r = struct.pack(">hhih", 1, 12, 100 + i, 7) + b"rdkafka" + bytes(60)
        reqs.append(struct.pack(">i", len(r)) + r)
        r = struct.pack(">i", 100 + i) + bytes(70)
        resps.append(struct.pack(">i", len(r)) + r)
    return reqs, resps


def _busy_connection(n: int, port: int = 40000) -> list[Packet]:
    """A tight request/response loop seen without its SYN (tcpdump started late)."""
    out, cs, ss, t = [], 1000, 5000, 10**18
    for q, r in zip(*_frames(n), strict=True):
        out.append(_pkt(t, port, 9092, cs, q))
        out.append(_pkt(t + 100_000, 9092, port, ss, r))
        cs, ss, t = cs + len(q), ss + len(r), t + 200_000
    return out


def _count(items: list) -> tuple[int, int, int]:
    frames = [i for i in items if isinstance(i, KafkaFrame)]
    skipped = sum(len(i.data) for i in items if isinstance(i, SkippedBytes))
    return (
        sum(f.direction == "request" for f in frames),
        sum(f.direction == "response" for f in frames),
        skipped,
    )


def test_long_mid_stream_capture_keeps_every_response() -> None:
    pk = _busy_connection(PAIRS)
    # starting at a request, and at a response whose request was before the capture
    for rest, want in ((pk, (PAIRS, PAIRS)), (pk[1:], (PAIRS - 1, PAIRS))):
        items, stats = decode(rest)
        req, resp, skipped = _count(items)
        assert (req, resp, skipped) == (*want, 0)
        assert stats.frames.partial_bytes == 0


def test_long_mid_stream_capture_starting_inside_a_response() -> None:
    pk = _busy_connection(PAIRS)
    first = pk[1]  # the first response, cut: the capture starts 30 bytes into it
    head = first.data[:54]
    seq = struct.unpack_from("!I", head, 38)[0] + 30
    cut = bytearray(head)
    struct.pack_into("!I", cut, 38, seq)
    struct.pack_into("!H", cut, 16, 40 + len(first.data) - 54 - 30)
    part = bytes(cut) + first.data[54 + 30 :]
    rest = [Packet(first.ts_ns, 1, part, len(part)), *pk[2:]]
    items, _ = decode(rest)
    assert _count(items) == (PAIRS - 1, PAIRS - 1, 48)


def test_framer_when_a_direction_arrives_in_one_piece() -> None:
    """However the events come (a held stream released at once), responses resync on the
    requests they answer, not on the last few thousand only."""
    reqs, resps = _frames(PAIRS)
    q, r = b"".join(reqs), b"".join(resps)[30:]  # picked up inside the first response
    kq, kr = (LO, 40000, LO, 9092), (LO, 9092, LO, 40000)
    events = [
        StreamOpen(kq, False, None),
        StreamOpen(kr, False, None),
        StreamData(kq, 0, q, ((0, 1),)),
        StreamData(kr, 0, r, ((0, 2),)),
        StreamEnd(kq, len(q), "capture end"),
        StreamEnd(kr, len(r), "capture end"),
    ]
    assert _count(list(iter_frames(events))) == (PAIRS, PAIRS - 1, 48)


def test_a_records_field_ending_a_torn_response_is_not_a_frame(shared: Path) -> None:
    """The torn end of a Fetch response before v12 often ends with its records field: a size
    prefix and bytes exactly to the frame's end, which walk like a frame. Record batches are no
    response: they stay with the torn bytes, and the whole responses after them are frames."""
    batch = (shared / "vectors" / "record_batch_v2_10rec.bin").read_bytes()
    _, resps = _frames(3)
    # one batch, two, and two with the second cut by the fetch size limit (a Fetch response's
    # records often end in a partial batch)
    for records in (batch, batch + batch, batch + batch[: len(batch) // 2], batch + batch[:7]):
        torn = b"\x07" * 10 + struct.pack(">i", len(records)) + records
        assert frame_pieces(torn + b"".join(resps), "response") == (torn, resps)
        assert frame_pieces(torn, "response") == (torn, [])
    # a response whose body reads as no batch chain stays a frame
    odd = struct.pack(">i", 30) + struct.pack(">i", 5) + bytes(26)
    assert frame_pieces(b"\x07" * 3 + odd, "response") == (b"\x07" * 3, [odd])


def test_skipped_frames_are_counted_as_frames() -> None:
    _, resps = _frames(5)
    conn = ConnKey(LO, 40000, LO, 9092)
    whole = SkippedBytes(conn, "response", 0, b"".join(resps), "resync")
    assert frame_pieces(bytes(whole.data), whole.direction) == (b"", resps)
    # the torn end of a frame, then whole ones: the torn bytes apart, the frames one by one
    torn = SkippedBytes(conn, "response", 3, b"".join(resps)[3:], "resync")
    assert frame_pieces(bytes(torn.data), torn.direction) == (resps[0][3:], resps[1:])
    assert frame_pieces(b"\x00\x00\x00\x09abc", "response") == (b"\x00\x00\x00\x09abc", [])
    summary, rejects = Summary(), []
    add_item_rejects(summary, rejects, "c", torn)
    assert [(r["error"], r["reason"], r["raw"]) for r in rejects] == [
        ("Partial", "resync", resps[0][3:]),
        *(("Unmatched", UNMATCHED, r[4:]) for r in resps[1:]),
    ]
    assert summary.frames_in == summary.rejects == 5


def _rejects(capture: bytes) -> list[list[tuple]]:
    """The rejects (error, reason, direction, raw) of the Python path, then of the kernels in
    one chunk and in chunks of 1.5 KB; frames in = rows + rejects in each."""
    specs = default_specs()
    out = []
    summary, rows = Summary(), []
    groups = group_frames([io.BytesIO(capture)], specs, summary=summary, rejects=rows)
    assert summary.frames_in == sum(map(len, groups.values())) + summary.rejects
    out.append(sorted((r["error"], r["reason"], r["direction"], r["raw"]) for r in rows))
    for chunk_bytes in (32 << 20, 1500):
        summary = Summary()
        table, rejects = frames_table([io.BytesIO(capture)], specs, summary=summary, chunk_bytes=chunk_bytes)
        assert summary.frames_in == len(table) + summary.rejects == len(table) + len(rejects)
        out.append(sorted((r["error"], r["reason"], r["direction"], r["raw"]) for r in rejects.to_pylist()))
    return out


def test_a_response_without_its_request_has_one_reason() -> None:
    """Responses to requests sent before the capture began are ``Unmatched``, whether the
    framer could frame them (the capture starts at one) or skipped them while looking for a
    frame start (the capture starts inside the one before): same error, reason and bytes, in
    the Python path and the kernels, in one chunk or many."""
    pk = _busy_connection(40)
    _, resps = _frames(40)
    # the requests of responses 0-3 were sent before the capture: it has their responses only
    lost = [p for i, p in enumerate(pk) if i % 2 == 0 and i < 8]
    kept = [p for p in pk if p not in lost]
    first = kept[0]  # response 0, then the same capture starting 30 bytes into it
    head = bytearray(first.data[:54])
    struct.pack_into("!I", head, 38, struct.unpack_from("!I", head, 38)[0] + 30)
    struct.pack_into("!H", head, 16, 40 + len(first.data) - 54 - 30)
    torn = Packet(first.ts_ns, 1, bytes(head) + first.data[54 + 30 :], len(first.data) - 30)
    unmatched = [("Unmatched", UNMATCHED, "response", r[4:]) for r in resps[:4]]
    at_frame = _rejects(write_pcap(kept))
    in_frame = _rejects(write_pcap([torn, *kept[1:]]))
    assert at_frame == [unmatched] * 3
    assert in_frame == [sorted([("Partial", "resync", "response", resps[0][30:]), *unmatched[1:]])] * 3


def test_a_real_capture_picked_up_mid_stream_has_one_reason_per_cause(shared: Path) -> None:
    """Real captures cut to start inside their connections (at frame boundaries and inside
    frames): the Python path and the kernels, in one chunk or many, give the same rejects; a
    whole response is never ``resync``."""
    seen = set()
    for name in ("tansu_confluent.pcap", "kafka091_legacy.pcap"):
        pk = split_segments(load(shared / "captures" / name), 7, 1000)
        for start in range(5, len(pk) - 20, 41):
            py, one, many = _rejects(write_pcap(pk[start:]))
            assert py == one == many, (name, start)
            for error, reason, direction, raw in py:
                seen.add((error, reason, direction))
                if (error, reason, direction) == ("Partial", "resync", "response"):
                    assert frame_pieces(raw, "response")[1] == []  # no whole frame left in it
    assert ("Unmatched", UNMATCHED, "response") in seen and ("Partial", "resync", "response") in seen


def test_capture_cut_mid_record_shows(shared: Path) -> None:
    data = (shared / "captures" / "tansu_confluent.pcap").read_bytes()[:1000]
    summary = Summary()
    _, rejects = frames_table([io.BytesIO(data)], default_specs(), summary=summary)
    cut = [r for r in rejects.to_pylist() if r["error"] == "Truncated"]
    assert len(cut) == 1 and "31 bytes into a packet record, at byte 1000" in cut[0]["reason"]
    assert cut[0]["raw"] == data[969:]  # the cut record's bytes
    assert "capture cut: the file ends 31 bytes into a packet record, at byte 1000" in summary.render()
    assert summary.rejects == 1 and summary.frames_in == 3  # two whole frames, and the cut


def test_big_pieces_on_two_connections() -> None:
    """A large Produce request on another mid-stream connection, spread over many segments,
    while the first connection loops: both keep every frame."""
    pk = _busy_connection(PAIRS)
    big = struct.pack(">hhih", 0, 9, 7, 7) + b"rdkafka" + bytes(600_000)
    big = struct.pack(">i", len(big)) + big
    t = pk[len(pk) // 2].ts_ns
    produce = [_pkt(t + i, 40001, 9092, 77 + i * 32768, big[i * 32768 : (i + 1) * 32768])
               for i in range(0, -(-len(big) // 32768))]  # fmt: skip
    merged = sorted(pk + produce, key=lambda p: p.ts_ns)
    items, _ = decode(write_pcap(merged))
    frames = [i for i in items if isinstance(i, KafkaFrame)]
    assert sum(f.direction == "response" for f in frames) == PAIRS
    assert sum(f.conn.client_port == 40001 for f in frames) == 1
