"""Side by side, in one process, on the same bytes: arrowkafka against kio 0.6.5,
kafka-python 3.0.12 and (when node is present) kafkajs 2.2.4, decoding and encoding; memory
bandwidth (numpy copy into an existing array) as the ceiling; cold start in fresh processes;
record batches (bench/records.py's magic 2 workloads: decode_records against kafka-python,
kio and kafkajs, and the decompression and the CRCs alone); captures to Parquet (MB/s of
capture, peak RSS); decoding inside Spark's mapInArrow per task
(when pyspark is installed). Prints a table and writes bench/results/<date>.json.

    python bench/compare.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.metadata as md
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.bench_compile import FIFTY, FIRST_DECODE, _run
from benchmarks.data import WORKLOADS, batch, body
from keep import results_path

import arrowkafka as ak
from arrowkafka.plan import compile_plan

# Targets from the decoder and encoder issues, to say plainly where we are behind.
TARGET_MB_S = {"metadata_v12": 500.0, "encode metadata_v12": 500.0}
TARGET_RATIO_TO_KIO = {"metadata_v12": 12.0, "encode metadata_v12": 50.0}
TARGET_TWO_CORES = 1.6  # the decoder issue: both cores against one
TARGET_PCAP_MB_S = 100.0  # the capture issue: MB/s of capture, end to end, one core
# the speed issue's, for two of the captures: 80 MB of control-plane copies, and bulk traffic
TARGET_PCAP_SPEED_MB_S = {"pcap tansu_confluent x1000": 150.0, "pcap bulk produce/fetch": 400.0}
TARGET_VIEWS_X_KIO = 5.0  # the speed issue: bytes and records fields without a copy


def best_of(fn: Callable[[], object], repeat: int) -> float:
    return best_of_each({"": fn}, repeat)[""]


def best_of_each(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best seconds of each function, the runs taken in turns: on a shared machine whose speed
    drifts over seconds, ratios between them (two threads against one) stay fair. One round
    first, untimed: the memory pool then holds pages for the outputs, as in a job that has
    been running (fresh pages cost this machine a page fault per 4 KB, a tenth of a decode)."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def ours(call: Callable[..., object], views: bool = False) -> dict[str, Callable[[], object]]:
    """The ways arrowkafka is timed: the kernel generated for the plan (which a long job moves
    to by itself) on one and two threads, and the interpreter; where the message has bytes or
    records fields, also with ``views=True`` (those fields point into the input, as kio's do)."""
    out = {
        "arrowkafka (1 thread)": lambda: call(kernel="specialised"),
        "arrowkafka (2 threads)": lambda: call(threads=2, kernel="specialised"),
        "arrowkafka (interpreter, 1 thread)": lambda: call(kernel="interpreter"),
    }
    if views:
        out["arrowkafka (views, 1 thread)"] = lambda: call(kernel="specialised", views=True)
        out["arrowkafka (views, interpreter)"] = lambda: call(kernel="interpreter", views=True)
    return out


def kio_decoder(message: str, version: int) -> Callable[[bytes], object]:
    import importlib
    import re

    from kio.serial import entity_reader

    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", message.removesuffix("Request").removesuffix("Response")).lower()
    kind = "request" if message.endswith("Request") else "response"
    module = importlib.import_module(f"kio.schema.{snake}.v{version}.{kind}")
    reader = entity_reader(getattr(module, message))
    return lambda b: reader(b, 0)


def kafka_python_decoder(message: str, version: int) -> Callable[[bytes], object]:
    import kafka.protocol.consumer as consumer
    import kafka.protocol.metadata as metadata
    import kafka.protocol.producer as producer

    for module in (metadata, consumer, producer):
        cls = getattr(module, message, None)
        if cls is not None:
            return lambda b: cls.decode(b, version=version)
    raise LookupError(message)


def kio_encoder(message: str, version: int) -> Callable[[bytes], Callable[[], object]]:
    """body -> a function that encodes kio's value of it (decoded once, outside the timing)."""
    import io

    from kio.serial import entity_writer

    reader = kio_decoder(message, version)

    def prepare(b: bytes) -> Callable[[], object]:
        value, _ = reader(b)
        writer = entity_writer(type(value))

        def encode() -> bytes:
            buf = io.BytesIO()
            writer(buf, value)
            return buf.getvalue()

        return encode

    return prepare


def kafka_python_encoder(message: str, version: int) -> Callable[[bytes], Callable[[], object]]:
    decode = kafka_python_decoder(message, version)

    def prepare(b: bytes) -> Callable[[], object]:
        value = decode(b)
        return lambda: value.encode()  # type: ignore[attr-defined]  # (it keeps the version it was read at)

    return prepare


def encode_rows(name: str, message: str, version: int, repeat: int) -> list[dict[str, object]]:
    """Encode the decoded batch back to bytes: ours against the peers' encoders."""
    bodies = batch(name)
    n, nbytes, one = len(bodies), bodies.buffers()[2].size, body(name)
    rows_in = ak.decode(bodies, message, version)
    # warm: compile (or load from the cache) the kernel generated for this plan, which a long
    # job switches to by itself ("auto"); the interpreter is timed too
    for kernel in ("interpreter", "specialised"):
        got = ak.encode(rows_in.slice(0, 3), message, version, kernel=kernel).to_pylist()
        assert got == bodies.slice(0, 3).to_pylist()
    results = best_of_each(ours(functools.partial(ak.encode, rows_in, message, version)), repeat)
    peers = {}
    for peer, make in (("kio 0.6.5", kio_encoder), ("kafka-python 3.0.12", kafka_python_encoder)):
        try:
            encode_one = make(message, version)(one)
            if bytes(encode_one()) != one:  # type: ignore[call-overload]
                raise ValueError("does not give the same bytes back")
        except Exception as e:
            print(f"  {peer} cannot encode {message} v{version}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        sample = max(1, min(n, int(2e6 // max(len(one), 1))))
        peers[peer] = best_of(lambda: [encode_one() for _ in range(sample)], 3) * n / sample
    results.update(peers)
    best_peer = min(peers.values()) if peers else None
    return [
        {"workload": f"encode {name}", "impl": impl, "messages_per_s": n / t, "mb_per_s": nbytes / t / 1e6,
         "ratio_to_best_peer": (best_peer / t) if best_peer else None, "share_of_memcpy": None}
        for impl, t in results.items()
    ]  # fmt: skip


KAFKAJS = "2.2.4"
# workload -> kafkajs decoder (kafkajs reads Metadata up to v6, Fetch up to v11; no request decoders)
KAFKAJS_DECODERS = {"metadata_v1": "metadata/v1/response"}


def kafkajs_modules() -> Path | None:
    """kafkajs installed under bench/.node (npm, once), or None without node."""
    if not shutil.which("node") or not shutil.which("npm"):
        return None
    prefix = Path(__file__).parent / ".node"
    modules = prefix / "node_modules"
    if not (modules / "kafkajs").is_dir():
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix),
                        f"kafkajs@{KAFKAJS}"], check=True)  # fmt: skip
    return modules


def kafkajs_seconds(name: str, n: int) -> float | None:
    """Seconds kafkajs takes to decode ``n`` copies of the workload's body, or None."""
    modules = kafkajs_modules()
    decoder = KAFKAJS_DECODERS.get(name)
    if modules is None or decoder is None:
        return None
    file = tempfile.NamedTemporaryFile(suffix=".bin", delete=False)
    file.write(body(name))
    file.close()
    script = Path(__file__).with_name("kafkajs_peer.js")
    count = max(1, min(n, int(2e6 // len(body(name)))))
    out = subprocess.run(["node", str(script), str(modules), decoder, file.name, str(count)],
                         check=True, capture_output=True, text=True)  # fmt: skip
    result = json.loads(out.stdout)
    # the same bytes read the same way: topic and partition counts, a leader
    _, message, version = WORKLOADS[name]
    (ours,) = ak.decode([body(name)], message, version).to_pylist()
    assert result["summary"]["partitions"] == [len(t["partitions"]) for t in ours["topics"]]
    assert result["summary"]["first_leader"] == ours["topics"][0]["partitions"][0]["leader_id"]
    return float(result["seconds"]) * n / count


def capture_rows(repeat: int = 3) -> list[dict[str, object]]:
    """Captures to Parquet, end to end, each run in a fresh process held to one CPU (the speed
    issue's measure), and where the machine has two, held to two (a job then writes its tables
    in a thread of their own while it decodes: ``output.ParquetTables``): MB/s of capture (the
    best of ``repeat`` runs, as the other rows take the best), peak RSS (the process's VmHWM:
    ru_maxrss would carry over this parent's high-water mark)."""
    from benchmarks.bulk_capture import CaptureUnavailable, bulk_capture
    from benchmarks.data import big_capture

    rows = []
    # copies of a real capture: 8, 80 and 240 MB; memory must not grow with the capture
    captures = [(f"pcap tansu_confluent x{copies}", big_capture(copies)) for copies in (100, 1000, 3000)]
    try:  # and a live capture of bulk traffic (180 MB in 2,100 frames: Produce 90 KB, Fetch 5 MB)
        captures.append(("pcap bulk produce/fetch", bulk_capture()))
    except CaptureUnavailable as e:
        print(f"  no bulk capture row: {e}", file=sys.stderr)
    code = (
        "import os, sys, tempfile, time\n"
        "os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: int(sys.argv[3])])\n"
        "import arrowkafka as ak\n"
        "from arrowkafka.cli import bound_heap\nfrom arrowkafka.traffic import decode_capture\n"
        "bound_heap()\n"  # as the CLI does
        "specs = ak.load_specs()\n"
        "decode_capture([sys.argv[2]], tempfile.mkdtemp(), specs)\n"  # warm: compile, caches
        # the Parquet writer's own time (each table's rows written; on one core, in the job's thread)
        "from arrowkafka import output\n"
        "write, spent = output.ParquetTables._write, [0.0]\n"
        "def timed(self, name, table):\n"
        "    w = time.perf_counter(); write(self, name, table); spent[0] += time.perf_counter() - w\n"
        "output.ParquetTables._write = timed\n"
        "t = time.perf_counter()\n"
        "decode_capture([sys.argv[1]], tempfile.mkdtemp(), specs)\n"
        'print(time.perf_counter() - t, [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM")][0],'
        " spent[0])\n"
    )
    cores = [1, 2] if len(os.sched_getaffinity(0)) >= 2 else [1]
    runs: dict[tuple[str, int], list[tuple[float, int, float]]] = {
        (w, n): [] for w, _ in captures for n in cores
    }
    for _ in range(repeat):  # the captures in turns: a slow spell of the machine hits them all
        for workload, pcap in captures:
            for n in cores:
                out = subprocess.run([sys.executable, "-c", code, str(pcap), str(big_capture(2)), str(n)],
                                     check=True, capture_output=True, text=True)  # fmt: skip
                seconds, rss_kb, writing = out.stdout.split()
                runs[workload, n].append((float(seconds), int(rss_kb), float(writing)))
    for workload, pcap in captures:
        size = pcap.stat().st_size
        for n in cores:
            seconds, _, writing = min(runs[workload, n])
            rows.append({"workload": workload, "impl": "arrowkafka (1 core)" if n == 1 else f"arrowkafka ({n} cores)",
                         "messages_per_s": None, "mb_per_s": size / seconds / 1e6,
                         "ratio_to_best_peer": None, "share_of_memcpy": None, "capture_bytes": size,
                         "peak_rss_mb": max(rss for _, rss, _ in runs[workload, n]) / 1024,
                         "runs_mb_per_s": [round(size / t / 1e6, 1) for t, _, _ in runs[workload, n]],
                         # on one core, the fastest run's Parquet writing, and the capture's MB/s if
                         # the job did nothing else (on two the writer's thread waits for the CPU
                         # and for Python's lock: its time is not the writer's alone)
                         "parquet_writer_s": writing if n == 1 else None,
                         "parquet_writer_alone_mb_s": size / writing / 1e6 if n == 1 else None})  # fmt: skip
    return rows


def spark_rows() -> list[dict[str, object]]:
    """Decoding inside mapInArrow, one task, warm workers (bench/spark_task.py)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("  pyspark not installed: no mapInArrow row", file=sys.stderr)
        return []
    rows: list[dict[str, object]] = []
    # Spark as it comes, and with Arrow Java's checks off (what the README recommends)
    for suffix, options in (("", []), (", Arrow checks off", ["--java-options", ARROW_JAVA_OPTIONS])):
        out = subprocess.run([sys.executable, str(Path(__file__).with_name("spark_task.py")), "--json", *options],
                             check=True, capture_output=True, text=True)  # fmt: skip
        result = json.loads(out.stdout.strip().splitlines()[-1])
        rows += [{"workload": "mapInArrow metadata_v12" + suffix, "impl": impl, "messages_per_s": None,
                  "mb_per_s": mb, "ratio_to_best_peer": None, "share_of_memcpy": None}
                 for impl, mb in (("decoding inside one Spark task", result["inside_mb_s"]),
                                  ("the whole Spark task (wall)", result["task_mb_s"]),
                                  ("the whole task, tag_columns=False", result["lean_task_mb_s"]),
                                  ("the same task without decoding (wall)", result["transfer_mb_s"]),
                                  ("ak.decode, one core (same run)", result["local_mb_s"]))]  # fmt: skip
    return rows


# the rows of what the machine allows a compressed workload (records.measure_batches' floors)
CEILING_VIEWS = "the decompression, each byte kept once and the CRCs (ceiling, views)"
CEILING_COPIES = "the same, each byte copied once more (ceiling, copies)"


def record_rows() -> list[dict[str, object]]:
    """The records issue's workloads (32 MB of magic 2 batches each), measured as
    bench/records.py measures them, in this table: decode_records with copies and with views,
    the Python peers and kafkajs, the decompression alone and the CRCs alone. Every ratio is to
    the best Python peer (the issue's measure); ``records_behind`` sets ours against the
    decompression alone."""
    import records

    modules = records.kafkajs_modules()
    ak.decode_records([records._batches(1, 2, 10, 1, 0)])  # compile (or load) the kernels
    rows: list[dict[str, object]] = []
    for name in records.BATCH_WORKLOADS:
        r = records.measure_batches(name, 32, modules, seconds=2.0)
        impls = {
            "arrowkafka decode_records": r["arrowkafka_mb_s"],
            "arrowkafka decode_records, views": r["arrowkafka_views_mb_s"],
            "arrowkafka decode_records, views, no CRC check (as the Python peers read)": r[
                "arrowkafka_views_no_crc_mb_s"
            ],
            "kafka-python 3.0.12": r["kafka_python_mb_s"],
            "kio 0.6.5": r["kio_mb_s"],
            f"kafkajs {KAFKAJS} (no CRC check)": r["kafkajs_mb_s"],
            "the decompression alone": r["decompress_only_mb_s"],
            "python-lz4's lz4.frame.decompress, batch by batch": r.get("library_api_mb_s"),
            "the CRCs alone (ceiling)": r["crc_only_mb_s"],
            CEILING_VIEWS: r["floor_views_mb_s"],
            CEILING_COPIES: r["floor_copies_mb_s"],
        }
        for impl, mb in impls.items():
            if mb is None:
                continue
            rows.append({"workload": f"records: {name}", "impl": impl, "messages_per_s": None, "mb_per_s": mb,
                         "ratio_to_best_peer": mb / r["best_python_mb_s"], "share_of_memcpy": None})  # fmt: skip
    return rows


# The records issue's targets, on one core: uncompressed 1 KB values at 2 GB/s and 50 times the
# best Python peer; small records (100 B values, 3 headers) at 500 MB/s; compressed batches at
# 0.8 of the decompression alone.
TARGET_RECORDS_1KB = (2000.0, 50.0)
TARGET_RECORDS_SMALL_MB_S = 500.0
TARGET_RECORDS_X_DECOMPRESS = 0.8


def records_behind(rows: list[dict[str, object]]) -> list[str]:
    """BEHIND TARGET lines for the records rows."""
    by = {(str(r["workload"]), str(r["impl"])): r for r in rows if str(r["workload"]).startswith("records: ")}
    out = []
    for workload in sorted({w for w, _ in by}):
        ours = by[(workload, "arrowkafka decode_records")]
        mb, ratio = float(ours["mb_per_s"]), float(ours["ratio_to_best_peer"])  # type: ignore[arg-type]
        views = float(by[(workload, "arrowkafka decode_records, views")]["ratio_to_best_peer"])  # type: ignore[arg-type]
        if "1 KB values" in workload and (
            mb < TARGET_RECORDS_1KB[0] or max(ratio, views) < TARGET_RECORDS_1KB[1]
        ):
            bare = by[(workload, "arrowkafka decode_records, views, no CRC check (as the Python peers read)")]
            out.append(f"{workload}: {mb:.0f} MB/s, {ratio:.1f}x the best Python peer ({views:.1f}x with views; "
                       f"{float(bare['ratio_to_best_peer']):.1f}x with views and no CRC check, as the peers"  # type: ignore[arg-type]
                       " read), target 2,000 and 50x")  # fmt: skip
        if "3 headers" in workload and mb < TARGET_RECORDS_SMALL_MB_S:
            out.append(f"{workload}: {mb:.0f} MB/s, target {TARGET_RECORDS_SMALL_MB_S:.0f}")
        alone = by.get((workload, "the decompression alone"))
        if alone and mb < TARGET_RECORDS_X_DECOMPRESS * float(alone["mb_per_s"]):  # type: ignore[arg-type]
            dec = float(alone["mb_per_s"])  # type: ignore[arg-type]
            mb_views = float(by[(workload, "arrowkafka decode_records, views")]["mb_per_s"])  # type: ignore[arg-type]
            ceilings = [
                float(by[(workload, impl)]["mb_per_s"]) / dec  # type: ignore[arg-type]
                for impl in (CEILING_COPIES, CEILING_VIEWS)
                if (workload, impl) in by
            ]
            most = f" (at most {ceilings[0]:.2f} and {ceilings[1]:.2f} here)" if len(ceilings) == 2 else ""
            out.append(
                f"{workload}: {mb / dec:.2f} of the decompression alone, {mb_views / dec:.2f} with views{most},"
                f" target {TARGET_RECORDS_X_DECOMPRESS}"
            )
    return out


# Arrow Java's bounds and null checks off in the JVM that reads the workers' batches (Arrow's
# documented tuning properties); set with spark.executor.extraJavaOptions
ARROW_JAVA_OPTIONS = "-Darrow.enable_unsafe_memory_access=true -Darrow.enable_null_check_for_get=false"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no cold start")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    rows = []
    for name, (_, message, version) in WORKLOADS.items():
        bodies = batch(name)
        n = len(bodies)
        nbytes = bodies.buffers()[2].size
        one = body(name)
        # warm: the interpreter, and the kernel generated for this plan (compiled, or loaded
        # from the cache), which a long job moves to by itself ("auto")
        want = ak.decode(bodies.slice(0, 3), message, version, kernel="interpreter")
        assert ak.decode(bodies.slice(0, 3), message, version, kernel="specialised").equals(want)
        views = bool(compile_plan(ak.load_specs()[message], version).view_nodes())
        results = best_of_each(
            ours(functools.partial(ak.decode, bodies, message, version), views), 2 * repeat
        )
        peers = {}
        for peer, make in (("kio 0.6.5", kio_decoder), ("kafka-python 3.0.12", kafka_python_decoder)):
            try:
                decode_one = make(message, version)
                decode_one(one)
            except Exception as e:  # a peer that cannot decode this workload
                print(
                    f"  {peer} cannot decode {message} v{version}: {type(e).__name__}: {e}", file=sys.stderr
                )
                continue
            sample = max(1, min(n, int(2e6 // max(len(one), 1))))  # peers are slow: time a sample
            t = best_of(lambda: [decode_one(one) for _ in range(sample)], 3) * n / sample
            peers[peer] = t
        js = kafkajs_seconds(name, n)
        if js is not None:
            peers[f"kafkajs {KAFKAJS}"] = js
        elif shutil.which("node"):
            print(f"  kafkajs {KAFKAJS} cannot decode {message} v{version}", file=sys.stderr)
        results.update(peers)
        dst = np.empty(nbytes, np.uint8)
        src = np.frombuffer(bodies.buffers()[2], np.uint8)[:nbytes]
        copy = best_of(lambda: np.copyto(dst, src), repeat)
        best_peer = min(peers.values()) if peers else None
        for impl, t in results.items():
            rows.append({
                "workload": name, "impl": impl, "messages_per_s": n / t, "mb_per_s": nbytes / t / 1e6,
                "ratio_to_best_peer": (best_peer / t) if best_peer else None,
                "share_of_memcpy": copy / t,
            })  # fmt: skip
        rows.append({"workload": name, "impl": "memcpy (ceiling)", "messages_per_s": n / copy,
                     "mb_per_s": nbytes / copy / 1e6, "ratio_to_best_peer": None, "share_of_memcpy": 1.0})  # fmt: skip
    for name, (_, message, version) in WORKLOADS.items():
        rows += encode_rows(name, message, version, repeat)
    rows += record_rows()
    if not args.quick:
        rows += capture_rows()
        rows += spark_rows()
    cold = {}
    if not args.quick:
        cache = tempfile.mkdtemp(prefix="ak-numba-")
        _run(FIRST_DECODE, cache)
        cold["import_and_first_decode_warm_cache_s"] = min(_run(FIRST_DECODE, cache) for _ in range(3))
        cold["import_and_first_decode_empty_cache_s"] = min(
            _run(FIRST_DECODE, tempfile.mkdtemp(prefix="ak-numba-empty-")) for _ in range(3)
        )
        cold["import_s"] = min(_run("import arrowkafka", cache) for _ in range(3))
        cold["fifty_pairs_empty_cache_s"] = _run(FIFTY, tempfile.mkdtemp(prefix="ak-numba-empty-"))
    w = max(len(str(r["workload"])) for r in rows)
    print(
        f"{'workload':<{w}} {'implementation':<36} {'msgs/s':>12} {'MB/s':>9} {'x best peer':>11} {'of memcpy':>9}"
    )
    for r in rows:
        ratio = f"{r['ratio_to_best_peer']:.1f}x" if r["ratio_to_best_peer"] else "-"
        share = f"{r['share_of_memcpy']:.1%}" if r["share_of_memcpy"] is not None else "-"
        msgs = f"{r['messages_per_s']:,.0f}" if r["messages_per_s"] is not None else "-"
        extra = f"  peak RSS {r['peak_rss_mb']:.0f} MB" if "peak_rss_mb" in r else ""
        print(f"{r['workload']:<{w}} {r['impl']:<36} {msgs:>12} {r['mb_per_s']:>9,.0f} "
              f"{ratio:>11} {share:>9}{extra}")  # fmt: skip
    for key, value in cold.items():
        print(f"{key}: {value:.2f}")
    behind = []
    for r in rows:
        if r["impl"] == "arrowkafka (1 thread)":
            target = TARGET_MB_S.get(r["workload"])
            if target and r["mb_per_s"] < target:
                behind.append(f"{r['workload']}: {r['mb_per_s']:.0f} MB/s on one core, target {target:.0f}")
            ratio_target = TARGET_RATIO_TO_KIO.get(r["workload"])
            if r["ratio_to_best_peer"] and ratio_target and r["ratio_to_best_peer"] < ratio_target:
                behind.append(
                    f"{r['workload']}: {r['ratio_to_best_peer']:.1f}x the best peer, target {ratio_target:.0f}x"
                )
    for r in rows:
        if r["impl"] == "arrowkafka (views, 1 thread)" and r["ratio_to_best_peer"]:
            if r["ratio_to_best_peer"] < TARGET_VIEWS_X_KIO:  # type: ignore[operator]
                behind.append(
                    f"{r['workload']}: views {r['ratio_to_best_peer']:.1f}x the best peer, target 5x"
                )
    by = {(r["workload"], r["impl"]): float(r["mb_per_s"]) for r in rows}  # type: ignore[arg-type]
    one, two = (
        by.get(("metadata_v12", "arrowkafka (1 thread)")),
        by.get(("metadata_v12", "arrowkafka (2 threads)")),
    )
    if one and two and two < TARGET_TWO_CORES * one:
        behind.append(f"metadata_v12: two threads {two / one:.2f}x one, target {TARGET_TWO_CORES}x")
    for r in rows:
        if not str(r["workload"]).startswith("pcap ") or r["impl"] != "arrowkafka (1 core)":
            continue
        target = max(TARGET_PCAP_MB_S, TARGET_PCAP_SPEED_MB_S.get(str(r["workload"]), 0.0))
        if float(r["mb_per_s"]) < target:  # type: ignore[arg-type]
            # what the Parquet writer alone leaves of the target's time, on one core
            budget = float(r["capture_bytes"]) / target / 1e6  # type: ignore[arg-type]
            behind.append(
                f"{r['workload']}: {r['mb_per_s']:.0f} MB/s of capture end to end, target {target:.0f}"
                f" (Parquet's writer alone: {r['parquet_writer_s']:.2f} s of the {budget:.2f} s the target"
                f" allows, {r['parquet_writer_alone_mb_s']:.0f} MB/s of capture if nothing else ran)"
            )
    behind += records_behind(rows)
    for workload in sorted({str(r["workload"]) for r in rows if str(r["workload"]).startswith("mapInArrow")}):
        spark = {r["impl"]: r["mb_per_s"] for r in rows if r["workload"] == workload}
        # the Spark issue's target: the decoding inside a task
        inside, local = spark["decoding inside one Spark task"], spark["ak.decode, one core (same run)"]
        if inside < local / 2:  # type: ignore[operator]
            behind.append(
                f"{workload}: decoding at {inside:.0f} MB/s in a task, target half of ak.decode's {local:.0f}"
            )
        # the speed issue's: the whole task at least half as fast as the same task without decoding
        task, floor = spark["the whole Spark task (wall)"], spark["the same task without decoding (wall)"]
        if task < floor / 2:  # type: ignore[operator]
            behind.append(
                f"{workload}: the whole task at {task:.0f} MB/s, target half of {floor:.0f} without decoding"
            )
    for line in behind:
        print(f"BEHIND TARGET: {line}")
    versions = {
        p: md.version(p)
        for p in ("arrowkafka", "numba", "llvmlite", "numpy", "pyarrow", "kio", "kafka-python")
    }
    if kafkajs_modules() is not None:
        versions["kafkajs"] = KAFKAJS
        versions["node"] = subprocess.run(
            ["node", "--version"], capture_output=True, text=True
        ).stdout.strip()
    out = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "versions": versions, "rows": rows, "cold_start": cold, "behind_target": behind,
    }  # fmt: skip
    path = results_path(out["date"][:10])
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
