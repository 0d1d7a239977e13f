"""The capture job writes the records of Produce requests and Fetch responses, linked to their
frame and partition: record_batches, records, record_markers; a damaged batch is a row of
rejects that names its topic, partition and byte, and keeps its bytes."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka.cli import main
from arrowkafka.traffic.columns import TABLE_COLUMNS
from arrowkafka.traffic.parquet import decode_capture
from arrowkafka.traffic.records import records_of
from arrowkafka.traffic.topic_names import learn_topic_names, name_topics, named_schema
from tests.records.batchtools import Rec, build, rewrap_v2
from tests.traffic.capwriters import controller_fetch_capture

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ("tansu_confluent", "noida_kafka_python", "kafka091_legacy")
# records per (capture, message), as tests/records/test_real_records.py checks them against kafka-python
RECORDS = {
    ("tansu_confluent", "ProduceRequest"): 186,
    ("tansu_confluent", "FetchResponse"): 187,
    ("noida_kafka_python", "ProduceRequest"): 100,
    ("noida_kafka_python", "FetchResponse"): 100,
    ("kafka091_legacy", "ProduceRequest"): 190,
    ("kafka091_legacy", "FetchResponse"): 190,
}


@pytest.fixture(scope="module")
def out(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folders = {}
    for capture in CAPTURES:
        folders[capture] = tmp_path_factory.mktemp(capture)
        decode_capture([shared / "captures" / f"{capture}.pcap"], folders[capture], ak.load_specs())
    return folders


def test_records_of_every_produce_and_fetch(out: dict[str, Path]) -> None:
    for capture, folder in out.items():
        counts = dict(
            duckdb.sql(f"SELECT _message, count(*) FROM '{folder}/records.parquet' GROUP BY 1").fetchall()
        )
        assert counts == {m: n for (c, m), n in RECORDS.items() if c == capture}, capture
        # every record's batch is in record_batches, with the same link columns
        orphans = duckdb.sql(
            f"SELECT count(*) FROM '{folder}/records.parquet' r ANTI JOIN '{folder}/record_batches.parquet' b"
            " ON r.batch_id = b.batch_id AND r._client = b._client AND r._correlation_id = b._correlation_id"
            " AND r._message = b._message AND r.topic IS NOT DISTINCT FROM b.topic AND r.partition = b.partition"
        ).fetchall()[0]
        assert orphans == (0,)
        crc = duckdb.sql(
            f"SELECT bool_and(crc_ok), count(*) FROM '{folder}/record_batches.parquet'"
        ).fetchall()[0]
        assert crc[0] is True and crc[1] > 0


def test_records_are_linked_to_their_frame_and_partition(out: dict[str, Path]) -> None:
    folder = out["tansu_confluent"]
    produce = pq.read_table(folder / "ProduceRequest.parquet").to_pylist()
    expected: dict[tuple, int] = {}  # (client, correlation id, topic, partition) -> records of that field
    for row in produce:
        for t in row["topic_data"]:
            for p in t["partition_data"]:
                n = ak.decode_records([p["records"]]).records.num_rows
                key = (row["_client"], row["_correlation_id"], t["name"], p["index"])
                expected[key] = expected.get(key, 0) + n
    got = duckdb.sql(
        f"SELECT _client, _correlation_id, topic, partition, count(*) FROM '{folder}/records.parquet'"
        " WHERE _message = 'ProduceRequest' GROUP BY ALL"
    ).fetchall()
    assert {(cl, c, t, p): n for cl, c, t, p, n in got} == {k: n for k, n in expected.items() if n}
    clients = duckdb.sql(
        f"SELECT DISTINCT _client_id FROM '{folder}/records.parquet' WHERE _message = 'ProduceRequest'"
    )
    assert clients.fetchall() == [("rdkafka",)]

    # Fetch v16 names topics by id: the name comes from what the capture's Metadata responses said
    def raw(uuid: Any) -> bytes:  # a uuid as Parquet readers hand it out: a UUID object or bytes
        return uuid.bytes if hasattr(uuid, "bytes") else bytes(uuid)

    metadata = pq.read_table(folder / "MetadataResponse.parquet").to_pylist()
    by_id = {
        raw(t["topic_id"]): t["name"]
        for row in metadata
        for t in row["topics"]
        if raw(t["topic_id"]) != bytes(16)
    }
    fetched = duckdb.sql(
        f"SELECT topic_id, topic, count(*) FROM '{folder}/records.parquet' WHERE _message = 'FetchResponse' GROUP BY ALL"
    ).fetchall()
    assert sum(n for _, _, n in fetched) == 187
    assert all(topic == by_id[raw(tid)] for tid, topic, _ in fetched)
    assert {topic for _, topic, _ in fetched} == {"ck-wire-a", "ck-wire-b"}


def test_fetch_tables_name_topics_sent_by_id(out: dict[str, Path]) -> None:
    """Fetch v13+ carries topic ids only: the message tables name them as the records do."""
    folder = out["tansu_confluent"]
    for table, column in (("FetchResponse", "responses"), ("FetchRequest", "topics")):
        got = duckdb.sql(
            f"SELECT _version, t.topic, t.topic_id, count(*) FROM (SELECT _version, unnest({column}) t"
            f" FROM '{folder}/{table}.parquet') GROUP BY ALL"
        ).fetchall()
        v16 = {(name, bytes(tid)) for v, name, tid, _ in got if v == 16}
        assert {name for name, _ in v16} >= {"ck-wire-a", "ck-wire-b"}, got
        # a name only where the capture paired that id with it; none is ''
        assert all(name is None for name, tid in v16 if tid == bytes(16)), v16
        assert "" not in {name for _, name, _, _ in got}
    # the same names as the records tables give the same (frame, partition)
    mismatched = duckdb.sql(
        f"""SELECT count(*) FROM (SELECT _client, _correlation_id, t.topic_id tid, t.topic topic
        FROM (SELECT _client, _correlation_id, unnest(responses) t FROM '{folder}/FetchResponse.parquet'
        WHERE _version = 16)) f JOIN '{folder}/records.parquet' r USING (_client, _correlation_id)
        WHERE r._message = 'FetchResponse' AND r.topic_id = f.tid AND r.topic IS DISTINCT FROM f.topic"""
    ).fetchall()
    assert mismatched == [(0,)]
    # Fetch v12 and older carry the name itself: kept as sent
    v12 = duckdb.sql(
        f"SELECT DISTINCT t.topic FROM (SELECT unnest(responses) t FROM '{out['noida_kafka_python']}"
        "/FetchResponse.parquet')"
    ).fetchall()
    assert v12 == [("ndp-wire-a",)]


# a FetchResponse v13 body: throttle, error, session; one topic by id (0x11 * 16) with no
# partitions and no tags; no tags
NAMED_BODY = bytes.fromhex("0000000000000000000002" + "11" * 16 + "010000")


def test_name_topics_null_where_the_capture_never_said() -> None:
    specs = ak.load_specs()
    tables = decode_frames_like(specs, NAMED_BODY)
    named = name_topics(tables, specs, "FetchResponse", {bytes([0x11] * 16): "orders"})
    assert [t["topic"] for t in named.column("responses").to_pylist()[0]] == ["orders"]
    unnamed = name_topics(tables, specs, "FetchResponse", {})
    assert [t["topic"] for t in unnamed.column("responses").to_pylist()[0]] == [None]
    assert named.schema == unnamed.schema == named_schema(specs, "FetchResponse")


def test_kraft_control_records_in_a_fetch_response() -> None:
    """A controller's Fetch of the metadata log carries KRaft control records: they come out
    through their spec, linked to their frame and partition as records are."""
    specs = ak.load_specs()
    change = pa.table({"version": pa.array([0], pa.int16()), "leader_id": pa.array([3], pa.int32()),
                       "voters": [[{"voter_id": 3}]], "granting_voters": [[{"voter_id": 3}]]})  # fmt: skip
    value = ak.encode(change, "LeaderChangeMessage", 0)[0].as_py()
    batch = rewrap_v2(build(2, 0, [Rec(struct.pack(">hh", 0, 2), value, [], 0)], offset=41), attributes=0x20)
    response = pa.Table.from_pylist([{"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "__cluster_metadata", "partitions": [{"partition_index": 0, "records": batch}]}]}])  # fmt: skip
    body = ak.encode(response, "FetchResponse", 12)
    decoded = pa.Table.from_batches([specs.decode(body, "FetchResponse", 12, all_versions=True)])
    frame = pa.Table.from_pylist([{"_capture": "c.pcap", "_client": "10.0.0.1:5000", "_broker": "10.0.0.2:9093",
                                   "_ts_first": 1, "_ts_last": 2, "_size": 100, "_correlation_id": 7,
                                   "_api_version": 12, "_header_tags": []}], schema=pa.schema(TABLE_COLUMNS))  # fmt: skip
    table = pa.Table.from_arrays(
        [*frame.columns, *decoded.columns], names=[*frame.column_names, *decoded.column_names]
    )
    got = records_of(table, "FetchResponse", 5, True, "c.pcap", {})
    (row,) = got.control["LeaderChangeMessage"].to_pylist()
    assert (row["_client"], row["_correlation_id"], row["topic"], row["partition"]) == (
        "10.0.0.1:5000", 7, "__cluster_metadata", 0)  # fmt: skip
    assert (row["batch_id"], row["record_offset"], row["leader_id"]) == (5, 41, 3)
    assert got.markers.column("type").to_pylist() == ["LEADER_CHANGE"]


def test_kraft_control_records_of_a_capture_are_written(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A controller's Fetch of the metadata log, captured: the command writes its KRaft control
    records to ``record_control.<Spec>`` tables, each row linked to its frame, partition, batch
    and record offset; the markers and data records come out as ever."""
    capture = tmp_path / "controller.pcap"
    capture.write_bytes(controller_fetch_capture(shared))
    out = tmp_path / "out"
    assert main(["decode", str(capture), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert (
        "KRaft control records: record_control.LeaderChangeMessage 1, record_control.VotersRecord 1" in said
    )
    assert "the record tables, 2 of KRaft control records and rejects.parquet" in said
    written = sorted(p.name for p in out.glob("record_control.*"))
    assert written == ["record_control.LeaderChangeMessage.parquet", "record_control.VotersRecord.parquet"]
    (change,) = pq.read_table(out / written[0]).to_pylist()
    assert (change["_client"], change["_broker"], change["_correlation_id"], change["_version"]) == (
        "127.0.0.1:40000", "127.0.0.1:9092", 7, 12)  # fmt: skip
    assert (change["topic"], change["partition"], change["batch_id"], change["record_offset"]) == (
        "__cluster_metadata", 0, 0, 41)  # fmt: skip
    assert change["leader_id"] == 3 and [v["voter_id"] for v in change["voters"]] == [3]
    (voters,) = pq.read_table(out / written[1]).to_pylist()
    assert (voters["batch_id"], voters["record_offset"]) == (0, 42)
    (voter,) = voters["voters"]
    assert voter["voter_directory_id"] == bytes(range(16)) and voter["endpoints"][0]["port"] == 9093
    markers = pq.read_table(out / "record_markers.parquet").column("type").to_pylist()
    assert markers == ["LEADER_CHANGE", "KRAFT_VOTERS"]
    records = pq.read_table(out / "records.parquet").to_pylist()
    assert [(r["batch_id"], r["record_offset"]) for r in records] == [(0, 41), (0, 42), (1, 43), (1, 44)]
    assert [r["value"] for r in records if r["batch_id"] == 1] == [b"v1", b"v2"]


def test_a_group_whose_every_body_was_rejected() -> None:
    # decode keeps an empty table for such a group; its uuid columns cannot be combined, which
    # once let pyarrow's "extension" error out of the command (found by tests/fuzz)
    specs = ak.load_specs()
    for message in ("MetadataResponse", "FetchResponse"):
        empty = pa.Table.from_batches([], schema=specs.arrow_schema(message))  # no chunks
        names: dict[bytes, str] = {}
        learn_topic_names({message: [empty]}, names)
        assert names == {}
    empty = pa.Table.from_batches(
        [], schema=pa.schema([*TABLE_COLUMNS, *specs.arrow_schema("FetchResponse")])
    )
    got = records_of(empty, "FetchResponse", 0, True, "x.pcap", {})
    assert (got.batches.num_rows, got.records.num_rows, got.rejects.num_rows) == (0, 0, 0)
    assert name_topics(empty, specs, "FetchResponse", {}).num_rows == 0


def test_each_capture_names_its_own_topics(shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one run over two captures: the second starts with no names (a topic id is named only by
    # what its own capture said, as in the Spark job, which keys names by capture)
    import arrowkafka.traffic.parquet as job

    seen: list[tuple[str, int]] = []
    real = job.learn_topic_names

    def spy(tables: Any, names: dict[bytes, str]) -> None:
        seen.append(
            (next(iter(tables.values()))[0].column("_capture")[0].as_py() if tables else "", len(names))
        )
        real(tables, names)

    monkeypatch.setattr(job, "learn_topic_names", spy)
    first, second = (
        str(shared / "captures" / f"{c}.pcap") for c in ("tansu_confluent", "noida_kafka_python")
    )
    decode_capture([first, second], None, ak.load_specs())
    firsts = {}
    for capture, known in seen:
        firsts.setdefault(capture, known)
    assert firsts == {first: 0, second: 0}, seen


def test_name_topics_over_a_null_list_that_spans_values() -> None:
    # a null list whose offsets still span values (Arrow allows it; other writers leave them)
    specs = ak.load_specs()
    t = decode_frames_like(specs, NAMED_BODY)
    t = pa.concat_tables([t, t, t]).combine_chunks()
    col = t.column("responses").chunk(0)
    masked = pa.ListArray.from_arrays(col.offsets, col.values, mask=pa.array([False, True, False]))
    t = t.set_column(t.schema.get_field_index("responses"), "responses", masked)
    got = name_topics(t, specs, "FetchResponse", {bytes([0x11] * 16): "orders"}).column("responses")
    assert [None if r is None else [x["topic"] for x in r] for r in got.to_pylist()] == [
        ["orders"], None, ["orders"]]  # fmt: skip


def decode_frames_like(specs: Any, body: bytes) -> Any:
    """One FetchResponse v13 body in the all-versions schema, as the capture job decodes it."""
    import pyarrow as pa

    batch = specs.decode([body], "FetchResponse", 13, all_versions=True)
    return pa.Table.from_batches([batch]).cast(specs.arrow_schema("FetchResponse"))


def test_no_payloads_through_the_command(shared: Path, out: dict[str, Path], tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "arrowkafka.cli", "decode", str(shared / "captures" / "tansu_confluent.pcap"),
         "-o", str(tmp_path), "--no-payloads"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr  # the capture holds one reject
    assert "records 373 in 37 batches (0 batches rejected)" in run.stdout
    bare = pq.read_table(tmp_path / "records.parquet")
    full = pq.read_table(out["tansu_confluent"] / "records.parquet")
    assert "key" not in bare.column_names and "value" not in bare.column_names
    assert bare.equals(full.drop_columns(["key", "value"]))
    # no key or value anywhere in the folder: the message tables' record batches held them all
    values = [v for c in ("key", "value") for v in full.column(c).to_pylist() if v]
    # (printable: not transaction markers; 8 bytes or more: key "txn-1" is inside transactional
    # id "ck-txn-1")
    secrets = {v for v in values if len(v) >= 8 and v.isascii() and v.decode().isprintable()}
    assert len(secrets) > 100
    assert _leaked(out["tansu_confluent"], secrets) >= {"ProduceRequest.parquet", "FetchResponse.parquet"}
    assert _leaked(tmp_path, secrets) == set()
    for message in ("ProduceRequest", "FetchResponse"):  # the rest of those tables is kept
        kept = pq.read_table(tmp_path / f"{message}.parquet")
        whole = pq.read_table(out["tansu_confluent"] / f"{message}.parquet")
        assert len(str(kept.schema)) < len(str(whole.schema)) and "records" not in str(kept.schema)
        assert kept.equals(
            whole.cast(pa.schema([f.with_type(kept.schema.field(f.name).type) for f in whole.schema]))
        )


def test_without_payloads_no_reject_keeps_bytes(shared: Path, out: dict[str, Path], tmp_path: Path) -> None:
    """A frame whose header was damaged to name a message without records (a Produce request
    read as a Metadata request) keeps no bytes either: a reject's bytes go whatever it names."""
    produce = pq.read_table(out["noida_kafka_python"] / "ProduceRequest.parquet").to_pylist()[0]
    pcap = (shared / "captures" / "noida_kafka_python.pcap").read_bytes()
    header = struct.pack(">hhi", 0, produce["_api_version"], produce["_correlation_id"])
    at = pcap.rindex(header, 0, pcap.index(produce["topic_data"][0]["partition_data"][0]["records"]))
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(pcap[:at] + struct.pack(">h", 3) + pcap[at + 2 :])  # api key 3: Metadata
    decode_capture([damaged], tmp_path / "full", ak.load_specs())
    decode_capture([damaged], tmp_path / "bare", ak.load_specs(), payloads=False)
    full = pq.read_table(tmp_path / "full" / "rejects.parquet").to_pylist()
    bare = pq.read_table(tmp_path / "bare" / "rejects.parquet").to_pylist()
    assert any(r["message"] == "MetadataRequest" and len(r["raw"]) > 1000 for r in full)
    assert bare == [{**r, "raw": None} for r in full]
    values = pq.read_table(out["noida_kafka_python"] / "records.parquet").column("value").to_pylist()
    secrets = {v for v in values if v and len(v) >= 8}
    assert _leaked(tmp_path / "full", secrets) and not _leaked(tmp_path / "bare", secrets)


def _leaked(folder: Path, secrets: set[bytes]) -> set[str]:
    """The Parquet files of ``folder`` holding any of ``secrets`` in any string or binary leaf."""
    found = set()
    for path in sorted(folder.glob("*.parquet")):
        leaves = [c.combine_chunks() for c in pq.read_table(path).columns]
        blob = bytearray()
        while leaves:
            a = leaves.pop()
            if isinstance(a, pa.ExtensionArray):
                a = a.storage
            t = a.type
            if pa.types.is_struct(t):
                leaves += [a.field(i) for i in range(t.num_fields)]
            elif pa.types.is_map(t):
                leaves += [a.keys, a.items]
            elif pa.types.is_list(t):
                leaves.append(a.values)
            elif pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_fixed_size_binary(t):
                for v in a.to_pylist():
                    blob += (v.encode() if isinstance(v, str) else v or b"") + b"\0"
        if any(s in blob for s in secrets):
            found.add(path.name)
    return found


def test_a_damaged_batch_is_a_reject_naming_its_partition(
    shared: Path, out: dict[str, Path], tmp_path: Path
) -> None:
    produce = pq.read_table(out["noida_kafka_python"] / "ProduceRequest.parquet").to_pylist()
    records = produce[0]["topic_data"][0]["partition_data"][0]["records"]
    pcap = (shared / "captures" / "noida_kafka_python.pcap").read_bytes()
    at = pcap.index(records) + 100  # inside the batch's compressed records
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(pcap[:at] + bytes([pcap[at] ^ 0xFF]) + pcap[at + 1 :])
    summary = decode_capture([damaged], tmp_path / "out", ak.load_specs())
    assert summary.record_rejects == 1
    assert summary.frames_in == summary.rows + summary.rejects  # the frame itself decoded
    rejects = pq.read_table(tmp_path / "out" / "rejects.parquet").to_pylist()
    (reject,) = [r for r in rejects if r["message"] == "ProduceRequest"]
    topic = produce[0]["topic_data"][0]["name"]
    assert reject["path"] == f"records of {topic} partition 0: batch at byte 0"
    assert reject["reason"].startswith("CRC-32C mismatch")
    assert (
        reject["raw"]
        == records[: at - pcap.index(records)]
        + bytes([pcap[at] ^ 0xFF])
        + records[at - pcap.index(records) + 1 :]
    )
    batches = pq.read_table(tmp_path / "out" / "record_batches.parquet")
    assert batches.column("error").to_pylist().count(None) == batches.num_rows - 1
    # without payloads the reject keeps its place and reason, not the batch's bytes
    decode_capture([damaged], tmp_path / "bare", ak.load_specs(), payloads=False)
    bare = pq.read_table(tmp_path / "bare" / "rejects.parquet").to_pylist()
    (kept,) = [r for r in bare if r["message"] == "ProduceRequest"]
    assert kept == {**reject, "raw": None}


@pytest.mark.parametrize("revision", ["old-3.0.0", "newer"])
def test_records_with_specs_of_another_revision(
    revision: str, shared: Path, out: dict[str, Path], tmp_path: Path
) -> None:
    """A capture decoded with another revision's specs (3.0.0's FetchResponse has no topic_id;
    the newer one has no Produce below v3) gives the same records, linked the same way, for
    every version the revision knows; a field the revision lacks is null."""
    from tests.conftest import SPEC_FOLDERS

    specs = ak.load_specs(SPEC_FOLDERS[revision])
    known = set(specs.pairs())
    query = (
        "SELECT _message, _version, _correlation_id, topic, partition, record_offset, key, value"
        " FROM '{}/records.parquet' ORDER BY ALL"
    )
    total = 0
    for capture in CAPTURES:
        folder = tmp_path / capture
        decode_capture([shared / "captures" / f"{capture}.pcap"], folder, specs)
        got = duckdb.sql(query.format(folder)).fetchall()
        want = [r for r in duckdb.sql(query.format(out[capture])).fetchall() if (r[0], r[1]) in known]
        assert got == want, capture
        total += len(got)
        if revision == "old-3.0.0":
            assert duckdb.sql(f"SELECT count(topic_id) FROM '{folder}/records.parquet'").fetchall() == [(0,)]
    assert total >= 200  # noida_kafka_python's 200 at least: both revisions know its versions


def test_records_where_other_specs_name_their_lists_otherwise(
    shared: Path, out: dict[str, Path], tmp_path: Path
) -> None:
    """Specs that call FetchResponse's topics ``Topics`` and a topic's name ``Name`` (as Kafka's
    older ones did): the records are found all the same; specs with no records field there say
    so in the summary rather than write no records in silence."""
    vendored = ROOT / "specs" / "clients" / "src" / "main" / "resources" / "common" / "message"
    text = (vendored / "FetchResponse.json").read_text()
    renamed = text.replace('"name": "Responses"', '"name": "Topics"').replace(
        '"name": "Topic",', '"name": "Name",'
    )
    query = "SELECT _message, _correlation_id, topic, partition, record_offset, value FROM '{}/records.parquet' ORDER BY ALL"
    for name, spec_text in (
        ("renamed", renamed),
        ("no-records", text.replace('"name": "Records"', '"name": "Data"')),
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "FetchResponse.json").write_text(spec_text)
        specs = ak.load_specs(ROOT / "specs", folder)
        summary = decode_capture(
            [shared / "captures" / "tansu_confluent.pcap"], tmp_path / f"{name}-out", specs
        )
        got = duckdb.sql(query.format(tmp_path / f"{name}-out")).fetchall()
        want = duckdb.sql(query.format(out["tansu_confluent"])).fetchall()
        if name == "renamed":
            assert got == want and sum(r[0] == "FetchResponse" for r in got) == 187
            assert not summary.records_not_found
        else:
            assert got == [r for r in want if r[0] != "FetchResponse"]
            assert (
                "records not read in FetchResponse: the specs given hold no records field" in summary.render()
            )
