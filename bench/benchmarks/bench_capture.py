"""Captures to Parquet, end to end: MB/s of capture and peak RSS (a fresh process each)."""

from __future__ import annotations

import subprocess
import sys

from .data import SHARED, big_capture, some

# the real captures (small: fixed costs dominate) and 100 copies of one (8 MB)
CAPTURES = some(
    [*sorted(p.stem for p in (SHARED / "captures").glob("*.pcap")), "tansu_confluent_x100"],
    ["tansu_confluent_x100"],
)

_CODE = """
import sys, tempfile, time
import arrowkafka as ak
from arrowkafka.traffic import decode_capture
specs = ak.load_specs()
with tempfile.TemporaryDirectory() as warm, tempfile.TemporaryDirectory() as out:  # (none left behind)
    decode_capture([sys.argv[1]], warm, specs)  # warm: compile, caches
    t = time.perf_counter()
    summary = decode_capture([sys.argv[1]], out, specs)
    seconds = time.perf_counter() - t
assert summary.frames_in == summary.rows + summary.rejects
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM")]  # peak RSS, kB
print(seconds, hwm[0].split()[1])
"""


def _run(capture: str) -> tuple[float, float]:
    path = big_capture(100) if capture.endswith("_x100") else SHARED / "captures" / f"{capture}.pcap"
    out = subprocess.run([sys.executable, "-c", _CODE, str(path)], check=True, capture_output=True, text=True)
    seconds, rss_kb = out.stdout.split()
    return path.stat().st_size / float(seconds) / 1e6, int(rss_kb) / 1024


class Capture:
    params = (CAPTURES,)
    param_names = ("capture",)
    number = 1
    repeat = 1
    timeout = 300

    def track_mb_per_s(self, capture: str) -> float:
        return _run(capture)[0]

    track_mb_per_s.unit = "MB/s"  # type: ignore[attr-defined]

    def track_peak_rss_mb(self, capture: str) -> float:
        return _run(capture)[1]

    track_peak_rss_mb.unit = "MB"  # type: ignore[attr-defined]
