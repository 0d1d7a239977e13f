"""The segments claim: a 1 GB Kafka log directory decoded by ``arrowkafka segments`` in bounded
memory (peak RSS under 1 GB). Generates the log directories (magic 2 batches with keys, values
and headers; uncompressed, gzip, snappy, lz4 and zstd; written by kafka-python's builder once,
then repeated with new base offsets and timestamps and their CRC-32C), runs the command on each
in a fresh process with and without ``--no-payloads`` (after a warm-up run: no compiling in the
runs measured), and measures its peak RSS (wait4's ru_maxrss, and VmRSS sampled every half
second: memory should stay flat as the files go by) and wall time. DuckDB reads the output
back: its rows must be the records written. Three layouts:

- ``rolled``: about 1 GB over four partitions, segments rolled at 256 MB (a broker's
  ``log.segment.bytes`` set so), the last of a partition shorter (the active segment);
- ``one-segment``: one segment near Kafka's default 1 GiB roll size, the worst case for a
  reader that would hold a file;
- ``compressible``: 256 MB of zstd batches that decompress 10x: memory follows a piece's
  records once decompressed, not the directory's size.

Prints a table and writes bench/results/<date>-segments-memory.json.

    python bench/segments_memory.py [--dir DIR] [--keep] [--scale 1.0] [--layouts rolled,...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import crc32c
import duckdb
import numpy as np
from keep import results_path

with warnings.catch_warnings():  # kafka-python's package import uses a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

HERE = Path(__file__).parent
ROOT = HERE.parent
LIMIT_MB = 1024  # the claim: peak RSS under 1 GB
MB = 1 << 20
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# layout -> (partition folder, codecs its producer used, [segment sizes in MB], words its
# values are made of: 2000 compress about 2-3x, 4 about 10x); sizes are multiplied by --scale.
# rolled: 256 + 256 + 256 + 100 + 128 + 64 = 1060 MB.
LAYOUTS = {
    "rolled": [
        ("orders-0", ("zstd",), [256, 256], 2000),
        ("orders-1", ("lz4",), [256, 100], 2000),
        ("events-0", ("none",), [128], 2000),
        ("clicks-0", ("snappy", "gzip"), [64], 2000),
    ],
    "one-segment": [("audit-0", ("none", "lz4", "zstd", "snappy", "gzip"), [1000], 2000)],
    # memory follows what a piece decompresses to, not the directory's size: 32 MB pieces of
    # 10x zstd are 320 MB of records each
    "compressible": [("logs-0", ("zstd",), [256], 4)],
}

# a pattern batch: (records, value bytes, headers); a producer's batches run from a few KB
# (batch.size 16 KB, little linger) to a MB (high throughput)
SHAPES = [(20, 300, 1), (100, 500, 2), (400, 800, 0), (1500, 600, 3)]


def _pattern(codec: int, vocabulary: int, rng: np.random.Generator) -> list[tuple[bytes, int]]:
    """One batch per shape in ``codec``, from kafka-python's builder: (bytes, records). Values
    are JSON-like text with ids and random words out of ``vocabulary``, which compresses about
    as real events do."""
    words = [f"w{i:04d}" for i in range(vocabulary)]
    out = []
    for records, value, headers in SHAPES:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)  # fmt: skip
        for i in range(records):
            user = int(rng.integers(0, 100_000))
            note = " ".join(words[j] for j in rng.integers(0, len(words), value // 6))
            v = f'{{"id":{i},"user":"user-{user}","amount":{rng.random():.4f},"note":"{note}"}}'
            hs = [("trace-id", rng.bytes(8).hex().encode()), ("source", b"web"), ("v", b"1")][:headers]
            b.append(i, timestamp=1_700_000_000_000 + 3 * i, key=b"user-%d" % user,
                     value=v.encode()[:value], headers=hs)  # fmt: skip
        out.append((bytes(b.build()), records))
    return out


def _write_segments(folder: Path, batches: list[tuple[bytes, int]], sizes: list[int]) -> tuple[int, int]:
    """Segment files of about ``sizes`` bytes each in ``folder``, the pattern batches repeated
    in turn, each with its base offset, base and max timestamps moved on (a new CRC-32C: it
    covers the timestamps, not the offset). Files are named by their first offset, as brokers
    name them. Returns (records, batches) written."""
    folder.mkdir(parents=True, exist_ok=True)
    offset, ts, n_batches = 0, 1_700_000_000_000, 0
    for size in sizes:
        with open(folder / f"{offset:020d}.log", "wb", buffering=8 * MB) as f:
            written, i = 0, 0
            while written < size:
                raw, records = batches[i % len(batches)]
                buf = bytearray(raw)
                first_ts, max_ts = struct.unpack_from(">qq", buf, 27)
                struct.pack_into(">q", buf, 0, offset)
                struct.pack_into(">qq", buf, 27, ts, ts + (max_ts - first_ts))
                struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
                f.write(buf)
                written += len(buf)
                offset += records
                ts += max_ts - first_ts + 1
                n_batches += 1
                i += 1
    return offset, n_batches


Patterns = dict[tuple[str, int], list[tuple[bytes, int]]]


def generate(base: Path, layout: str, scale: float, patterns: Patterns, rng: np.random.Generator) -> dict:
    """The layout's log directory under ``base``; what it holds. ``patterns``: batches made so
    far, by (codec, vocabulary)."""
    records = batches = 0
    files = []
    for folder, codecs, sizes, vocabulary in LAYOUTS[layout]:
        for c in codecs:
            if (c, vocabulary) not in patterns:
                patterns[c, vocabulary] = _pattern(CODECS[c], vocabulary, rng)
        mixed = [b for c in codecs for b in patterns[c, vocabulary]]
        r, b = _write_segments(base / folder, mixed, [int(s * scale * MB) for s in sizes])
        records, batches = records + r, batches + b
        files += [p.stat().st_size for p in (base / folder).glob("*.log")]
    return {"bytes": sum(files), "files": len(files), "largest_file": max(files), "records": records,
            "batches": batches}  # fmt: skip


def _vmrss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmRSS")) / 1024
    except (OSError, StopIteration):
        return None


def measure(cmd: list[str]) -> dict:
    """Run ``cmd``; its wall time, exit status, peak RSS (ru_maxrss from wait4: the process's
    own peak, or a child's if larger) and VmRSS sampled every 0.5 s."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    series: list[tuple[float, float]] = []
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    err = threading.Thread(target=lambda: out.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    err.start()
    while True:  # wait4, not poll: poll would reap the child and lose its rusage
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss = _vmrss_mb(proc.pid)
        if rss is not None:
            series.append((round(time.perf_counter() - t, 1), round(rss)))
        time.sleep(0.5)
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    err.join()
    return {"seconds": seconds, "exit": proc.returncode, "peak_rss_mb": usage.ru_maxrss / 1024,
            "rss_series_mb": series, "output": b"".join(out).decode(errors="replace")}  # fmt: skip


def check_output(out: Path) -> dict:
    """What DuckDB reads back: rows of the record tables and rejects, and the output's size."""
    con = duckdb.connect()

    def rows(name: str) -> int:
        return int(con.sql(f"SELECT count(*) FROM read_parquet('{out}/{name}.parquet')").fetchall()[0][0])

    size = sum(p.stat().st_size for p in out.rglob("*.parquet"))
    # what the codecs made of the stored bytes: how much a piece can grow once decompressed
    stored, whole = con.sql(f"SELECT sum(records_size), sum(uncompressed_size) FROM "
                            f"read_parquet('{out}/record_batches.parquet')").fetchall()[0]  # fmt: skip
    return {"records": rows("records"), "batches": rows("record_batches"), "rejects": rows("rejects"),
            "output_bytes": size, "records_bytes": int(stored), "uncompressed_bytes": int(whole)}  # fmt: skip


def _flat(series: list[tuple[float, float]]) -> list[float]:
    """VmRSS at 25, 50, 75 and 100% of the run: flat when memory is bounded."""
    if not series:
        return []
    return [series[min(len(series) - 1, int(len(series) * q))][1] for q in (0.25, 0.5, 0.75, 0.999)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, help="generate here (default: a temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the generated log directories")
    ap.add_argument("--scale", type=float, default=1.0, help="segment sizes times this (default 1)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="comma-separated: " + ", ".join(LAYOUTS))
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="segments-memory-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        rng = np.random.default_rng(7)
        patterns: Patterns = {}
        # the command's fixed cost: the interpreter with arrowkafka.segments and its imports
        baseline = measure([sys.executable, "-c", "import arrowkafka.segments"])["peak_rss_mb"]
        # a warm-up on a small directory: Numba's cache is filled (a stale one costs a minute of
        # compiling and some hundreds of MB), so no measured run pays for a compile
        generate(base / "warm-up", "rolled", 0.002, patterns, rng)
        for i, flags in enumerate(([], ["--no-payloads"])):  # (an output folder each: one holds tables)
            warm = measure([sys.executable, "-m", "arrowkafka", "segments", str(base / "warm-up"), "-o",
                            str(base / f"warm-up-out-{i}"), *flags])  # fmt: skip
            assert warm["exit"] == 0, warm["output"]
            shutil.rmtree(base / f"warm-up-out-{i}")
        shutil.rmtree(base / "warm-up")
        results: dict = {}
        print(f"{'layout':<12} {'payloads':<11} {'GB':>5} {'files':>5} {'largest MB':>10} {'seconds':>7}"
              f" {'MB/s':>6} {'peak RSS MB':>11} {'RSS 25/50/75/100%':>22} {'rows ok':>7}")  # fmt: skip
        for layout in args.layouts.split(","):
            logs = base / layout
            g = time.perf_counter()
            made = generate(logs, layout, args.scale, patterns, rng)
            made["generate_seconds"] = round(time.perf_counter() - g, 1)
            results[layout] = {"input": made}
            for payloads in (True, False):
                out = base / f"{layout}-out"
                cmd = [sys.executable, "-m", "arrowkafka", "segments", str(logs), "-o", str(out)]
                run = measure(cmd + ([] if payloads else ["--no-payloads"]))
                back = check_output(out)
                shutil.rmtree(out)
                ok = back["records"] == made["records"] and back["batches"] == made["batches"]
                ok = ok and back["rejects"] == 0 and run["exit"] == 0
                key = "payloads" if payloads else "no-payloads"
                results[layout][key] = {
                    "seconds": round(run["seconds"], 1),
                    "mb_per_s": round(made["bytes"] / MB / run["seconds"], 1),
                    "peak_rss_mb": round(run["peak_rss_mb"]),
                    "under_limit": run["peak_rss_mb"] < LIMIT_MB,
                    "rss_25_50_75_100_mb": _flat(run["rss_series_mb"]),
                    "read_back": back,
                    "rows_ok": ok,
                    "exit": run["exit"],
                }
                if run["exit"] != 0:
                    results[layout][key]["output"] = run["output"][-2000:]
                r = results[layout][key]
                print(f"{layout:<12} {key:<11} {made['bytes'] / 1e9:>5.2f} {made['files']:>5}"
                      f" {made['largest_file'] / MB:>10.0f} {r['seconds']:>7.1f} {r['mb_per_s']:>6.1f}"
                      f" {r['peak_rss_mb']:>11} {r['rss_25_50_75_100_mb']!s:>22} {ok!s:>7}",
                      flush=True)  # fmt: skip
            if not args.keep:
                shutil.rmtree(logs)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
        elif args.keep:
            print(f"kept the log directories in {base}")
    doc = {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "what": "arrowkafka segments DIR -o OUT in a fresh process per run (2 shared cores, other jobs"
        " running): peak RSS (wait4 ru_maxrss) and VmRSS every 0.5 s, wall time, rows read back by DuckDB;"
        " magic 2 batches from kafka-python's builder repeated with new offsets, timestamps and CRCs",
        "python": sys.version.split()[0],
        "limit_mb": LIMIT_MB,
        "import_rss_mb": round(baseline),
        "scale": args.scale,
        "shapes": SHAPES,
        "layouts": {k: [[f, list(c), s, w] for f, c, s, w in v] for k, v in LAYOUTS.items()},
        "results": results,
    }
    if args.scale == 1.0 and set(results) == set(LAYOUTS):
        out = results_path(f"{datetime.date.today()}-segments-memory")
    else:  # a smaller or partial trial run is not the claim
        out = Path(tempfile.gettempdir()) / f"segments-memory-scale-{args.scale}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
