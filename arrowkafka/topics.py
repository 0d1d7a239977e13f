"""Kafka's internal topics: record keys and values that frame a message body.

- ``__consumer_offsets`` (the group coordinator's records): the key is an int16 record type
  and the body of ``<Name>Key`` at version = that type; the value is an int16 version and the
  body of ``<Name>Value`` at that version, or null (a tombstone: the key was deleted).
- ``__cluster_metadata`` (KRaft metadata records): the value is an unsigned varint frame
  version (1), an unsigned varint api key (the record type: the ``apiKey`` of a ``metadata``
  spec) and an unsigned varint version, then the body (Kafka's ``AbstractApiMessageSerde``).

Both give one table per record type, rows in input order with ``_index`` naming the input
row, decoded by the batch kernels (one call per record type and version). Encoding goes the
other way, so tests and examples can build real records.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from arrowkafka.api import SpecSet, default_specs
from arrowkafka.codec.decode import as_bodies
from arrowkafka.errors import Corrupt, DecodeError, Truncated
from arrowkafka.wire import read_uvarint, uvarint_bytes

__all__ = [
    "cluster_metadata_types",
    "consumer_offsets_types",
    "decode_cluster_metadata",
    "decode_consumer_offsets",
    "encode_cluster_metadata",
    "encode_consumer_offsets",
]

METADATA_FRAME_VERSION = 1


def consumer_offsets_types(specs: SpecSet | None = None) -> dict[int, str]:
    """Record type -> record name (``OffsetCommit``, ``GroupMetadata`` ...): the group
    coordinator's ``<Name>Key`` specs, whose versions are the record types."""
    specs = specs or default_specs()
    out: dict[int, str] = {}
    for name in specs:
        spec = specs[name]
        if (
            name.endswith("Key")
            and "group-coordinator" in Path(spec.source).parts
            and name[:-3] + "Value" in specs
        ):
            for t in spec.valid_versions:
                out[t] = name[:-3]
    return out


def cluster_metadata_types(specs: SpecSet | None = None) -> dict[int, str]:
    """Api key -> record name (``PartitionRecord`` ...) of the KRaft metadata specs (those of
    Kafka's ``metadata`` module: the storage module's remote-log records reuse the api keys)."""
    specs = specs or default_specs()
    out: dict[int, str] = {}
    for name in specs:
        spec = specs[name]
        if spec.type == "metadata" and spec.api_key is not None and "metadata" in Path(spec.source).parts:
            out[spec.api_key] = name
    return out


def _decode_groups(
    specs: SpecSet,
    groups: dict[tuple[str, int], list[int]],
    bodies: list[bytes | None],
    prefix: list[int],
    topic: str,
) -> dict[str, pa.Table]:
    """Decode each (message, version) group in the all-versions schema; tables by message,
    rows in input order, with ``_index``. Errors name the input record and the byte offset in
    it (``prefix[i]``: the frame bytes before record i's body)."""
    parts: dict[str, list[pa.Table]] = defaultdict(list)
    for (message, version), idx in sorted(groups.items()):
        if version not in specs[message].valid_versions:
            reason = f"{message} has no version {version} (valid versions: {specs[message].valid_versions})"
            raise Corrupt(reason, message_index=idx[0], message=topic, version=version)
        try:
            batch = specs.decode([bodies[i] for i in idx], message, version, all_versions=True)
        except DecodeError as e:
            i = idx[e.message_index]
            raise type(e)(
                e.reason, path=e.path, message_index=i, offset=prefix[i] + e.offset,
                size=prefix[i] + e.size, message=f"{topic} {message}", version=version,
            ) from None  # fmt: skip
        table = pa.Table.from_batches([batch])
        parts[message].append(table.add_column(0, "_index", pa.array(idx, pa.int64())))
    out = {}
    for message, tables in parts.items():
        table = pa.concat_tables(tables)
        out[message] = table.take(np.argsort(table.column("_index").to_numpy(), kind="stable"))
    return out


def decode_cluster_metadata(values: Any, *, specs: SpecSet | None = None) -> dict[str, pa.Table]:
    """``__cluster_metadata`` record values -> {record name: table}: the record's columns in
    its all-versions schema (``_version`` first), after ``_index``."""
    specs = specs or default_specs()
    types = cluster_metadata_types(specs)
    raw: list[bytes | None] = as_bodies(values).to_pylist()
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    bodies: list[bytes | None] = []
    prefix: list[int] = []  # frame bytes before each body
    for i, value in enumerate(raw):
        if value is None:
            raise Corrupt("a null metadata record value", message_index=i, message="__cluster_metadata")
        try:
            frame, pos = read_uvarint(value, 0)
            key, pos = read_uvarint(value, pos)
            version, pos = read_uvarint(value, pos)
        except ValueError as e:
            raise Corrupt(
                f"reading the record frame: {e}", message_index=i, message="__cluster_metadata"
            ) from None
        except IndexError:
            raise Truncated(
                "reading the record frame: the value ends inside it",
                message_index=i,
                size=len(value),
                message="__cluster_metadata",
            ) from None
        if frame != METADATA_FRAME_VERSION:
            raise Corrupt(
                f"frame version {frame}, expected {METADATA_FRAME_VERSION}",
                message_index=i,
                message="__cluster_metadata",
            )
        if key not in types:
            raise Corrupt(
                f"unknown metadata record type {key}", message_index=i, offset=1, message="__cluster_metadata"
            )
        groups[(types[key], version)].append(i)
        bodies.append(value[pos:])
        prefix.append(pos)
    return _decode_groups(specs, groups, bodies, prefix, "__cluster_metadata")


def decode_consumer_offsets(keys: Any, values: Any, *, specs: SpecSet | None = None) -> dict[str, pa.Table]:
    """``__consumer_offsets`` records (key and value bytes) -> {record name: table} with
    ``_index``, a ``key`` struct and a ``value`` struct (all-versions schema; null for a
    tombstone)."""
    specs = specs or default_specs()
    types = consumer_offsets_types(specs)
    raw_keys: list[bytes | None] = as_bodies(keys).to_pylist()
    raw_values: list[bytes | None] = as_bodies(values).to_pylist()
    key_groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    value_groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    key_bodies: list[bytes | None] = []
    value_bodies: list[bytes | None] = []
    names = []
    for i, (k, v) in enumerate(zip(raw_keys, raw_values, strict=True)):
        if k is None or len(k) < 2:
            raise Truncated(
                "reading the record type: a key needs 2 bytes", message_index=i, message="__consumer_offsets"
            )
        t = int.from_bytes(k[:2], "big", signed=True)
        if t not in types:
            raise Corrupt(f"unknown record type {t}", message_index=i, message="__consumer_offsets")
        names.append(types[t])
        key_groups[(types[t] + "Key", t)].append(i)
        key_bodies.append(k[2:])
        if v is None:
            value_bodies.append(None)
            continue
        if len(v) < 2:
            raise Truncated(
                "reading the value version: a value needs 2 bytes",
                message_index=i,
                message="__consumer_offsets",
            )
        value_groups[(types[t] + "Value", int.from_bytes(v[:2], "big", signed=True))].append(i)
        value_bodies.append(v[2:])
    two = [2] * len(key_bodies)  # the int16 record type (key) and version (value)
    decoded_keys = _decode_groups(specs, key_groups, key_bodies, two, "__consumer_offsets key")
    decoded_values = _decode_groups(specs, value_groups, value_bodies, two, "__consumer_offsets value")
    out = {}
    for name in sorted(set(names)):
        k = decoded_keys[name + "Key"]
        index = k.column("_index").combine_chunks()
        key_struct = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in k.columns[1:]], fields=list(k.schema)[1:]
        )
        value_schema = specs.arrow_schema(name + "Value")
        v = decoded_values.get(name + "Value")
        value_struct = _aligned_values(index, v, value_schema)
        out[name] = pa.table({"_index": index, "key": key_struct, "value": value_struct})
    return out


def _aligned_values(index: pa.Array, values: pa.Table | None, schema: pa.Schema) -> pa.Array:
    """The value struct for each row of ``index``: the decoded value, or null (tombstone)."""
    value_type = pa.struct([f.with_nullable(True) for f in schema])
    if values is None:
        return pa.nulls(len(index), value_type)
    where = {int(i): k for k, i in enumerate(values.column("_index").to_pylist())}
    take = pa.array([where.get(int(i)) for i in index.to_pylist()], pa.int64())
    struct = pa.StructArray.from_arrays(
        [c.combine_chunks().cast(f.type) for c, f in zip(values.columns[1:], schema, strict=True)],
        fields=list(value_type),
    )
    return struct.take(take)


def encode_consumer_offsets(
    name: str,
    keys: Any,
    values: Any | None,
    *,
    key_version: int,
    value_version: int,
    specs: SpecSet | None = None,
) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """Key and value bytes of ``__consumer_offsets`` records of one type (``key_version`` is
    the record type): rows of ``<name>Key`` and ``<name>Value`` (None: tombstones)."""
    specs = specs or default_specs()
    key_bodies = specs.encode(keys, name + "Key", key_version).to_pylist()
    prefix = key_version.to_bytes(2, "big", signed=True)
    k = pa.array([prefix + b for b in key_bodies], pa.binary())
    if values is None:
        return k, pa.nulls(len(k), pa.binary())
    vprefix = value_version.to_bytes(2, "big", signed=True)
    v = [vprefix + b for b in specs.encode(values, name + "Value", value_version).to_pylist()]
    return k, pa.array(v, pa.binary())


def encode_cluster_metadata(
    name: str, rows: Any, version: int, *, specs: SpecSet | None = None
) -> pa.BinaryArray:
    """``__cluster_metadata`` record values of one record type and version."""
    specs = specs or default_specs()
    api_key = specs[name].api_key
    assert api_key is not None, name
    head = bytes(uvarint_bytes(METADATA_FRAME_VERSION) + uvarint_bytes(api_key) + uvarint_bytes(version))
    return pa.array([head + b for b in specs.encode(rows, name, version).to_pylist()], pa.binary())
