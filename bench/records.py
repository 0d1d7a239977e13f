"""Record batches, side by side in one process on the same bytes, one core: arrowkafka's
``decode_records`` against kafka-python 3.0.12's ``MemoryRecords`` (every record's key, value
and headers touched) and kio 0.6.5's ``read_batch`` (uncompressed only: it reads no codec), and,
for compressed batches, against the decompression alone (the codec libraries decode_records
calls, one call per batch). Prints a table and writes bench/results/<date>-records.json.

    python bench/records.py [--mb 64]
"""

from __future__ import annotations

import argparse
import datetime
import json
import struct
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

import arrowkafka as ak
from arrowkafka.records.codecs import decompress

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

HERE = Path(__file__).parent


def _batches(n_batches: int, per_batch: int, value: int, headers: int, codec: int) -> bytes:
    rng = np.random.default_rng(7)
    words = [f"w{i:03d} ".encode() for i in range(300)]  # text-like values: they compress
    out = []
    for b in range(n_batches):
        mb = MemoryRecordsBuilder(2, codec, batch_size=1 << 30)
        for i in range(per_batch):
            v = b"".join(words[j] for j in rng.integers(0, 300, value // 5 + 1))[:value]
            mb.append(timestamp=1_700_000_000_000 + i, key=b"key-%06d" % i, value=v,
                      headers=[(f"h{h}", b"x" * 8) for h in range(headers)])  # fmt: skip
        mb.close()
        out.append(struct.pack(">q", b * per_batch) + bytes(mb.buffer())[8:])
    return b"".join(out)


def _kafka_python(buf: bytes) -> int:
    n = 0
    mr = MemoryRecords(buf)
    while (batch := mr.next_batch()) is not None:
        for r in batch:
            n += len(r.value or b"") + len(r.key or b"") + len(r.headers)
    return n


def _kio(buf: bytes) -> int:
    from kio.records.readers import read_batch

    n, pos, view = 0, 0, memoryview(buf)
    while pos < len(buf):
        batch, size = read_batch(view, pos)
        n += len(batch.records)
        pos += size
    return n


def _decompress_only(buf: bytes) -> int:
    pos, n, view = 0, 0, memoryview(buf)
    while pos < len(buf):
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        codec = struct.unpack_from(">h", buf, pos + 21)[0] & 7
        n += len(decompress(codec, view[pos + 61 : pos + 12 + length], 1 << 30))
        pos += 12 + length
    return n


def best(fn: Callable[[], object], seconds: float = 3.0, at_least: int = 3) -> float:
    times: list[float] = []
    end = time.perf_counter() + seconds
    while len(times) < at_least or time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=32, help="MB of batches per workload (default 32)")
    args = ap.parse_args()
    mb = args.mb
    # name: (records per batch, value bytes, headers, codec)
    workloads = {
        "1 KB values, uncompressed": (100, 1000, 0, 0),
        "100 B values, 3 headers, uncompressed": (200, 100, 3, 0),
        "200 B values, gzip": (200, 200, 0, 1),
        "200 B values, snappy": (200, 200, 0, 2),
        "200 B values, lz4": (200, 200, 0, 3),
        "200 B values, zstd": (200, 200, 0, 4),
    }
    ak.decode_records([_batches(1, 2, 10, 1, 0)])  # compile (or load) the kernels
    results = {}
    print(f"{'workload':<40} {'MB':>6} {'arrowkafka':>11} {'kafka-python':>13} {'kio':>8} {'decompress':>11}"
          f" {'x best py':>9} {'x decomp':>8}")  # fmt: skip
    for name, (per, value, headers, codec) in workloads.items():
        one = _batches(4, per, value, headers, codec)
        buf = one * max(1, int(mb * 1e6 / len(one)))
        size = len(buf) / 1e6
        arr = pa.array([buf], pa.binary())
        ours = size / best(lambda arr=arr: ak.decode_records(arr))
        # the Python peers on a sixteenth (whole batches): the same rate, less waiting
        small = one * max(1, len(buf) // len(one) // 16)
        kp = len(small) / 1e6 / best(lambda small=small: _kafka_python(small), seconds=2, at_least=1)
        kio = (
            len(small) / 1e6 / best(lambda small=small: _kio(small), seconds=2, at_least=1)
            if codec == 0
            else None
        )
        dec = size / best(lambda buf=buf: _decompress_only(buf)) if codec else None
        peer = max(x for x in (kp, kio) if x)
        results[name] = {"mb": size, "arrowkafka_mb_s": ours, "kafka_python_mb_s": kp, "kio_mb_s": kio,
                         "decompress_only_mb_s": dec, "x_best_python": ours / peer,
                         "x_decompress": ours / dec if dec else None}  # fmt: skip
        print(f"{name:<40} {size:>6.1f} {ours:>11.0f} {kp:>13.1f} {kio or 0:>8.1f} {dec or 0:>11.0f}"
              f" {ours / peer:>9.0f} {ours / dec if dec else 0:>8.2f}")  # fmt: skip
    out = HERE / "results" / f"{datetime.date.today()}-records.json"
    out.write_text(json.dumps({"python": sys.version.split()[0], "results": results}, indent=1) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
