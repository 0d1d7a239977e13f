"""TCP reassembly on hand-made segments: order, overlap, wrap, gaps, mid-stream, streaming."""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from arrowkafka.traffic.packets import Segment
from arrowkafka.traffic.tcp import (
    StreamData,
    StreamEnd,
    StreamGap,
    StreamOpen,
    TcpReassembler,
    TcpStats,
    reassemble,
)

A, B = b"\x7f\0\0\x01", b"\x7f\0\0\x02"
KEY = (A, 40000, B, 9092)
REV = (B, 9092, A, 40000)
SYN, FIN, RST, ACK = 0x02, 0x01, 0x04, 0x10
ISN = 1000
MS = 1_000_000


def seg(
    off: int,
    data: bytes = b"",
    *,
    flags: int = ACK,
    ts: int = 0,
    key: tuple = KEY,
    isn: int = ISN,
    wire: int | None = None,
) -> Segment:
    """A segment carrying ``data`` at stream offset ``off`` (sequence ``isn + 1 + off``)."""
    seq = (isn + 1 + off) & 0xFFFFFFFF
    return Segment(ts, key[0], key[1], key[2], key[3], seq, flags, data, len(data) if wire is None else wire)


def syn(ts: int = 0, key: tuple = KEY, isn: int = ISN, ack: bool = False) -> Segment:
    return Segment(ts, key[0], key[1], key[2], key[3], isn, SYN | (ACK if ack else 0), b"", 0)


def run(segs: list[Segment], **kw: object) -> tuple[list, TcpStats]:
    stats = TcpStats()
    return list(reassemble(segs, stats=stats, **kw)), stats  # type: ignore[arg-type]


def content(events: list, key: tuple = KEY) -> list[tuple[str, int, object]]:
    """The direction's events as (kind, offset, bytes or gap length/reason)."""
    out: list[tuple[str, int, object]] = []
    for e in events:
        if e.key != key:
            continue
        if isinstance(e, StreamData):
            out.append(("data", e.offset, e.data))
        elif isinstance(e, StreamGap):
            out.append(("gap", e.offset, (e.length, e.reason)))
        elif isinstance(e, StreamEnd):
            out.append(("end", e.offset, e.reason))
        else:
            out.append(("open", 0, (e.syn, e.initiator)))
    return out


def joined(events: list, key: tuple = KEY) -> bytes:
    """Stream bytes with gaps filled by '?' (checks that data offsets tile the stream)."""
    buf = bytearray()
    for kind, off, v in content(events, key):
        if kind in ("data", "gap"):
            assert off == len(buf)
            buf += v if kind == "data" else b"?" * v[0]  # type: ignore[operator,index]
    return bytes(buf)


def test_in_order_with_handshake() -> None:
    ev, stats = run(
        [
            syn(1),
            syn(2, REV, 5000, ack=True),
            seg(0, b"hello", ts=3),
            seg(5, b" world", ts=4),
            seg(11, flags=FIN | ACK, ts=5),
        ]
    )
    assert content(ev) == [
        ("open", 0, (True, True)),
        ("data", 0, b"hello"),
        ("data", 5, b" world"),
        ("end", 11, "fin"),
    ]
    assert content(ev, REV) == [("open", 0, (True, False)), ("end", 0, "capture end")]
    assert [e.marks for e in ev if isinstance(e, StreamData)] == [((0, 3),), ((5, 4),)]
    assert (stats.segments, stats.streams, stats.data_bytes, stats.gaps) == (5, 2, 11, 0)


def test_out_of_order_keeps_segment_times() -> None:
    ev, _ = run([syn(0), seg(6, b"world", ts=10), seg(11, b"!", ts=11), seg(0, b"hello ", ts=12)])
    data = [e for e in ev if isinstance(e, StreamData)]
    assert [(d.offset, d.data, d.marks) for d in data] == [(0, b"hello world!", ((0, 12), (6, 10), (11, 11)))]


def test_retransmission_and_overlap_first_seen_wins() -> None:
    ev, stats = run(
        [syn(), seg(0, b"aaaa"), seg(0, b"XXXX"), seg(8, b"cccc"), seg(2, b"YYYYYYYYYYYY"), seg(14, b"dd")]
    )
    # [0,4) first from 'a'; [4,8) only from the overlap 'Y'; [8,12) 'c' was there first.
    assert joined(ev) == b"aaaa" + b"YYYY" + b"cccc" + b"YY" + b"dd"
    assert stats.duplicate_bytes == 4 + 6


def test_overlap_inside_queued_pieces() -> None:
    ev, stats = run(
        [syn(), seg(10, b"kkk"), seg(20, b"zz"), seg(5, b"0123456789abcdefghijklm"), seg(0, b"HEAD!")]
    )
    # The long segment fills only what the queued pieces left free: [5,10), [13,20), [22,28).
    assert joined(ev) == b"HEAD!" + b"01234" + b"kkk" + b"89abcde" + b"zz" + b"hijklm"
    assert stats.duplicate_bytes == 5


def test_sequence_wraparound() -> None:
    isn = 0xFFFFFFFF - 10
    parts = [bytes([65 + i]) * 7 for i in range(6)]
    segs = [syn(isn=isn)] + [seg(7 * i, p, isn=isn) for i, p in enumerate(parts)]
    segs[3], segs[4] = segs[4], segs[3]  # and a reordering across the wrap
    ev, stats = run(segs)
    assert joined(ev) == b"".join(parts)
    assert stats.gaps == 0


def test_mid_stream_start_and_late_syn() -> None:
    # No SYN: the stream starts at the lowest sequence seen in the window, reordering included.
    ev, _ = run([seg(50, b"later"), seg(45, b"first")], window_ns=None)
    assert content(ev) == [("open", 0, (False, None)), ("data", 0, b"firstlater"), ("end", 10, "capture end")]
    # The SYN overtaken by data: offsets are re-based on the real ISN.
    ev, _ = run([seg(3, b"def", ts=1), syn(ts=2), seg(0, b"abc", ts=3)])
    assert content(ev)[:2] == [("open", 0, (True, True)), ("data", 0, b"abcdef")]


def test_gaps_lost_and_snaplen() -> None:
    ev, stats = run(
        [
            syn(),
            seg(0, b"0123456789"),
            seg(20, b"KLMNOPQRST"),
            seg(30, b"uvw", wire=8),
            seg(38, flags=FIN | ACK),
        ],
        window_ns=None,
    )
    assert content(ev)[1:] == [
        ("data", 0, b"0123456789"),
        ("gap", 10, (10, "lost")),
        ("data", 20, b"KLMNOPQRSTuvw"),
        ("gap", 33, (5, "snaplen")),
        ("end", 38, "fin"),
    ]
    assert (stats.gaps, stats.gap_bytes) == (2, 15)


def test_snaplen_gap_is_reported_at_once() -> None:
    r = TcpReassembler(window_ns=None)
    r.add(syn())
    ev = r.add(seg(0, b"abcd", wire=100))
    assert content(ev) == [("data", 0, b"abcd"), ("gap", 4, (96, "snaplen"))]
    assert content(r.add(seg(100, b"next"))) == [("data", 100, b"next")]


def test_lost_tail_before_fin() -> None:
    ev, _ = run([syn(), seg(0, b"abc"), seg(10, flags=FIN | ACK)], window_ns=None)
    assert content(ev)[1:] == [("data", 0, b"abc"), ("gap", 3, (7, "lost")), ("end", 10, "fin")]


def test_streaming_window_bounds_memory() -> None:
    """A segment lost early must not make the reassembler hold the rest of the capture."""
    r = TcpReassembler(window_ns=50 * MS)
    events = r.add(syn())
    peak = 0
    for i in range(2000):
        if i == 10:
            continue  # lost
        events += r.add(seg(100 * i, bytes([i % 251]) * 100, ts=i * MS))
        peak = max(peak, r.pending_bytes)
    before_finish = len(events)
    events += r.finish()
    assert peak <= 100 * 60  # about one window of data, not the whole stream
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(g.offset, g.length, g.reason) for g in gaps] == [(1000, 100, "lost")]
    assert events.index(gaps[0]) < before_finish  # declared while streaming
    assert len(joined(events)) == 200000


def test_max_pending_bounds_memory() -> None:
    r = TcpReassembler(window_ns=None, max_pending=1000)
    r.add(syn())
    peak = 0
    for i in range(1, 100):
        r.add(seg(100 * i, b"x" * 100))
        peak = max(peak, r.pending_bytes)
    assert peak <= 1100
    assert r.stats.gaps == 1


def test_late_retransmission_after_gap_is_dropped() -> None:
    r = TcpReassembler(window_ns=10 * MS)
    r.add(syn())
    r.add(seg(0, b"aaaa", ts=0))
    r.add(seg(8, b"cccc", ts=1 * MS))
    ev = r.add(seg(12, b"dddd", ts=20 * MS))  # the window passed: [4, 8) is a gap now
    assert ("gap", 4, (4, "lost")) in content(ev)
    r.add(seg(4, b"bbbb", ts=21 * MS))  # too late
    assert r.stats.duplicate_bytes == 4


def test_rst_ends_after_reordered_data_and_port_reuse() -> None:
    ev, _ = run([syn(), seg(0, b"ab"), seg(4, flags=RST), seg(2, b"cd")], window_ns=None)
    assert content(ev)[1:] == [("data", 0, b"ab"), ("data", 2, b"cd"), ("end", 4, "rst")]
    ev, _ = run([syn(), seg(0, b"one"), seg(3, flags=FIN | ACK), syn(isn=77), seg(0, b"two", isn=77)])
    assert content(ev) == [
        ("open", 0, (True, True)),
        ("data", 0, b"one"),
        ("end", 3, "fin"),
        ("open", 0, (True, True)),
        ("data", 0, b"two"),
        ("end", 3, "capture end"),
    ]


def test_idle_streams_end() -> None:
    r = TcpReassembler(window_ns=None, idle_ns=5 * MS)
    r.add(syn(ts=0))
    r.add(seg(0, b"abc", ts=1))
    ev = r.add(syn(ts=10 * MS, key=(A, 40001, B, 9092)))
    assert ("end", 3, "idle") in content(ev)


def test_events_open_first_end_last() -> None:
    ev, _ = run([seg(5, b"x", key=REV), syn(), seg(0, b"abc")])
    for key in (KEY, REV):
        kinds = [type(e) for e in ev if e.key == key]
        assert kinds[0] is StreamOpen and kinds[-1] is StreamEnd


@given(
    data=st.binary(min_size=1, max_size=300),
    cuts=st.lists(st.integers(1, 299), max_size=10),
    seed=st.integers(0, 1 << 16),
    copies=st.integers(0, 6),
    isn=st.integers(0, (1 << 32) - 1),
)
def test_any_segmentation_order_and_duplication(
    data: bytes, cuts: list[int], seed: int, copies: int, isn: int
) -> None:
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    segs = [seg(a, data[a:b], isn=isn, ts=i) for i, (a, b) in enumerate(itertools.pairwise(bounds))]
    rng = random.Random(seed)
    # Retransmissions, some re-cut to overlap their neighbours.
    for _ in range(copies):
        a = rng.randrange(len(data))
        b = rng.randrange(a, len(data)) + 1
        segs.append(seg(a, data[a:b], isn=isn, ts=100))
    rng.shuffle(segs)
    ev, stats = run([syn(isn=isn), *segs, seg(len(data), flags=FIN | ACK, isn=isn)], window_ns=None)
    assert joined(ev) == data
    assert stats.gaps == 0
    assert content(ev)[-1] == ("end", len(data), "fin")
