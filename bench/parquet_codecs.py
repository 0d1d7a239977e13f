"""The Parquet codecs a capture job can write with (``arrowkafka decode --compression``): the
job's speed and its tables' size for each, on the bulk capture (Produce batches and Fetch
responses, 180 MB) and 1,000 copies of the Tansu capture (control-plane traffic, 80 MB).

One process per capture, held to one core: a warm-up decode, then each capture decoded once per
codec, the codecs in turns, ``--rounds`` times (a slow spell of the machine hits them all), so
every timed decode runs in steady state, its memory reused. Prints a table and writes
bench/results/<date>-parquet-codecs.json.

    python bench/parquet_codecs.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.bulk_capture import CaptureUnavailable, bulk_capture
from benchmarks.data import big_capture
from keep import results_path

HERE = Path(__file__).parent

CHILD = """\
import json, os, shutil, sys, tempfile, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import arrowkafka as ak
from arrowkafka.cli import bound_heap
from arrowkafka.output import COMPRESSIONS
from arrowkafka.traffic import decode_capture
bound_heap()  # as the CLI does
specs = ak.load_specs()
capture, rounds = sys.argv[1], int(sys.argv[2])
with tempfile.TemporaryDirectory() as warm:
    decode_capture([capture], warm, specs)
runs = {c: [] for c in COMPRESSIONS}
sizes = {}
for _ in range(rounds):
    for c in COMPRESSIONS:
        out = tempfile.mkdtemp()
        t = time.perf_counter()
        decode_capture([capture], out, specs, compression=c)
        runs[c].append(os.path.getsize(capture) / 1e6 / (time.perf_counter() - t))
        sizes[c] = sum(p.stat().st_size for p in os.scandir(out))
        shutil.rmtree(out)
print(json.dumps({"mb_s": runs, "table_bytes": sizes}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    captures = [("control-plane copies x1000", big_capture(1000))]
    try:
        captures.insert(0, ("bulk produce/fetch", bulk_capture()))
    except CaptureUnavailable as e:
        print(f"no bulk capture: {e}", file=sys.stderr)
    results = {}
    for name, pcap in captures:
        out = subprocess.run([sys.executable, "-c", CHILD, str(pcap), str(args.rounds)],
                             check=True, capture_output=True, text=True)  # fmt: skip
        got = json.loads(out.stdout.splitlines()[-1])
        results[name] = {"capture_mb": pcap.stat().st_size / 1e6, **got}
    print(f"{'codec':8s}" + "".join(f" {name:>36s}" for name in results))
    for codec in next(iter(results.values()))["mb_s"]:
        cells = []
        for r in results.values():
            lo, hi = min(r["mb_s"][codec]), max(r["mb_s"][codec])
            cells.append(f"{lo:5.0f}-{hi:<5.0f} MB/s, tables {r['table_bytes'][codec] / 1e6:6.0f} MB")
        print(f"{codec:8s}" + "".join(f" {c:>36s}" for c in cells))
    date = datetime.date.today().isoformat()
    path = results_path(f"{date}-parquet-codecs")
    path.write_text(json.dumps({"date": date, "rounds": args.rounds, "results": results}, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
