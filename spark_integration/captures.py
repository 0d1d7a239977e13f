"""Captures decoded in parallel on Spark: pcap/pcapng files -> the CLI's tables, as Parquet.

Stage 1 reads the files with Spark's ``binaryFile`` source, one task per file, and runs
``traffic.frames_table`` on each: one row per whole frame (headers parsed, responses paired
with their requests), or per frame-level reject. Stage 2 runs ``traffic.decode_frames`` (the
CLI's own decoding, with its rules for rejects) on each task's frames and yields one wide row
per frame: the frame columns, one struct column per message type present (the all-versions
schema; null outside its own rows) and a ``_reject`` struct for what did not decode. Each
message type is then written from that cached result with Spark's Parquet writer, so the
output is readable by Spark as well as by anything else (the CLI's files are not: Spark
rejects their nanosecond timestamps and UUID columns).

Types are Spark's: unsigned integers widen, uuid is its 16 bytes, and timestamps hold
microseconds (a pcapng capture with nanosecond stamps loses the last three digits;
``_latency_ns`` is computed before and stays exact).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .types import spark_arrow_type, spark_type, task_specs

# ``arrowkafka.traffic`` is imported where it is used: it loads Numba, which a driver that only
# plans the job does not need.

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CaptureSummary", "capture_frames", "decode_captures", "decoded_frames"]

_REJECT = "_reject"
_MESSAGE = "_message"


@dataclass
class CaptureSummary:
    """What ``decode_captures`` saw and wrote: frames in = rows + rejects."""

    frames_in: int = 0
    rows: int = 0
    rejects: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # message -> rows written
    outdir: str = ""


def _spark_fields(schema: pa.Schema) -> list[pa.Field]:
    """The schema's fields in the types Spark exchanges, all nullable (a row holds either a
    frame or a reject)."""
    return [pa.field(f.name, spark_arrow_type(f.type)) for f in schema]


def _frames_type() -> pa.Schema:
    from arrowkafka.traffic import FRAMES_SCHEMA, REJECT_SCHEMA

    reject = pa.struct(_spark_fields(REJECT_SCHEMA))
    return pa.schema([*_spark_fields(FRAMES_SCHEMA), pa.field(_REJECT, reject)])


def _decoded_type(specs: Any, messages: Sequence[str]) -> pa.Schema:
    from arrowkafka.traffic import FRAME_COLUMNS, REJECT_SCHEMA

    structs = [pa.field(m, spark_arrow_type(pa.struct(list(specs.arrow_schema(m))))) for m in messages]
    reject = pa.field(_REJECT, pa.struct(_spark_fields(REJECT_SCHEMA)))
    return pa.schema([pa.field(_MESSAGE, pa.string()), *_spark_fields(FRAME_COLUMNS), *structs, reject])


def _to(table: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    """``table``'s columns cast to ``schema`` by name; columns it lacks are null. Unsafe casts:
    only widening and ns -> us truncation happen here."""
    n = table.num_rows
    cols = [
        table.column(f.name).combine_chunks().cast(f.type, safe=False)
        if f.name in table.column_names
        else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _struct(table: pa.Table) -> pa.StructArray:
    cols = [c.combine_chunks() for c in table.columns]
    return pa.StructArray.from_arrays(cols, fields=list(table.schema.with_metadata(None)))


class _CaptureFrames:
    """mapInArrow over ``binaryFile`` rows: each file's frames and frame-level rejects."""

    def __init__(self, broker_ports: tuple[int, ...], folders: tuple[str, ...]) -> None:
        self.broker_ports, self.folders = broker_ports, folders

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from arrowkafka.traffic import frames_table

        specs = task_specs(self.folders)
        out = _frames_type()
        for batch in batches:
            paths, contents = batch.column("path").to_pylist(), batch.column("content").to_pylist()
            for path, content in zip(paths, contents, strict=True):
                frames, rejects = frames_table([io.BytesIO(content)], specs, broker_ports=self.broker_ports)
                # the file's name, not the in-memory stream's
                frames = frames.set_column(0, "_capture", pa.array([path] * frames.num_rows, pa.string()))
                rejects = rejects.set_column(0, "capture", pa.array([path] * rejects.num_rows, pa.string()))
                if frames.num_rows:
                    yield _to(frames, out)
                if rejects.num_rows:
                    yield _reject_rows(rejects, out)


def _reject_rows(rejects: pa.Table, out: pa.Schema) -> pa.RecordBatch:
    """Rows of ``out`` with only ``_reject`` set, from rows of the REJECT_SCHEMA."""
    fields = list(out.field(_REJECT).type)
    flat = _to(rejects, pa.schema(fields))
    return _to(pa.table({_REJECT: pa.StructArray.from_arrays(flat.columns, fields=fields)}), out)


class _DecodeFrames:
    """mapInArrow over frames rows: ``decode_frames`` per batch, one wide row per frame."""

    def __init__(self, messages: tuple[str, ...], folders: tuple[str, ...]) -> None:
        self.messages, self.folders = messages, folders

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from arrowkafka.traffic import FRAME_COLUMNS, FRAMES_SCHEMA, decode_frames

        specs = task_specs(self.folders)
        out = _decoded_type(specs, self.messages)
        n_frame = len(FRAME_COLUMNS)
        for batch in batches:
            table = pa.Table.from_batches([batch])
            is_reject = pc.is_valid(table.column(_REJECT))
            passed = table.filter(is_reject)
            if passed.num_rows:  # frame-level rejects from stage 1
                yield _to(passed.select([_REJECT]), out)
            frames = table.filter(pc.invert(is_reject)).select(FRAMES_SCHEMA.names)
            if not frames.num_rows:
                continue
            tables, rejects = decode_frames(frames.cast(FRAMES_SCHEMA), specs)
            for message, decoded in tables.items():
                # decode_frames' layout: the frame columns, then the message's own (_version first)
                part = decoded.select(FRAME_COLUMNS.names)
                part = part.append_column(_MESSAGE, pa.array([message] * decoded.num_rows, pa.string()))
                own = decoded.select(decoded.column_names[n_frame:])
                yield _to(part.append_column(message, _struct(own)), out)
            if rejects.num_rows:
                yield _reject_rows(rejects, out)


def capture_frames(
    spark: SparkSession,
    paths: str | Sequence[str],
    *,
    broker_ports: Iterable[int] = (9092,),
    specs: Sequence[str] = (),
) -> DataFrame:
    """Stage 1: the captures' frames as a DataFrame, one task per file (``binaryFile``; paths,
    folders and globs as Spark takes them). Columns: ``traffic.FRAMES_SCHEMA`` in Spark's types
    (``_capture`` is the file's path as Spark names it), then a ``_reject`` struct that is
    set, alone, on the rows of what could not be framed, parsed or paired."""
    folders = tuple(str(f) for f in specs)
    files = spark.read.format("binaryFile").load([paths] if isinstance(paths, str) else list(paths))
    # binaryFile packs small files into one partition: spread them, one per task
    files = files.select("path", "content").repartition(max(len(files.inputFiles()), 1))
    return files.mapInArrow(
        _CaptureFrames(tuple(int(p) for p in broker_ports), folders), _spark_schema(_frames_type())
    )


def decoded_frames(frames: DataFrame, messages: Sequence[str], *, specs: Sequence[str] = ()) -> DataFrame:
    """Stage 2: ``capture_frames`` rows decoded (``traffic.decode_frames`` in each task), one
    row per frame: ``_message``, the frame columns, one struct column per message type in
    ``messages`` (null outside that type's rows) and ``_reject`` (set, alone, on rejects)."""
    folders = tuple(str(f) for f in specs)
    messages = tuple(sorted(messages))
    out = _decoded_type(task_specs(folders), messages)
    return frames.mapInArrow(_DecodeFrames(messages, folders), _spark_schema(out))


def _spark_schema(schema: pa.Schema) -> Any:
    """A Spark StructType for an Arrow schema already in the types Spark exchanges."""
    return spark_type(pa.struct(list(schema)))


_conf_lock = threading.Lock()


def decode_captures(
    spark: SparkSession,
    paths: str | Sequence[str],
    outdir: str | Path,
    *,
    broker_ports: Iterable[int] = (9092,),
    specs: Sequence[str] = (),
    writers: int = 8,
) -> CaptureSummary:
    """Decode captures on Spark into ``outdir``: ``<Message>.parquet`` per message type and
    ``_rejects.parquet``, each a folder of Parquet parts as Spark writes them, with the CLI's
    columns (frame columns, then the all-versions schema) in Spark's types.

    The frames and the decoded rows are cached while the tables are written (``writers`` of
    them at a time), then released. Timestamps are written as Parquet TIMESTAMP_MICROS (UTC):
    the session's ``spark.sql.parquet.outputTimestampType`` is set for the writes and put back.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    out = str(outdir)
    frames = capture_frames(spark, paths, broker_ports=broker_ports, specs=specs)
    frames = frames.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        seen = frames.groupBy(_MESSAGE).count().collect()
        messages = sorted(r[_MESSAGE] for r in seen if r[_MESSAGE] is not None)
        summary = CaptureSummary(frames_in=sum(r["count"] for r in seen), outdir=out)
        decoded = decoded_frames(frames, messages, specs=specs).persist(StorageLevel.MEMORY_AND_DISK)
        counts = {r[_MESSAGE]: r["count"] for r in decoded.groupBy(_MESSAGE).count().collect()}
    finally:
        frames.unpersist()
    try:
        from arrowkafka.traffic import FRAME_COLUMNS

        summary.rejects = counts.pop(None, 0)
        summary.tables = {m: counts.get(m, 0) for m in messages if counts.get(m, 0)}
        summary.rows = sum(summary.tables.values())
        jobs = {
            m: decoded.where(F.col(_MESSAGE) == m).select(*FRAME_COLUMNS.names, f"`{m}`.*")
            for m in summary.tables
        }
        jobs["_rejects"] = decoded.where(F.col(_REJECT).isNotNull()).select(f"{_REJECT}.*")
        with _conf_lock:
            key = "spark.sql.parquet.outputTimestampType"
            before = spark.conf.get(key)
            spark.conf.set(key, "TIMESTAMP_MICROS")
            try:
                with ThreadPoolExecutor(max(1, writers)) as pool:
                    done = [
                        pool.submit(df.write.mode("overwrite").parquet, f"{out}/{name}.parquet")
                        for name, df in jobs.items()
                    ]
                    for d in done:
                        d.result()
            finally:
                if before is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, before)
    finally:
        decoded.unpersist()
    return summary
