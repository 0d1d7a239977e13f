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


def best_mb_per_s(fn: object, nbytes: int, repeat: int = 5) -> float:
    """MB/s of ``nbytes`` over the best of ``repeat`` calls of ``fn``."""
    import time

    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e6


def big_capture(copies: int = 100, source: str = "tansu_confluent") -> Path:
    """A large capture made of ``copies`` of a real one, each copy's connections on client
    ports of their own (so each is a separate conversation), timestamps shifted after the last.
    Classic pcap, Linux cooked (SLL) or Ethernet, IPv4; cached in the temp folder."""
    import struct
    import tempfile

    from arrowkafka.capture.packets import _network_offset

    out = Path(tempfile.gettempdir()) / f"arrowkafka-bench-{source}-x{copies}-v2.pcap"
    if out.exists():
        return out
    raw = (SHARED / "captures" / f"{source}.pcap").read_bytes()
    assert raw[:4] == b"\xd4\xc3\xb2\xa1", "little-endian classic pcap expected"
    linktype = struct.unpack_from("<I", raw, 20)[0]
    records = []
    pos = 24
    while pos + 16 <= len(raw):
        sec, usec, incl, orig = struct.unpack_from("<IIII", raw, pos)
        records.append((sec, usec, orig, bytearray(raw[pos + 16 : pos + 16 + incl])))
        pos += 16 + incl
    ports: dict[int, int] = {}
    for *_, data in records:
        ip, version = _network_offset(bytes(data), linktype)
        assert version == 4
        tcp = ip + (data[ip] & 0x0F) * 4
        for at in (tcp, tcp + 2):
            port = int.from_bytes(data[at : at + 2], "big")
            if port != 9092:
                ports.setdefault(port, len(ports))
    assert 1024 + copies * len(ports) < 65535, f"at most {(65535 - 1024) // len(ports) - 1} copies"
    span = records[-1][0] - records[0][0] + 1
    chunks = [raw[:24]]
    for k in range(copies):
        for sec, usec, orig, data in records:
            d = bytearray(data)
            ip, _ = _network_offset(bytes(d), linktype)
            tcp = ip + (d[ip] & 0x0F) * 4
            for at in (tcp, tcp + 2):
                port = int.from_bytes(d[at : at + 2], "big")
                if port != 9092:
                    new = 1024 + k * len(ports) + ports[port]
                    new += new >= 9092  # never the broker's port
                    d[at : at + 2] = new.to_bytes(2, "big")
            chunks.append(struct.pack("<IIII", sec + k * span, usec, len(d), orig) + bytes(d))
    out.write_bytes(b"".join(chunks))
    return out
