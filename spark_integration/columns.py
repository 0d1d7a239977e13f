"""Columns of message bodies decoded inside ``DataFrame.mapInArrow``: ``decode_column`` for any
message, ``decode_consumer_offsets`` and ``decode_cluster_metadata`` for Kafka's internal
topics, each task running the same kernels as ``ak.decode`` and ``arrowkafka.topics``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import arrowkafka as ak
from arrowkafka import topics

from .types import drop_tag_columns, spark_arrow_type, spark_type, task_specs, without_tag_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["decode_column", "decode_consumer_offsets", "decode_cluster_metadata"]


def _struct_type(specs: ak.SpecSet, message: str, version: int | None, errors: str) -> pa.StructType:
    """The decoded struct's Arrow type: the version's schema (all versions if None); with
    errors="null" its fields may be null, as in ak.decode."""
    fields = list(specs.arrow_schema(message, version))
    if errors == "null":
        fields = [f.with_nullable(True) for f in fields]
    return pa.struct(fields)


class _DecodeBatches:
    """The function mapInArrow runs on each task's batches (a class, so it pickles by
    reference to this installed module)."""

    def __init__(
        self,
        column: str,
        message: str,
        version: int | None,
        version_column: str | None,
        into: str,
        errors: str,
        folders: tuple[str, ...],
        tag_columns: bool = True,
    ) -> None:
        self.column, self.message, self.version = column, message, version
        self.version_column, self.into, self.errors, self.folders = version_column, into, errors, folders
        self.tag_columns = tag_columns

    chunk_bytes = 4 << 20

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        specs = task_specs(self.folders)
        out_type = spark_arrow_type(_struct_type(specs, self.message, self.version, self.errors))
        if not self.tag_columns:
            out_type = without_tag_columns(out_type)
        for batch in _slices(batches, self.column, self.chunk_bytes):
            bodies = batch.column(self.column)
            if self.version_column is None:
                assert self.version is not None
                rows, bad = self.decode(specs, bodies, self.version, False)
            else:
                rows, bad = self.decode_by_version(specs, bodies, batch.column(self.version_column))
            mask = pa.array(bad) if bad is not None and bad.any() else None
            struct = pa.StructArray.from_arrays(rows.columns, fields=list(rows.schema), mask=mask)
            if not self.tag_columns:
                struct = drop_tag_columns(struct)
            yield batch.append_column(self.into, struct.cast(out_type))

    def decode(
        self, specs: ak.SpecSet, bodies: pa.Array, version: int, all_versions: bool
    ) -> tuple[pa.RecordBatch, np.ndarray | None]:
        if self.errors == "raise":
            return specs.decode(bodies, self.message, version, all_versions=all_versions), None
        rows, rejects = specs.decode(bodies, self.message, version, errors="null", all_versions=all_versions)
        bad = np.zeros(len(bodies), bool)
        bad[rejects.column("index").to_numpy()] = True
        return rows, bad

    def decode_by_version(
        self, specs: ak.SpecSet, bodies: pa.Array, versions: pa.Array
    ) -> tuple[pa.RecordBatch, np.ndarray | None]:
        """Rows of several versions: decode each version's rows in the all-versions schema,
        then put them back in input order."""
        v = np.asarray(versions.to_numpy(zero_copy_only=False))
        order = np.argsort(v, kind="stable")
        parts, bads = [], []
        for version in np.unique(v):
            idx = np.flatnonzero(v == version)
            rows, bad = self.decode(specs, bodies.take(pa.array(idx)), int(version), True)
            parts.append(
                pa.Table.from_batches([rows]).cast(specs.arrow_schema(self.message).with_metadata(None))
            )
            bads.append(bad if bad is not None else np.zeros(len(idx), bool))
        table = pa.concat_tables(parts) if parts else specs.arrow_schema(self.message).empty_table()
        back = np.empty(len(v), np.int64)
        back[order] = np.arange(len(v))
        rows = table.take(pa.array(back)).combine_chunks()
        batch = rows.to_batches()[0] if rows.num_rows else pa.RecordBatch.from_pylist([], schema=rows.schema)
        bad = np.concatenate(bads)[back] if bads else np.zeros(0, bool)
        return batch, (bad if self.errors == "null" else None)


def _slices(batches: Iterator[pa.RecordBatch], column: str, nbytes: int) -> Iterator[pa.RecordBatch]:
    """Each batch cut into runs of rows holding about ``nbytes`` of ``column``: the JVM turns
    one decoded run into rows while this worker decodes the next, instead of waiting for the
    whole batch (Spark sends up to 10,000 rows at a time)."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        sizes = pc.fill_null(pc.binary_length(batch.column(column)), 0).to_numpy()
        ends = np.cumsum(sizes, dtype=np.int64)
        cuts = np.searchsorted(ends, np.arange(nbytes, int(ends[-1]), nbytes), side="right")
        start = 0
        for stop in [*np.unique(cuts[cuts > 0]).tolist(), batch.num_rows]:
            if stop > start:
                yield batch.slice(start, stop - start)
                start = stop


def decode_column(
    df: DataFrame,
    column: str,
    message: str,
    version: int | str,
    *,
    into: str | None = None,
    errors: str = "raise",
    specs: Sequence[str] = (),
    tag_columns: bool = True,
) -> DataFrame:
    """``df`` with a struct column (``into``, default the message name) holding each row's
    ``column`` decoded as ``message``.

    ``version`` is an int, or the name of an integer column holding each row's version (the
    struct is then in the all-versions schema, with ``_version``). ``errors`` is ``ak.decode``'s:
    ``"raise"`` fails the job on the first bad body with arrowkafka's message, ``"null"``
    leaves that row's struct null. ``specs`` are spec folders, as ``ak.load_specs`` takes them
    (the vendored specs if empty); the workers must see the same paths. ``tag_columns=False``
    leaves out every struct's ``_unknown_tags`` and ``_tags_present`` (what encoding the rows
    again needs, not what queries read): Spark's JVM makes an object of each, even empty, when
    it turns the result into rows: a fifth to a third of a nested message's task (Metadata v12).
    """
    if errors not in ("raise", "null"):
        raise ValueError(f"errors must be 'raise' or 'null', not {errors!r}")
    from pyspark.sql import types as T

    folders = tuple(str(f) for f in specs)
    version_column = version if isinstance(version, str) else None
    into = into or message
    fixed_version = None if version_column else int(version)
    arrow = _struct_type(task_specs(folders), message, fixed_version, errors)
    struct = spark_type(arrow if tag_columns else without_tag_columns(spark_arrow_type(arrow)))
    out = T.StructType([*df.schema.fields, T.StructField(into, struct, True)])
    fn = _DecodeBatches(column, message, fixed_version, version_column, into, errors, folders, tag_columns)
    return df.mapInArrow(fn, out)


class _DecodeTopic:
    """mapInArrow function for one record type of an internal topic: keeps that type's rows
    and decodes them with ``arrowkafka.topics``."""

    def __init__(
        self, topic: str, record: str, key: str | None, value: str, folders: tuple[str, ...]
    ) -> None:
        self.topic, self.record, self.key, self.value, self.folders = topic, record, key, value, folders

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        specs = task_specs(self.folders)
        for batch in batches:
            keep = [c for c in batch.schema.names if c not in (self.key, self.value)]
            if self.topic == "__consumer_offsets":
                assert self.key is not None
                tables = topics.decode_consumer_offsets(
                    batch.column(self.key), batch.column(self.value), specs=specs
                )
                t = tables.get(self.record)
                cols = ["key", "value"]
            else:
                tables = topics.decode_cluster_metadata(batch.column(self.value), specs=specs)
                t = tables.get(self.record)
                if t is not None:
                    record = pa.StructArray.from_arrays(
                        [c.combine_chunks() for c in t.columns[1:]], fields=list(t.schema)[1:]
                    )
                    t = pa.table({"_index": t.column("_index"), "record": record})
                cols = ["record"]
            out_types = _topic_types(specs, self.topic, self.record)
            if t is None:
                continue
            rows = batch.select(keep).take(t.column("_index").combine_chunks())
            for c in cols:
                rows = rows.append_column(c, t.column(c).combine_chunks().cast(out_types[c]))
            yield rows


def _topic_types(specs: ak.SpecSet, topic: str, record: str) -> dict[str, pa.DataType]:
    """The Spark-exchange Arrow types of a record type's decoded columns."""

    def nullable(name: str) -> pa.DataType:
        return spark_arrow_type(pa.struct([f.with_nullable(True) for f in specs.arrow_schema(name)]))

    if topic == "__consumer_offsets":
        return {
            "key": spark_arrow_type(pa.struct(list(specs.arrow_schema(record + "Key")))),
            "value": nullable(record + "Value"),
        }
    return {"record": spark_arrow_type(pa.struct(list(specs.arrow_schema(record))))}


def _decode_topic(
    df: DataFrame, topic: str, records: list[str], key: str | None, value: str, folders: tuple[str, ...]
) -> dict[str, DataFrame]:
    from pyspark.sql import types as T

    specs = task_specs(folders)
    base = [f for f in df.schema.fields if f.name not in (key, value)]
    out = {}
    for record in records:
        types = _topic_types(specs, topic, record)
        fields = [T.StructField(c, spark_type(t), c == "value") for c, t in types.items()]
        out[record] = df.mapInArrow(
            _DecodeTopic(topic, record, key, value, folders), T.StructType(base + fields)
        )
    return out


def decode_consumer_offsets(
    df: DataFrame, *, key: str = "key", value: str = "value", specs: Sequence[str] = ()
) -> dict[str, DataFrame]:
    """``__consumer_offsets`` records as Spark's Kafka source delivers them (binary ``key`` and
    ``value``) -> one DataFrame per record type (``OffsetCommit``, ``GroupMetadata`` ...): the
    other input columns, then ``key`` and ``value`` structs (``value`` null for a tombstone).
    Each DataFrame is its own pass over ``df``: cache ``df`` if it is expensive to compute."""
    folders = tuple(str(f) for f in specs)
    records = sorted(set(topics.consumer_offsets_types(task_specs(folders)).values()))
    return _decode_topic(df, "__consumer_offsets", records, key, value, folders)


def decode_cluster_metadata(
    df: DataFrame, *, value: str = "value", specs: Sequence[str] = ()
) -> dict[str, DataFrame]:
    """``__cluster_metadata`` record values -> one DataFrame per KRaft record type
    (``TopicRecord``, ``PartitionRecord`` ...): the other input columns (the key, null in that
    topic, is dropped with the value), then a ``record`` struct in the record's all-versions
    schema. Each DataFrame is its own pass over ``df``."""
    folders = tuple(str(f) for f in specs)
    records = sorted(topics.cluster_metadata_types(task_specs(folders)).values())
    return _decode_topic(df, "__cluster_metadata", records, "key", value, folders)
