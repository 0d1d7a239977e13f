"""Captures decoded on Spark (arrowkafka.spark.decode_captures) give the CLI's tables: read
back by pyarrow, every message type's table and the record tables have the CLI's columns and
types (in Spark's types: unsigned widened, uuid as 16 bytes, microsecond timestamps) and the
same rows, batch ids included; the rejects are the same; frames in = rows + rejects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
import arrowkafka.report as rep
from arrowkafka.cli import main
from arrowkafka.spark import decode_captures, spark_arrow_type
from arrowkafka.traffic import decode_capture
from tests.conftest import SHARED
from tests.test_output import codecs_of
from tests.traffic.capwriters import controller_fetch_capture

pytestmark = [pytest.mark.spark, pytest.mark.filterwarnings("ignore")]


def canonical(t: pa.DataType) -> pa.DataType:
    """``t`` with what Parquet writers name differently made equal: list items are "item",
    every field nullable (Spark writes every column nullable)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, canonical(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(canonical(t.key_type), canonical(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(canonical(t.value_type))
    return t


def in_spark_types(table: pa.Table) -> pa.Table:
    """The CLI's table as Spark holds it (microseconds: the truncation Spark makes)."""
    cols = [c.combine_chunks().cast(spark_arrow_type(c.type), safe=False) for c in table.columns]
    return pa.table(cols, names=table.column_names)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows in a stable order (a key that orders frames, then the whole row)."""
    keyed = [(r.get("_client") or r.get("client"), r.get("_ts_first") or r.get("ts"), repr(r), r)
             for r in table.to_pylist()]  # fmt: skip
    return [k[-1] for k in sorted(keyed, key=lambda k: (str(k[0]), str(k[1]), k[2]))]


def assert_same_tables(spark_out: Path, cli_out: Path) -> list[str]:
    """Every table the CLI wrote, Spark wrote with the same columns, types and rows; the names."""
    written = sorted(p.name for p in spark_out.iterdir())
    assert written == sorted(p.name for p in cli_out.iterdir())
    for name in written:
        want = in_spark_types(pq.read_table(cli_out / name))
        got = pq.read_table(spark_out / name)  # a folder of Spark's parts
        assert got.column_names == want.column_names, name
        assert [canonical(t) for t in got.schema.types] == [canonical(t) for t in want.schema.types], name
        column = "capture" if name == "rejects.parquet" else "_capture"
        if column in want.column_names:  # Spark names each file by its URI
            at = want.column_names.index(column)
            want = want.set_column(at, column, pa.array(["file:" + c for c in want[column].to_pylist()]))
        assert rows(got) == rows(want), name
    return written


def test_captures_equal_the_cli(spark: Any, tmp_path: Path) -> None:
    paths = sorted(str(p) for p in (SHARED / "captures").glob("*.pcap"))
    assert len(paths) == 3
    key = "spark.sql.parquet.compression.codec"
    before = spark.conf.get(key)
    spark.conf.set(key, "gzip")  # no compression asked: the session's codec
    try:
        summary = decode_captures(spark, paths, tmp_path / "spark")
    finally:
        spark.conf.set(key, before)
    assert codecs_of(tmp_path / "spark") == {"GZIP"}
    cli = decode_capture(paths, tmp_path / "cli", ak.load_specs())

    assert summary.frames_in == cli.frames_in == summary.rows + summary.rejects
    assert (summary.rows, summary.rejects) == (cli.rows, cli.rejects)
    assert summary.tables == cli.tables
    assert (summary.record_batches, summary.records, summary.record_rejects) == (
        cli.record_batches, cli.records, cli.record_rejects)  # fmt: skip
    assert summary.records > 0
    written = assert_same_tables(tmp_path / "spark", tmp_path / "cli")
    assert {"record_batches.parquet", "records.parquet", "record_markers.parquet"} <= set(written)
    for name in written:
        assert pq.read_table(tmp_path / "spark" / name).num_rows > 0, name
    # both kinds of rejects come through: a partial frame (stage 1) and a body that does not decode
    errors = pq.read_table(tmp_path / "spark" / "rejects.parquet").column("error").to_pylist()
    assert sorted(errors) == ["Corrupt", "Partial"]
    # decode_frames' rule holds: ApiVersions v4 answered in the v0 error layout is read as v0
    versions = pq.read_table(tmp_path / "spark" / "ApiVersionsResponse.parquet").column("_version")
    assert 0 in versions.to_pylist()
    # Fetch v16 names its topics by id only: their names come from Metadata responses
    fetched = pq.read_table(tmp_path / "spark" / "records.parquet").filter(pc.field("_version") == 16)
    assert fetched.num_rows and fetched.column("topic").null_count == 0
    # the capture report reads Spark's folders of parts as it reads the CLI's files: every table
    # of every section the same, and the command writes the page
    for section, tables in rep.SECTIONS.items():
        for table in tables:
            got, want = table(tmp_path / "spark"), table(tmp_path / "cli")
            assert got.num_rows == want.num_rows and got.to_pylist() == want.to_pylist(), (section, table)
    assert main(["report", str(tmp_path / "spark")]) == 0
    assert "Committed offsets" in (tmp_path / "spark" / "report.html").read_text()


def test_records_chunk_by_chunk_with_a_rejected_batch(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 16 KB and Arrow batches of 50 rows (a chunk's frames over several batches, its
    topic names learned chunk by chunk), a damaged batch, no payloads, a controller's Fetch of
    KRaft control records, and batch id offsets by the join that many captures take: still
    the CLI's tables."""
    monkeypatch.setattr("arrowkafka.spark.captures._MAP_CAPTURES", 0)
    specs = ak.load_specs()
    noida = SHARED / "captures" / "noida_kafka_python.pcap"
    decode_capture([noida], tmp_path / "noida", specs)
    produce = pq.read_table(tmp_path / "noida" / "ProduceRequest.parquet").to_pylist()
    records = produce[0]["topic_data"][0]["partition_data"][0]["records"]
    pcap = noida.read_bytes()
    at = pcap.index(records) + 100  # inside the batch's compressed records: its CRC fails
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(pcap[:at] + bytes([pcap[at] ^ 0xFF]) + pcap[at + 1 :])
    controller = tmp_path / "controller.pcap"
    controller.write_bytes(controller_fetch_capture(SHARED))
    paths = sorted([str(damaged), str(SHARED / "captures" / "tansu_confluent.pcap"), str(controller)])

    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "50")
    try:
        summary = decode_captures(spark, paths, tmp_path / "spark", payloads=False, chunk_bytes=16 << 10,
                                  compression="lz4")  # fmt: skip
    finally:
        spark.conf.set(key, before)
    cli = decode_capture(
        paths, tmp_path / "cli", specs, payloads=False, chunk_bytes=16 << 10, compression="lz4"
    )
    # the codec asked for: Spark's lz4_raw is pyarrow's lz4
    assert codecs_of(tmp_path / "spark") == codecs_of(tmp_path / "cli") == {"LZ4_RAW"}

    assert (summary.frames_in, summary.rows, summary.rejects) == (cli.frames_in, cli.rows, cli.rejects)
    assert (summary.record_batches, summary.records, summary.record_rejects) == (
        cli.record_batches, cli.records, 1)  # fmt: skip
    assert summary.control == cli.control == {
        "record_control.LeaderChangeMessage": 1, "record_control.VotersRecord": 1}  # fmt: skip
    written = assert_same_tables(tmp_path / "spark", tmp_path / "cli")
    assert "record_control.VotersRecord.parquet" in written
    (voters,) = pq.read_table(tmp_path / "spark" / "record_control.VotersRecord.parquet").to_pylist()
    assert voters["voters"][0]["voter_directory_id"] == bytes(range(16))  # a uuid, as its 16 bytes
    got = pq.read_table(tmp_path / "spark" / "records.parquet")
    assert "key" not in got.column_names and "value_size" in got.column_names
    rejects = pq.read_table(tmp_path / "spark" / "rejects.parquet").to_pylist()
    (reject,) = [r for r in rejects if r["message"] == "ProduceRequest"]
    assert reject["reason"].startswith("CRC-32C mismatch")
    assert reject["capture"] == "file:" + str(damaged)
    # no record bytes anywhere: none in the reject, no records fields in the message tables
    assert reject["raw"] is None
    for message in ("ProduceRequest", "FetchResponse"):
        schema = pq.read_schema(next((tmp_path / "spark" / f"{message}.parquet").glob("*.parquet")))
        assert "records: binary" not in str(schema) and "partition" in str(schema)


def test_topic_ids_are_named_from_chunks_up_to_their_own() -> None:
    """The tasks' functions, without Spark: the survey finds the topic ids Metadata responses
    name and the chunk that first named them, and a Fetch v16 response's records take a name
    only from chunks up to their own, as the CLI learns names."""
    from arrowkafka.spark.captures import _CaptureFrames, _DecodeFrames, _Survey

    path = SHARED / "captures" / "tansu_confluent.pcap"
    uri = "file:" + str(path)
    files = pa.RecordBatch.from_pylist([{"path": uri, "content": path.read_bytes()}])
    frames = list(_CaptureFrames((9092,), (), 4 << 10)(iter([files])))
    assert len({c for b in frames for c in b.column("_chunk").to_pylist() if c is not None}) > 1
    first: dict[tuple[bytes, str], int] = {}
    for row in (r for b in _Survey(())(iter(frames)) for r in b.to_pylist() if r["topic_id"] is not None):
        key = (row["topic_id"], row["name"])
        first[key] = min(first.get(key, row["_chunk"]), row["_chunk"])
    assert {name for _, name in first} >= {"ck-wire-a", "ck-wire-b"}
    messages = tuple(sorted({m for b in frames for m in b.column("_message").to_pylist() if m}))

    def fetched_topics(later: int) -> list[str | None]:
        names = {uri: sorted((chunk + later, tid, name) for (tid, name), chunk in first.items())}
        out = _DecodeFrames(messages, (), names, records=True)(iter(frames))
        rows = [r["records"] for b in out for r in b.to_pylist() if r["_message"] == "records"]
        return [r["topic"] for r in rows if r["_message"] == "FetchResponse"]

    assert len(fetched_topics(0)) == 187 and None not in fetched_topics(0)
    assert set(fetched_topics(1000)) == {None}  # named only in later chunks: not known yet


def test_an_earlier_run_is_refused_or_replaced_on_purpose(spark: Any, tmp_path: Path) -> None:
    """As the CLI: a folder holding an earlier run's tables is refused before anything is read
    (a table this run does not write would be left beside the new ones); overwrite=True
    replaces them, and nothing else of the folder's."""
    out = tmp_path / "spark"
    legacy, sample = (str(SHARED / "captures" / f"{c}.pcap") for c in ("kafka091_legacy", "tansu_confluent"))
    decode_captures(spark, [legacy], out)
    assert (out / "LeaderAndIsrRequest.parquet").is_dir()  # (only the 0.9 broker's capture has it)
    (out / "mine.parquet").write_bytes(b"a table of the user's own")
    with pytest.raises(ValueError, match=r"holds \d+ tables of an earlier run"):
        decode_captures(spark, [sample], out)
    decode_captures(spark, [sample], out.as_uri(), overwrite=True)
    assert not (out / "LeaderAndIsrRequest.parquet").exists()
    assert (out / "mine.parquet").read_bytes() == b"a table of the user's own"
    assert (out / "FetchResponse.parquet").is_dir()
