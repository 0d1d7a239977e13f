"""Side by side, in one process, on the same bytes: arrowkafka against kio 0.6.5 and
kafka-python 3.0.12; memory bandwidth (numpy copy into an existing array) as the ceiling;
cold start in fresh processes. Prints a table and writes bench/results/<date>.json.

    python bench/compare.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata as md
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.bench_compile import FIFTY, FIRST_DECODE, _run
from benchmarks.data import WORKLOADS, batch, body

import arrowkafka as ak

# Targets from the decoder and encoder issues, to say plainly where we are behind.
TARGET_MB_S = {"metadata_v12": 500.0, "encode metadata_v12": 500.0}
TARGET_RATIO_TO_KIO = {"metadata_v12": 12.0, "encode metadata_v12": 50.0}


def best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


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
    ak.encode(rows_in.slice(0, 2), message, version)  # warm the JIT
    assert ak.encode(rows_in.slice(0, 3), message, version).to_pylist() == bodies.slice(0, 3).to_pylist()
    results = {
        f"arrowkafka ({k} thread{'s' * (k > 1)})": best_of(
            lambda: ak.encode(rows_in, message, version, threads=k), repeat
        )
        for k in (1, 2)
    }
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
        ak.decode(bodies.slice(0, 2), message, version)  # warm the JIT
        results = {}
        for threads in (1, 2):
            t = best_of(lambda: ak.decode(bodies, message, version, threads=threads), repeat)
            results[f"arrowkafka ({threads} thread{'s' * (threads > 1)})"] = t
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
    cold = {}
    if not args.quick:
        cache = tempfile.mkdtemp(prefix="ak-numba-")
        _run(FIRST_DECODE, cache)
        cold["import_and_first_decode_warm_cache_s"] = min(_run(FIRST_DECODE, cache) for _ in range(3))
        cold["fifty_pairs_empty_cache_s"] = _run(FIFTY, tempfile.mkdtemp(prefix="ak-numba-empty-"))
    print(
        f"{'workload':<27} {'implementation':<24} {'msgs/s':>12} {'MB/s':>9} {'x best peer':>11} {'of memcpy':>9}"
    )
    for r in rows:
        ratio = f"{r['ratio_to_best_peer']:.1f}x" if r["ratio_to_best_peer"] else "-"
        share = f"{r['share_of_memcpy']:.1%}" if r["share_of_memcpy"] is not None else "-"
        print(f"{r['workload']:<27} {r['impl']:<24} {r['messages_per_s']:>12,.0f} {r['mb_per_s']:>9,.0f} "
              f"{ratio:>11} {share:>9}")  # fmt: skip
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
    for line in behind:
        print(f"BEHIND TARGET: {line}")
    versions = {
        p: md.version(p)
        for p in ("arrowkafka", "numba", "llvmlite", "numpy", "pyarrow", "kio", "kafka-python")
    }
    out = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "python": platform.python_version()},
        "versions": versions, "rows": rows, "cold_start": cold, "behind_target": behind,
    }  # fmt: skip
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    path = results / f"{out['date'][:10]}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
