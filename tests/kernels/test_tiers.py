"""A new process decodes its first few kilobytes on the plain-Python tier (no Numba import, no
compile), then moves to the compiled kernel for good; both give the same rows."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT, SHARED

SCRIPT = f"""
import sys
import arrowkafka as ak
from arrowkafka import oracle as ref
small = open({str(SHARED / "vectors" / "fetch_request_v12.bin")!r}, "rb").read()
big = open({str(SHARED / "vectors" / "metadata_response_v12_1t1000p.bin")!r}, "rb").read()
first = ak.decode([small, small], "FetchRequest", 12).to_pylist()
assert "numba" not in sys.modules, "the first small batch must not import numba"
assert first == [ref.decode(ak.load_specs()["FetchRequest"], 12, small)] * 2
rows = ak.decode([big, big], "MetadataResponse", 12).to_pylist()
assert "numba" in sys.modules, "past the budget, the compiled kernel takes over"
assert rows == [ref.decode(ak.load_specs()["MetadataResponse"], 12, big)] * 2
again = ak.decode([small], "FetchRequest", 12).to_pylist()
assert again == first[:1]
print("ok")
"""


def test_first_bytes_are_plain_python_then_compiled() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
