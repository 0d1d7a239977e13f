"""Kafka log segments (``*.log`` files, or whole log directories) to Parquet: the job behind
``arrowkafka segments``.

A segment file is record batches back to back, so it is read in pieces of ``chunk_bytes``, each
piece decoded by ``decode_records`` and cut after its last whole batch (the partial one starts
the next piece): memory holds a piece and its tables, whatever the file's size. Topic and
partition come from the folder a segment lies in (``<topic>-<partition>``, as brokers name
them). Records of ``__consumer_offsets`` and ``__cluster_metadata`` are also decoded into typed
tables through ``arrowkafka.topics``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrowkafka.errors import ArrowKafkaError
from arrowkafka.records import Records, decode_records
from arrowkafka.records.tables import CONTROL_TABLES, linked_control, linked_schemas
from arrowkafka.schema import portable_table
from arrowkafka.topics import decode_cluster_metadata, decode_consumer_offsets

__all__ = ["SegmentSummary", "decode_segments", "segment_files", "segment_schemas"]

CHUNK_BYTES = 16 << 20  # a piece of zstd batches may decompress to 10 times this
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")

LINK = pa.schema(
    [
        pa.field("file", pa.string(), nullable=False),
        pa.field("topic", pa.string(), metadata={"about": "from the <topic>-<partition> folder name"}),
        pa.field("partition", pa.int32()),
        pa.field(
            "batch_id", pa.int64(), nullable=False, metadata={"about": "one per batch in the output folder"}
        ),
    ]
)
REJECTS = pa.schema(
    [
        pa.field("file", pa.string(), nullable=False),
        pa.field("position", pa.int64()),
        pa.field("error", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.binary()),
    ]
)


def segment_schemas(payloads: bool = True) -> dict[str, pa.Schema]:
    return {**linked_schemas(list(LINK), payloads), "rejects": REJECTS}


@dataclass
class SegmentSummary:
    files: int = 0
    bytes: int = 0
    batches: int = 0
    records: int = 0
    rejects: int = 0  # rows of rejects.parquet: batches, and internal records (as counted below)
    internal_rejects: int = 0  # records of __consumer_offsets / __cluster_metadata that did not decode
    partial: list[str] = field(default_factory=list)  # files ending inside a batch
    unread: dict[str, int] = field(default_factory=dict)  # file -> bytes after a length that cannot be walked
    codecs: dict[str, int] = field(default_factory=dict)  # codec -> batches
    tables: dict[str, int] = field(default_factory=dict)  # typed table -> rows
    first_batch_id: int = 0  # batch ids count from here

    def add(self, other: SegmentSummary) -> None:
        """Count ``other`` (another job's, a Spark task's) in."""
        for name in ("files", "bytes", "batches", "records", "rejects", "internal_rejects"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.partial += other.partial
        self.unread.update(other.unread)
        for mine, theirs in ((self.codecs, other.codecs), (self.tables, other.tables)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n

    def render(self) -> str:
        codecs = ", ".join(f"{c} {n}" for c, n in sorted(self.codecs.items()))
        lines = [
            f"{self.files} segment files, {self.bytes} bytes: {self.records} records in {self.batches}"
            f" batches ({codecs})",
            f"rejected batches {self.rejects - self.internal_rejects}",
        ]
        if self.internal_rejects:  # (in rejects.parquet too; their batches are in the tables above)
            n = self.internal_rejects
            lines.append(f"rejected records of internal topics {n} (not in their typed tables)")
        for f in self.partial:
            lines.append(f"{f}: ends inside a batch (kept as a partial batch row)")
        for f, n in self.unread.items():
            lines.append(f"{f}: {n} bytes after a batch length that cannot be walked (not read)")
        for name, n in sorted(self.tables.items()):
            lines.append(f"{name}: {n} rows")
        return "\n".join(lines)


def segment_files(paths: Iterable[str | Path]) -> list[Path]:
    """The ``*.log`` files named or found under the folders named, in order, each file once
    however often it is named. Folders are walked through symbolic links (each real folder
    once), and a folder that cannot be read fails, as does a file that is missing, unreadable or
    not a regular file: all before anything is written (a skipped folder was lost data)."""
    out: list[Path] = []
    seen: set[str] = set()
    for p in map(Path, paths):
        found = sorted(_walk(p)) if p.is_dir() else [p]
        for f in found:
            real = os.path.realpath(f)
            if real in seen:
                continue
            seen.add(real)
            if not stat.S_ISREG(os.stat(f).st_mode):  # (a pipe would block the open below)
                raise OSError(errno.EINVAL, "not a regular file (a segment is read by position)", str(f))
            with open(f, "rb"):  # missing or unreadable: fails here
                pass
            out.append(f)
    return out


def _walk(folder: Path) -> list[Path]:
    """The ``*.log`` files under ``folder``, through symbolic links; an unreadable folder raises."""
    found: list[Path] = []
    visited: set[str] = set()

    def fail(e: OSError) -> None:
        raise e

    for top, dirs, files in os.walk(folder, onerror=fail, followlinks=True):
        real = os.path.realpath(top)
        if real in visited:  # a link back up the tree, or a second link to one folder
            dirs[:] = []
            continue
        visited.add(real)
        found += [Path(top) / name for name in files if name.endswith(".log")]
    return found


def _topic_partition(path: Path) -> tuple[str | None, int | None]:
    """From the ``<topic>-<partition>`` folder name; neither where the name is not one (a
    partition is an int32: ``backup-20240115120000`` names no partition)."""
    m = _PARTITION_DIR.match(path.parent.name)
    if m is None or int(m["partition"]) >= 2**31:
        return None, None
    return m["topic"], int(m["partition"])


class _Writers:
    """One Parquet file per table: ``<name>.parquet``, or with ``part`` the file
    ``<name>.parquet/<part>.parquet`` (a folder of parts, one per Spark task)."""

    def __init__(self, out: Path, part: str | None) -> None:
        self.out, self.part = out, part
        self.open: dict[str, pq.ParquetWriter] = {}

    def path(self, name: str) -> Path:
        if self.part is None:
            return self.out / f"{name}.parquet"
        folder = self.out / f"{name}.parquet"
        folder.mkdir(exist_ok=True)
        return folder / f"{self.part}.parquet"

    def write(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        table = portable_table(table)  # types every reader takes, Spark's included
        if name not in self.open:
            self.open[name] = pq.ParquetWriter(self.path(name), table.schema)
        self.open[name].write_table(table)

    def close(self, empty: dict[str, pa.Schema]) -> None:
        for w in self.open.values():
            w.close()
        for name, schema in empty.items():
            if name not in self.open:
                pq.write_table(portable_table(schema.empty_table()), self.path(name))


def decode_segments(
    paths: Iterable[str | Path],
    outdir: str | Path,
    *,
    payloads: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int], None] | None = None,
    part: str | None = None,
    first_batch_id: int = 0,
) -> SegmentSummary:
    """Decode log segment files (or the ``*.log`` files under folders) into Parquet tables under
    ``outdir``: ``record_batches``, ``records``, ``record_markers``, ``rejects``, and for the
    internal topics one table per record type (``consumer_offsets.OffsetCommit`` ...).
    ``part``: write each table as a part of a folder (``records.parquet/<part>.parquet``), with
    batch ids from ``first_batch_id``, as the Spark job does per task."""
    files = segment_files(paths)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    schemas = segment_schemas(payloads)
    writers = _Writers(out, part)
    summary = SegmentSummary(first_batch_id=first_batch_id)
    try:
        for path in files:
            summary.files += 1
            summary.bytes += path.stat().st_size
            _decode_file(path, writers, schemas, summary, payloads, chunk_bytes, progress)
    finally:
        writers.close(schemas)
    return summary


INTERNAL = ("__consumer_offsets", "__cluster_metadata")
# their tables: ``consumer_offsets.OffsetCommit`` ... (a leading _ hides a file from Spark and Hive)
INTERNAL_TABLES = tuple(f"{topic.lstrip('_')}." for topic in INTERNAL)
OTHER_TABLES = (*INTERNAL_TABLES, CONTROL_TABLES)  # the tables named by prefix, a job's own


def _decode_file(
    path: Path,
    writers: _Writers,
    schemas: dict[str, pa.Schema],
    summary: SegmentSummary,
    payloads: bool,
    chunk_bytes: int,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    """One segment file, a piece at a time: each piece is decoded and cut after its last whole
    batch; a batch the piece cuts is read whole into the next piece (its length says how much:
    one read, not a piece at a time). A length that cannot be walked (below 5) or that runs
    past the end of the file ends the file there: the rest is counted as unread."""
    topic, partition = _topic_partition(path)
    size = path.stat().st_size
    # internal topics' keys and values are read whatever ``payloads`` says: the typed tables
    # are decoded from them (records still leaves them out)
    keep_payloads = payloads or topic in INTERNAL
    with open(path, "rb") as f:
        pos, buf = 0, f.read(chunk_bytes)
        while True:
            last = pos + len(buf) >= size
            got = decode_records([buf], errors="null", payloads=keep_payloads)
            batches = got.batches
            keep = batches.num_rows
            cut = len(buf)  # bytes of this piece the tables account for
            stop = last
            length = batches.column("batch_length")[keep - 1].as_py() if keep else None
            # the piece cuts its last batch: a partial one, or one whose magic byte failed it
            # before its end (its length says where it ends)
            cut_short = keep and (
                batches.column("partial")[keep - 1].as_py()
                or (
                    length is not None
                    and length >= 5
                    and batches.column("size")[keep - 1].as_py() < 12 + length
                )
            )
            if cut_short:
                at = int(batches.column("position")[keep - 1].as_py())
                if last or length is None or pos + at + 12 + length > size:
                    summary.partial.append(str(path))  # the file ends inside this batch
                    if not last:
                        summary.unread[str(path)] = size - pos - len(buf)
                    stop = True
                else:  # read on: the next piece starts with this batch
                    keep -= 1
                    cut = at
            elif keep and (length or 0) < 5:
                at = int(batches.column("position")[keep - 1].as_py())
                if not np.frombuffer(buf, np.uint8)[at:].any() and _zeros_to_the_end(f):
                    # zeros to the file's end: a preallocated segment's unwritten tail (Kafka's
                    # file.preallocate), no batch: the file ends here, the rest unread
                    keep -= 1
                    summary.unread[str(path)] = size - pos - at
                elif not last:
                    summary.unread[str(path)] = size - pos - len(buf)  # nothing after it can be found
                stop = True
            _write_piece(path, topic, partition, pos, got, keep, writers, schemas, summary, payloads)
            if progress is not None:
                progress(str(path), pos + cut, size)
            if stop:
                return
            rest = buf[cut:]
            need = 0
            if rest:  # a batch cut by the piece: read at least all of it
                need = 12 + int(batches.column("batch_length")[keep].as_py()) - len(rest)
            pos += cut
            del got, batches  # this piece's tables go before the next piece decodes beside them
            buf = rest + f.read(max(chunk_bytes, need))


def _zeros_to_the_end(f: BinaryIO) -> bool:
    """Are the file's bytes from here to its end all zeros? (Read a piece at a time: a
    preallocated segment is mostly its tail.)"""
    while piece := f.read(CHUNK_BYTES):
        if np.frombuffer(piece, np.uint8).any():
            return False
    return True


def _write_piece(
    path: Path,
    topic: str | None,
    partition: int | None,
    pos: int,
    got: Records,
    keep: int,
    writers: _Writers,
    schemas: dict[str, pa.Schema],
    summary: SegmentSummary,
    payloads: bool,
) -> None:
    batches = got.batches.slice(0, keep)
    first = summary.first_batch_id + summary.batches
    summary.batches += keep
    n_rec = int(np.searchsorted(got.records.column("batch").to_numpy(), keep))
    records = got.records.slice(0, n_rec)
    summary.records += n_rec
    for codec in batches.column("codec").to_pylist():
        summary.codecs[str(codec)] = summary.codecs.get(str(codec), 0) + 1

    def link(batch: pa.Array | pa.ChunkedArray, n: int) -> list[pa.Array]:
        return [
            pa.repeat(pa.scalar(str(path)), n),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pc.add(batch, first),
        ]

    file_pos = pc.add(batches.column("position"), pos)
    body = batches.drop_columns(["row"]).set_column(0, "position", file_pos)
    table = pa.Table.from_arrays([*link(pa.array(np.arange(keep)), keep), *body.columns],
                                 schema=schemas["record_batches"])  # fmt: skip
    writers.write("record_batches", table)
    dropped = ["batch"] if payloads else [c for c in ("batch", "key", "value") if c in records.column_names]
    rec_body = records.drop_columns(dropped).columns
    table = pa.Table.from_arrays(
        [*link(records.column("batch"), n_rec), *rec_body], schema=schemas["records"]
    )
    writers.write("records", table)
    markers = got.markers.filter(pc.less(got.markers.column("batch"), keep))
    marker_body = markers.drop_columns(["record", "batch"]).columns
    table = pa.Table.from_arrays([*link(markers.column("batch"), markers.num_rows), *marker_body],
                                 schema=schemas["record_markers"])  # fmt: skip
    writers.write("record_markers", table)
    # KRaft control records, through their specs, of the batches kept
    control = {name: t.filter(pc.less(t.column("record"), n_rec)) for name, t in got.control.items()}
    linked = linked_control(control, records, lambda b: pa.table(link(b, len(b)), schema=LINK))
    for name, table in linked.items():
        summary.tables[CONTROL_TABLES + name] = summary.tables.get(CONTROL_TABLES + name, 0) + table.num_rows
        writers.write(CONTROL_TABLES + name, table)
    rejects = got.rejects.filter(pc.less(got.rejects.column("batch"), keep))
    summary.rejects += rejects.num_rows
    where = [pa.repeat(pa.scalar(str(path)), rejects.num_rows), pc.add(rejects.column("position"), pos)]
    # no payloads: no batch bytes (an internal topic's were read all the same, for its tables)
    raw = rejects.column("raw") if payloads else pa.nulls(rejects.num_rows, pa.binary())
    table = pa.Table.from_arrays([*where, *rejects.select(["error", "reason"]).columns, raw], schema=REJECTS)
    writers.write("rejects", table)
    if topic in INTERNAL and n_rec:
        _typed(path, topic, partition, pos, batches, records, writers, summary)


def _typed(
    path: Path,
    topic: str,
    partition: int | None,
    pos: int,
    batches: pa.Table,
    records: pa.Table,
    writers: _Writers,
    summary: SegmentSummary,
) -> None:
    """The records of an internal topic as typed tables (control records left out), each row
    led by the file, partition, offset and timestamp of its record. A record that does not
    decode is a reject naming its offset; the others are kept (``_decoded_apart``)."""
    control = batches.column("control").to_numpy(zero_copy_only=False)
    data = records.filter(pa.array(~control[records.column("batch").to_numpy()]))
    if data.num_rows == 0:
        return

    def decode(rows: np.ndarray) -> dict[str, pa.Table]:
        part = data.take(pa.array(rows))
        if topic == "__consumer_offsets":
            return decode_consumer_offsets(part.column("key"), part.column("value"))
        return decode_cluster_metadata(part.column("value"))

    parts, bad = _decoded_apart(decode, np.arange(data.num_rows), [0])
    rejects: dict[str, list[object]] = {name: [] for name in REJECTS.names}
    for rows, e in bad:
        first, final = (data.column("record_offset")[int(r)].as_py() for r in (rows[0], rows[-1]))
        what = (
            f"record at offset {first}"
            if len(rows) == 1
            else f"{len(rows)} records, offsets {first} to {final}"
        )
        batch = int(data.column("batch")[int(rows[0])].as_py())
        at = pos + batches.column("position")[batch].as_py()  # the first one's batch
        reason = f"{topic} {what}: {getattr(e, 'reason', e)}"
        for name, value in zip(REJECTS.names, (str(path), at, type(e).__name__, reason, None), strict=True):
            rejects[name].append(value)
    if bad:  # (one table for the piece's: a row group each would bloat the file)
        summary.rejects += len(bad)
        summary.internal_rejects += len(bad)
        writers.write("rejects", pa.table(rejects, schema=REJECTS))
    for tables, rows in parts:
        _write_typed(path, topic, partition, data, tables, rows, writers, summary)


SPLIT_CALLS = 256  # decodes of a piece's typed records spent finding the ones that fail


def _decoded_apart(
    decode: Callable[[np.ndarray], dict[str, pa.Table]], rows: np.ndarray, calls: list[int]
) -> tuple[list[tuple[dict[str, pa.Table], np.ndarray]], list[tuple[np.ndarray, ArrowKafkaError]]]:
    """``decode`` of ``rows``, or where it fails, of each half apart, down to the records that
    fail alone -> ([(tables, the rows they hold)], [(rows that fail, the error)]): one bad
    record costs about two decodes of the rest, not the piece. Past ``SPLIT_CALLS`` decodes
    (a piece of many bad records) a part that fails fails whole."""
    calls[0] += 1
    try:
        return [(decode(rows), rows)], []
    except ArrowKafkaError as e:
        if len(rows) == 1 or calls[0] >= SPLIT_CALLS:
            return [], [(rows, e)]
    half = len(rows) // 2
    a, bad_a = _decoded_apart(decode, rows[:half], calls)
    b, bad_b = _decoded_apart(decode, rows[half:], calls)
    return a + b, bad_a + bad_b


def _write_typed(
    path: Path,
    topic: str,
    partition: int | None,
    data: pa.Table,
    tables: dict[str, pa.Table],
    rows: np.ndarray,
    writers: _Writers,
    summary: SegmentSummary,
) -> None:
    for name, table in tables.items():
        index = pa.array(rows[table.column("_index").to_numpy()])  # rows of ``data``
        lead = pa.table(
            {
                "file": pa.repeat(pa.scalar(str(path)), table.num_rows),
                "partition": pa.repeat(pa.scalar(partition, pa.int32()), table.num_rows),
                "record_offset": pc.take(data.column("record_offset"), index),
                "timestamp": pc.take(data.column("timestamp"), index),
            }
        )
        full = pa.Table.from_arrays([*lead.columns, *table.drop_columns(["_index"]).columns],
                                    names=[*lead.column_names, *table.column_names[1:]])  # fmt: skip
        key = f"{topic.lstrip('_')}.{name}"  # INTERNAL_TABLES
        summary.tables[key] = summary.tables.get(key, 0) + full.num_rows
        writers.write(key, full)
