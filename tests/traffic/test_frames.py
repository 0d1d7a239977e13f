"""Kafka frames from the real captures, intact and damaged in known ways."""

from __future__ import annotations

import itertools
import re
import struct
from collections import Counter
from pathlib import Path

import pytest
from capwriters import (
    decode,
    dir_key,
    duplicate,
    epb,
    idb,
    isns,
    load,
    relink,
    shb,
    shift_seqs,
    shuffle_windows,
    snap,
    split_segments,
    stream_extents,
    tcp_of,
    tiling,
    to_ipv6,
    whole_frames,
    write_pcap,
)
from hypothesis import given
from hypothesis import strategies as st

from arrowkafka import default_specs
from arrowkafka.traffic import KafkaFrame, MissingBytes, PartialFrame, SkippedBytes
from arrowkafka.traffic.frames import iter_frames, peek_request, peek_response
from arrowkafka.traffic.pcap import Packet
from arrowkafka.traffic.summary import Summary, add_item_rejects
from arrowkafka.traffic.tcp import StreamData, StreamEnd, StreamGap, StreamOpen

CAPTURES = ["tansu_confluent.pcap", "noida_kafka_python.pcap", "kafka091_legacy.pcap"]
# The README's numbers, restated so a README the test cannot parse still fails loudly.
COUNTS = {
    "tansu_confluent.pcap": (123, 122),
    "noida_kafka_python.pcap": (49, 49),
    "kafka091_legacy.pcap": (53, 51),
}


@pytest.fixture(scope="module")
def readme(shared: Path) -> dict[str, tuple[int, int, set[tuple[int, int]]]]:
    """Per capture: (requests, responses, {(api_key, api_version)}) as the README lists them."""
    text = (shared / "captures" / "README.md").read_text()
    specs = default_specs()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\| `(\w+\.pcap)` \|.*\| (\d+) \((\d+) / (\d+)\) \| (.+) \|$", line)
        if not m:
            continue
        types = set()
        for part in m.group(5).split(", "):
            name, versions = part.split(" ", 1)
            key = specs[name + "Request"].api_key
            assert key is not None
            types |= {(key, int(v)) for v in re.findall(r"v(\d+)", versions)}
        assert int(m.group(2)) == int(m.group(3)) + int(m.group(4))
        rows[m.group(1)] = (int(m.group(3)), int(m.group(4)), types)
    assert {k: v[:2] for k, v in rows.items()} == COUNTS
    return rows


@pytest.fixture(scope="module")
def packets(shared: Path) -> dict[str, list[Packet]]:
    return {name: load(shared / "captures" / name) for name in CAPTURES}


@pytest.fixture(scope="module")
def baseline(packets: dict[str, list[Packet]]) -> dict[str, list]:
    return {name: decode(pk)[0] for name, pk in packets.items()}


def canon(items: list) -> list:
    """Items per direction in stream order (directions interleave by timing, which damage moves)."""
    return sorted(items, key=lambda i: (dir_key(i), i.offset))


def frames_of(items: list) -> list[KafkaFrame]:
    return [i for i in items if isinstance(i, KafkaFrame)]


def flow_of(k: tuple[int, int, str]) -> tuple[int, int]:
    return (k[0], k[1]) if k[2] == "request" else (k[1], k[0])


def assert_accounted(items: list, packets: list[Packet]) -> None:
    """Every direction's bytes are covered once, from offset 0 to the stream's real length."""
    ext = tiling(items)
    lengths = stream_extents(packets)
    for k, (start, end) in ext.items():
        assert start == 0, k
        assert end == lengths.get(flow_of(k), 0), k


# -- the real captures ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", CAPTURES)
def test_real_capture_counts_and_apis(name: str, readme: dict, baseline: dict, packets: dict) -> None:
    requests, responses, apis = readme[name]
    items = baseline[name]
    c = Counter(f.direction for f in frames_of(items))
    assert (c["request"], c["response"]) == (requests, responses)
    seen = {peek_request(f.data)[:2] for f in frames_of(items) if f.direction == "request"}
    assert seen == apis
    assert not [i for i in items if isinstance(i, SkippedBytes | MissingBytes)]
    assert_accounted(items, packets[name])


@pytest.mark.parametrize("name", CAPTURES)
def test_real_capture_pairs_and_times(name: str, baseline: dict, packets: dict) -> None:
    items = baseline[name]
    times = {p.ts_ns for p in packets[name]}
    corr: dict[tuple, set[int]] = {}
    for f in frames_of(items):
        assert f.ts_first_ns in times and f.ts_last_ns in times and f.ts_first_ns <= f.ts_last_ns
        if f.direction == "request":
            corr.setdefault(f.conn, set()).add(peek_request(f.data)[2])
    unpaired = [
        f
        for f in frames_of(items)
        if f.direction == "response" and peek_response(f.data) not in corr.get(f.conn, ())
    ]
    assert unpaired == []
    for f in frames_of(items):  # indexes count whole frames per direction
        assert f.frame_index == sum(
            1 for g in frames_of(items) if dir_key(g) == dir_key(f) and g.offset < f.offset
        )


def test_frame_timestamps_span_segments(packets: dict, baseline: dict) -> None:
    pk = packets["tansu_confluent.pcap"]
    items, _ = decode(split_segments(pk, 7, 1000))
    assert whole_frames(items) == whole_frames(baseline["tansu_confluent.pcap"])
    before = {(dir_key(f), f.offset): f for f in frames_of(baseline["tansu_confluent.pcap"])}
    for f in frames_of(items):
        b = before[(dir_key(f), f.offset)]
        # Each frame now spans both halves of its segment: first time unchanged, last +1 µs.
        assert (f.ts_first_ns, f.ts_last_ns) == (b.ts_first_ns, b.ts_last_ns + 1000)


# -- encodings -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sll", "sll2", "null-le", "null-be", "loop", "raw", "vlan", "qinq"])
def test_link_layers(kind: str, packets: dict, baseline: dict) -> None:
    items, stats = decode([relink(p, kind) for p in packets["tansu_confluent.pcap"]])
    assert whole_frames(items) == whole_frames(baseline["tansu_confluent.pcap"])
    assert stats.link.tcp == len(packets["tansu_confluent.pcap"])


@pytest.mark.parametrize("ext", [True, False])
def test_ipv6(ext: bool, packets: dict, baseline: dict) -> None:
    items, _ = decode([to_ipv6(p, ext=ext) for p in packets["noida_kafka_python.pcap"]])
    assert whole_frames(items) == whole_frames(baseline["noida_kafka_python.pcap"])
    assert {len(f.conn.client_ip) for f in frames_of(items)} == {16}
    assert str(frames_of(items)[0].conn).startswith("fd00::7f00:1:")


@pytest.mark.parametrize(("order", "nanos"), [(">", False), ("<", True), (">", True)])
def test_classic_pcap_variants(order: str, nanos: bool, packets: dict, baseline: dict) -> None:
    items, _ = decode(write_pcap(packets["noida_kafka_python.pcap"], order=order, nanos=nanos))
    assert items == baseline["noida_kafka_python.pcap"]


def test_pcapng_two_sections_and_interfaces(packets: dict, baseline: dict) -> None:
    pk = packets["tansu_confluent.pcap"]
    half = len(pk) // 2
    # Section 1, little-endian: Ethernet in microseconds and SLL2 in nanoseconds, alternating.
    out = [shb("<"), idb(1, tsresol=6), idb(276, tsresol=9)]
    for i, p in enumerate(pk[:half]):
        if i % 2:
            out.append(epb(relink(p, "sll2"), 1, units_per_s=10**9))
        else:
            out.append(epb(p, 0))
    # Section 2, big-endian: one Ethernet interface counting 10 ns units from a 1.7e9 s offset.
    out += [shb(">"), idb(1, order=">", tsresol=8, tsoffset=1_700_000_000)]
    out += [epb(p, 0, order=">", units_per_s=10**8, offset_s=1_700_000_000) for p in pk[half:]]
    items, stats = decode(b"".join(out))
    assert stats.format == "pcapng" and stats.packets == len(pk)
    assert items == baseline["tansu_confluent.pcap"]  # same bytes, same timestamps


# -- damage ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("seed", [1, 2])
def test_reordered(name: str, seed: int, packets: dict, baseline: dict) -> None:
    pk = shuffle_windows(packets[name], 7, seed)
    assert pk != packets[name]
    items, stats = decode(pk)
    assert whole_frames(items) == whole_frames(baseline[name])
    assert stats.tcp.gaps == 0
    # Timestamps too, except where the capture holds two copies of a segment: then whichever
    # copy comes first in the file wins, as it should.
    copies = Counter((tcp_of(p).flow, tcp_of(p).seq) for p in packets[name] if tcp_of(p).payload)
    twice = {flow for (flow, _), n in copies.items() if n > 1}
    times = {(dir_key(f), f.offset): (f.ts_first_ns, f.ts_last_ns) for f in frames_of(baseline[name])}
    checked = [f for f in frames_of(items) if flow_of(dir_key(f)) not in twice]
    assert len(checked) > len(frames_of(items)) // 2
    assert all((f.ts_first_ns, f.ts_last_ns) == times[(dir_key(f), f.offset)] for f in checked)


def test_duplicated(packets: dict, baseline: dict) -> None:
    pk = packets["tansu_confluent.pcap"]
    _, before = decode(pk)
    dup = duplicate(pk, lambda i: i % 3 == 0, later=5)
    items, stats = decode(dup)
    assert canon(items) == canon(baseline["tansu_confluent.pcap"])
    added = sum(len(tcp_of(p).payload) for i, p in enumerate(pk) if i % 3 == 0) * 2
    assert stats.tcp.duplicate_bytes == before.tcp.duplicate_bytes + added


def _unique_data_packets(pk: list[Packet]) -> list[int]:
    seen = Counter((tcp_of(p).flow, tcp_of(p).seq) for p in pk)
    return [i for i, p in enumerate(pk) if tcp_of(p).payload and seen[(tcp_of(p).flow, tcp_of(p).seq)] == 1]


@pytest.mark.parametrize("name", CAPTURES)
def test_dropped_segment(name: str, packets: dict, baseline: dict) -> None:
    pk = packets[name]
    base = isns(pk)
    # Dropping a flow's last data with no FIN after it leaves no trace: nothing says the stream
    # was longer. Every other drop must show as a gap.
    fins = {tcp_of(p).flow for p in pk if tcp_of(p).flags & 0x01}
    last = {tcp_of(p).flow: i for i, p in enumerate(pk) if tcp_of(p).payload}
    candidates = [
        i
        for i in _unique_data_packets(pk)
        if tcp_of(pk[i]).flow in base and (tcp_of(pk[i]).flow in fins or last[tcp_of(pk[i]).flow] != i)
    ]
    orig = whole_frames(baseline[name])
    for i in candidates[:: max(1, len(candidates) // 10)]:
        s = tcp_of(pk[i])
        lo = (s.seq - base[s.flow]) & 0xFFFFFFFF
        hi = lo + len(s.payload)
        items, _ = decode(pk[:i] + pk[i + 1 :])
        missing = [m for m in items if isinstance(m, MissingBytes)]
        assert [(m.offset, m.length, m.reason) for m in missing] == [(lo, hi - lo, "lost")]
        hit = dir_key(missing[0])
        assert flow_of(hit) == s.flow
        got = whole_frames(items)
        for k, frames in orig.items():
            want = [f for f in frames if k != hit or f[0] + 4 + len(f[1]) <= lo or f[0] >= hi]
            assert got.get(k, []) == want, (i, k)
        assert_accounted(items, pk)


@pytest.mark.parametrize("snaplen", [70, 120, 400])
def test_snaplen(snaplen: int, packets: dict, baseline: dict) -> None:
    pk = packets["tansu_confluent.pcap"]
    base = isns(pk)
    items, stats = decode(snap(pk, snaplen))
    # Stream bytes the snaplen removed, from the intact packets: sent but in no captured part
    # (retransmitted copies overlap, hence sets).
    sent: dict[tuple[int, int], set[int]] = {}
    kept: dict[tuple[int, int], set[int]] = {}
    for p in pk:
        s = tcp_of(p)
        lo = (s.seq - base[s.flow]) & 0xFFFFFFFF
        n = max(0, min(len(s.payload), snaplen - s.payload_at))
        sent.setdefault(s.flow, set()).update(range(lo, lo + len(s.payload)))
        kept.setdefault(s.flow, set()).update(range(lo, lo + n))
    lost = {f: sent[f] - kept[f] for f in sent}
    assert stats.tcp.gap_bytes == sum(map(len, lost.values())) > 0
    orig = whole_frames(baseline["tansu_confluent.pcap"])
    got = whole_frames(items)
    for k, frames in orig.items():
        holes = lost[flow_of(k)]
        want = [f for f in frames if holes.isdisjoint(range(f[0], f[0] + 4 + len(f[1])))]
        assert got.get(k, []) == want, k
    assert_accounted(items, pk)
    # Where a request lost its body but kept its header, the header is still readable.
    heads = {
        (dir_key(f), f.offset): peek_request(f.data)
        for f in frames_of(baseline["tansu_confluent.pcap"])
        if f.direction == "request"
    }
    partial = [
        p for p in items if isinstance(p, PartialFrame) and p.direction == "request" and p.reason == "gap"
    ]
    assert partial
    for p in partial:
        if len(p.header) >= 8:
            assert peek_request(p.header) == heads[(dir_key(p), p.frame_offset)]
    assert stats.frames.skipped_bytes == 0  # the sizes told where every next frame starts


def test_capture_cut_mid_frame(packets: dict, baseline: dict) -> None:
    pk = split_segments(packets["tansu_confluent.pcap"], 100, 1000)
    # Stop right after the first half of the largest frame's segment.
    big = max(frames_of(baseline["tansu_confluent.pcap"]), key=lambda f: len(f.data))
    first = next(
        i
        for i, p in enumerate(pk)
        if tcp_of(p).payload[:4] == len(big.data).to_bytes(4, "big")
        and tcp_of(p).payload[4:100] == big.data[:96]
    )
    # The file ends 30 bytes into the next record, as when tcpdump is killed mid-write.
    data = write_pcap(pk[: first + 2])[: len(write_pcap(pk[: first + 1])) + 30]
    items, stats = decode(data)
    assert stats.truncated_bytes == 30
    part = [i for i in items if isinstance(i, PartialFrame)]
    assert [
        (p.offset, p.data, p.size, p.reason)
        for p in part
        if p.frame_offset == big.offset and dir_key(p) == dir_key(big)
    ] == [(big.offset, len(big.data).to_bytes(4, "big") + big.data[:96], len(big.data), "capture end")]
    orig = {(dir_key(f), f.offset): f.data for f in frames_of(baseline["tansu_confluent.pcap"])}
    assert all(orig[(dir_key(f), f.offset)] == f.data for f in frames_of(items))
    ext = tiling(items)
    assert ext[dir_key(big)] == (0, big.offset + 100)


def test_sequence_wraparound(packets: dict, baseline: dict) -> None:
    pk = shift_seqs(packets["tansu_confluent.pcap"], (1 << 32) - 150)
    lengths = stream_extents(packets["tansu_confluent.pcap"])
    assert max(lengths.values()) > 150  # some stream really crosses 2**32
    items, stats = decode(pk)
    assert canon(items) == canon(baseline["tansu_confluent.pcap"])
    assert stats.tcp.gaps == 0


def test_mid_stream_start(packets: dict, baseline: dict) -> None:
    """Start the capture in the middle of things: every later request is found again; a response
    is lost only if the request it answers was before the cut."""
    # Segments cut in two, so that a capture can start inside a frame.
    pk = split_segments(packets["tansu_confluent.pcap"], 7, 1000)
    orig_items = baseline["tansu_confluent.pcap"]
    halves = [
        i
        for i in range(1, len(pk))
        if pk[i].ts_ns == pk[i - 1].ts_ns + 1000 and tcp_of(pk[i]).flow == tcp_of(pk[i - 1]).flow
    ]
    to_broker = [i for i in halves if tcp_of(pk[i]).flow[1] == 9092]
    from_broker = [i for i in halves if tcp_of(pk[i]).flow[0] == 9092]
    skipped = 0
    for cut in (to_broker[40], from_broker[40], to_broker[-20], 333):
        rest = pk[cut:]
        items, stats = decode(rest)
        base, syns = isns(pk), isns(rest)
        first_seq: dict[tuple[int, int], int] = {}  # lowest offset each flow still has
        for p in rest:
            s = tcp_of(p)
            if s.payload:
                off = (s.seq - base[s.flow]) & 0xFFFFFFFF
                first_seq[s.flow] = min(first_seq.get(s.flow, off), off)
        got = whole_frames(items)
        seen_corr = {
            (f.conn.client_port, peek_request(f.data)[2])
            for f in frames_of(items)
            if f.direction == "request"
        }
        for k, frames in whole_frames(orig_items).items():
            flow = flow_of(k)
            if flow not in first_seq:
                continue
            start = first_seq[flow]
            shift = 0 if flow in syns else start  # a stream without SYN counts from its first byte
            want = [(o - shift, d) for o, d in frames if o >= start]
            have = got.get(k, [])
            if k[2] == "request":
                assert have == want, (cut, k)
            else:
                assert set(have) <= set(want), (cut, k)
                lost = [w for w in want if w not in have]
                assert all((k[0], peek_response(d)) not in seen_corr for _, d in lost), (cut, k)
        ext = tiling(items)
        assert all(a == 0 for a, _ in ext.values())
        assert stats.frames.resyncs > 0
        skipped += stats.frames.skipped_bytes
    assert skipped > 0  # some cut fell inside a frame


def test_roles_without_broker_ports(packets: dict, baseline: dict) -> None:
    # Handshakes captured: the SYN sender is the client.
    for name in CAPTURES:
        items, _ = decode(packets[name], broker_ports=())
        assert canon(items) == canon(baseline[name])
    # No handshakes either: the side whose first frame reads as a request is the client.
    pk = [p for p in packets["tansu_confluent.pcap"] if not tcp_of(p).flags & 0x02]
    items, stats = decode(pk, broker_ports=())
    assert whole_frames(items) == whole_frames(baseline["tansu_confluent.pcap"])
    assert stats.frames.skipped_bytes == 0


def test_peek_helpers() -> None:
    assert peek_request(bytes.fromhex("0012000300000007") + b"\xff\xff") == (18, 3, 7)
    assert peek_response(bytes.fromhex("fffffffe00")) == -2
    with pytest.raises(ValueError, match="shorter than a request header"):
        peek_request(b"\0" * 7)
    with pytest.raises(ValueError, match="shorter than a response header"):
        peek_response(b"\0" * 3)


def _request(key: int, version: int, corr: int, body: bytes) -> bytes:
    frame = struct.pack(">hhih", key, version, corr, 7) + b"client!" + body
    return struct.pack(">i", len(frame)) + frame


@given(
    bodies=st.lists(st.binary(max_size=120), min_size=3, max_size=12),
    cuts=st.lists(st.integers(1, 2000), max_size=15),
    gap=st.tuples(st.integers(0, 2000), st.integers(1, 300)),
)
def test_any_segmentation_and_one_gap(bodies: list[bytes], cuts: list[int], gap: tuple[int, int]) -> None:
    """Requests cut anywhere, one range lost: whole frames before the gap and every frame that
    starts after the first one past it come out intact; all bytes are accounted for."""
    frames = [_request(i % 70, i % 13, 1000 + i, b) for i, b in enumerate(bodies)]
    stream = b"".join(frames)
    starts = list(itertools.accumulate((len(f) for f in frames), initial=0))[:-1]
    g0 = gap[0] % len(stream)
    g1 = min(len(stream), g0 + gap[1])
    bounds = sorted({0, g0, g1, len(stream), *(c for c in cuts if c < len(stream))})
    key = (b"\x7f\0\0\x01", 40000, b"\x7f\0\0\x01", 9092)
    events: list = [StreamOpen(key, True, True)]
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        if a == g0 and g1 > g0:
            events.append(StreamGap(key, g0, g1 - g0, "lost"))
        elif not g0 <= a < g1:
            events.append(StreamData(key, a, stream[a:b], ((a, i),)))
    events.append(StreamEnd(key, len(stream), "fin"))
    items = list(iter_frames(events))
    assert tiling(items) == {(40000, 9092, "request"): (0, len(stream))}
    got = {(f.offset, f.data) for f in frames_of(items)}
    everything = {(s, f[4:]) for s, f in zip(starts, frames, strict=True)}
    assert got <= everything
    untouched = {(s, f[4:]) for s, f in zip(starts, frames, strict=True) if s + len(f) <= g0}
    after = [s for s in starts if s >= g1]
    untouched |= {(s, f[4:]) for s, f in zip(starts, frames, strict=True) if after and s > after[0]}
    assert untouched <= got


@pytest.mark.parametrize("ports", [(9092,), ()])
def test_lost_client_syns(ports: tuple[int, ...], packets: dict, baseline: dict) -> None:
    """Without its SYN a client direction is held back and may open after the broker side ended;
    it must still join its connection (one connection, roles from the SYN-ACK if no port)."""
    pk = [p for p in packets["tansu_confluent.pcap"] if tcp_of(p).flags & 0x12 != 0x02]
    items, stats = decode(pk, broker_ports=ports)
    _, before = decode(packets["tansu_confluent.pcap"])
    assert whole_frames(items) == whole_frames(baseline["tansu_confluent.pcap"])
    assert stats.frames.connections == before.frames.connections == 21


def _produce_v7_frames(packets: dict, n: int, client_id: bytes = b"cli") -> list[bytes]:
    """``n`` Produce v7 request frames (records last in the frame, no tags after them): the
    tansu capture's Produce v10 bodies, encoded again in v7 under one client id."""
    bodies = []
    for f in frames_of(decode(packets["tansu_confluent.pcap"])[0]):
        if f.direction == "request" and peek_request(f.data)[:2] == (0, 10) and len(bodies) < n:
            cid = struct.unpack_from(">h", f.data, 8)[0]
            bodies.append(bytes(f.data[10 + max(cid, 0) + 1 :]))  # header v2: client id, tags
    table = default_specs().decode(bodies, "ProduceRequest", 10)
    out = []
    for i, body in enumerate(default_specs().encode(table, "ProduceRequest", 7).to_pylist()):
        head = struct.pack(">hhih", 0, 7, 100 + i, len(client_id)) + client_id
        out.append(struct.pack(">i", len(head) + len(body)) + head + body)
    return out


@pytest.mark.parametrize("client_id", [b"cli", b""])
@pytest.mark.parametrize("segment", [7, 100, 1460, 1 << 20])
def test_a_torn_request_whose_records_end_it(segment: int, client_id: bytes, packets: dict) -> None:
    """A stream picked up inside a Produce request before v9: its records field is a length
    prefix and bytes that end the frame, which read as a request (Produce v0, correlation id 0,
    an empty client id: a batch's base offset and length) that the next frame confirms. The
    next frame's client id tells them apart: the torn bytes are one skipped piece, whatever
    the segments, and every frame after them is found. An empty client id matches the one the
    records field reads as: there, that the field's bytes are record batches tells."""
    frames = _produce_v7_frames(packets, 8, client_id)
    lo = bytes([127, 0, 0, 1])
    key = (lo, 40000, lo, 9092)
    for i in range(len(frames) - 2):
        for cut in (5, len(frames[i]) // 2, len(frames[i]) - 5):
            stream = frames[i][cut:] + b"".join(frames[i + 1 :])
            events: list = [StreamOpen(key, False, None)]
            events += [
                StreamData(key, o, stream[o : o + segment], ((o, 1),)) for o in range(0, len(stream), segment)
            ]
            events.append(StreamEnd(key, len(stream), "capture end"))
            items = list(iter_frames(events))
            assert [type(x) for x in items[:1]] == [SkippedBytes], (i, cut)
            assert [len(x.data) for x in items if not isinstance(x, KafkaFrame)] == [len(frames[i]) - cut]
            corr = [peek_request(x.data)[2] for x in items if isinstance(x, KafkaFrame)]
            assert corr == list(range(101 + i, 100 + len(frames))), (i, cut)
            # ... and one reject row, though a walk of size prefixes ends exactly at its end
            summary, rejects = Summary(), []
            add_item_rejects(summary, rejects, "c", items[0])
            assert [(r["error"], r["reason"], len(r["raw"])) for r in rejects] == [
                ("Partial", "resync", len(frames[i]) - cut)
            ]
            assert summary.frames_in == 1


def test_a_torn_request_then_the_end(packets: dict) -> None:
    """The records field of a torn Produce request, then one whole request and the end of the
    capture (or a gap): no next request can confirm either, and still the records are no
    request."""
    frames = _produce_v7_frames(packets, 3)
    lo = bytes([127, 0, 0, 1])
    key = (lo, 40000, lo, 9092)
    stream = frames[0][5:] + frames[1]
    items = list(iter_frames([StreamOpen(key, False, None), StreamData(key, 0, stream, ((0, 1),)),
                              StreamEnd(key, len(stream), "capture end")]))  # fmt: skip
    assert [type(x) for x in items] == [SkippedBytes, KafkaFrame]
    assert len(items[0].data) == len(frames[0]) - 5 and peek_request(items[1].data)[2] == 101


def test_request_resync_scans_each_byte_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Held request bytes are searched again only from the first candidate still undecided:
    here every 13 bytes hold a candidate the next 13 disprove, fed 104 bytes at a time (the
    bytes searched once grew with the square of the bytes held)."""
    from arrowkafka.traffic.frames import KafkaFramer

    searched = [0]
    real = KafkaFramer._scan_requests

    def spy(self, b, pos, final, since=None, other=None):  # type: ignore[no-untyped-def]
        searched[0] += len(b) - (pos if since is None else since)
        return real(self, b, pos, final, since, other)

    monkeypatch.setattr(KafkaFramer, "_scan_requests", spy)
    stream = (struct.pack(">ihhi", 8, 1, 1, -0x7F7F7F80) + b"\xff") * 12_000  # 156 KB
    lo = bytes([127, 0, 0, 1])
    key = (lo, 40000, lo, 9092)
    events: list = [StreamOpen(key, False, True)]
    events += [StreamData(key, o, stream[o : o + 104], ((o, 1),)) for o in range(0, len(stream), 104)]
    events.append(StreamEnd(key, len(stream), "capture end"))
    items = list(iter_frames(events))
    assert sum(x.span for x in items) == len(stream)  # every byte in one item
    assert searched[0] < 4 * len(stream), searched[0]
