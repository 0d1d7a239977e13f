"""Control batches: transaction markers (ABORT/COMMIT) and the KRaft control records, decoded
through their JSON specs by the message decoder."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from batchtools import Rec, build, rewrap_v2

import arrowkafka as ak
from arrowkafka import Corrupt

CONTROL = 0x20 | 0x10  # control and transactional


def _control_batch(records: list[tuple[bytes, bytes]], offset: int = 0) -> bytes:
    batch = build(2, 0, [Rec(k, v, [], 1_700_000_000_000) for k, v in records], offset=offset,
                  transactional=True, producer_id=9, producer_epoch=1, base_sequence=0)  # fmt: skip
    return rewrap_v2(batch, attributes=CONTROL)


def _control_batch_at(batch: bytes, offset: int) -> bytes:
    """``batch`` with its base offset set (the offset is outside the CRC)."""
    return struct.pack(">q", offset) + batch[8:]


def _leader_change(leader: int, voters: list[int]) -> bytes:
    table = pa.table(
        {
            "version": pa.array([0], pa.int16()),
            "leader_id": pa.array([leader], pa.int32()),
            "voters": [[{"voter_id": v} for v in voters]],
            "granting_voters": [[{"voter_id": leader}]],
        }
    )
    return ak.encode(table, "LeaderChangeMessage", 0)[0].as_py()


def test_transaction_markers_and_a_leader_change() -> None:
    data = build(
        2,
        0,
        [Rec(b"k", b"v", [], 1_700_000_000_000)],
        transactional=True,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    commit = _control_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 17))], offset=1)
    abort = _control_batch([(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 18))], offset=2)
    leader = _control_batch([(struct.pack(">hh", 0, 2), _leader_change(3, [1, 2, 3]))], offset=3)
    got = ak.decode_records([data + commit + abort + leader])
    assert got.batches.column("control").to_pylist() == [False, True, True, True]
    markers = got.markers.to_pylist()
    assert [(m["record"], m["record_offset"], m["type"], m["coordinator_epoch"]) for m in markers] == [
        (1, 1, "COMMIT", 17),
        (2, 2, "ABORT", 18),
        (3, 3, "LEADER_CHANGE", None),
    ]
    assert all(m["error"] is None for m in markers)
    lc = got.control["LeaderChangeMessage"].to_pylist()
    assert [(r["record"], r["leader_id"], [v["voter_id"] for v in r["voters"]]) for r in lc] == [
        (3, 3, [1, 2, 3])
    ]
    # control records survive payloads=False: they are what the markers are read from
    bare = ak.decode_records([data + commit + abort + leader], payloads=False)
    assert bare.markers.equals(got.markers)
    assert bare.control["LeaderChangeMessage"].equals(got.control["LeaderChangeMessage"])


def test_a_bad_control_record_is_named() -> None:
    short = _control_batch([(b"\x00", b"")])
    with pytest.raises(Corrupt, match="control record key of 1 bytes"):
        ak.decode_records([short])
    got = ak.decode_records([short], errors="null")
    assert got.markers.column("error").to_pylist() == ["a control record key of 1 bytes (needs 4)"]
    bad_lc = _control_batch([(struct.pack(">hh", 0, 2), b"\x00\x00\x00")])
    got = ak.decode_records([bad_lc], errors="null")
    assert got.markers.column("error").to_pylist()[0].startswith("LeaderChangeMessage v0:")
    assert got.control["LeaderChangeMessage"].num_rows == 0
    # every value of a spec failing leaves an empty table of its schema (UUID columns included)
    unknown = _control_batch([(struct.pack(">hh", 0, 6), b"\x00\x63")])
    got = ak.decode_records([unknown], errors="null")
    assert got.markers.column("error").to_pylist() == ["VotersRecord version 99 is not one of 0"]
    assert got.control["VotersRecord"].num_rows == 0
    # raised, each names the input row, the batch's byte and the record's offset
    data = build(2, 0, [Rec(b"k", b"v", [], 1_700_000_000_000)])
    for bad, part in ((short, "key"), (bad_lc, "value")):
        row = data + data + _control_batch_at(bad, 51)
        with pytest.raises(Corrupt) as e:
            ak.decode_records([data, row])
        assert (e.value.message_index, e.value.offset, e.value.size) == (1, 2 * len(data), len(row)), part
        assert (
            e.value.path
            == f"the control record at offset 51 of the batch at byte {2 * len(data)}: its {part}"
        )
    # of two that fail, the first is named (their specs' versions sort them otherwise)
    two = [(struct.pack(">hh", 0, 2), b"\x00\x07"), (struct.pack(">hh", 0, 2), b"\xff\xfd")]
    with pytest.raises(Corrupt, match="version 7 is not one of") as e:
        ak.decode_records([_control_batch(two, 10)])
    assert "at offset 10 " in e.value.path
