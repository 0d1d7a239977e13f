"""What the real captures do not hold, written here: record batches that did not decode or were
cut (partial), offsets committed in a transaction, watermarks older than the commit and from
another capture file."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import arrowkafka.report as rep
import tests.report.test_report_numbers as numbers
from arrowkafka.traffic import REJECT_SCHEMA

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


# ---------------------------------------------------------------------------------------------
# record batches that did not decode, and partial ones


def _broken_batches(decoded: dict[str, Path], tmp_path: Path) -> Path:
    """tansu_confluent, with every produced gzip batch undecoded (its records unread: no
    uncompressed size) and a partial batch at the end of a Fetch response."""
    out = tmp_path / "broken"
    shutil.copytree(decoded["tansu_confluent"], out)
    t = pq.read_table(out / "record_batches.parquet")
    gzip = pc.and_(pc.equal(t["_message"], "ProduceRequest"), pc.equal(t["codec"], "gzip")).combine_chunks()
    t = t.set_column(
        t.schema.get_field_index("uncompressed_size"),
        t.schema.field("uncompressed_size"),
        pc.if_else(gzip, pa.scalar(None, pa.int64()), t["uncompressed_size"]),
    )
    t = t.set_column(
        t.schema.get_field_index("error"),
        t.schema.field("error"),
        pc.if_else(gzip, "gzip: bad data", t["error"]),
    )
    fetch = t.filter(pc.equal(t["_message"], "FetchResponse")).slice(0, 1).to_pylist()[0]
    cut = {c: None for c in ("codec", "record_count", "control", "transactional", "records_size",
                             "uncompressed_size", "last_offset", "crc", "crc_ok", "producer_id")}  # fmt: skip
    partial = {**fetch, **cut, "partial": True, "size": 40, "batch_id": 10_000}
    t = pa.concat_tables([t, pa.Table.from_pylist([partial], t.schema)])
    pq.write_table(t, out / "record_batches.parquet")
    return out


def test_batches_that_did_not_decode_or_were_cut(decoded: dict[str, Path], tmp_path: Path) -> None:
    folder = _broken_batches(decoded, tmp_path)
    rows = {
        (r["side"], r["codec"]): r for r in rep.compression(folder).to_pylist() if r["topic"] == "ck-wire-b"
    }
    assert None not in {codec for _, codec in rows}  # a partial batch has no codec: not a row
    bad = rows[("produce", "gzip")]
    assert bad["batches"] == bad["undecoded"] == 1 and bad["records"] == 20
    assert bad["sent_bytes"] is None and bad["uncompressed_bytes"] is None and bad["ratio"] is None
    good = rows[("fetch", "gzip")]
    assert good["undecoded"] == 0 and good["ratio"] == 3410 / 268
    # the partial batch is in the overview, not in the throughput
    before, after = rep.throughput_by_topic(decoded["tansu_confluent"]), rep.throughput_by_topic(folder)
    assert before.to_pylist() == after.to_pylist()
    ov = rep.overview(folder).to_pylist()[0]
    assert ov["partial_batches"] == 1 and ov["record_batches"] == 38 and ov["records"] == 372
    for check in ("test_compression", "test_throughput_by_topic", "test_throughput_by_partition",
                  "test_throughput_by_client", "test_throughput_over_time", "test_overview"):  # fmt: skip
        getattr(numbers, check)(folder)


def test_control_batches_are_not_records(decoded: dict[str, Path]) -> None:
    """tansu_confluent: 85 records produced to ck-wire-b in 5 batches; the consumer fetched them,
    and the COMMIT marker of the transaction in a sixth (control) batch, which is no record."""
    folder = decoded["tansu_confluent"]
    b = {r["topic"]: r for r in rep.throughput_by_topic(folder).to_pylist()}["ck-wire-b"]
    assert (b["produce_batches"], b["produce_records"]) == (b["fetch_batches"], b["fetch_records"]) == (5, 85)
    none = [
        r for r in rep.compression(folder).to_pylist() if r["topic"] == "ck-wire-b" and r["codec"] == "none"
    ]
    assert [(r["side"], r["batches"], r["records"]) for r in none] == [("produce", 1, 5), ("fetch", 1, 5)]
    ov = rep.overview(folder).to_pylist()[0]
    assert (ov["record_batches"], ov["records"], ov["control_batches"]) == (37, 372, 1)


# ---------------------------------------------------------------------------------------------
# committed offsets and lag


def _ts(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


_FRAME = [
    ("_capture", pa.string()),
    ("_client", pa.string()),
    ("_broker", pa.string()),
    ("_correlation_id", pa.int32()),
    ("_ts_first", pa.timestamp("us", "UTC")),
    ("_ts_last", pa.timestamp("us", "UTC")),
    ("_version", pa.int16()),
    ("_client_id", pa.string()),
    ("_request_ts", pa.timestamp("us", "UTC")),
    ("_latency_ns", pa.int64()),
]


def _frame(capture: str, corr: int, at: float, request_at: float | None = None) -> dict[str, Any]:
    """A frame's columns; ``request_at``: a response's request time."""
    return {"_capture": capture, "_client": "c:1", "_broker": "b:9092", "_correlation_id": corr,
            "_ts_first": _ts(at), "_ts_last": _ts(at), "_version": 8, "_client_id": "me",
            "_request_ts": None if request_at is None else _ts(request_at),
            "_latency_ns": None if request_at is None else round((at - request_at) * 1e9)}  # fmt: skip


def _topics(name: str, fields: list[tuple[str, pa.DataType]], topic: str = "name") -> pa.Field:
    partition = pa.struct([("partition_index", pa.int32()), *fields])
    return pa.field(
        "topics" if topic == "name" else "responses",
        pa.list_(pa.struct([(topic, pa.string()), ("partitions", pa.list_(partition))])),
    )


def _write(folder: Path, name: str, extra: list[pa.Field], rows: list[dict[str, Any]]) -> None:
    pq.write_table(pa.Table.from_pylist(rows, pa.schema([*_FRAME, *extra])), folder / f"{name}.parquet")


def _commit(folder: Path, api: str, commits: list[tuple[str, int, int, int, float]]) -> None:
    """(capture, correlation id, partition, offset, time) per request of ``api``, all accepted
    (TxnOffsetCommit: of transactional id "t1", producer id 7)."""
    offsets = _topics("topics", [("committed_offset", pa.int64())])
    txn = {"transactional_id": "t1", "producer_id": 7} if api == "TxnOffsetCommit" else {}
    requests = [
        {**_frame(c, corr, at), "group_id": "g", **txn,
         "topics": [{"name": "t", "partitions": [{"partition_index": p, "committed_offset": o}]}]}
        for c, corr, p, o, at in commits
    ]  # fmt: skip
    fields = [pa.field("transactional_id", pa.string()), pa.field("producer_id", pa.int64())] if txn else []
    _write(folder, f"{api}Request", [pa.field("group_id", pa.string()), *fields, offsets], requests)
    responses = [
        {**_frame(c, corr, at + 0.01, request_at=at),
         "topics": [{"name": "t", "partitions": [{"partition_index": p, "error_code": 0}]}]}
        for c, corr, p, _, at in commits
    ]  # fmt: skip
    _write(folder, f"{api}Response", [_topics("topics", [("error_code", pa.int16())])], responses)


def _end_txn(folder: Path, ends: list[tuple[int, int, bool, float, int]]) -> None:
    """EndTxn requests of transactional id "t1" with their responses, in a.pcap: (correlation id,
    producer id, commit or abort, time, the response's error code) each."""
    fields = [pa.field("transactional_id", pa.string()), pa.field("producer_id", pa.int64()),
              pa.field("producer_epoch", pa.int16()), pa.field("committed", pa.bool_())]  # fmt: skip
    requests = [{**_frame("a.pcap", corr, at), "transactional_id": "t1", "producer_id": pid,
                 "producer_epoch": 0, "committed": ok} for corr, pid, ok, at, _ in ends]  # fmt: skip
    _write(folder, "EndTxnRequest", fields, requests)
    answers = [
        {**_frame("a.pcap", corr, at + 0.01, request_at=at), "error_code": e} for corr, _, _, at, e in ends
    ]
    _write(folder, "EndTxnResponse", [pa.field("error_code", pa.int16())], answers)


def test_lag_per_capture_file_and_only_after_the_commit(tmp_path: Path) -> None:
    _commit(
        tmp_path,
        "OffsetCommit",
        [("a.pcap", 1, 0, 10, 1.0), ("a.pcap", 2, 1, 20, 3.0), ("a.pcap", 3, 3, 5, 1.0)],
    )
    _commit(tmp_path, "TxnOffsetCommit", [("a.pcap", 4, 2, 7, 1.0)])
    _end_txn(tmp_path, [(5, 7, True, 1.1, 0)])  # its transaction commits
    fields = [("high_watermark", pa.int64()), ("error_code", pa.int16())]
    watermarks = [("a.pcap", 10, 2.0, {0: 15, 1: 20, 2: 9, 3: 6}), ("b.pcap", 11, 4.0, {3: 100})]
    _write(tmp_path, "FetchResponse", [_topics("responses", fields, topic="topic")],
           [{**_frame(c, corr, at), "responses": [{"topic": "t", "partitions": [
               {"partition_index": p, "high_watermark": h, "error_code": 0} for p, h in hw.items()]}]}
            for c, corr, at, hw in watermarks])  # fmt: skip
    commits = rep.committed_offsets(tmp_path).to_pylist()
    assert [(r["partition"], r["committed_offset"], r["accepted"]) for r in commits] == [
        (0, 10, 1), (1, 20, 1), (2, 7, 1), (3, 5, 1)]  # fmt: skip
    got = [
        (r["partition"], r["high_watermark"], r["lag"], r["lag_unknown"])
        for r in rep.lag(tmp_path).to_pylist()
    ]
    assert got == [
        (0, 15, 5, None),
        (1, 20, None, "high watermark older than the commit"),  # records may have come since
        (2, 9, 2, None),  # committed in a transaction
        (3, 6, 1, None),  # b.pcap's watermark (another capture file) is not this partition's here
    ]
    numbers.test_lag(tmp_path)
    numbers.test_committed_offsets(tmp_path)


def test_a_marker_fetched_twice_counts_once(decoded: dict[str, Path], tmp_path: Path) -> None:
    """The consumer fetches the COMMIT marker again (a second Fetch response, its own batch id)."""
    out = tmp_path / "twice"
    shutil.copytree(decoded["tansu_confluent"], out)
    for table, control in (
        ("record_markers", pc.field("type") == "COMMIT"),
        ("record_batches", pc.field("control")),
    ):
        t = pq.read_table(out / f"{table}.parquet")
        again = t.filter(control)
        assert again.num_rows == 1
        again = again.set_column(
            again.schema.get_field_index("batch_id"), "batch_id", pa.array([99_999], pa.int64())
        )
        pq.write_table(pa.concat_tables([t, again.cast(t.schema)]), out / f"{table}.parquet")
    got = [(m["side"], m["producer_id"], m["type"], m["markers"]) for m in rep.markers(out).to_pylist()]
    assert got == [("fetch", 2, "COMMIT", 1)]
    numbers.test_markers(out)


def test_the_membership_plot_lanes(decoded: dict[str, Path]) -> None:
    """The plot's lanes and dots are computed (``member_lanes``), bounded by lanes and points."""
    folder = decoded["tansu_confluent"]
    events, tl = rep.group_events(folder), rep.timeline(folder)
    lanes, members, dots = rep.membership.member_lanes(events, tl.start_us, tl.seconds, lanes=1, points=10)
    per_member = events.group_by(["group_id", "member_id"]).aggregate([("api", "count")]).to_pylist()
    busiest = min(per_member, key=lambda r: (-r["api_count"], f"{r['group_id']}\x00{r['member_id'] or ''}"))
    assert members == len(per_member) and lanes == [(busiest["group_id"], busiest["member_id"])]
    assert set(dots["lane"].to_pylist()) == {0} and dots.num_rows <= 4 * 2 * 11
    assert 0 <= min(dots["t"].to_pylist()) and max(dots["t"].to_pylist()) <= tl.seconds * 1.05


def test_a_correlation_id_that_comes_back_pairs_each_request_with_its_own_response(tmp_path: Path) -> None:
    """Ports reused or a client restarted: one connection sends correlation id 1 again. Each
    request pairs with the response to it (by its time), not with every response of that id."""
    _commit(
        tmp_path, "OffsetCommit", [("a.pcap", 1, 0, off, at) for off, at in ((10, 1.0), (11, 2.0), (12, 3.0))]
    )
    (row,) = rep.committed_offsets(tmp_path).to_pylist()
    assert (row["commits"], row["accepted"], row["committed_offset"]) == (3, 3, 12)
    beats = [(1.0, 0), (2.0, 27), (3.0, 0)]  # 27: REBALANCE_IN_PROGRESS, on the second only
    fields = [pa.field("group_id", pa.string()), pa.field("member_id", pa.string()),
              pa.field("generation_id", pa.int32())]  # fmt: skip
    _write(tmp_path, "HeartbeatRequest", fields,
           [{**_frame("a.pcap", 1, at), "group_id": "g", "member_id": "m", "generation_id": 1}
            for at, _ in beats])  # fmt: skip
    answers = [{**_frame("a.pcap", 1, at + 0.01, request_at=at), "error_code": e} for at, e in beats]
    _write(tmp_path, "HeartbeatResponse", [pa.field("error_code", pa.int16())], answers)
    # a folder written before the tables had ``_size``: frame bytes unknown, not zero
    assert rep.overview(tmp_path)["frame_bytes"].to_pylist() == [None]
    assert set(rep.apis(tmp_path)["response_bytes"].to_pylist()) == {None}
    events = rep.group_events(tmp_path).to_pylist()
    assert [(e["ts"], e["error"]) for e in events] == [
        (_ts(1.0), "NONE"), (_ts(2.0), "REBALANCE_IN_PROGRESS"), (_ts(3.0), "NONE")]  # fmt: skip


def test_a_transactions_offsets_count_once_it_commits(tmp_path: Path) -> None:
    """TxnOffsetCommit offsets take effect when their transaction commits (EndTxn COMMIT answered
    NONE): one committed, one aborted, one whose EndTxn failed, one with no EndTxn after it."""
    _commit(tmp_path, "TxnOffsetCommit", [("a.pcap", n + 1, 0, 10 * (n + 1), n + 1.0) for n in range(4)])
    # EndTxn after each but the last: COMMIT (NONE), ABORT (NONE), COMMIT answered 48
    # (INVALID_TXN_STATE); one of another producer id in between, which ends nothing here
    ends = [(11, 7, True, 1.5, 0), (12, 7, False, 2.5, 0), (13, 8, True, 2.7, 0), (14, 7, True, 3.5, 48)]
    _end_txn(tmp_path, ends)
    # a monitor's OffsetFetch mid-transaction still sees the offset from before it
    _offset_fetches(tmp_path, [(21, 1.2, [(0, 5, 0)])])
    (row,) = rep.committed_offsets(tmp_path).to_pylist()
    counts = {k: row[k] for k in ("commits", "accepted", "aborted", "undecided", "fetched")}
    assert counts == {"commits": 4, "accepted": 4, "aborted": 2, "undecided": 1, "fetched": 1}
    # held from the EndTxn that committed it, later than the fetch
    assert (row["committed_offset"], row["committed_at"], row["source"]) == (10, _ts(1.5), "TxnOffsetCommit")


def _offset_fetches(folder: Path, answers: list[tuple[int, float, list[tuple[int, int, int]]]]) -> None:
    """OffsetFetch v8+ responses of group "g", topic "t", in a.pcap: (correlation id, time,
    [(partition, offset, error) ...]) each."""
    part = pa.struct([("partition_index", pa.int32()), ("committed_offset", pa.int64()),
                      ("error_code", pa.int16())])  # fmt: skip
    topic = pa.struct([("name", pa.string()), ("partitions", pa.list_(part))])
    group = pa.struct([("group_id", pa.string()), ("error_code", pa.int16()), ("topics", pa.list_(topic))])
    rows = []
    for corr, at, parts in answers:
        partitions = [{"partition_index": p, "committed_offset": o, "error_code": e} for p, o, e in parts]
        groups = [{"group_id": "g", "error_code": 0, "topics": [{"name": "t", "partitions": partitions}]}]
        rows.append({**_frame("a.pcap", corr, at, request_at=at - 0.01), "groups": groups})
    _write(folder, "OffsetFetchResponse", [pa.field("groups", pa.list_(group))], rows)


def test_offsets_a_consumer_fetched_count_as_committed(tmp_path: Path) -> None:
    """A capture that starts after the commits: the OffsetFetch answers (v8+: per group in the
    response) give the committed offsets, and lag with a later high watermark. An answer that
    repeats the offset held does not move when the group held it; -1 (none committed) and an
    error give nothing."""
    _offset_fetches(tmp_path, [(1, 1.0, [(0, 5, 0), (1, -1, 0), (2, 9, 16)]), (2, 3.0, [(0, 5, 0)])])
    fields = [("high_watermark", pa.int64()), ("error_code", pa.int16())]
    _write(tmp_path, "FetchResponse", [_topics("responses", fields, topic="topic")],
           [{**_frame("a.pcap", 3, 2.0), "responses": [{"topic": "t", "partitions": [
               {"partition_index": 0, "high_watermark": 8, "error_code": 0}]}]}])  # fmt: skip
    (row,) = rep.committed_offsets(tmp_path).to_pylist()
    got = (row["partition"], row["commits"], row["fetched"], row["committed_offset"], row["source"])
    assert got == (0, 0, 2, 5, "OffsetFetch")
    assert row["committed_at"] == _ts(1.0)  # the second answer repeats the first
    (lag,) = rep.lag(tmp_path).to_pylist()
    assert (lag["committed_offset"], lag["high_watermark"], lag["lag"]) == (5, 8, 3)


def test_consumer_group_heartbeats_of_kip_848_are_group_events(tmp_path: Path) -> None:
    """A member joins with epoch 0 and no id (the coordinator gives both), heartbeats, is told
    FENCED_MEMBER_EPOCH (110: an error answer has no member id and epoch 0, so the epoch asked
    counts), and leaves with epoch -1; one heartbeat has no response."""
    beats = [(1, 1.0, "", 0, ("m1", 5, 0)), (2, 2.0, "m1", 5, ("m1", 5, 0)),
             (3, 3.0, "m1", 5, (None, 0, 110)), (4, 4.0, "m1", -1, ("m1", -1, 0)),
             (5, 5.0, "m1", 6, None)]  # fmt: skip
    asked = [pa.field("group_id", pa.string()), pa.field("member_id", pa.string()),
             pa.field("member_epoch", pa.int32())]  # fmt: skip
    _write(tmp_path, "ConsumerGroupHeartbeatRequest", asked,
           [{**_frame("a.pcap", corr, at), "group_id": "g", "member_id": m, "member_epoch": e}
            for corr, at, m, e, _ in beats])  # fmt: skip
    answered = [pa.field("error_code", pa.int16()), pa.field("member_id", pa.string()),
                pa.field("member_epoch", pa.int32())]  # fmt: skip
    _write(tmp_path, "ConsumerGroupHeartbeatResponse", answered,
           [{**_frame("a.pcap", corr, at + 0.01, request_at=at), "member_id": r[0], "member_epoch": r[1],
             "error_code": r[2]} for corr, at, _, _, r in beats if r])  # fmt: skip
    events = rep.group_events(tmp_path).to_pylist()
    got = [(e["api"], e["member_id"], e["generation_id"], e["error"]) for e in events]
    assert got == [
        ("ConsumerGroupHeartbeat", "m1", 5, "NONE"),
        ("ConsumerGroupHeartbeat", "m1", 5, "NONE"),
        ("ConsumerGroupHeartbeat", "m1", 5, "FENCED_MEMBER_EPOCH"),
        ("ConsumerGroupHeartbeat", "m1", -1, "NONE"),
        ("ConsumerGroupHeartbeat", "m1", 6, None),
    ]
    summary = rep.group_summary(tmp_path).to_pylist()
    assert [(r["error"], r["requests"], r["members"]) for r in summary] == [
        ("FENCED_MEMBER_EPOCH", 1, 1), ("NONE", 3, 1), ("NO_RESPONSE", 1, 1)]  # fmt: skip
    pq.write_table(REJECT_SCHEMA.empty_table(), tmp_path / "rejects.parquet")
    page = rep.build_report(tmp_path, tmp_path / "r.html").read_text()
    assert "FENCED_MEMBER_EPOCH" in page and "ConsumerGroupHeartbeat ok" in page  # the table and the plot
