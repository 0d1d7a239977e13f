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

# ARROWKAFKA_BENCH_SMOKE=1 (tests/bench/test_asv_suite.py, with `asv run --quick`): every
# benchmark still runs, but on batches a hundred times smaller and on one value of each
# workload-like parameter, so that the whole suite takes about a minute. Its numbers mean
# nothing: never record results with it set.
SMOKE = os.environ.get("ARROWKAFKA_BENCH_SMOKE") == "1"

# name -> (file stem, message, version)
WORKLOADS = {
    "metadata_v12": ("metadata_response_v12_1t1000p", "MetadataResponse", 12),
    "metadata_v1": ("metadata_response_v1_1t1000p", "MetadataResponse", 1),
    "fetch_response_v12": ("fetch_response_v12_10t10p_1k", "FetchResponse", 12),
    "produce_request_v9": ("produce_request_v9", "ProduceRequest", 9),
    "fetch_request_v12": ("fetch_request_v12", "FetchRequest", 12),
}
COPIES = {"metadata_v12": 1000, "metadata_v1": 1000, "fetch_response_v12": 400}


def some(values: list[str], smoke: list[str]) -> list[str]:
    """A benchmark's parameter values: ``smoke`` under ARROWKAFKA_BENCH_SMOKE=1, else ``values``."""
    assert set(smoke) <= set(values)
    return smoke if SMOKE else values


def body(workload: str) -> bytes:
    stem = WORKLOADS[workload][0]
    meta = json.loads((SHARED / "vectors" / f"{stem}.json").read_text())
    assert meta["cross_checked"]["kio_roundtrip_equal"]
    return (SHARED / "vectors" / f"{stem}.bin").read_bytes()


def batch(workload: str) -> pa.BinaryArray:
    """Copies of one body totalling tens of MB (small bodies: 100,000 copies; a hundredth of
    that under ARROWKAFKA_BENCH_SMOKE=1)."""
    b = body(workload)
    copies = COPIES.get(workload, 100_000)
    return pa.array([b] * (copies // 100 if SMOKE else copies), pa.binary())


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

    from arrowkafka.traffic.packets import _network_offset

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


def scaled_capture(source: Path, gigabytes: float, same_clients: bool = False) -> Path:
    """About ``gigabytes`` GB (1e9 bytes) of classic pcap made of repetitions of ``source`` (a
    little-endian classic pcap, Ethernet, IPv4, the broker on port 9092): in repetition r each
    client address (the end whose TCP port is not 9092) becomes 10.(r >> 8).(r & 255).(n + 1),
    n numbering the source's client addresses, so every repetition's connections are its own
    (``same_clients``: 10.0.0.(n + 1) in every repetition, so the connections, clients and
    groups stay those of one repetition, each opened and closed again on the same ports);
    timestamps shifted past the previous repetition's last. Lengths unchanged, checksums not
    fixed (the decoder does not check them). Cached in the temp folder; written a repetition
    at a time (memory: the source twice), under a temporary name then renamed."""
    import struct
    import tempfile

    import numpy as np

    source = Path(source)
    same = "-same-clients" if same_clients else ""
    out = Path(tempfile.gettempdir()) / f"{source.stem}-scaled-{gigabytes:g}GB{same}-v1.pcap"
    if out.exists():
        return out
    raw = np.fromfile(source, np.uint8)
    head = raw[:24].tobytes()
    frac = {b"\xd4\xc3\xb2\xa1": 10**6, b"\x4d\x3c\xb2\xa1": 10**9}.get(head[:4])
    assert frac is not None, "little-endian classic pcap expected"
    assert struct.unpack_from("<I", head, 20)[0] & 0xFFFF == 1, "Ethernet link type expected"
    # the records: their offsets (found once, one record after the other), then arrays
    offs = []
    pos, end = 24, len(raw)
    view = memoryview(raw)
    while pos + 16 <= end:
        offs.append(pos)
        pos += 16 + struct.unpack_from("<I", view, pos + 8)[0]
    assert pos == end, f"{source}: the last record is cut"
    rec = np.array(offs, np.int64)

    def u32(at: np.ndarray) -> np.ndarray:  # little-endian uint32 at each offset
        return raw[at[:, None] + np.arange(4)].astype(np.int64) @ (1 << (8 * np.arange(4)))

    def be16(at: np.ndarray) -> np.ndarray:
        return (raw[at].astype(np.int64) << 8) | raw[at + 1]

    ts = u32(rec) * frac + u32(rec + 4)
    incl = u32(rec + 8)
    ip = rec + 16 + 14
    ipv4 = (incl >= 14 + 20) & (raw[np.minimum(rec + 28, end - 1)] == 0x08)
    ipv4 &= raw[np.minimum(rec + 29, end - 1)] == 0x00
    ipv4 &= (raw[np.minimum(ip, end - 1)] >> 4) == 4
    tcp = ip + (raw[np.minimum(ip, end - 1)] & 0x0F).astype(np.int64) * 4
    ok = ipv4 & (raw[np.minimum(ip + 9, end - 1)] == 6) & (tcp + 4 <= rec + 16 + incl)
    ip_ok, tcp_ok = ip[ok], tcp[ok]
    sport, dport = be16(tcp_ok), be16(tcp_ok + 2)
    assert ((sport == 9092) != (dport == 9092)).all(), "one end on port 9092 expected"
    client_at = np.where(sport == 9092, ip_ok + 16, ip_ok + 12)  # the client's address: dst or src
    clients, client_of = np.unique(raw[client_at[:, None] + np.arange(4)], axis=0, return_inverse=True)
    client_of = client_of.ravel()
    assert len(clients) < 255, "at most 254 client addresses"
    # offsets in the bytes after the file header, which are copied per repetition
    ip_idx = (client_at - 24)[:, None] + np.arange(4)
    ts_idx = (rec - 24)[:, None] + np.arange(8)
    # TCP sequence and acknowledgement numbers (big-endian): moved on per repetition when the
    # same ports come back, else the reassembler rightly takes the bytes for retransmissions
    seq_idx = (tcp_ok - 24 + 4)[:, None] + np.arange(4)
    ack_idx = seq_idx + 4
    seq, ack = (raw[i + 24].astype(np.int64) @ (1 << (8 * np.arange(3, -1, -1))) for i in (seq_idx, ack_idx))
    span = int(ts.max() - ts.min()) + 1
    body = raw[24:]
    reps = max(1, round(gigabytes * 1e9 / len(body)))
    # (the client addresses number the repetitions: 10.r>>8.r&255.n)
    assert same_clients or reps <= 1 << 16, "at most 65536 repetitions with new clients each"
    buf = np.empty_like(body)
    part = out.with_name(f"{out.name}.{os.getpid()}.part")
    try:
        with open(part, "wb") as f:
            f.write(head)
            for r in range(reps):
                np.copyto(buf, body)
                address = np.empty((len(clients), 4), np.uint8)
                rep = 0 if same_clients else r
                address[:] = (10, rep >> 8, rep & 255, 0)
                address[:, 3] = np.arange(1, len(clients) + 1)
                buf[ip_idx] = address[client_of]
                shifted = ts + r * span
                stamp = np.empty((len(rec), 2), "<u4")
                stamp[:, 0], stamp[:, 1] = shifted // frac, shifted % frac
                buf[ts_idx] = stamp.view(np.uint8)
                if same_clients:  # a new stretch of sequence space per repetition
                    for at, v in ((seq_idx, seq), (ack_idx, ack)):
                        buf[at] = (
                            ((v + r * 0x9E3779B1) % (1 << 32)).astype(">u4").view(np.uint8).reshape(-1, 4)
                        )
                buf.tofile(f)
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    return out
