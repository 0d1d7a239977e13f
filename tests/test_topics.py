"""Internal topics: __consumer_offsets keys/values and __cluster_metadata values, built by
the project's encoder, decode back into one table per record type; bad frames raise."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import topics

TOPIC_ID = uuid.UUID(int=7)


def offsets_records() -> tuple[pa.Array, pa.Array]:
    keys = pa.RecordBatch.from_pylist([{"group": "g1", "topic": "t", "partition": p} for p in range(3)])
    values = pa.RecordBatch.from_pylist(
        [
            {"offset": 100 + p, "leader_epoch": 5, "metadata": "", "commit_timestamp": 1_700_000_000_000}
            for p in range(3)
        ]
    )
    k1, v1 = topics.encode_consumer_offsets("OffsetCommit", keys, values, key_version=1, value_version=3)
    group = pa.RecordBatch.from_pylist([{"group": "g1"}])
    k2, v2 = topics.encode_consumer_offsets("GroupMetadata", group, None, key_version=2, value_version=0)
    return pa.concat_arrays([k1[:2], k2, k1[2:]]), pa.concat_arrays([v1[:2], v2, v1[2:]])


def metadata_values() -> pa.Array:
    topic = pa.RecordBatch.from_pylist(
        [{"name": "orders", "topic_id": TOPIC_ID.bytes}],
        schema=pa.schema([("name", pa.string()), ("topic_id", pa.binary(16))]),
    )
    partition = pa.RecordBatch.from_pylist(
        [{"partition_id": p, "topic_id": TOPIC_ID.bytes, "replicas": [1, 2], "isr": [1], "leader": 1}
         for p in range(2)],
        schema=pa.schema([("partition_id", pa.int32()), ("topic_id", pa.binary(16)),
                          ("replicas", pa.list_(pa.int32())), ("isr", pa.list_(pa.int32())),
                          ("leader", pa.int32())]),
    )  # fmt: skip
    return pa.concat_arrays(
        [
            topics.encode_cluster_metadata("TopicRecord", topic, 0),
            topics.encode_cluster_metadata("PartitionRecord", partition, 1),
        ]
    )


def test_consumer_offsets_one_table_per_record_type() -> None:
    keys, values = offsets_records()
    assert keys[0].as_py()[:2] == b"\x00\x01" and values[0].as_py()[:2] == b"\x00\x03"  # type, version
    out = topics.decode_consumer_offsets(keys, values)
    assert sorted(out) == ["GroupMetadata", "OffsetCommit"]
    commits = out["OffsetCommit"].to_pylist()
    assert [r["_index"] for r in commits] == [0, 1, 3]
    assert commits[2]["key"] == {"_version": 1, "group": "g1", "topic": "t", "partition": 2}
    assert commits[2]["value"]["offset"] == 102 and commits[2]["value"]["_version"] == 3
    assert commits[2]["value"]["expire_timestamp"] == -1  # not in v3: its default
    (group,) = out["GroupMetadata"].to_pylist()
    assert group == {"_index": 2, "key": {"_version": 2, "group": "g1"}, "value": None}  # a tombstone


def test_cluster_metadata_one_table_per_record_type() -> None:
    values = metadata_values()
    assert values[0].as_py()[:3] == b"\x01\x02\x00"  # frame version 1, TopicRecord (api key 2), v0
    out = topics.decode_cluster_metadata(values)
    assert sorted(out) == ["PartitionRecord", "TopicRecord"]
    (t,) = out["TopicRecord"].to_pylist()
    assert (t["_index"], t["_version"], t["name"], t["topic_id"]) == (0, 0, "orders", TOPIC_ID)
    parts = out["PartitionRecord"].to_pylist()
    assert [(p["_index"], p["partition_id"], p["replicas"], p["leader_epoch"]) for p in parts] == [
        (1, 0, [1, 2], -1),
        (2, 1, [1, 2], -1),
    ]


def test_bad_frames_name_the_record() -> None:
    with pytest.raises(ak.Corrupt, match="unknown record type 99") as e:
        topics.decode_consumer_offsets([b"\x00\x63abc"], [None])
    assert e.value.message_index == 0
    with pytest.raises(ak.Truncated, match="a key needs 2 bytes"):
        topics.decode_consumer_offsets([b"\x00"], [None])
    with pytest.raises(ak.Corrupt, match="frame version 0, expected 1"):
        topics.decode_cluster_metadata([b"\x00\x02\x00"])
    with pytest.raises(ak.Corrupt, match="unknown metadata record type 99"):
        topics.decode_cluster_metadata([b"\x01\x63\x00"])
    with pytest.raises(ak.Truncated, match="ends inside"):
        topics.decode_cluster_metadata([b"\x01"])


def test_errors_name_the_input_record_and_its_byte() -> None:
    values = metadata_values()
    cut = values.to_pylist()
    cut[2] = cut[2][:-3]  # the second PartitionRecord, three bytes short
    with pytest.raises(ak.Truncated) as e:
        topics.decode_cluster_metadata(cut)
    assert e.value.message_index == 2 and e.value.size == len(cut[2])
    assert e.value.offset > 3 and e.value.message == "__cluster_metadata PartitionRecord"
    with pytest.raises(ak.Corrupt, match="PartitionRecord has no version 99") as c:
        topics.decode_cluster_metadata([values[0].as_py(), b"\x01\x03\x63"])
    assert c.value.message_index == 1
    keys, vals = offsets_records()
    bad = vals.to_pylist()
    bad[3] = bad[3][:-1]  # input 3 is the third OffsetCommit (input 2 is a tombstone)
    with pytest.raises(ak.Truncated) as t:
        topics.decode_consumer_offsets(keys, bad)
    assert t.value.message_index == 3 and t.value.size == len(bad[3])
