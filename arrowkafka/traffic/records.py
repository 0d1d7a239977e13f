"""The records inside decoded Produce requests and Fetch responses, as tables linked to their
frame: each ``records`` field decoded by ``decode_records``, its batches and records carrying
the frame's client, broker, time, correlation id and version, and the topic and partition the
field belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.records import decode_records
from arrowkafka.records.tables import linked_control, linked_control_schemas, linked_schemas
from arrowkafka.schema import without_records
from arrowkafka.traffic.columns import CAPTURE, REJECT_SCHEMA

__all__ = [
    "SOURCES",
    "RecordTables",
    "control_schemas",
    "record_schemas",
    "records_of",
    "without_payloads",
    "rejects_without_payloads",
]

# message -> (topics list, topic name field, topic id field, partitions list, partition index field)
SOURCES = {
    "ProduceRequest": ("topic_data", "name", None, "partition_data", "index"),
    "FetchResponse": ("responses", "topic", "topic_id", "partitions", "partition_index"),
    "ShareFetchResponse": ("responses", None, "topic_id", "partitions", "partition_index"),
}

_FRAME = ["_capture", "_client", "_broker", "_ts_first", "_correlation_id", "_client_id"]
_UUID = pa.uuid()
LINK = pa.schema(
    [
        CAPTURE,
        pa.field("_client", pa.string(), nullable=False),
        pa.field("_broker", pa.string(), nullable=False),
        pa.field("_ts_first", pa.timestamp("ns", "UTC"), nullable=False),
        pa.field("_correlation_id", pa.int32(), nullable=False),
        pa.field("_client_id", pa.string()),
        pa.field(
            "_message", pa.string(), nullable=False, metadata={"about": "ProduceRequest, FetchResponse, ..."}
        ),
        pa.field("_version", pa.int16(), nullable=False),
        pa.field("topic", pa.string(), metadata={"about": "by id: from the capture's Metadata, else null"}),
        pa.field("topic_id", _UUID),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field(
            "batch_id", pa.int64(), nullable=False, metadata={"about": "one per batch in the output folder"}
        ),
    ]
)


def record_schemas(payloads: bool = True) -> dict[str, pa.Schema]:
    """The schemas of the three record tables a capture job writes."""
    return linked_schemas(list(LINK), payloads)


def control_schemas() -> dict[str, pa.Schema]:
    """The schemas of the KRaft control record tables a capture job writes where it finds such
    records (``record_control.LeaderChangeMessage`` ...)."""
    return linked_control_schemas(list(LINK))


@dataclass
class RecordTables:
    batches: pa.Table
    records: pa.Table
    markers: pa.Table
    rejects: pa.Table  # rows of rejects
    # KRaft control records through their specs, linked as the records are: {spec name: table}
    control: dict[str, pa.Table] = field(default_factory=dict)
    found: bool = True  # False: the message holds no records field where a topic's partitions would


def records_of(
    table: pa.Table,
    message: str,
    first_id: int,
    payloads: bool,
    capture: str,
    topic_names: dict[bytes, str] | None = None,
) -> RecordTables:
    """The records of every ``records`` field of ``table`` (decoded rows of ``message``, frame
    columns first); batch ids count from ``first_id``. A topic named only by its id gets its
    name from ``topic_names`` (what the capture's Metadata responses said so far)."""
    schemas = record_schemas(payloads)
    where = record_fields(table.schema, message)
    # (every body rejected; and an empty uuid column cannot combine), or specs of the user's
    # whose message holds no records field under a topic's partitions (``found`` is False)
    if table.num_rows == 0 or where is None:
        return RecordTables(
            schemas["record_batches"].empty_table(),
            schemas["records"].empty_table(),
            schemas["record_markers"].empty_table(),
            REJECT_SCHEMA.empty_table(),
            found=where is not None,
        )
    topics_list, name_field, id_field, parts_list, index_field = where
    topics = table.column(topics_list).combine_chunks()
    topic = pc.list_flatten(topics)
    topic_row = pc.list_parent_indices(topics)
    parts = pc.struct_field(topic, parts_list)
    part = pc.list_flatten(parts)
    part_topic = pc.list_parent_indices(parts)
    got = decode_records(pc.struct_field(part, "records"), errors="null", payloads=payloads)

    # one row of link columns per partition entry, then per batch
    n = len(part)
    row = pc.take(topic_row, part_topic)
    frame = table.select(_FRAME).take(row)
    # a version without the field holds its default ('' or the zero uuid): null, as no topic
    # is named '' and no topic id is zero
    names = pa.nulls(n, pa.string())
    if name_field:
        names = pc.take(pc.struct_field(topic, name_field), part_topic)
        names = pc.if_else(pc.equal(names, ""), pa.scalar(None, pa.string()), names)
    ids = pa.nulls(n, _UUID)
    if id_field:
        storage = pc.take(pc.struct_field(topic, id_field), part_topic).storage
        zero = pc.equal(storage, pa.scalar(bytes(16), storage.type))
        ids = pa.ExtensionArray.from_storage(_UUID, pc.if_else(zero, pa.scalar(None, storage.type), storage))
        if topic_names:
            known = pa.array(list(topic_names), pa.binary(16))
            found = pc.take(
                pa.array(list(topic_names.values()), pa.string()), pc.index_in(ids.storage, known)
            )
            names = pc.coalesce(names, found)
    link = pa.Table.from_arrays(
        [
            *frame.columns,
            pa.repeat(pa.scalar(message), n),
            pc.take(table.column("_version"), row),
            names,
            ids,
            pc.struct_field(part, index_field),
        ],
        names=LINK.names[:-1],
    )
    nb = got.batches.num_rows
    batch_row = got.batches.column("row")
    batch_link = link.take(batch_row).append_column("batch_id", pa.array(np.arange(first_id, first_id + nb)))
    batches = _join(batch_link, got.batches.drop_columns(["row"]), schemas["record_batches"])
    rec_batch = got.records.column("batch")
    records = _join(batch_link.take(rec_batch), got.records.drop_columns(["batch"]), schemas["records"])
    marker_link = batch_link.take(got.markers.column("batch"))
    markers = _join(marker_link, got.markers.drop_columns(["record", "batch"]), schemas["record_markers"])
    rejects = _rejects(got.rejects, batch_link.take(got.rejects.column("batch")), message, capture)
    control = linked_control(got.control, got.records, batch_link.take)
    return RecordTables(batches, records, markers, rejects, control)


# ---- payloads=False: no record bytes anywhere in what a job writes ----


def without_payloads(table: pa.Table) -> pa.Table:
    """A message table without its ``records`` fields (``schema.without_records``): with
    ``payloads=False`` the record tables keep sizes, not keys and values, and the record
    batches in the message tables would hold them all."""
    schema = without_records(table.schema)
    if len(schema) == len(table.schema) and schema.equals(table.schema):
        return table
    return table.select(schema.names).cast(schema)


def rejects_without_payloads(rejects: pa.Table) -> pa.Table:
    """Rejects (``REJECT_SCHEMA``) without their raw bytes: a frame that did not decode may
    hold records whatever message its header names (a damaged header can name another), and a
    batch that failed holds its keys and values. Their place and reason stay."""
    raw = pa.nulls(rejects.num_rows, pa.binary())
    return rejects.set_column(rejects.schema.get_field_index("raw"), rejects.schema.field("raw"), raw)


def record_fields(schema: pa.Schema, message: str) -> tuple[str, str | None, str | None, str, str] | None:
    """Where a message table's ``records`` fields are: (topics list, topic name, topic id,
    partitions list, partition index), by ``SOURCES``' names where the table has them, else
    found (specs of another revision may name them otherwise: Kafka's older Fetch responses call
    the topics ``topics``); a name or id the specs lack is None (null, as in a version without
    it). None where no list of structs holds a list of structs with ``records``."""
    known = SOURCES.get(message)
    lists = {f.name: f.type.value_type for f in schema if _is_struct_list(f.type)}
    names = [known[0]] if known and known[0] in lists else list(lists)
    for topics_list in names:
        topic = lists[topics_list]
        parts = {f.name: f.type.value_type for f in topic if _is_struct_list(f.type)}
        wanted = [known[3]] if known and known[3] in parts else list(parts)
        for parts_list in [p for p in wanted if parts[p].get_field_index("records") >= 0]:
            part = parts[parts_list]
            index = _first(part, (known[4],) if known else (), ("partition_index", "index", "partition"),
                           pa.types.is_int32)  # fmt: skip
            if index is None:
                continue
            name = _first(
                topic, (known[1],) if known and known[1] else (), ("topic", "name"), pa.types.is_string
            )
            uuid = _first(topic, (known[2],) if known and known[2] else (), ("topic_id",), _is_uuid)
            return topics_list, name, uuid, parts_list, index
    return None


def _is_struct_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) and pa.types.is_struct(t.value_type)


def _is_uuid(t: pa.DataType) -> bool:
    return isinstance(t, pa.UuidType) or t == pa.binary(16)


def _first(
    struct: pa.StructType, preferred: tuple[str, ...], names: tuple[str, ...], kind: Any
) -> str | None:
    """The first of ``preferred`` then ``names`` that ``struct`` holds, of the kind asked."""
    for name in (*preferred, *names):
        i = struct.get_field_index(name)
        if i >= 0 and kind(struct.field(i).type):
            return name
    return None


def _join(link: pa.Table, body: pa.Table, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_arrays([*link.columns, *body.columns], schema=schema)


def _rejects(bad: pa.Table, link: pa.Table, message: str, capture: str) -> pa.Table:
    """Rows of rejects for record batches that failed: their frame, where, why, their bytes."""
    n = bad.num_rows
    where = [
        f"records of {t if t is not None else tid} partition {p}: batch at byte {pos}"
        for t, tid, p, pos in zip(
            link.column("topic").to_pylist(),
            link.column("topic_id").to_pylist(),
            link.column("partition").to_pylist(),
            bad.column("position").to_pylist(),
            strict=True,
        )
    ]
    return pa.Table.from_arrays(
        [
            pa.repeat(pa.scalar(capture), n),
            link.column("_client"),
            link.column("_broker"),
            pa.repeat(pa.scalar("request" if message.endswith("Request") else "response"), n),
            link.column("_ts_first"),
            pa.repeat(pa.scalar(message), n),
            link.column("_version"),
            bad.column("error"),
            bad.column("reason"),
            pa.array(where, pa.string()),
            bad.column("position"),
            bad.column("raw"),
        ],
        schema=REJECT_SCHEMA,
    )
