"""The main job on the three real captures: every frame accounted for, the (API, version)
sets and request/response counts of the captures' README, Parquet read back by DuckDB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.cli import main
from arrowkafka.traffic import decode_capture
from arrowkafka.traffic import parquet as traffic
from tests.conftest import SHARED, writing_threads

# From ../shared/captures/README.md: requests / responses, and the (API, version) pairs seen.
CAPTURES = {
    "tansu_confluent": (123, 122, "AddPartitionsToTxn v0, ApiVersions v3, ConsumerGroupDescribe v0, CreateTopics v4, "
        "DeleteGroups v2, DeleteTopics v4, DescribeConfigs v1, EndTxn v1, Fetch v16, FindCoordinator v2, "
        "GetTelemetrySubscriptions v0, Heartbeat v3, IncrementalAlterConfigs v1, InitProducerId v4, JoinGroup v5, "
        "LeaveGroup v1, ListGroups v5, ListOffsets v7, Metadata v12, OffsetCommit v9, OffsetFetch v9, Produce v10, "
        "SyncGroup v3"),
    "noida_kafka_python": (49, 49, "ApiVersions v3, ApiVersions v4, CreateTopics v7, DeleteGroups v2, DeleteRecords v2, "
        "DeleteTopics v6, DescribeCluster v0, DescribeConfigs v4, DescribeGroups v5, Fetch v12, FindCoordinator v4, "
        "InitProducerId v4, JoinGroup v7, LeaveGroup v5, ListGroups v4, ListOffsets v8, Metadata v12, OffsetCommit v8, "
        "OffsetFetch v8, Produce v9, SyncGroup v5"),
    "kafka091_legacy": (53, 51, "Fetch v1, FindCoordinator v0, Heartbeat v0, JoinGroup v0, LeaderAndIsr v0, LeaveGroup v0, "
        "ListOffsets v0, Metadata v0, OffsetCommit v2, OffsetFetch v1, Produce v1, SyncGroup v0, UpdateMetadata v1"),
}  # fmt: skip

# What does not decode, and why; each is a real peer's oddity, kept raw in rejects.
EXPECTED_REJECTS = {
    # librdkafka sends one MetadataRequest v12 of 7 bytes, 00000000 01 00 00: read as v12 (a
    # compact topics count) it is null topics, false, false, no tags, and 3 bytes left over; it
    # parses exactly as a classic int32 topics count 0, allow_auto_topic_creation true,
    # include_topic_authorized_operations false, empty tag section: the empty topic list's
    # count written in the non-flexible form. A broker that does not check for leftover bytes
    # reads "all topics"; we keep it in rejects.
    "tansu_confluent": [("MetadataRequest", "Corrupt", "3 bytes left over after the last field")],
    # (noida answers ApiVersions v4 with an UNSUPPORTED_VERSION error in the v0 layout: those
    # decode as v0, as Kafka clients read them; see the test below)
    "noida_kafka_python": [],
    # the capture ends inside the last response
    "kafka091_legacy": [(None, "Partial", "capture end")],
}  # fmt: skip


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_capture_to_parquet(capture: str, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    requests, responses, pairs = CAPTURES[capture]
    summary = decode_capture([SHARED / "captures" / f"{capture}.pcap"], tmp_path, ak.load_specs())
    assert summary.frames_in == summary.rows + summary.rejects
    assert sum(s["requests"] for s in summary.per_api.values()) == requests
    assert sum(s["responses"] for s in summary.per_api.values()) == responses
    assert {f"{api} v{v}" for api, v in summary.per_api} == set(pairs.split(", "))
    rejects = pq.read_table(tmp_path / "rejects.parquet")
    got = [
        (r["message"], r["error"], r["reason"])
        for r in rejects.select(["message", "error", "reason"]).to_pylist()
    ]
    assert got == EXPECTED_REJECTS[capture]
    assert all(raw for raw in rejects.column("raw").to_pylist())
    # Every table is read back by a reader that did not write it, with the rows we wrote.
    for message, rows in summary.tables.items():
        path = tmp_path / f"{message}.parquet"
        assert duckdb.sql(f"SELECT count(*) FROM '{path}'").fetchall() == [(rows,)]
    total = sum(summary.tables.values())
    assert total == summary.rows


def test_responses_carry_latency_and_request_time(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    decode_capture([SHARED / "captures" / "tansu_confluent.pcap"], tmp_path, ak.load_specs())
    rows = duckdb.sql(
        f"SELECT _correlation_id, _latency_ns, epoch_ns(_ts_first) - epoch_ns(_request_ts), _client, _broker, _version, "
        f"len(responses) FROM '{tmp_path}/FetchResponse.parquet' ORDER BY _ts_first"
    ).fetchall()
    assert len(rows) == 8
    for corr, latency, diff, client, broker, version, topics in rows:
        assert topics >= 0
        assert latency > 0 and diff == latency
        assert client.startswith("127.0.0.1:") and broker == "127.0.0.1:9092" and version == 16 and corr > 0
    produced = duckdb.sql(
        f"SELECT t.name, count(*) FROM (SELECT unnest(topic_data) AS t FROM '{tmp_path}/ProduceRequest.parquet') "
        "GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert produced == [("ck-wire-a", 13), ("ck-wire-b", 5)]


def test_sample_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample", "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "frames in 245 = rows 244 + rejects 1 (all accounted for)" in out
    assert "Fetch                         16        8         8" in out
    assert (tmp_path / "out" / "FetchResponse.parquet").is_file()


def test_apiversions_error_in_the_v0_layout(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    decode_capture([SHARED / "captures" / "noida_kafka_python.pcap"], tmp_path, ak.load_specs())
    rows = duckdb.sql(
        f"SELECT _api_version, _version, error_code, len(api_keys) FROM '{tmp_path}/ApiVersionsResponse.parquet' "
        "WHERE _api_version = 4"
    ).fetchall()
    assert rows == [(4, 0, 35, 1)] * 3  # UNSUPPORTED_VERSION, listing ApiVersions 0-3


@pytest.mark.parametrize("background", [False, True], ids=["written in turn", "written in the background"])
@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_chunks_give_the_same_tables(
    capture: str, background: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read a few kilobytes at a time (frames and request/response pairs then span chunks),
    from a pipe (read once, kept on disk for the second pass), writing each chunk's rows at
    once (in the background: while the next chunk is decoded): the same rows as one chunk."""
    duckdb = pytest.importorskip("duckdb")
    path = SHARED / "captures" / f"{capture}.pcap"
    whole = decode_capture([path], tmp_path / "whole", ak.load_specs(), background=False)
    monkeypatch.setattr(traffic, "HELD_BYTES", 1)
    threads, steps = writing_threads(monkeypatch)
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat:
        assert cat.stdout is not None
        parts = decode_capture(
            [cat.stdout], tmp_path / "parts", ak.load_specs(), chunk_bytes=4096, background=background
        )
    assert threads == {"arrowkafka-parquet_0" if background else "MainThread"}
    assert len(steps) > 1
    assert (parts.frames_in, parts.rows, parts.rejects) == (whole.frames_in, whole.rows, whole.rejects)
    assert parts.tables == whole.tables
    for message in whole.tables:
        groups = pq.ParquetFile(tmp_path / "parts" / f"{message}.parquet").metadata.num_row_groups
        rows = [duckdb.sql(f"SELECT * EXCLUDE (_capture) FROM '{d}/{message}.parquet' ORDER BY ALL").fetchall()
                for d in (tmp_path / "whole", tmp_path / "parts")]  # fmt: skip
        assert rows[0] == rows[1], message
        names = {
            c
            for (c,) in duckdb.sql(
                f"SELECT DISTINCT _capture FROM '{tmp_path}/whole/{message}.parquet'"
            ).fetchall()
        }
        assert names == {str(path)}, message  # which capture each row came from
        assert groups >= 1
    more = [
        m
        for m in whole.tables
        if pq.ParquetFile(tmp_path / "parts" / f"{m}.parquet").metadata.num_row_groups > 1
    ]
    assert more  # some table really was written in several chunks
    rejects = [pq.read_table(tmp_path / d / "rejects.parquet").drop_columns(["capture"]).to_pylist()
               for d in ("whole", "parts")]  # fmt: skip
    assert sorted(map(str, rejects[0])) == sorted(map(str, rejects[1]))


def test_a_write_that_fails_in_the_background_fails_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error the writer's thread met is the job's, and the job's tables go, as when it
    writes in turn (the CLI then names the file and the reason)."""
    write_table = pq.ParquetWriter.write_table
    calls = []

    def full_disk(self: pq.ParquetWriter, table: object, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 5:
            raise OSError(28, "No space left on device", str(self.where))
        write_table(self, table, *args, **kwargs)

    path = SHARED / "captures" / "tansu_confluent.pcap"
    monkeypatch.setattr(pq.ParquetWriter, "write_table", full_disk)
    monkeypatch.setattr(traffic, "HELD_BYTES", 1)
    with pytest.raises(OSError, match="No space left on device"):
        decode_capture([path], tmp_path / "out", ak.load_specs(), chunk_bytes=65536, background=True)
    assert list((tmp_path / "out").iterdir()) == []
    assert len(calls) == 5  # no write after the one that failed ...
    monkeypatch.setattr(pq.ParquetWriter, "write_table", lambda *a, **k: calls.append(1))
    decode_capture([path], tmp_path / "whole", ak.load_specs(), chunk_bytes=65536, background=True)
    assert len(calls) > 10  # ... of a job that had more to write


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_counts_match_an_independent_census(capture: str) -> None:
    """Per (API, version, direction), our frames agree with the reference material's own
    minimal census of the capture (../shared/traffic/kafka_pcap_truth.py: sequence-number
    reassembly, size-prefix split, header read), which shares no code with ours."""
    path = SHARED / "captures" / f"{capture}.pcap"
    out = subprocess.run([sys.executable, str(SHARED / "traffic" / "kafka_pcap_truth.py"), str(path)],
                         check=True, capture_output=True, text=True)  # fmt: skip
    theirs = {(r["api"], r["version"], r["dir"]): r["count"] for r in json.loads(out.stdout)}
    summary = decode_capture([path], None, ak.load_specs())
    ours = {
        (api, version, direction): s[direction + "s"]
        for (api, version), s in summary.per_api.items()
        for direction in ("request", "response")
        if s[direction + "s"]
    }
    assert ours == theirs


def test_payloads_are_written_without_dictionaries(tmp_path: Path) -> None:
    """Names repeat and get a dictionary; payloads (records fields, record keys, values and
    header values) do not: a dictionary there costs time and saves nothing."""
    decode_capture([SHARED / "captures" / "tansu_confluent.pcap"], tmp_path, ak.load_specs())

    def dictionary_columns(table: str) -> dict[str, bool]:
        meta = pq.ParquetFile(tmp_path / f"{table}.parquet").metadata
        group = meta.row_group(0)
        return {
            group.column(i).path_in_schema: any("DICTIONARY" in e for e in group.column(i).encodings)
            for i in range(meta.num_columns)
        }

    records = dictionary_columns("records")
    assert not records["key"] and not records["value"] and not records["headers.list.element.value"]
    assert records["topic"] and records["headers.list.element.key"] and records["_client_id"]
    produce = dictionary_columns("ProduceRequest")
    assert not produce["topic_data.list.element.partition_data.list.element.records"]
    assert produce["topic_data.list.element.name"]
