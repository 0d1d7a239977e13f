"""The workloads: the shared golden vectors, as batches of copies (deterministic)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve()
_CANDIDATES = [
    os.environ.get("ARROWKAFKA_SHARED", ""),
    str(HERE.parents[2].parent / "shared"),
    "/work/shared",
]
SHARED = next((Path(p) for p in _CANDIDATES if p and Path(p).is_dir()), Path("/work/shared"))

# name -> (file stem, message, version)
WORKLOADS = {
    "metadata_v12": ("metadata_response_v12_1t1000p", "MetadataResponse", 12),
    "metadata_v1": ("metadata_response_v1_1t1000p", "MetadataResponse", 1),
    "fetch_response_v12": ("fetch_response_v12_10t10p_1k", "FetchResponse", 12),
    "produce_request_v9": ("produce_request_v9", "ProduceRequest", 9),
    "fetch_request_v12": ("fetch_request_v12", "FetchRequest", 12),
}
COPIES = {"metadata_v12": 1000, "metadata_v1": 1000, "fetch_response_v12": 400}


def body(workload: str) -> bytes:
    stem = WORKLOADS[workload][0]
    meta = json.loads((SHARED / "vectors" / f"{stem}.json").read_text())
    assert meta["cross_checked"]["kio_roundtrip_equal"]
    return (SHARED / "vectors" / f"{stem}.bin").read_bytes()


def batch(workload: str) -> pa.BinaryArray:
    """Copies of one body totalling tens of MB (small bodies: 100,000 copies)."""
    b = body(workload)
    return pa.array([b] * COPIES.get(workload, 100_000), pa.binary())
