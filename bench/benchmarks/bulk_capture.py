"""A real capture of bulk traffic for the captures-to-Parquet benchmark: Produce requests and
Fetch responses carrying record batches, which is what most captures users decode are made of
(``big_capture`` in data.py repeats a small capture of control-plane messages, ~330 bytes a frame).

Recorded live, once, then cached in the temp folder: the Tansu broker and tcpdump on loopback,
set up by the live broker test's helpers (tests/traffic/live_env.py: tcpdump from Debian if
missing, a venv of its own with the broker and confluent-kafka), and bulk_workload.py as the
client, producing about ``MB`` megabytes of records then reading them back in a consumer group.
The capture is about 1.8 times ``MB`` (the records go both ways; a fifth are lz4-compressed).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import struct
import tempfile
import time
from pathlib import Path
from types import ModuleType

NAME = "arrowkafka-bench-bulk-v1.pcap"  # a new name when the workload changes
MB = 100  # megabytes of records produced (keys, values, headers)
PARTITIONS = 6
TOPIC = "bulk-events"
GROUP = "bulk-readers"
LIMIT = 300  # seconds for broker, capture and client together, per attempt
ATTEMPTS = 2  # a second try when the kernel dropped packets (a busy machine)
WORKLOAD = Path(__file__).with_name("bulk_workload.py")
LIVE_ENV = Path(__file__).resolve().parents[2] / "tests" / "traffic" / "live_env.py"


class CaptureUnavailable(RuntimeError):
    """The bulk capture is not cached and could not be recorded here."""


def bulk_capture() -> Path:
    """The bulk capture's path: classic pcap, Ethernet (loopback), IPv4, the broker on 9092 when
    that port is free. Recorded at the first call (10-15 s, plus installing tcpdump and
    the live venv if missing), written under a temporary name and renamed once checked, so a
    half-written capture is never taken for the cached one. Call it from the main thread: the
    recording's hard time limit is a SIGALRM. Raises CaptureUnavailable if it cannot record."""
    out = Path(tempfile.gettempdir()) / NAME
    if out.exists():
        return out
    live_env = _live_env()
    try:
        tcpdump, _ = live_env.ensure_tcpdump()
        python, _ = live_env.ensure_venv()
        tansu = live_env.tansu_binary(python)
    except Exception as e:
        raise CaptureUnavailable(f"cannot set up the live broker to record {out.name}: {e}") from e
    work = Path(tempfile.mkdtemp(prefix="arrowkafka-bench-bulk-", dir=out.parent))
    try:
        for attempt in range(1, ATTEMPTS + 1):
            pcap = work / f"attempt{attempt}.pcap"
            dropped, report = _record(live_env, tcpdump, python, tansu, pcap, work)
            if dropped == 0:
                break
            pcap.unlink()
        else:
            raise CaptureUnavailable(f"the kernel dropped packets in each of {ATTEMPTS} recordings")
        _check(pcap)
        report["pcap_bytes"] = pcap.stat().st_size
        out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")  # what the client did
        os.replace(pcap, out)  # the same file system: atomic
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _live_env() -> ModuleType:
    """tests/traffic/live_env.py, loaded from its file (the tests folder is not a package)."""
    spec = importlib.util.spec_from_file_location("arrowkafka_live_env", LIVE_ENV)
    if spec is None or spec.loader is None or not LIVE_ENV.is_file():
        raise CaptureUnavailable(f"no {LIVE_ENV}: the bulk capture is recorded with the tests' helpers")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _port(live_env: ModuleType) -> int:
    """9092 (the decoder's default broker port) if free, else any free port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", 9092))
            return 9092
        except OSError:
            return int(live_env.free_port())


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


def _record(
    live_env: ModuleType, tcpdump: str, python: Path, tansu: Path, pcap: Path, work: Path
) -> tuple[int, dict[str, object]]:
    """One recording into ``pcap``: the packets the kernel dropped (tcpdump's counts), and the
    client's report with the recording's seconds."""
    logs = {name: work / f"{name}.log" for name in ("tansu", "tcpdump", "client")}
    report = work / "report.json"
    t0 = time.monotonic()
    try:
        # leaving this block disarms the deadline first, then stops every process still running
        with contextlib.ExitStack() as cleanup, live_env.hard_deadline(LIMIT):
            port = _port(live_env)
            live_env.start_tansu(cleanup, tansu, port, logs["tansu"])
            capture = live_env.start_tcpdump(cleanup, tcpdump, port, pcap, logs["tcpdump"])
            cmd = [str(python), str(WORKLOAD), f"127.0.0.1:{port}", TOPIC, str(PARTITIONS), str(MB), GROUP,
                   str(report)]  # fmt: skip
            client = live_env.spawn(cleanup, cmd, logs["client"], signal.SIGTERM)
            if client.wait(LIMIT) != 0:
                raise RuntimeError(f"the client exited {client.returncode}:\n{_tail(logs['client'])}")
            live_env.settle(pcap)
            live_env.stop(capture, signal.SIGINT)  # SIGINT: tcpdump flushes the pcap, prints its counts
    except Exception as e:
        raise CaptureUnavailable(
            f"recording the bulk capture failed after {time.monotonic() - t0:.0f} s: "
            f"{type(e).__name__}: {e}\n"
            f"tansu: {_tail(logs['tansu'], 1000)}\ntcpdump: {_tail(logs['tcpdump'], 1000)}"
        ) from e
    done = json.loads(report.read_text())
    if done["consumed"] != done["sent"] or done["consume_errors"]:
        raise CaptureUnavailable(f"the client did not read back what it produced: {done}")
    counts = _tail(logs["tcpdump"])
    m = re.search(r"^(\d+) packets? dropped by kernel$", counts, re.M)
    if m is None:
        raise CaptureUnavailable(f"tcpdump gave no counts:\n{counts}")
    done["recording_s"] = round(time.monotonic() - t0, 1)
    return int(m.group(1)), done


def _check(pcap: Path) -> None:
    """Classic pcap, every packet whole (captured length = length on the wire), not truncated."""
    size = pcap.stat().st_size
    with open(pcap, "rb") as f:
        head = f.read(24)
        magic = head[:4]
        if len(head) < 24 or magic not in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4"):
            raise CaptureUnavailable(f"{pcap} is not a classic pcap (starts {head[:4].hex()})")
        record = struct.Struct("<IIII" if magic[0] == 0xD4 else ">IIII")
        pos, packets = 24, 0
        while pos < size:
            f.seek(pos)
            h = f.read(16)
            if len(h) < 16:
                raise CaptureUnavailable(f"{pcap}: a packet header cut at byte {pos}")
            _, _, incl, orig = record.unpack(h)
            if incl != orig:
                raise CaptureUnavailable(f"{pcap}: packet {packets} cut to {incl} of {orig} bytes")
            pos += 16 + incl
            packets += 1
    if pos != size or size < MB * 1e6:
        raise CaptureUnavailable(f"{pcap}: {size} bytes, {packets} packets: cut, or less than produced")


if __name__ == "__main__":
    t = time.monotonic()
    path = bulk_capture()
    print(f"{path}: {path.stat().st_size / 1e6:.1f} MB ({time.monotonic() - t:.0f} s)")
