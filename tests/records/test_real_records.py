"""Records of real traffic: the Produce requests and Fetch responses of the three real captures
(librdkafka, kafka-python, and a real Kafka 0.9.0.1 broker's message sets), decoded and checked
record for record against kafka-python's readers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from batchtools import ours, read, records_values

import arrowkafka as ak
from arrowkafka.traffic.parquet import decode_capture

ROOT = Path(__file__).resolve().parents[2]

# (capture, message) -> (records values, batches, records, {(magic, codec): batches})
EXPECTED = {
    ("tansu_confluent", "ProduceRequest"): (18, 18, 186, {(2, "none"): 14, (2, "gzip"): 1, (2, "snappy"): 1,
                                                          (2, "lz4"): 1, (2, "zstd"): 1}),
    ("tansu_confluent", "FetchResponse"): (29, 19, 187, {(2, "none"): 15, (2, "gzip"): 1, (2, "snappy"): 1,
                                                         (2, "lz4"): 1, (2, "zstd"): 1}),
    ("noida_kafka_python", "ProduceRequest"): (2, 2, 100, {(2, "gzip"): 2}),
    ("noida_kafka_python", "FetchResponse"): (3, 2, 100, {(2, "gzip"): 2}),
    ("kafka091_legacy", "ProduceRequest"): (4, 152, 190, {(0, "none"): 150, (0, "gzip"): 1, (0, "snappy"): 1}),
    ("kafka091_legacy", "FetchResponse"): (3, 152, 190, {(0, "none"): 150, (0, "gzip"): 1, (0, "snappy"): 1}),
}  # fmt: skip


@pytest.fixture(scope="module")
def decoded(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], list[bytes]]:
    out = {}
    for capture in {c for c, _ in EXPECTED}:
        folder = tmp_path_factory.mktemp(capture)
        decode_capture([shared / "captures" / f"{capture}.pcap"], folder, ak.load_specs())
        for message in ("ProduceRequest", "FetchResponse"):
            out[(capture, message)] = records_values(pq.read_table(folder / f"{message}.parquet").to_pylist())
    return out


@pytest.mark.parametrize("case", list(EXPECTED), ids=["-".join(c) for c in EXPECTED])
def test_real_records_read_as_kafka_python_reads_them(decoded: dict, case: tuple[str, str]) -> None:
    values = decoded[case]
    got = ak.decode_records(values)
    n_values, n_batches, n_records, formats = EXPECTED[case]
    assert (len(values), got.batches.num_rows, got.records.num_rows) == (n_values, n_batches, n_records)
    seen: dict[tuple[int, str], int] = {}
    for b in got.batches.select(["magic", "codec"]).to_pylist():
        seen[(b["magic"], b["codec"])] = seen.get((b["magic"], b["codec"]), 0) + 1
    assert seen == formats
    assert got.batches.column("crc_ok").to_pylist() == [True] * n_batches
    # kafka-python, value by value; batch numbers continue from value to value
    mine = ours(got)
    at = 0
    for value in values:
        _, theirs, left = read(value)
        assert left == 0
        first = mine[at]["batch"] if theirs else 0
        assert [r | {"batch": r["batch"] - first} for r in mine[at : at + len(theirs)]] == [
            r | {"batch": r["batch"] - theirs[0]["batch"]} for r in theirs
        ]
        at += len(theirs)
    assert at == n_records


def test_fetched_records_are_the_produced_ones(decoded: dict) -> None:
    # the consumer of each workload read back what its producer wrote: same keys, values, headers
    for capture in ("tansu_confluent", "noida_kafka_python", "kafka091_legacy"):
        produced = ak.decode_records(decoded[(capture, "ProduceRequest")]).records
        fetched = ak.decode_records(decoded[(capture, "FetchResponse")]).records
        cols = ["key", "value", "headers"]
        as_set = {repr(r) for r in fetched.select(cols).to_pylist()}
        assert all(repr(r) in as_set for r in produced.select(cols).to_pylist()), capture


@pytest.mark.slow
@pytest.mark.jit  # thousands of calls: the kernels' Python source is too slow for it
def test_damaged_real_records_give_typed_errors_only(decoded: dict, tmp_path: Path) -> None:
    values = [v for key in sorted(decoded) for v in decoded[key]]
    path = tmp_path / "values.arrow"
    table = pa.table({"records": pa.array(values, pa.binary())})
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table)
    child = Path(__file__).with_name("fuzz_records_child.py")
    run = subprocess.run([sys.executable, str(child), str(path), "1", "2000"], capture_output=True, text=True,
                         cwd=ROOT)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    assert counts["corrupt"] > 500 and counts["decoded"] > 1000, counts


def _kio_records(value: bytes) -> list[tuple]:
    """kio's reader (magic 2, uncompressed batches only): (offset, key, value, headers)."""
    from kio.records.readers import read_batch

    out, pos = [], 0
    while pos < len(value):
        batch, size = read_batch(memoryview(value), pos)
        out += [
            (int(r.offset), r.key, r.value, [(h.key.decode(), h.value) for h in r.headers])
            for r in batch.records
        ]
        pos += size
    return out


def test_uncompressed_real_batches_read_as_kio_reads_them(decoded: dict) -> None:
    # kio reads uncompressed magic 2 batches only: those of librdkafka's Produce and Fetch
    checked = 0
    for key in [("tansu_confluent", "ProduceRequest"), ("tansu_confluent", "FetchResponse")]:
        for value in decoded[key]:
            got = ak.decode_records([value])
            if set(got.batches.column("codec").to_pylist()) != {"none"}:
                continue
            mine = [(r["record_offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                    for r in got.records.to_pylist()]  # fmt: skip
            assert mine == _kio_records(value)
            checked += len(mine)
    assert checked == 207  # every uncompressed record of the capture, Produce and Fetch
