"""Topics a message names only by id, named from what the capture said.

From Fetch v13 on, Kafka sends topic ids and no names (KIP-516); the all-versions table still
has the name column, which those rows would fill with its default ''. The capture's Metadata
and CreateTopics responses pair ids with names (``learn_topic_names``); ``name_topics`` puts
those names in the rows of versions that carry only the id, and null where the capture never
named the id, so a Fetch v12 row and a Fetch v13 row of the same topic read alike.

Where: every struct of a message spec with a ``topic_id`` (uuid) and a name field
(``name``, ``topic`` or ``topic_name``) that some version with the id lacks, found from the
spec itself (``named_by_id``): FetchRequest, FetchResponse and AlterPartition in today's specs.
Such a name column is nullable in the tables (``named_schema``). A topic id names one topic in
a cluster, and ids are random 128-bit values, so one map per capture serves every broker in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.api import SpecSet
from arrowkafka.ir.model import MessageSpec, Struct
from arrowkafka.schema import column_name

__all__ = ["TOPIC_NAMES", "ById", "learn_topic_names", "name_topics", "named_by_id", "named_schema"]

NAME_FIELDS = ("name", "topic", "topic_name")

# responses that name a topic and its id: (message, list column); Metadata v10+ and
# CreateTopics v7+ carry both
TOPIC_NAMES = {"MetadataResponse": "topics", "CreateTopicsResponse": "topics"}


def learn_topic_names(tables: dict[str, list[pa.Table]], names: dict[bytes, str]) -> None:
    """Add to ``names`` (topic id bytes -> name) what the decoded responses in ``tables`` say."""
    for message, column in TOPIC_NAMES.items():
        for table in tables.get(message, []):
            if table.num_rows == 0:  # (every body rejected; and an empty uuid column cannot combine)
                continue
            topic = pc.list_flatten(table.column(column).combine_chunks())
            ids = pc.struct_field(topic, "topic_id").storage.to_pylist()
            for tid, name in zip(ids, pc.struct_field(topic, "name").to_pylist(), strict=True):
                if tid is not None and tid != bytes(16) and name:
                    names[tid] = name


@dataclass(frozen=True)
class ById:
    """One struct whose name field some versions leave out: the column path to it (through
    lists and structs), the name field, and the versions that carry the id but not the name."""

    path: tuple[str, ...]
    name: str
    versions: tuple[int, ...]


def named_by_id(spec: MessageSpec) -> tuple[ById, ...]:
    """Where ``spec``'s rows name a topic by id alone in some versions."""
    versions = range(spec.valid_versions.lo, spec.valid_versions.hi + 1)
    out: list[ById] = []

    def walk(struct: Struct, path: tuple[str, ...]) -> None:
        fields = {column_name(f.name): f for f in struct.fields}
        tid = fields.get("topic_id")
        if tid is not None and tid.element == "uuid" and tid.kind == "primitive":
            for name in NAME_FIELDS:
                f = fields.get(name)
                if f is not None and f.element == "string":
                    only_id = tuple(v for v in versions if tid.present_in(v) and not f.present_in(v))
                    if only_id:
                        out.append(ById(path, name, only_id))
        for f in struct.fields:
            if f.struct is not None:
                walk(f.struct, (*path, column_name(f.name)))

    walk(spec.root, ())
    return tuple(out)


@lru_cache(maxsize=256)
def _named_by_id(spec: MessageSpec) -> tuple[ById, ...]:
    return named_by_id(spec)


def named_schema(specs: SpecSet, message: str) -> pa.Schema:
    """The all-versions schema of ``message`` with each name field ``named_by_id`` nullable:
    what ``name_topics`` gives."""
    schema = specs.arrow_schema(message)
    for where in _named_by_id(specs[message]):
        i = schema.get_field_index(where.path[0])
        field = schema.field(i)
        schema = schema.set(i, field.with_type(_nullable_in(field.type, (*where.path[1:], where.name))))
    return schema


def _nullable_in(t: pa.DataType, path: tuple[str, ...]) -> pa.DataType:
    """``t`` with the field at ``path`` (through lists and structs) made nullable."""
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_nullable_in(t.value_type, path)))
    i = t.get_field_index(path[0])
    f = t.field(i)
    inner = f.with_nullable(True) if len(path) == 1 else f.with_type(_nullable_in(f.type, path[1:]))
    return pa.struct([inner if j == i else t.field(j) for j in range(t.num_fields)])


def name_topics(table: pa.Table, specs: SpecSet, message: str, names: dict[bytes, str]) -> pa.Table:
    """``table`` (rows of ``message`` in its all-versions schema, after any frame columns, with
    ``_version``) with each name that its row's version leaves out taken from ``names`` (topic
    id -> name), null where ``names`` lacks the id; in ``named_schema``."""
    places = _named_by_id(specs[message])
    if not places or table.num_rows == 0:
        return table.cast(_with_columns(table.schema, named_schema(specs, message))) if places else table
    known = pa.array(list(names), pa.binary(16))
    found = pa.array(list(names.values()), pa.string())
    versions = table.column("_version").combine_chunks()
    for where in places:
        i = table.schema.get_field_index(where.path[0])
        column = table.column(i).combine_chunks()
        filled = _fill(column, versions, (*where.path[1:],), where, known, found)
        table = table.set_column(i, table.schema.field(i).with_type(filled.type), filled)
    return table


def _with_columns(schema: pa.Schema, message_schema: pa.Schema) -> pa.Schema:
    """``schema`` with the columns of ``message_schema`` replaced by its fields."""
    return pa.schema(
        [message_schema.field(f.name) if f.name in message_schema.names else f for f in schema],
        metadata=schema.metadata,
    )


def _fill(
    arr: pa.Array, versions: pa.Array, rest: tuple[str, ...], where: ById, known: pa.Array, found: pa.Array
) -> pa.Array:
    """``arr`` (one value per row of ``versions``) with the name field of ``where`` filled."""
    if isinstance(arr, pa.ListArray):
        # every value the offsets span, those under a null list too (a writer may leave some)
        offs = np.asarray(arr.offsets, np.int64)
        values = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        parents = pa.array(np.repeat(np.arange(len(arr)), np.diff(offs)))
        inner = _fill(values, pc.take(versions, parents), rest, where, known, found)
        offsets = pa.array((offs - offs[0]).astype(np.int32))
        typ = pa.list_(arr.type.value_field.with_type(inner.type))
        return pa.ListArray.from_arrays(
            offsets, inner, type=typ, mask=arr.is_null() if arr.null_count else None
        )
    assert isinstance(arr, pa.StructArray)
    children = arr.flatten()
    fields = [arr.type.field(j) for j in range(arr.type.num_fields)]
    if rest:
        j = arr.type.get_field_index(rest[0])
        children[j] = _fill(children[j], versions, rest[1:], where, known, found)
        fields[j] = fields[j].with_type(children[j].type)
    else:
        j = arr.type.get_field_index(where.name)
        ids = children[arr.type.get_field_index("topic_id")]
        if isinstance(ids, pa.ExtensionArray):
            ids = ids.storage
        named = pc.take(found, pc.index_in(ids, known))  # null where the capture never named it
        only_id = pc.is_in(versions, pa.array(where.versions, versions.type))
        children[j] = pc.if_else(only_id, named, children[j])
        fields[j] = fields[j].with_nullable(True)
    return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null() if arr.null_count else None)
