"""Captures decoded in parallel on Spark: pcap/pcapng files -> the CLI's tables, as Parquet.

Stage 1 reads the files with Spark's ``binaryFile`` source, one task per file, and runs
``traffic.frame_chunks`` on each: one row per whole frame (headers parsed, responses paired
with their requests), or per frame-level reject. A small job over the cached frames counts
them per message and version (the tables to make) and finds the topic names. Stage 2 runs
``traffic.decode_frames`` (the CLI's own decoding, with its rules for rejects) on each task's
frames and yields one wide row per frame: the frame columns, one struct column per message
type present (the all-versions schema; null outside its own rows) and a ``_reject`` struct
for what did not decode. Each message type is then written from that cached result with
Spark's Parquet writer, in the types the CLI's files have too (``schema.portable_type``).

The records of Produce requests and Fetch (and ShareFetch) responses are decoded in stage 2
too, by the CLI's ``traffic.records.records_of``, into three more struct columns of the same
wide rows (``record_batches``, ``records``, ``record_markers``, and one per KRaft control record
spec, ``record_control.LeaderChangeMessage`` ...), as the CLI's job would:

- Topic ids (Fetch v13+) are named by the capture's Metadata and CreateTopics responses. The
  CLI learns names a 32 MB chunk at a time, from the chunks read so far, this one included; so
  stage 1 numbers each frame's chunk (``_chunk``), the counting job also decodes those
  responses (only those) and collects the ids they name per capture and chunk, the driver keeps
  each (capture, id, name) with the first chunk that named it, and each stage 2 task names a
  chunk's records from its capture's names up to that chunk, wherever the responses were
  decoded. The names travel with the task's function (PySpark broadcasts a large one).
- Batch ids count as the CLI counts them: through each capture in its order (chunk by chunk,
  and in each chunk message by message), then the captures in order of their URIs. A stage 2
  task holds a capture's frames in stage 1's order (one task per file, and stage 2 maps stage
  1's partitions as they are), so it counts each capture's batches from 0, and each capture's
  offset (the batches of the captures before it) is added when the tables are written.

Types are the portable ones (Spark's): unsigned integers widen, uuid is its 16 bytes, and timestamps hold
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

from arrowkafka.output import REASON_NUMBER, Causes, frames_line, record_lines

from .types import spark_arrow_type, spark_type, task_specs

# ``arrowkafka.traffic`` is imported where it is used: it loads Numba, which a driver that only
# plans the job does not need.

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["CaptureSummary", "capture_frames", "decode_captures", "decoded_frames"]

_REJECT = "_reject"
_MESSAGE = "_message"
_CAPTURE = "_capture"
_CHUNK = "_chunk"
# the record tables: struct columns of the decoded rows, and those rows' ``_message``
RECORD_TABLES = ("record_batches", "records", "record_markers")
_RECORD_REJECT = "_record_rejects"  # ``_message`` of a rejected record batch's row
# what a survey of the frames collects: frames per (message, version), or a topic id that a
# capture's Metadata or CreateTopics responses named in a chunk
_SURVEY = pa.schema(
    [
        pa.field(_MESSAGE, pa.string()),
        pa.field("_version", pa.int16()),
        pa.field("count", pa.int64()),
        pa.field(_CAPTURE, pa.string()),
        pa.field(_CHUNK, pa.int32()),
        pa.field("topic_id", pa.binary()),
        pa.field("name", pa.string()),
    ]
)


@dataclass
class CaptureSummary:
    """What ``decode_captures`` saw and wrote: frames in = rows + rejects."""

    frames_in: int = 0
    rows: int = 0
    rejects: int = 0
    tables: dict[str, int] = field(default_factory=dict)  # message -> rows written
    outdir: str = ""
    # the records inside Produce requests and Fetch responses, as the CLI's Summary counts them
    # (rejected batches are not frames: they stay out of ``rejects``)
    record_batches: int = 0
    records: int = 0
    record_rejects: int = 0
    # KRaft control records written, per table (``record_control.LeaderChangeMessage`` ...)
    control: dict[str, int] = field(default_factory=dict)
    causes: Causes = field(default_factory=Causes)  # rows of rejects by cause

    def render(self) -> str:
        """What the job did, in the lines ``arrowkafka decode`` ends its summary with."""
        lines = [frames_line(self.frames_in, self.rows, self.rejects)]
        lines += record_lines(self.records, self.record_batches, self.record_rejects, self.control)
        lines += self.causes.lines()
        lines.append(
            f"wrote {len(self.tables)} message tables, the record tables and rejects to {self.outdir}/"
        )
        return "\n".join(lines)


def _spark_fields(schema: pa.Schema) -> list[pa.Field]:
    """The schema's fields in the types Spark exchanges, all nullable (a row holds either a
    frame or a reject)."""
    return [pa.field(f.name, spark_arrow_type(f.type)) for f in schema]


def _frames_type() -> pa.Schema:
    from arrowkafka.traffic import FRAMES_SCHEMA, REJECT_SCHEMA

    reject = pa.struct(_spark_fields(REJECT_SCHEMA))
    chunk = pa.field(_CHUNK, pa.int32())
    return pa.schema([*_spark_fields(FRAMES_SCHEMA), chunk, pa.field(_REJECT, reject)])


def _decoded_type(specs: Any, messages: Sequence[str], records: bool, payloads: bool) -> pa.Schema:
    from arrowkafka.schema import without_records
    from arrowkafka.traffic import FRAME_COLUMNS, REJECT_SCHEMA
    from arrowkafka.traffic.records import control_schemas, record_schemas
    from arrowkafka.traffic.topic_names import named_schema

    def kept(message: str) -> pa.Schema:  # no payloads: no ``records`` fields, as the CLI writes them
        schema = named_schema(specs, message)
        return schema if payloads else without_records(schema)

    structs = [pa.field(m, spark_arrow_type(pa.struct(list(kept(m))))) for m in messages]
    reject = pa.field(_REJECT, pa.struct(_spark_fields(REJECT_SCHEMA)))
    capture: list[pa.Field] = []
    if records:  # the record rows name their capture: its batch ids are offset by it
        capture = [pa.field(_CAPTURE, pa.string())]
        schemas = record_schemas(payloads)
        structs += [pa.field(t, pa.struct(_spark_fields(schemas[t]))) for t in RECORD_TABLES]
        # KRaft control records (a controller's Fetch of the metadata log), a struct per spec
        structs += [pa.field(t, pa.struct(_spark_fields(s))) for t, s in control_schemas().items()]
    head = [pa.field(_MESSAGE, pa.string()), *capture]
    return pa.schema([*head, *_spark_fields(FRAME_COLUMNS), *structs, reject])


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
    """mapInArrow over ``binaryFile`` rows: each file's frames and frame-level rejects, a chunk
    at a time as the CLI reads them (``_chunk`` numbers it), each chunk's frames grouped."""

    def __init__(
        self, broker_ports: tuple[int, ...], folders: tuple[str, ...], chunk_bytes: int | None
    ) -> None:
        self.broker_ports, self.folders, self.chunk_bytes = broker_ports, folders, chunk_bytes

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from arrowkafka.traffic import frame_chunks
        from arrowkafka.traffic.chunks import CHUNK_BYTES

        specs = task_specs(self.folders)
        out = _frames_type()
        for batch in batches:
            paths, contents = batch.column("path").to_pylist(), batch.column("content").to_pylist()
            for path, content in zip(paths, contents, strict=True):
                chunks = frame_chunks([io.BytesIO(content)], specs, broker_ports=self.broker_ports,
                                      chunk_bytes=self.chunk_bytes or CHUNK_BYTES)  # fmt: skip
                for chunk, (frames, rejects) in enumerate(chunks):
                    n = frames.num_rows
                    # the file's name, not the in-memory stream's
                    frames = frames.set_column(0, "_capture", pa.repeat(pa.scalar(path, pa.string()), n))
                    frames = frames.append_column(_CHUNK, pa.repeat(pa.scalar(chunk, pa.int32()), n))
                    rejects = rejects.set_column(
                        0, "capture", pa.repeat(pa.scalar(path, pa.string()), rejects.num_rows)
                    )
                    if n:
                        yield _to(frames, out)
                    if rejects.num_rows:
                        yield _reject_rows(rejects, out)


def _reject_rows(rejects: pa.Table, out: pa.Schema, **columns: str) -> pa.RecordBatch:
    """Rows of ``out`` with ``_reject`` set from rows of the REJECT_SCHEMA, and ``columns`` (a
    string for every row) set too; nothing else."""
    fields = list(out.field(_REJECT).type)
    flat = _to(rejects, pa.schema(fields))
    n = rejects.num_rows
    cols = {name: pa.repeat(pa.scalar(v, pa.string()), n) for name, v in columns.items()}
    return _to(pa.table({**cols, _REJECT: pa.StructArray.from_arrays(flat.columns, fields=fields)}), out)


def _runs(frames: pa.Table) -> Iterator[tuple[str, int, pa.Table]]:
    """``frames`` cut where the capture or the chunk changes: (capture, chunk, its frames)."""
    import numpy as np

    capture = frames.column("_capture").combine_chunks().dictionary_encode()
    codes = np.asarray(capture.indices)
    chunk = frames.column(_CHUNK).to_numpy()
    cuts = np.flatnonzero((np.diff(codes) != 0) | (np.diff(chunk) != 0)) + 1
    names = capture.dictionary.to_pylist()
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(codes)], strict=True):
        yield names[codes[lo]], int(chunk[lo]), frames.slice(lo, hi - lo)


class _Survey:
    """mapInArrow over frames rows: per batch, its frames per (message, version) (``_SURVEY``
    rows with ``count`` set), and the topic ids its Metadata and CreateTopics responses name,
    each run of a capture's chunk decoded (rows with ``topic_id`` set)."""

    def __init__(self, folders: tuple[str, ...]) -> None:
        self.folders = folders

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from arrowkafka.traffic import FRAMES_SCHEMA, decode_frames
        from arrowkafka.traffic.topic_names import TOPIC_NAMES, learn_topic_names

        specs = task_specs(self.folders)
        for batch in batches:
            table = pa.Table.from_batches([batch])
            counts = table.group_by([_MESSAGE, "_version"], use_threads=False).aggregate([([], "count_all")])
            yield _to(counts.rename_columns([_MESSAGE, "_version", "count"]), _SURVEY)
            naming = table.filter(pc.is_in(table.column(_MESSAGE), pa.array(list(TOPIC_NAMES))))
            for capture, chunk, run in _runs(naming) if naming.num_rows else ():
                tables, _ = decode_frames(run.select(FRAMES_SCHEMA.names).cast(FRAMES_SCHEMA), specs)
                names: dict[bytes, str] = {}
                learn_topic_names({m: [t] for m, t in tables.items()}, names)
                if not names:
                    continue
                n = len(names)
                found = {
                    _CAPTURE: pa.repeat(pa.scalar(capture, pa.string()), n),
                    _CHUNK: pa.repeat(pa.scalar(chunk, pa.int32()), n),
                    "topic_id": pa.array(list(names), pa.binary()),
                    "name": pa.array(list(names.values()), pa.string()),
                }
                yield _to(pa.table(found), _SURVEY)


# capture -> [(first chunk, topic id, name)], by chunk
_ByCapture = dict[str, list[tuple[int, bytes, str]]]


def _survey(
    frames: DataFrame, folders: tuple[str, ...]
) -> tuple[dict[tuple[str | None, int | None], int], _ByCapture]:
    """One small job over the frames: how many there are per (message, version) (None: the
    rejects), and what the captures' Metadata and CreateTopics responses name (only those are
    decoded): per capture, each (topic id, name) with the first chunk that named it."""
    counts: dict[tuple[str | None, int | None], int] = {}
    first: dict[tuple[str, bytes, str], int] = {}
    for r in frames.mapInArrow(_Survey(folders), _spark_schema(_SURVEY)).collect():
        if r["count"] is not None:
            key = (r[_MESSAGE], r["_version"])
            counts[key] = counts.get(key, 0) + r["count"]
        else:
            at = (r[_CAPTURE], bytes(r["topic_id"]), r["name"])
            first[at] = min(first.get(at, r[_CHUNK]), r[_CHUNK])
    names: _ByCapture = {}
    for (capture, tid, name), chunk in first.items():
        names.setdefault(capture, []).append((chunk, tid, name))
    for entries in names.values():  # a topic id names one topic; were it not so, the later chunk's wins
        entries.sort()
    return counts, names


class _DecodeFrames:
    """mapInArrow over frames rows: ``decode_frames`` per run of a capture's chunk, one wide row
    per frame, topics named by id alone named from ``names``; with ``records``, the rows of
    the record tables and their rejects."""

    def __init__(
        self,
        messages: tuple[str, ...],
        folders: tuple[str, ...],
        names: _ByCapture | None = None,
        payloads: bool = True,
        records: bool = False,
    ) -> None:
        self.messages, self.folders, self.names, self.payloads = messages, folders, names, payloads
        self.records = records

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.compute as pc

        from arrowkafka.traffic import FRAMES_SCHEMA, TABLE_COLUMNS, decode_frames
        from arrowkafka.traffic.records import rejects_without_payloads
        from arrowkafka.traffic.topic_names import name_topics

        specs = task_specs(self.folders)
        out = _decoded_type(specs, self.messages, self.records, self.payloads)
        n_frame = len(TABLE_COLUMNS)
        # per capture, the batch ids given so far: a capture's frames come to one task in order
        next_id: dict[str, int] = {}
        for batch in batches:
            table = pa.Table.from_batches([batch])
            is_reject = pc.is_valid(table.column(_REJECT))
            passed = table.filter(is_reject)
            if passed.num_rows:  # frame-level rejects from stage 1
                rows = pa.Table.from_struct_array(passed.column(_REJECT).combine_chunks())
                yield _reject_rows(rows if self.payloads else rejects_without_payloads(rows), out)
            frames = table.filter(pc.invert(is_reject))
            # a run each: a chunk's frames come grouped (no reordering), and its records are
            # named and counted as the CLI does them
            for capture, chunk, run in _runs(frames) if frames.num_rows else ():
                tables, rejects = decode_frames(run.select(FRAMES_SCHEMA.names).cast(FRAMES_SCHEMA), specs)
                names = self._names(capture, chunk)
                tables = {m: name_topics(t, specs, m, names) for m, t in tables.items()}
                for message, decoded in tables.items():
                    # decode_frames' layout: _capture, the frame columns, then the message's own
                    # (_version first)
                    part = decoded.select(TABLE_COLUMNS.names)
                    part = part.append_column(_MESSAGE, pa.repeat(pa.scalar(message, pa.string()), len(part)))
                    own = decoded.select(decoded.column_names[n_frame:])
                    yield _to(part.append_column(message, _struct(own)), out)
                if rejects.num_rows:
                    yield _reject_rows(rejects if self.payloads else rejects_without_payloads(rejects), out)
                if self.records:
                    yield from self._records(tables, capture, chunk, next_id, out)

    def _names(self, capture: str, chunk: int) -> dict[bytes, str]:
        """Topic id -> name: what the capture's responses said up to this chunk, this one included."""
        entries = self.names.get(capture, ()) if self.names is not None else ()
        return {tid: name for first, tid, name in entries if first <= chunk}

    def _records(
        self, tables: dict[str, pa.Table], capture: str, chunk: int, next_id: dict[str, int], out: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """The record tables' rows of a run's decoded tables (``traffic.records.records_of``,
        in the order the CLI takes them: the tables' order), batch ids counted per capture."""
        from arrowkafka.records.tables import CONTROL_TABLES
        from arrowkafka.schema import portable_table
        from arrowkafka.traffic.records import SOURCES, records_of

        names = self._names(capture, chunk)
        for message in [m for m in tables if m in SOURCES]:
            first_id = next_id.get(capture, 0)
            got = records_of(tables[message], message, first_id, self.payloads, capture, names)
            next_id[capture] = first_id + got.batches.num_rows
            tables_of = {**dict(zip(RECORD_TABLES, (got.batches, got.records, got.markers), strict=True)),
                         **{CONTROL_TABLES + name: rows for name, rows in got.control.items()}}  # fmt: skip
            for name, rows in tables_of.items():
                rows = portable_table(rows)  # (a time microseconds cannot hold: null, as the CLI's)
                if rows.num_rows:
                    n = rows.num_rows
                    cols = {
                        _MESSAGE: pa.repeat(pa.scalar(name), n),
                        _CAPTURE: pa.repeat(pa.scalar(capture), n),
                    }
                    yield _to(pa.table({**cols, name: _struct(rows)}), out)
            if got.rejects.num_rows:
                yield _reject_rows(got.rejects, out, **{_MESSAGE: _RECORD_REJECT, _CAPTURE: capture})


def capture_frames(
    spark: SparkSession,
    paths: str | Sequence[str],
    *,
    broker_ports: Iterable[int] = (9092,),
    specs: Sequence[str] = (),
    chunk_bytes: int | None = None,
) -> DataFrame:
    """Stage 1: the captures' frames as a DataFrame, one task per file (``binaryFile``; paths,
    folders and globs as Spark takes them). Columns: ``traffic.FRAMES_SCHEMA`` in Spark's types
    (``_capture`` is the file's path as Spark names it), ``_chunk`` (which ``chunk_bytes`` piece
    of the file the frame was read in, as the CLI reads it: 32 MB unless given), then a
    ``_reject`` struct that is set, alone, on the rows of what could not be framed, parsed or
    paired. Each file's rows come chunk by chunk, each chunk's frames grouped by (direction,
    message, version)."""
    folders = tuple(str(f) for f in specs)
    files = spark.read.format("binaryFile").load([paths] if isinstance(paths, str) else list(paths))
    # binaryFile packs small files into one partition: spread them, one per task
    files = files.select("path", "content").repartition(max(len(files.inputFiles()), 1))
    ports = tuple(int(p) for p in broker_ports)
    return files.mapInArrow(_CaptureFrames(ports, folders, chunk_bytes), _spark_schema(_frames_type()))


def decoded_frames(
    frames: DataFrame,
    messages: Sequence[str],
    *,
    specs: Sequence[str] = (),
    records: bool = False,
    payloads: bool = True,
) -> DataFrame:
    """Stage 2: ``capture_frames`` rows decoded (``traffic.decode_frames`` in each task), one
    row per frame: ``_message``, the frame columns, one struct column per message type in
    ``messages`` (null outside that type's rows) and ``_reject`` (set, alone, on rejects).

    ``records=True`` (this runs a small job first, for the topic names) adds ``_capture`` and a
    struct column per record table (``record_batches``, ``records``, ``record_markers`` and the
    ``record_control.<Spec>`` tables of KRaft control records):
    one row per batch, record or marker, whose ``_message`` names its table and ``_capture``
    its capture; a batch that does not decode is a ``_reject`` row whose ``_message`` is
    ``_record_rejects``. Batch ids count from 0 in each capture (``decode_captures`` offsets
    them), so each capture's frames must be in one partition in ``capture_frames``' order, as
    it gives them. ``payloads=False``: no record bytes anywhere (``decode_captures``)."""
    folders = tuple(str(f) for f in specs)
    names = _survey(frames, folders)[1] if records or _names_by_id(messages, folders) else None
    return _decoded(frames, messages, folders, names, payloads, records)


def _names_by_id(messages: Sequence[str], folders: tuple[str, ...]) -> bool:
    """Does any of ``messages`` name topics by id alone in some version (Fetch v13+)?"""
    from arrowkafka.traffic.topic_names import named_by_id

    specs = task_specs(folders)
    return any(named_by_id(specs[m]) for m in messages)


def _decoded(
    frames: DataFrame,
    messages: Sequence[str],
    folders: tuple[str, ...],
    names: _ByCapture | None,
    payloads: bool,
    records: bool,
) -> DataFrame:
    messages = tuple(sorted(messages))
    out = _decoded_type(task_specs(folders), messages, records, payloads)
    decode = _DecodeFrames(messages, folders, names, payloads, records)
    return frames.mapInArrow(decode, _spark_schema(out))


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
    payloads: bool = True,
    chunk_bytes: int | None = None,
    compression: str | None = None,
    overwrite: bool = False,
) -> CaptureSummary:
    """Decode captures on Spark into ``outdir``: ``<Message>.parquet`` per message type,
    ``rejects.parquet`` and the record tables ``record_batches.parquet``, ``records.parquet``
    and ``record_markers.parquet``, and ``record_control.<Spec>.parquet`` where KRaft control
    records were found (``payloads=False``: as the CLI's ``--no-payloads``, no
    record bytes anywhere: no keys and values, no ``records`` fields in the message tables, no
    raw bytes in rejects), each a folder of
    Parquet parts as Spark writes them, with the CLI's columns and rows in Spark's types. Batch
    ids are the CLI's given the captures in order of their URIs. ``chunk_bytes`` must be the
    CLI's (32 MB unless given) for the same topic names: a Fetch response's topic ids are
    named from its capture's chunks up to its own.

    The frames and the decoded rows are cached while the tables are written (``writers`` of
    them at a time), then released. Timestamps are written as Parquet TIMESTAMP_MICROS (UTC):
    the session's ``spark.sql.parquet.outputTimestampType`` is set for the writes and put back.
    ``compression``: as ``arrowkafka decode --compression`` (lz4 is Spark's ``lz4_raw``, the
    codec pyarrow writes); None: the session's ``spark.sql.parquet.compression.codec``.
    An ``outdir`` that holds an earlier run's tables is refused (a ``ValueError`` before
    anything is read), as the CLI refuses it: a table of the earlier run that this one does
    not write would be left beside the new ones; ``overwrite=True`` removes those tables first
    (nothing else of the folder's). Checked on a local ``outdir`` (no scheme, or ``file:``).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from arrowkafka.api import default_specs, load_specs
    from arrowkafka.output import check_compression, refuse_or_remove_earlier
    from arrowkafka.segments import job_tables

    options = {}  # (none: the session's codec)
    if compression is not None:
        options["compression"] = {"lz4": "lz4_raw"}.get(check_compression(compression), compression)
    out = str(outdir)
    folders = tuple(str(f) for f in specs)
    spec_names = load_specs(*folders) if folders else default_specs()
    refuse_or_remove_earlier(out, *job_tables(spec_names), overwrite)
    frames = capture_frames(spark, paths, broker_ports=broker_ports, specs=specs, chunk_bytes=chunk_bytes)
    frames = frames.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts_in, names = _survey(frames, folders)  # one pass over the cached frames, small result
        messages = sorted({m for m, _ in counts_in if m is not None})
        summary = CaptureSummary(frames_in=sum(counts_in.values()), outdir=out)
        decoded = _decoded(frames, messages, folders, names, payloads, True).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        counted = decoded.groupBy(_MESSAGE, _CAPTURE).count().collect()
    finally:
        frames.unpersist()
    try:
        from arrowkafka.records.tables import CONTROL_TABLES
        from arrowkafka.traffic import TABLE_COLUMNS

        counts: dict[str | None, int] = {}
        batches: dict[str, int] = {}  # capture -> record batches
        for r in counted:
            counts[r[_MESSAGE]] = counts.get(r[_MESSAGE], 0) + r["count"]
            if r[_MESSAGE] == RECORD_TABLES[0]:
                batches[r[_CAPTURE]] = r["count"]
        summary.rejects = counts.pop(None, 0)
        summary.record_batches = counts.get(RECORD_TABLES[0], 0)
        summary.records = counts.get(RECORD_TABLES[1], 0)
        summary.record_rejects = counts.get(_RECORD_REJECT, 0)
        control = sorted(m for m in counts if m and m.startswith(CONTROL_TABLES))
        summary.control = {m: counts[m] for m in control}
        summary.tables = {m: counts.get(m, 0) for m in messages if counts.get(m, 0)}
        summary.rows = sum(summary.tables.values())
        jobs = {
            m: decoded.where(F.col(_MESSAGE) == m).select(*TABLE_COLUMNS.names, f"`{m}`.*")
            for m in summary.tables
        }
        jobs["rejects"] = decoded.where(F.col(_REJECT).isNotNull()).select(f"{_REJECT}.*")
        if summary.rejects or summary.record_rejects:  # why, as the CLI's summary says it
            # grouped as Causes groups them (numbers as #), only the commonest (Causes.MAX) brought back
            cause = F.regexp_replace("reason", REASON_NUMBER.pattern, "#").alias("cause")
            by_cause = (
                jobs["rejects"]
                .groupBy("error", cause, "message", "version")
                .agg(F.count("*").alias("n"), F.min("reason").alias("lo"), F.max("reason").alias("hi"))
            )
            for r in by_cause.orderBy(F.desc("n")).limit(Causes.MAX).collect():
                same = r["lo"] == r["hi"]
                summary.causes.add(r["error"], r["lo"], r["message"], r["version"], r["n"], same=same)
        jobs.update(_record_jobs(spark, decoded, batches, (*RECORD_TABLES, *control)))
        with _conf_lock:
            key = "spark.sql.parquet.outputTimestampType"
            before = spark.conf.get(key)
            spark.conf.set(key, "TIMESTAMP_MICROS")
            try:
                with ThreadPoolExecutor(max(1, writers)) as pool:
                    done = [
                        pool.submit(
                            df.write.mode("overwrite").options(**options).parquet,
                            f"{out}/{name}.parquet",
                        )
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


# captures whose batch id offsets go in a map literal; more go in a broadcast table (a join)
_MAP_CAPTURES = 1024


def _record_jobs(
    spark: SparkSession, decoded: DataFrame, batches: dict[str, int], tables: Sequence[str]
) -> dict[str, DataFrame]:
    """The record ``tables`` to write, from ``decoded``'s rows, each capture's batch ids moved
    past those of the captures before it (by URI), as the CLI counts them through its list."""
    from pyspark.sql import functions as F

    offsets, total = [], 0
    for capture in sorted(batches):
        offsets.append((capture, total))
        total += batches[capture]
    jobs = {}
    for name in tables:
        rows = decoded.where(F.col(_MESSAGE) == name)
        fields = decoded.select(f"`{name}`.*").columns
        cols = [F.col(f"`{name}`.`{f}`") for f in fields]
        if len(offsets) > 1:  # the first capture's ids need no offset
            if len(offsets) <= _MAP_CAPTURES:  # no extra job, as a join's broadcast would be
                pairs = [F.lit(x) for pair in offsets for x in pair]
                offset = F.element_at(F.create_map(*pairs), F.col(_CAPTURE))
            else:  # a small table, broadcast to the rows where they sit: no shuffle
                table = spark.createDataFrame(offsets, f"{_CAPTURE} string, _offset long")
                rows = rows.join(F.broadcast(table), _CAPTURE)
                offset = F.col("_offset")
            cols = [
                (c + offset).alias(f) if f == "batch_id" else c for c, f in zip(cols, fields, strict=True)
            ]
        jobs[name] = rows.select(*cols)
    return jobs
