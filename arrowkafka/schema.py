"""Stage 2: a ``MessageSpec`` (and a version, or all of them) -> ``pa.Schema``.

The mapping (also in the README):

======================  =============================  ==========================================
Kafka                   Arrow                          why
======================  =============================  ==========================================
bool                    bool                           any non-zero byte reads as true
int8/16/32/64           int8/16/32/64                  same width and sign, whatever the KIP-625
                                                       wire encoding (fixed, packed, upacked)
uint16, uint32          uint16, uint32                 unsigned on the wire, kept unsigned
float64                 float64                        IEEE 754 both sides
string                  string (utf8)                  Kafka strings are UTF-8
bytes                   binary                         opaque
records                 binary                         the record set as sent, bytes kept exact
uuid                    arrow.uuid extension           canonical type: Parquet writes it as its
                        (fixed_size_binary(16))        UUID logical type, readers show UUIDs
[]T                     list<T not null>               Kafka arrays never hold null elements
struct / []struct       struct / list<struct>          field order as on the wire
tagged field            an ordinary column             absent on the wire -> the spec default
unknown tagged fields   ``_unknown_tags``              map<uint32, binary> in every struct of a
                                                       flexible version: tag -> raw value bytes
known tags on the wire  ``_tags_present``              list<uint32>, ascending, in a struct with
                                                       known tagged (or draft optional) fields:
                                                       which were on the wire, even at their
                                                       default (Kafka leaves those out, some
                                                       peers do not): encoding keeps them
======================  =============================  ==========================================

Column names are the spec names in snake_case (``ThrottleTimeMs`` -> ``throttle_time_ms``);
the spec name, type, versions, tag, default and about text ride along as field metadata
(keys ``kafka.*``). Nullability follows ``nullableVersions`` in the version asked for.

``message_schema(spec, None)`` is the all-versions schema: one schema for every valid version
(as Kafka's generated MessageData class is one class for all versions). Its first column,
``_version`` (int16), carries each row's version; a field is in it if it is in any version, and
is nullable if it is nullable in any version or its default is null.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from arrowkafka.errors import SpecError
from arrowkafka.ir import STRUCT_DEFAULTS, Field, MessageSpec, Struct

__all__ = [
    "default_value",
    "default_struct",
    "TAGS_PRESENT",
    "UNKNOWN_TAGS",
    "VERSION_COLUMN",
    "has_tags_present",
    "column_name",
    "message_schema",
    "portable_table",
    "portable_type",
    "storage_type",
    "primitive_type",
    "unknown_tags_type",
    "without_records",
]

UNKNOWN_TAGS = "_unknown_tags"
TAGS_PRESENT = "_tags_present"
VERSION_COLUMN = "_version"

_PRIMITIVE = {
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "records": pa.binary(),
    "uuid": pa.uuid(),
}

_WORD_START = re.compile(r"(?<=[^A-Z])(?=[A-Z])")


def portable_type(t: pa.DataType) -> pa.DataType:
    """The type a Parquet file holds for ``t`` so that Spark reads it as well as DuckDB, pandas
    and Polars (Spark has no unsigned integers, no uuid and no nanoseconds): unsigned integers
    widen to the next signed type, uuid becomes its 16 raw bytes as binary, timestamps hold
    microseconds; nesting is kept. The files the CLI writes and the Spark jobs' both use it."""
    if isinstance(t, pa.BaseExtensionType):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(portable_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(portable_type(t.key_type), t.item_field.with_type(portable_type(t.item_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(portable_type(t.value_type)))
    if pa.types.is_timestamp(t):  # UTC-adjusted unless naive
        return pa.timestamp("us", "UTC" if t.tz else None)
    return {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64()}.get(t, t)


def portable_table(table: pa.Table) -> pa.Table:
    """``table`` in ``portable_type``s (the same table when nothing changes); nanoseconds past
    the microsecond are dropped (``_latency_ns`` columns keep them). Only the columns whose
    type changes are cast (a job writes the same few schemas again and again: each one's
    portable schema is worked out once)."""
    schema = _portable_schema(table.schema)
    if schema is None:
        return table
    columns = table.columns
    for i, (f, g) in enumerate(zip(table.schema, schema, strict=True)):
        if f.type == g.type:
            continue
        column = columns[i]
        if pa.types.is_timestamp(f.type) and f.type.unit in _PER_MICRO:  # (top-level columns only)
            column = _in_micros(column, _PER_MICRO[f.type.unit])
        columns[i] = column.cast(g.type, safe=False)
    return pa.Table.from_arrays(columns, schema=schema)


_PORTABLE: dict[pa.Schema, tuple[pa.Schema, pa.Schema | None]] = {}


def _portable_schema(schema: pa.Schema) -> pa.Schema | None:
    """``schema`` in ``portable_type``s, None where that changes nothing (kept for the schemas
    seen: a nested message's took 0.3 ms to work out, per table written). (Schemas compare
    without their metadata, which the result carries: a hit is checked with it.)"""
    seen = _PORTABLE.get(schema)
    if seen is not None and seen[0].equals(schema, check_metadata=True):
        return seen[1]
    if len(_PORTABLE) >= 1024:  # (a bound: a process that sees many schemas works some out again)
        _PORTABLE.clear()
    out = pa.schema([f.with_type(portable_type(f.type)) for f in schema], metadata=schema.metadata)
    _PORTABLE[schema] = (schema, None if out.equals(schema) else out)
    return _PORTABLE[schema][1]


_PER_MICRO = {"s": 1_000_000, "ms": 1_000}


def _in_micros(column: pa.ChunkedArray, per: int) -> pa.ChunkedArray:
    """Null where a timestamp is past what microseconds hold (year 294,247: a producer that
    wrote nanoseconds where Kafka wants milliseconds, which Kafka takes), not wrapped around
    into some other time by the cast."""
    import pyarrow.compute as pc

    raw = column.cast(pa.int64())
    bound = (2**63 - 1) // per
    out = pc.or_(pc.greater(raw, bound), pc.less(raw, -bound))
    if not pc.any(out).as_py():
        return column
    return pc.if_else(out, pa.scalar(None, column.type), column)


def column_name(kafka_name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``, as Kafka's own generator names things
    (``MessageGenerator.toSnakeCase``: an underscore before a capital that follows a
    non-capital), so ``KRaftVersion`` -> ``kraft_version``."""
    return _WORD_START.sub("_", kafka_name).lower()


def primitive_type(element: str) -> pa.DataType:
    return _PRIMITIVE[element]


def unknown_tags_type() -> pa.DataType:
    return pa.map_(pa.uint32(), pa.field("value", pa.binary(), nullable=False))


def storage_type(t: pa.DataType) -> pa.DataType:
    """``t`` with the uuid extension as its storage, fixed_size_binary(16), at any depth (what
    pyarrow can build from Python values; the encoder reads both)."""
    if isinstance(t, pa.BaseExtensionType):
        return t.storage_type
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(storage_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(storage_type(t.value_type)))
    return t


def _is_records(f: pa.Field) -> bool:
    return (f.metadata or {}).get(b"kafka.type") == b"records"


def without_records(schema: pa.Schema) -> pa.Schema:
    """``schema`` without its ``records`` fields (by their ``kafka.type``), at any depth: the
    message tables of a job asked for no payloads, since a record batch holds keys and values.
    ``table.select(kept).cast(without_records(table.schema))`` drops them (casts match struct
    fields by name)."""

    def strip(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(strip(f.type)) for f in t if not _is_records(f)])
        if pa.types.is_map(t):
            return pa.map_(t.key_field, t.item_field.with_type(strip(t.item_type)), t.keys_sorted)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            of = pa.list_ if pa.types.is_list(t) else pa.large_list
            return of(t.value_field.with_type(strip(t.value_type)))
        if pa.types.is_fixed_size_list(t):
            return pa.list_(t.value_field.with_type(strip(t.value_type)), t.list_size)
        return t

    fields = [f.with_type(strip(f.type)) for f in schema if not _is_records(f)]
    return pa.schema(fields, metadata=schema.metadata)


def has_tags_present(spec: MessageSpec, struct: Struct, versions: Sequence[int]) -> bool:
    """Does the struct get a ``_tags_present`` column over these versions: does any of them
    carry a known tagged field (or a draft optional field) of it?"""
    return any(
        (spec.is_flexible(v) and any(f.tagged_in(v) and f.present_in(v) for f in struct.fields))
        or (spec.has_optional_buffer(v) and bool(struct.optional_fields))
        for v in versions
    )


def _tags_present_field() -> pa.Field:
    return pa.field(
        TAGS_PRESENT,
        pa.list_(pa.field("item", pa.uint32(), nullable=False)),
        nullable=False,
        metadata={
            "kafka.about": "Known tagged fields that were on the wire, ascending, even at their default; "
            "encoding writes these back."
        },
    )


def _unknown_tags_field() -> pa.Field:
    return pa.field(
        UNKNOWN_TAGS,
        unknown_tags_type(),
        nullable=False,
        metadata={"kafka.about": "Tagged fields this spec does not know: tag -> raw value bytes."},
    )


def _metadata(f: Field) -> dict[str, str]:
    meta = {
        "kafka.name": f.name,
        "kafka.type": f.type,
        "kafka.versions": str(f.versions),
    }
    if not f.nullable_versions.empty:
        meta["kafka.nullable_versions"] = str(f.nullable_versions)
    if f.tag is not None:
        meta["kafka.tag"] = str(f.tag)
        meta["kafka.tagged_versions"] = str(f.tagged_versions)
    if f.optional:
        meta["kafka.optional"] = "true"
    if f.default_text is not None:
        meta["kafka.default"] = f.default_text
    if f.encodings:
        meta["kafka.encoding"] = ", ".join(f"{e.versions}: {e.name}" for e in f.encodings)
    if f.entity_type:
        meta["kafka.entity_type"] = f.entity_type
    if f.map_key:
        meta["kafka.map_key"] = "true"
    if f.ignorable:
        meta["kafka.ignorable"] = "true"
    if f.about:
        meta["kafka.about"] = f.about
    return meta


class _Builder:
    """Builds Arrow types for one message over a set of versions (one, or all valid)."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec

    def struct_fields(self, struct: Struct, versions: Sequence[int], path: str) -> list[pa.Field]:
        out: list[pa.Field] = []
        names: dict[str, str] = {}
        # Draft dialect: the optional-field buffer opens each struct, so its fields come first.
        for f in (*struct.optional_fields, *struct.fields):
            present = [v for v in versions if v in f.versions]
            if not present:
                continue
            col = column_name(f.name)
            if col in names:
                raise SpecError(
                    self.spec.source,
                    f"{path}.{f.name}",
                    f"fields {names[col]} and {f.name} both map to column {col!r}",
                )
            names[col] = f.name
            nullable = any(f.nullable_in(v) for v in present) or (
                f.default is None and len(present) < len(versions)
            )
            out.append(pa.field(col, self.field_type(f, present, f"{path}.{f.name}"), nullable, _metadata(f)))
        if has_tags_present(self.spec, struct, versions):
            out.append(_tags_present_field())
        if any(self.spec.is_flexible(v) or self.spec.has_optional_buffer(v) for v in versions):
            out.append(_unknown_tags_field())
        return out

    def field_type(self, f: Field, versions: Sequence[int], path: str) -> pa.DataType:
        if f.struct is not None:
            value: pa.DataType = pa.struct(self.struct_fields(f.struct, versions, path))
        else:
            value = _PRIMITIVE[f.element]
        if f.kind == "array":
            return pa.list_(pa.field("item", value, nullable=False))
        return value


def message_schema(spec: MessageSpec, version: int | None = None) -> pa.Schema:
    """The Arrow schema of one version of a message, or (``version=None``) of all versions."""
    builder = _Builder(spec)
    meta = {
        "kafka.name": spec.name,
        "kafka.type": spec.type,
        "kafka.valid_versions": str(spec.valid_versions),
        "kafka.flexible_versions": str(spec.flexible_versions),
        "kafka.spec_sha256": spec.sha256,
    }
    if spec.api_key is not None:
        meta["kafka.api_key"] = str(spec.api_key)
    if not spec.optional_versions.empty:
        meta["kafka.versions_with_optional"] = str(spec.optional_versions)
    if version is None:
        fields = [
            pa.field(
                VERSION_COLUMN,
                pa.int16(),
                nullable=False,
                metadata={"kafka.about": "The message version this row was read at."},
            )
        ]
        fields += builder.struct_fields(spec.root, list(spec.valid_versions), spec.name)
    else:
        spec.check_version(version)
        meta["kafka.version"] = str(version)
        fields = builder.struct_fields(spec.root, [version], spec.name)
    return pa.schema(fields, metadata=meta)


# ---- defaults as row values --------------------------------------------------------------------


def default_value(spec: MessageSpec, f: Field, version: int | None) -> Any:
    """The value a field takes when the wire does not carry it (absent tag, older version), as
    a row value of its column (``pa.array`` of it gives the column's type).

    ``version=None`` gives it in the all-versions shape (a struct default then has every
    field of every version)."""
    d = f.default
    if d is STRUCT_DEFAULTS:
        assert f.struct is not None
        return default_struct(spec, f.struct, version)
    if f.element == "uuid" and isinstance(d, bytes):
        return uuid.UUID(bytes=d)
    if isinstance(d, list):
        return list(d)
    return d


def default_struct(spec: MessageSpec, s: Struct, version: int | None) -> dict[str, Any]:
    """A struct of defaults as a row value: every field the version(s) have, with the
    ``_tags_present`` and ``_unknown_tags`` columns the struct carries."""
    versions = list(spec.valid_versions) if version is None else [version]
    out: dict[str, Any] = {}
    for f in (*s.optional_fields, *s.fields):
        in_some = any(v in f.versions for v in versions)
        if f.optional:
            in_some = in_some and any(spec.has_optional_buffer(v) for v in versions)
        if in_some:
            out[column_name(f.name)] = default_value(spec, f, version)
    if has_tags_present(spec, s, versions):
        out[TAGS_PRESENT] = []
    if any(spec.is_flexible(v) or spec.has_optional_buffer(v) for v in versions):
        out[UNKNOWN_TAGS] = []
    return out
