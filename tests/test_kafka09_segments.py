"""Segments written by a real Apache Kafka 0.9.0.1 broker (magic 0, every codec it has: the
broker itself compresses them, gzip with Java's GZIPOutputStream, snappy in xerial framing, lz4
in its own frame with the KAFKA-3160 header checksum), decoded by ``arrowkafka segments`` and
checked against Kafka's own ``DumpLogSegments`` on the same files, batch for batch and record
for record; its ``__consumer_offsets`` segments come out typed."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from kafka09 import Broker

from arrowkafka.segments import decode_segments

CODECS = {"none": "NoCompressionCodec", "gzip": "GZIPCompressionCodec", "snappy": "SnappyCompressionCodec",
          "lz4": "LZ4CompressionCodec"}  # fmt: skip
GROUP = "seg-group"
LINE = re.compile(
    r"^offset: (?P<offset>\d+) position: (?P<position>\d+) isvalid: (?P<valid>\w+)"
    r" payloadsize: (?P<size>-?\d+) magic: (?P<magic>\d) compresscodec: (?P<codec>\w+) crc: (?P<crc>\d+)"
    r"(?: keysize: (?P<keysize>\d+)(?: key: (?P<key>.*?))?)?(?: payload: (?P<payload>.*))?$"
)


def _value(codec: str, i: int) -> bytes:
    return (f"{codec} value {i} " * (1 + i % 5)).encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("kafka09"))
    try:
        with warnings.catch_warnings():  # kafka-python's package import uses a deprecated importlib call
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaConsumer, KafkaProducer
        for codec in CODECS:
            p = KafkaProducer(bootstrap_servers=b.bootstrap, api_version=(0, 9), linger_ms=50,
                              compression_type=None if codec == "none" else codec)  # fmt: skip
            sent = [p.send(f"seg-{codec}", key=f"k{i}".encode() if i % 4 else None, value=_value(codec, i))
                    for i in range(120)]  # fmt: skip
            p.flush(30)
            p.close(5)
            assert all(f.succeeded() for f in sent), codec
        c = KafkaConsumer("seg-gzip", group_id=GROUP, bootstrap_servers=b.bootstrap, api_version=(0, 9),
                          auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=3000,
                          session_timeout_ms=6000, heartbeat_interval_ms=1000)  # fmt: skip
        got, end = 0, time.time() + 60
        while got < 120 and time.time() < end:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        c.commit()
        c.close()
        assert got == 120
    finally:
        b.stop()
    yield b


@pytest.fixture(scope="module")
def decoded(broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    summary = decode_segments([broker.logs], out)
    assert summary.rejects == 0 and not summary.partial and not summary.unread
    return out


def _dump(broker: Broker, segment: Path) -> list[dict[str, str]]:
    rows = []
    for line in broker.dump_log_segments(segment).splitlines():
        if line.startswith("offset:"):
            m = LINE.match(line)
            assert m, line
            rows.append(m.groupdict())
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("codec", list(CODECS))
def test_segments_of_a_real_broker_read_as_dump_log_segments_reads_them(
    broker: Broker, decoded: Path, codec: str
) -> None:
    segment = next((broker.logs / f"seg-{codec}-0").glob("*.log"))
    records = _read_as_dump_reads(broker, decoded, segment)
    if codec != "none":
        batches = pq.read_table(decoded / "record_batches.parquet").to_pylist()
        assert {b["codec"] for b in batches if b["file"] == str(segment)} == {codec}  # the broker's own
    assert [r["value"] for r in records] == [_value(codec, i) for i in range(120)]


@pytest.mark.slow
def test_the_bundled_sample_segments_read_as_dump_log_segments_reads_them(
    broker: Broker, tmp_path: Path
) -> None:
    """arrowkafka/data/segments (``arrowkafka sample --segments``): another run of this broker's."""
    from importlib.resources import files

    logs = Path(str(files("arrowkafka.data").joinpath("segments")))
    summary = decode_segments([logs], tmp_path)
    assert summary.rejects == 0 and summary.records == 123
    for segment in sorted(logs.glob("orders-*/*.log")):  # (__consumer_offsets: binary, typed elsewhere)
        assert len(_read_as_dump_reads(broker, tmp_path, segment)) == 30, segment


def _read_as_dump_reads(broker: Broker, decoded: Path, segment: Path) -> list[dict[str, object]]:
    """The segment's batches and records in ``decoded``, held to DumpLogSegments's lines for it
    -> its records."""
    batches = [
        b for b in pq.read_table(decoded / "record_batches.parquet").to_pylist() if b["file"] == str(segment)
    ]
    records = [r for r in pq.read_table(decoded / "records.parquet").to_pylist() if r["file"] == str(segment)]
    # shallow: one line per message as stored (a compressed wrapper is one), its last offset
    shallow = _dump_shallow(broker, segment)
    assert [(b["last_offset"], b["position"], b["crc"], b["crc_ok"], b["magic"], CODECS[b["codec"]])
            for b in batches] == [(int(d["offset"]), int(d["position"]), int(d["crc"]), d["valid"] == "true",
                                   int(d["magic"]), d["codec"]) for d in shallow]  # fmt: skip
    # deep: every record
    deep = _dump(broker, segment)
    assert [(r["record_offset"], r["key"], r["value"]) for r in records] == [
        (int(d["offset"]), None if d["key"] is None else d["key"].encode(), (d["payload"] or "").encode())
        for d in deep
    ]
    return records


def _dump_shallow(broker: Broker, segment: Path) -> list[dict[str, str]]:
    import subprocess

    run = subprocess.run([*broker.java, "kafka.tools.DumpLogSegments", "--files", str(segment)],
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return [m.groupdict() for line in run.stdout.splitlines() if (m := LINE.match(line))]


@pytest.mark.slow
def test_consumer_offsets_of_a_real_broker_come_out_typed(decoded: Path) -> None:
    commits = pq.read_table(decoded / "consumer_offsets.OffsetCommit.parquet").to_pylist()
    mine = [c for c in commits if c["key"]["group"] == GROUP]
    assert [(c["key"]["topic"], c["key"]["partition"], c["value"]["offset"]) for c in mine][-1:] == [
        ("seg-gzip", 0, 120)]  # fmt: skip
    groups = pq.read_table(decoded / "consumer_offsets.GroupMetadata.parquet").to_pylist()
    assert any(g["key"]["group"] == GROUP for g in groups)
