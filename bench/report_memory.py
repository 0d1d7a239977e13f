"""The capture report at scale: time and peak RSS of ``arrowkafka report`` on the output of a
large capture. The capture is the Tansu capture repeated to the size, every repetition with
client addresses of its own (data.py's ``scaled_capture``: many connections, the worst case
for the tables the report keeps a row per connection), or with ``--same-clients`` the same
clients, connections and consumer group again and again (a long capture of one cluster: the
frames, records and commits grow, the things the report lists do not), decoded once by ``arrowkafka decode``
(cached in the temp folder beside the capture). The report runs in a fresh process, as the
command and as ``arrowkafka.report.build_report`` from Python (the command switches Arrow to
jemalloc; a Python caller keeps its own allocator); peak RSS is each child's own ``ru_maxrss``.
Prints a table (``--json``: JSON) and writes bench/results/<date>-report-memory-<size>GB.json.

    python bench/report_memory.py [--gigabytes 1] [--same-clients] [--json]

The report's DuckDB steps run under ARROWKAFKA_REPORT_MEMORY (default spill.MEMORY_LIMIT); a
run under another cap is kept with the cap in its file name.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.data import SHARED, scaled_capture
from keep import results_path

from arrowkafka.report.spill import MEMORY_LIMIT

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent / "arrowkafka"
PYTHON_API = "import sys; from arrowkafka.report import build_report; build_report(sys.argv[1], sys.argv[2])"


def _child(cmd: list[str]) -> dict[str, float]:
    """Wall time and peak RSS (MB) of one child process (its own rusage, from ``wait4``)."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):  # 1: rejects in the capture; the tables are written
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err.read()[-2000:].decode()}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gigabytes", type=float, default=1.0, help="capture size in GB (default 1)")
    ap.add_argument("--same-clients", action="store_true", help="the same connections in every repetition")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()
    cap = os.environ.get("ARROWKAFKA_REPORT_MEMORY", MEMORY_LIMIT)
    capture = scaled_capture(SHARED / "captures" / "tansu_confluent.pcap", args.gigabytes, args.same_clients)
    out = capture.with_suffix(".decoded")
    if not (out / "rejects.parquet").exists():
        print(f"decoding {capture} ({capture.stat().st_size / 1e9:.2f} GB) once ...", file=sys.stderr)
        _child([str(BIN), "decode", str(capture), "-o", str(out), "--overwrite"])
    parquet = sum(p.stat().st_size for p in out.glob("*.parquet"))
    runs = {
        "command": _child([str(BIN), "report", str(out), "-o", str(out / "report-cli.html")]),
        "python": _child([sys.executable, "-c", PYTHON_API, str(out), str(out / "report-api.html")]),
    }
    result = {
        "date": datetime.date.today().isoformat(),
        "capture_gb": round(capture.stat().st_size / 1e9, 2),
        "clients": "the same in every repetition" if args.same_clients else "new in every repetition",
        "parquet_mb": round(parquet / 1e6, 1),
        "report_kb": round((out / "report-cli.html").stat().st_size / 1e3),
        "cpus": len(os.sched_getaffinity(0)),
        # the cap DuckDB runs the report's whole-table steps under (ARROWKAFKA_REPORT_MEMORY)
        "duckdb_memory_cap": cap,
        "runs": runs,
    }
    same = "-same-clients" if args.same_clients else ""
    capped = "" if cap == MEMORY_LIMIT else f"-cap{cap}"
    results = results_path(f"{result['date']}-report-memory-{args.gigabytes:g}GB{same}{capped}")
    results.write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"report of a {result['capture_gb']} GB capture, clients {result['clients']}, DuckDB cap {cap}"
          f" ({result['parquet_mb']} MB of Parquet, report {result['report_kb']} KB)")  # fmt: skip
    for name, r in runs.items():
        print(f"  {name:<8} {r['seconds']:>7.1f} s   peak RSS {r['peak_rss_mb']:,.0f} MB")


if __name__ == "__main__":
    main()
