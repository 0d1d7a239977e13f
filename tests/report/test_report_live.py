"""The report on a live capture made for it: Tansu (the live broker tests' broker) on 127.0.0.1,
tcpdump on lo, and a confluent-kafka client (live_report_workload.py) with an idempotent
producer, a transactional producer (one transaction committed, one aborted) and a consumer
group that leaves some records uncommitted. ``arrowkafka decode --report`` on the pcap; then
every report table equals DuckDB's numbers (the same checks as on the real captures), and the
consumer-group and producer sections equal what the client did and was told.

What it needs from outside the project it installs as the live broker tests do
(tests/traffic/live_env.py); everything runs under one hard time limit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import arrowkafka.report as rep
import tests.report.test_report_numbers as numbers
from tests.report.reporthtml import read_report
from tests.traffic import live_env

pytestmark = pytest.mark.slow

TOPIC, GROUP, TXN_ID = "rep-topic", "rep-group", "rep-txn"
LIMIT = 120  # seconds for broker + capture + client + decode and report, together
WORKLOAD = Path(__file__).with_name("live_report_workload.py")


@dataclass
class Live:
    out: Path
    client: dict[str, Any]  # what the client did and was told
    stdout: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    seconds: dict[str, float] = {}
    tcpdump, python, tansu, _ = live_env.broker_tools(seconds)
    work = tmp_path_factory.mktemp("live-report")
    pcap, told, out = work / "live.pcap", work / "client.json", work / "decoded"
    env = {**os.environ, "PYTHONPATH": str(Path(live_env.__file__).parent)}  # live_clients.py
    with contextlib.ExitStack() as cleanup, live_env.hard_deadline(LIMIT):
        port = live_env.free_port()
        live_env.start_tansu(cleanup, tansu, port, work / "tansu.log")
        capture = live_env.start_tcpdump(cleanup, tcpdump, port, pcap, work / "tcpdump.log")
        client = subprocess.run(
            [str(python), str(WORKLOAD), f"127.0.0.1:{port}", TOPIC, GROUP, TXN_ID, str(told)],
            capture_output=True, text=True, timeout=LIMIT, check=False, env=env,
        )  # fmt: skip
        assert client.returncode == 0, client.stderr[-3000:]
        live_env.settle(pcap)
        live_env.stop(capture, signal.SIGINT)
        t0 = time.monotonic()
        decode = subprocess.run(
            [sys.executable, "-m", "arrowkafka", "decode", str(pcap), "-o", str(out), "--port", str(port),
             "--report"],
            capture_output=True, text=True, timeout=LIMIT, check=False,
        )  # fmt: skip
        seconds["decode and report"] = time.monotonic() - t0
    assert decode.returncode == 0, decode.stdout[-3000:] + decode.stderr[-3000:]
    print("\nlive report test, seconds", json.dumps({k: round(v, 2) for k, v in seconds.items()}))
    return Live(out, json.loads(told.read_text()), decode.stdout)


def test_the_client_did_what_it_says(live: Live) -> None:
    c = live.client
    assert c["errors"] == [] and c["unflushed_idempotent"] == c["unflushed_late"] == 0
    values = [v for _, _, v in c["consumed"]]
    assert sorted(v for v in values if v.startswith("plain")) == sorted(f"plain {i}" for i in range(30))
    assert values.count("committed") == 5 and values.count("late") == 4
    # Tansu 0.6.0 lists no aborted transactions in its Fetch responses, so even a read_committed
    # consumer is handed the aborted records (a broker that lists them: none)
    assert values.count("aborted") in (0, 3)
    assert live.stdout.rstrip("\n").splitlines()[-1] == f"wrote the report to {live.out / 'report.html'}"


@pytest.mark.parametrize(
    "check",
    [
        name
        for name in dir(numbers)
        if name.startswith("test_") and "folder" in getattr(numbers, name).__code__.co_varnames[:1]
    ],
)
def test_every_table_equals_duckdb(live: Live, check: str) -> None:
    getattr(numbers, check)(live.out)


def test_consumer_group_as_the_client_saw_it(live: Live) -> None:
    committed = {p: o for p, o in live.client["committed"]}
    got = {r["partition"]: r for r in rep.committed_offsets(live.out).to_pylist()}
    assert {p: r["committed_offset"] for p, r in got.items()} == committed
    assert all(r["group_id"] == GROUP and r["topic"] == TOPIC and r["accepted"] >= 1 for r in got.values())
    # lag: the high watermark of the consumer's last Fetch response - what it committed
    watermarks = dict(live.client["high_watermarks"])
    lag = {r["partition"]: (r["high_watermark"], r["lag"]) for r in rep.lag(live.out).to_pylist()}
    assert lag == {p: (watermarks[p], watermarks[p] - committed[p]) for p in committed}
    assert lag[0][1] == 4 and lag[1][1] == 0  # the 4 late records on partition 0 are read, not committed
    # the member joined (librdkafka's first JoinGroup is told MEMBER_ID_REQUIRED), synced and left
    events = rep.group_events(live.out).to_pylist()
    assert {e["group_id"] for e in events} == {GROUP}
    outcomes = [(e["api"], e["error"]) for e in events if e["api"] != "Heartbeat"]
    assert outcomes[-1] == ("LeaveGroup", "NONE") and ("SyncGroup", "NONE") in outcomes
    assert ("JoinGroup", "NONE") in outcomes and len({e["member_id"] for e in events}) == 1


def test_producers_as_the_client_saw_them(live: Live) -> None:
    prods = rep.producers(live.out).to_pylist()
    assert [(p["transactional_id"], p["transactional"]) for p in prods] == [(None, False), (TXN_ID, True)]
    assert prods[0]["records"] == 30 + 4 and prods[1]["records"] == 5 + 3
    seqs = rep.sequences(live.out).to_pylist()
    assert seqs and all(s["gaps"] == 0 and s["duplicates"] == 0 for s in seqs)
    assert [
        (t["transactional_id"], t["outcome"], t["error"]) for t in rep.transactions(live.out).to_pylist()
    ] == [
        (TXN_ID, "COMMIT", "NONE"),
        (TXN_ID, "ABORT", "NONE"),
    ]
    fetched = {(m["partition"], m["type"]) for m in rep.markers(live.out).to_pylist() if m["side"] == "fetch"}
    assert fetched == {(0, "COMMIT"), (1, "ABORT")}
    # the records fetched are the records the consumer received: the markers are none of them
    received = [p for p, _, _ in live.client["consumed"]]
    fetch = {r["partition"]: r["fetch_records"] for r in rep.throughput_by_partition(live.out).to_pylist()}
    assert fetch == {p: received.count(p) for p in (0, 1)}


def test_the_report_shows_them(live: Live) -> None:
    report = read_report(live.out / "report.html")
    assert not report.section_empty  # every section has something on this capture
    assert {
        "lag",
        "committed_offsets",
        "group_events",
        "producers",
        "sequences",
        "transactions",
        "markers",
    } <= set(report.tables)
