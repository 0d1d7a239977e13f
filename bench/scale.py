"""The scale claim: a 5 GB capture decoded to Parquet by ``decode_capture`` on one core, in
peak RSS under 1.5 GB. Two captures, each a small one repeated to the size (data.py's
``scaled_capture``, cached in the temp folder): ``big_capture(3000)``, many short connections
(the worst case for what is kept per connection), and the live bulk capture, few connections
carrying large frames. Each is decoded as compare.py's capture rows do, in a fresh process
held to one CPU, which also samples its RSS every second: memory should stay flat as the
capture goes by. Prints a table (``--json``: JSON).

    python bench/scale.py [--gigabytes 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.bulk_capture import bulk_capture
from benchmarks.data import big_capture, scaled_capture

LIMIT_MB = 1536  # the claim: peak RSS under 1.5 GB

# What compare.py's capture rows run (one core, bound_heap, a warm-up decode, one timed decode),
# with a thread reading VmRSS every second. argv: capture, warm-up capture, output folder.
CHILD = """\
import json, os, sys, tempfile, threading, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

def status(field):
    return [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith(field)][0]

series, done = [], threading.Event()
t0 = time.perf_counter()

def sample():
    while not done.is_set():
        series.append((round(time.perf_counter() - t0, 1), status("VmRSS")))
        done.wait(1.0)

threading.Thread(target=sample, daemon=True).start()
import arrowkafka as ak
from arrowkafka.cli import bound_heap
from arrowkafka.traffic import decode_capture
bound_heap()
specs = ak.load_specs()
with tempfile.TemporaryDirectory() as warm:
    decode_capture([sys.argv[2]], warm, specs)
started = time.perf_counter() - t0
t = time.perf_counter()
summary = decode_capture([sys.argv[1]], sys.argv[3], specs)
seconds = time.perf_counter() - t
done.set()
hwm = status("VmHWM")
st = summary.capture_stats[0]
print(json.dumps({"seconds": seconds, "peak_rss_kb": hwm, "rss_series": series, "timed_from_s": started,
                  "frames_in": summary.frames_in, "rows": summary.rows, "rejects": summary.rejects,
                  "packets": st.packets, "tcp_streams": st.tcp.streams}))
"""


def output_stats(out: Path) -> tuple[int, int]:
    """The Parquet files' total bytes, and the distinct clients (ip:port) in them."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    size, uniques = 0, []
    for path in out.glob("*.parquet"):
        size += path.stat().st_size
        column = "client" if path.name == "rejects.parquet" else "_client"
        file = pq.ParquetFile(path)
        for g in range(file.num_row_groups):
            uniques.append(pc.unique(file.read_row_group(g, columns=[column]).column(0)).cast(pa.string()))
    clients = len(pc.unique(pa.chunked_array(uniques, pa.string()).drop_null())) if uniques else 0
    return size, clients


def run(name: str, pcap: Path) -> dict[str, object]:
    out = Path(tempfile.mkdtemp(prefix="arrowkafka-scale-"))
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(pcap), str(big_capture(2)), str(out)],
                              check=True, capture_output=True, text=True)  # fmt: skip
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        parquet_bytes, clients = output_stats(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    size = pcap.stat().st_size
    return {"workload": name, "capture": str(pcap), "capture_bytes": size,
            "seconds": result["seconds"], "mb_per_s": size / result["seconds"] / 1e6,
            "peak_rss_mb": result["peak_rss_kb"] / 1024,
            "under_limit": result["peak_rss_kb"] / 1024 < LIMIT_MB,
            "parquet_bytes": parquet_bytes, "clients": clients,
            "rss_series_mb": [(t, round(kb / 1024)) for t, kb in result["rss_series"]],
            **{k: result[k] for k in ("timed_from_s", "frames_in", "rows", "rejects", "packets",
                                      "tcp_streams")}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gigabytes", type=float, default=5.0)
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    args = parser.parse_args()
    sources = {"tansu_confluent x3000 (many connections)": big_capture(3000),
               "bulk produce/fetch (large frames)": bulk_capture()}  # fmt: skip
    rows = []
    for name, source in sources.items():
        t = time.perf_counter()
        pcap = scaled_capture(source, args.gigabytes)
        generate_s = time.perf_counter() - t  # next to nothing when cached
        os.sync()  # a capture just written: its pages flushed now, not during the timed decode
        print(f"  {pcap.name}: {pcap.stat().st_size / 1e9:.2f} GB in {generate_s:.1f} s", file=sys.stderr)
        row = run(name, pcap)
        row["generate_s"] = generate_s
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'workload':<42} {'GB':>5} {'s':>7} {'MB/s':>6} {'peak RSS MB':>11} {'Parquet MB':>10} "
          f"{'clients':>9} {'under 1.5 GB':>12}")  # fmt: skip
    for r in rows:
        print(f"{r['workload']:<42} {r['capture_bytes'] / 1e9:>5.2f} {r['seconds']:>7.1f} "
              f"{r['mb_per_s']:>6.1f} "
              f"{r['peak_rss_mb']:>11.0f} {r['parquet_bytes'] / 1e6:>10.0f} {r['clients']:>9,} "
              f"{'yes' if r['under_limit'] else 'NO':>12}")  # fmt: skip
    for r in rows:
        series = r["rss_series_mb"]
        step = max(1, len(series) // 20)  # about twenty samples
        shown = series[::step] + ([series[-1]] if (len(series) - 1) % step else [])
        print(f"RSS (s: MB) {r['workload']} (timed decode from {r['timed_from_s']:.0f} s): "
              + ", ".join(f"{t:.0f}: {mb}" for t, mb in shown))  # fmt: skip


if __name__ == "__main__":
    main()
