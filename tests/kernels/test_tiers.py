"""A new process decodes its first few kilobytes on the plain-Python tier (no Numba import, no
compile), then moves to the compiled kernel for good; both give the same rows, and refuse
the same bodies with the same errors and reject rows."""

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
# what Kafka refuses: a null array element, a count ahead of a corrupt element, varints cut short
bad = [("DescribeConfigsRequest", 1, "00000001020001610000000200016bffff00"),
       ("ConsumerGroupHeartbeatRequest", 0, "0267026d00000000000000000000" + "03026b00" + "000000"),
       ("CreateDelegationTokenRequest", 1, "00000008fdffeffffffffffb"),
       ("ApiVersionsRequest", 3, "0101808080"), ("ApiVersionsRequest", 3, "0101010580")]
def refusals():
    out = []
    for name, version, body in bad:
        try:
            ak.decode([bytes.fromhex(body)], name, version)
            raise AssertionError(name + " decoded")
        except ak.DecodeError as e:
            out.append((type(e).__name__, str(e)))
        out.append(ak.decode([bytes.fromhex(body)], name, version, errors="null")[1].to_pylist())
    return out
plain_refusals = refusals()
assert plain_refusals[0][0] == "Corrupt" and "configuration_keys[1]" in plain_refusals[0][1]
first = ak.decode([small, small], "FetchRequest", 12).to_pylist()
assert "numba" not in sys.modules, "the first small batch must not import numba"
assert first == [ref.decode(ak.load_specs()["FetchRequest"], 12, small)] * 2
rows = ak.decode([big, big], "MetadataResponse", 12).to_pylist()
assert "numba" in sys.modules, "past the budget, the compiled kernel takes over"
assert rows == [ref.decode(ak.load_specs()["MetadataResponse"], 12, big)] * 2
again = ak.decode([small], "FetchRequest", 12).to_pylist()
assert again == first[:1]
assert refusals() == plain_refusals
print("ok")
"""


def test_first_bytes_are_plain_python_then_compiled() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
