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

from arrowkafka.errors import ArrowKafkaError
from arrowkafka.output import Causes, ParquetTables
from arrowkafka.records import Records, decode_records
from arrowkafka.records.decode import find_batch
from arrowkafka.records.tables import CONTROL_TABLES, linked_control, linked_schemas
from arrowkafka.topics import decode_cluster_metadata, decode_consumer_offsets

__all__ = ["SegmentSummary", "decode_segments", "segment_files", "segment_schemas"]

CHUNK_BYTES = 16 << 20  # a piece of zstd batches may decompress to 10 times this
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
# a tiered-storage bucket: <topic>-<topic id>/<partition>/<offset>-<segment id>.log, each id a
# Kafka Uuid in URL-safe base64 (the layout of the Aiven plugin and Kafka's own test store)
_ID = r"[A-Za-z0-9_-]{22}"
_TOPIC_ID_DIR = re.compile(rf"^(?P<topic>.+)-{_ID}$")

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
    partial_bytes: dict[str, int] = field(default_factory=dict)  # file -> bytes of that batch
    unread: dict[str, int] = field(default_factory=dict)  # file -> bytes after a length that cannot be walked
    zeros: dict[str, int] = field(default_factory=dict)  # file -> bytes of a zero tail (preallocated)
    skipped: dict[str, int] = field(default_factory=dict)  # file -> bytes holding no batch, batches after
    codecs: dict[str, int] = field(default_factory=dict)  # codec -> batches
    tables: dict[str, int] = field(default_factory=dict)  # typed table -> rows
    first_batch_id: int = 0  # batch ids count from here
    causes: Causes = field(default_factory=Causes)  # rows of rejects by cause

    def add(self, other: SegmentSummary) -> None:
        """Count ``other`` (another job's, a Spark task's) in."""
        for name in ("files", "bytes", "batches", "records", "rejects", "internal_rejects"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.partial += other.partial
        for mine, theirs in ((self.partial_bytes, other.partial_bytes), (self.unread, other.unread),
                             (self.zeros, other.zeros), (self.skipped, other.skipped)):  # fmt: skip
            mine.update(theirs)
        for mine, theirs in ((self.codecs, other.codecs), (self.tables, other.tables)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.causes.merge(other.causes)

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
            at_end = self.partial_bytes.get(f)
            lines.append(f"{f}: ends inside a batch ({at_end} bytes, kept as a partial batch row)")
        for f, n in self.skipped.items():
            lines.append(f"{f}: {n} bytes that hold no batch, batches after them read (rejects)")
        for f, n in self.unread.items():
            lines.append(
                f"{f}: {n} bytes after an entry no walk gets past, no batch found in them (not read)"
            )
        for f, n in self.zeros.items():
            lines.append(f"{f}: ends in {n} bytes of zeros (a preallocated segment's unwritten tail)")
        for name, n in sorted(self.tables.items()):
            lines.append(f"{name}: {n} rows")
        return "\n".join(lines + self.causes.lines())


def segment_files(paths: Iterable[str | Path]) -> list[Path]:
    """The ``*.log`` files named or found under the folders named, in order, each file once
    however often it is named. Folders are walked through symbolic links (each real folder
    once), and a folder that cannot be read or holds no ``*.log`` fails, as does a file that is
    missing, unreadable or not a regular file: all before anything is written (a skipped folder
    was lost data)."""
    out: list[Path] = []
    seen: set[str] = set()
    for p in map(Path, paths):
        found = sorted(_walk(p)) if p.is_dir() else [p]
        if not found:  # a folder named by mistake (the wrong one, a typo'd partition) says so
            raise OSError(errno.ENOENT, "no *.log segment files in this folder", str(p))
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
    """From the ``<topic>-<partition>`` folder name, or in a tiered-storage bucket from the
    ``<topic>-<topic id>/<partition>`` folders; neither where the names are not those (a
    partition is an int32: ``backup-20240115120000`` names no partition)."""
    m = _PARTITION_DIR.match(path.parent.name)
    if m is not None:
        topic, partition = m["topic"], m["partition"]
    elif path.parent.name.isdigit() and (t := _TOPIC_ID_DIR.match(path.parent.parent.name)):
        topic, partition = t["topic"], path.parent.name
    else:
        return None, None
    if not partition.isascii() or int(partition) >= 2**31:
        return None, None
    return topic, int(partition)


def decode_segments(
    paths: Iterable[str | Path],
    outdir: str | Path,
    *,
    payloads: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int], None] | None = None,
    part: str | None = None,
    first_batch_id: int = 0,
    compression: str = "snappy",
    background: bool | None = None,
) -> SegmentSummary:
    """Decode log segment files (or the ``*.log`` files under folders) into Parquet tables under
    ``outdir``: ``record_batches``, ``records``, ``record_markers``, ``rejects``, and for the
    internal topics one table per record type (``consumer_offsets.OffsetCommit`` ...).
    ``part``: write each table as a part of a folder (``records.parquet/<part>.parquet``), with
    batch ids from ``first_batch_id``, as the Spark job does per task. ``compression``: the
    Parquet pages' codec, one of ``output.COMPRESSIONS``. ``background``: the tables written by
    a thread of their own while the next piece is decoded (``output.ParquetTables``: a piece's
    rows are held meanwhile); None: where the process has a second core."""
    out = Path(outdir)
    # (a bad codec: refused before anything is read)
    writers = ParquetTables(out, part, compression, background=background)
    files = segment_files(paths)
    out.mkdir(parents=True, exist_ok=True)
    schemas = segment_schemas(payloads)
    summary = SegmentSummary(first_batch_id=first_batch_id)
    try:
        for path in files:
            summary.files += 1
            summary.bytes += path.stat().st_size
            _decode_file(path, writers, schemas, summary, payloads, chunk_bytes, progress)
        writers.close(schemas)
    except BaseException:  # an interrupt too
        writers.abort()
        raise
    return summary


INTERNAL = ("__consumer_offsets", "__cluster_metadata")
# their tables: ``consumer_offsets.OffsetCommit`` ... (a leading _ hides a file from Spark and Hive)
INTERNAL_TABLES = tuple(f"{topic.lstrip('_')}." for topic in INTERNAL)
OTHER_TABLES = (*INTERNAL_TABLES, CONTROL_TABLES)  # the tables named by prefix, a job's own


def job_tables(messages: Iterable[str] = ()) -> tuple[set[str], tuple[str, ...]]:
    """The tables a job writes, as ``output.earlier_tables`` takes them: (names, prefixes). A
    segments job's, and with ``messages`` a capture job's (its message tables besides)."""
    return {*messages, *segment_schemas()}, OTHER_TABLES


def _decode_file(
    path: Path,
    writers: ParquetTables,
    schemas: dict[str, pa.Schema],
    summary: SegmentSummary,
    payloads: bool,
    chunk_bytes: int,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    """One segment file, a piece at a time: each piece is decoded and cut after its last whole
    batch; a batch the piece cuts is read whole into the next piece (its length says how much:
    one read, not a piece at a time).

    A batch's length is outside its CRC, so damage can send the walk astray: an entry whose
    CRC fails, whose magic or length is no batch's, that runs past the end of the file, or
    that claims more than a piece, may hold whole batches the walk stepped over. The bytes
    from it to the next entry that is not rejected are searched for a whole batch
    (``find_batch``), one that runs past that entry included (a forged length may land on a
    batch in a record's value, whose CRC checks): where one is found, the bytes before it are
    one reject and the file is read on from it. Where none is, the walk stands: a rejected
    batch is a reject, a batch cut by the file's end a partial row (a torn write), the rest
    after a length below 5 is counted unread, and zeros to the end are a preallocated tail."""
    topic, partition = _topic_partition(path)
    size = path.stat().st_size
    # internal topics' keys and values are read whatever ``payloads`` says: the typed tables
    # are decoded from them (records still leaves them out)
    keep_payloads = payloads or topic in INTERNAL
    # the floor of offsets a search looks for: the file name's, not the batches' (a base offset
    # is outside its batch's CRC), unless batches read lie below it (then none)
    min_offset = _base_offset(path)
    none_after = size  # a search from here to the end found no batch: nor will one from further on
    with open(path, "rb") as f:
        pos, buf = 0, f.read(chunk_bytes)
        while True:
            end = pos + len(buf)  # where the file's next bytes are
            got = decode_records([buf], errors="null", payloads=keep_payloads)
            e = _piece_end(got.batches, buf, pos, size, chunk_bytes, f)
            n = keep = e.n  # entries of the piece; those written
            stop = e.last
            # (None: no batch here has an offset)
            lowest = pc.min(got.batches.column("base_offset").filter(pa.array(~e.rejected))).as_py()
            if lowest is not None and lowest < min_offset:
                min_offset = 0  # the file's name is not its first offset
            found, i, none_after = _search(e, f, size, min_offset, chunk_bytes, none_after)
            if found is not None:  # read on from the batch found
                _write_piece(path, topic, partition, pos, got, i, writers, schemas, summary, payloads)
                why = _entry_reason(got, i, size - int(e.at[i]))
                _skipped(path, f, int(e.at[i]), found, why, writers, summary, payloads)
                writers.step()  # (in the background: the piece before this one is written)
                if progress is not None:
                    progress(str(path), found, size)
                pos = found
                del got
                f.seek(pos)
                buf = f.read(chunk_bytes)
                continue
            need = 0  # bytes the next piece must hold past this one's end
            if e.zeros:  # a preallocated segment's unwritten tail (Kafka's file.preallocate): no batch
                keep -= 1
                summary.zeros[str(path)] = size - int(e.at[n - 1])
                stop = True
            elif e.past_end and not e.last and size - e.at[n - 1] <= max(2 * chunk_bytes, RAW_KEPT):
                keep -= 1  # a torn write's batch, cut by the piece: read to the file's end, whole
                need = size - end
            elif e.past_end:
                stop = True  # the file ends inside this entry
                if not e.rejected[n - 1]:
                    summary.partial.append(str(path))
                    summary.partial_bytes[str(path)] = end - int(e.at[n - 1])  # (its row's size)
                if not e.last:
                    summary.unread[str(path)] = size - end
            elif e.below_5:
                stop = True
                if not e.last:
                    summary.unread[str(path)] = size - end  # nothing after it can be found
            elif e.cut_short:  # read on: the next piece starts with this entry, read whole (a big
                # one held no batch: a batch that big, or bytes the walk hops, as in one piece)
                keep -= 1
                need = int(e.claimed - end)
            cut = int(e.at[keep] - pos) if keep < n else len(buf)
            _write_piece(path, topic, partition, pos, got, keep, writers, schemas, summary, payloads)
            writers.step()
            if progress is not None:
                progress(str(path), pos + cut, size)
            if stop:
                return
            f.seek(end)  # (a search, or a look for zeros, read on past the piece)
            rest = buf[cut:]
            pos += cut
            del got  # this piece's tables go (or, written in the background, once they are written)
            buf = rest + f.read(max(chunk_bytes, need))


@dataclass
class _PieceEnd:
    """What the entries of a decoded piece say: where each is in the file, which the walk
    trusts, and how the piece ends."""

    n: int  # entries
    at: np.ndarray  # each entry's position in the file
    rejected: np.ndarray  # entries with an error
    framed: np.ndarray  # entries whose CRC checks: the length they were written with
    bad: np.ndarray  # entries that make the walk suspect: rejected, or the last one as below
    last: bool  # the piece reaches the file's end
    claimed: int  # where the last entry says it ends
    cut_short: bool  # the piece cuts its last entry
    past_end: bool  # ... which runs past the file's end
    big: bool  # ... which claims more than a piece, and ends inside the file
    below_5: bool  # the last entry's length is below 5: no walk gets past it
    zeros: bool  # ... and the file is zeros from it to its end (a preallocated tail)
    longest: int  # bytes of the longest batch read well


def _piece_end(
    batches: pa.Table, buf: bytes, pos: int, size: int, chunk_bytes: int, f: BinaryIO
) -> _PieceEnd:
    """The entries of the piece ``buf`` (at ``pos`` in a file of ``size`` bytes) that
    ``decode_records`` read into ``batches``. Where the last entry's length is below 5 and
    zeros follow it, it reads on in ``f`` to see whether zeros end the file."""
    n = batches.num_rows
    last = pos + len(buf) >= size
    rejected = batches.column("error").is_valid().to_numpy(zero_copy_only=False)
    bad = rejected.copy()
    # a batch whose CRC checks has the length it was written with: no search in it
    framed = batches.column("crc_ok").fill_null(False).to_numpy(zero_copy_only=False)
    at = batches.column("position").to_numpy() + pos
    length = batches.column("batch_length")[n - 1].as_py() if n else None
    claimed = int(at[n - 1]) + 12 + (length or 0) if n else 0
    # the piece cuts its last entry: a partial one, or one whose magic byte failed it before
    # its end (its length says where it ends); (a piece that ends inside a batch's first 12
    # bytes says no length: read on)
    cut_short = bool(n) and (
        batches.column("partial")[n - 1].as_py()
        or (
            length is not None and 5 <= length and at[n - 1] + batches.column("size")[n - 1].as_py() < claimed
        )
    )
    past_end = cut_short and (last or (length is not None and claimed > size))
    below_5 = bool(n) and not cut_short and (length or 0) < 5
    zeros = (
        below_5
        and not np.frombuffer(buf, np.uint8)[at[n - 1] - pos :].any()
        and _zeros_to_the_end(f)  # (to the file's end: a piece at a time)
    )
    big = cut_short and not past_end and claimed - at[n - 1] > chunk_bytes
    if n and (past_end or big or (below_5 and not zeros)):
        bad[n - 1] = True  # an entry no walk gets past, or one too big to read on trust
    sizes = batches.column("size").to_numpy()[
        ~rejected & ~batches.column("partial").to_numpy(zero_copy_only=False)
    ]
    longest = int(sizes.max()) if len(sizes) else 0
    return _PieceEnd(
        n, at, rejected, framed, bad, last, claimed, cut_short, past_end, big, below_5, zeros, longest
    )


def _search(
    e: _PieceEnd, f: BinaryIO, size: int, min_offset: int, chunk_bytes: int, none_after: int
) -> tuple[int | None, int, int]:
    """Search the bytes from each run of suspect entries of a piece up to the next entry the
    walk trusts -> (the position of the first batch found or None, the entry its search began
    at, ``none_after``: from where a search to the file's end found nothing)."""
    found, i = None, 0
    n, at, bad, framed = e.n, e.at, e.bad, e.framed
    for i in map(int, np.flatnonzero(bad & ~framed)):
        if i and bad[i - 1] and not framed[i - 1]:
            continue  # searched from the entry before it
        if i == n - 1 and e.cut_short and not (e.past_end or e.big):
            continue  # read on, and searched whole beside the entry after it
        later = np.flatnonzero(~bad[i + 1 :] | framed[i + 1 :])  # the next entry the walk trusts
        j = i + 1 + int(later[0]) if len(later) else n
        limit = int(at[j]) if j < n else size
        if e.big and i == n - 1:
            limit = e.claimed  # (a batch it claims to hold: its length is wrong)
        if limit == size and at[i] >= none_after:
            continue
        reach = size  # where a batch found may end
        if j < n and not (j == n - 1 and e.cut_short):
            # a batch whose CRC checks starts at the limit, so one found before it ends by it,
            # or holds it in a record's value (where a forged length landed): a batch at most
            # as long as the longest read here, or OVERLAP
            reach = min(size, limit + max(OVERLAP, e.longest))
        found = _find_batch(f, int(at[i]) + 1, limit, reach, min_offset, chunk_bytes)
        if found is not None:
            break
        if limit == size:
            none_after = int(at[i])
    return found, i, none_after


_OFFSET_NAME = re.compile(rf"^(\d{{20}})(?:-{_ID})?\.log$")


def _base_offset(path: Path) -> int:
    """The first offset a segment holds, from its file name (``00000000000000012345.log``, or
    in a tiered-storage bucket ``00000000000000012345-<segment id>.log``); 0 for other names."""
    m = _OFFSET_NAME.match(path.name)
    return int(m[1]) if m and int(m[1]) < 2**63 else 0


def _find_batch(
    f: BinaryIO, start: int, limit: int, reach: int, min_offset: int, chunk_bytes: int
) -> int | None:
    """The file position of the first whole batch that starts in [start, limit) and ends by
    ``reach`` (``find_batch``), read in windows of two pieces, each searched for a batch
    starting in its first piece: a batch longer than a piece right after the damage can be
    missed (the ones after it are found), as can one among bytes made to look like batch
    headers (each window's CRCs are bounded)."""
    step = max(chunk_bytes, 1 << 20)
    at = start
    while at < limit:
        f.seek(at)
        window = f.read(min(2 * step, reach - at))
        to_end = at + len(window) >= reach
        found = find_batch(window, 0, min(limit - at, len(window) if to_end else step), min_offset)
        if found is not None:
            return at + found
        if to_end:
            return None
        at += step
    return None


def _entry_reason(got: Records, b: int, left: int) -> str:
    """Why entry ``b`` of a piece is no batch: its reject's reason, or its length's (``left``:
    bytes from it to the file's end)."""
    rejects = got.rejects.filter(pc.equal(got.rejects.column("batch"), b))
    if rejects.num_rows:
        return str(rejects.column("reason")[0].as_py())
    length = got.batches.column("batch_length")[b].as_py()
    if length is not None and length > left - 12:
        return f"batch length {length} runs past the end of the file ({left - 12} bytes after it)"
    return f"batch length {length} passes over whole batches (more than a piece, read no further)"


# bytes past a batch whose CRC checks that a batch found before it may run (it holds the one
# that checks, in a record's value, where a forged length landed), at least
OVERLAP = 64 << 10
RAW_KEPT = 64 << 20  # bytes of a region that holds no batch kept in its reject (more: the file has them)


def _skipped(
    path: Path,
    f: BinaryIO,
    start: int,
    end: int,
    why: str,
    writers: ParquetTables,
    summary: SegmentSummary,
    payloads: bool,
) -> None:
    """A reject for the bytes [start, end) of a file, which hold no batch (a batch follows)."""
    n = end - start
    raw = None
    if payloads and n <= RAW_KEPT:
        f.seek(start)
        raw = f.read(n)
    kept = "" if raw is not None or not payloads else f" (more than {RAW_KEPT} bytes: not kept here)"
    reason = f"{why}; the {n} bytes from here hold no batch, read on at the next whole one, {end}{kept}"
    row = {"file": [str(path)], "position": [start], "error": ["Corrupt"], "reason": [reason], "raw": [raw]}
    _write_rejects(writers, summary, pa.table(row, schema=REJECTS))
    summary.rejects += 1
    summary.skipped[str(path)] = summary.skipped.get(str(path), 0) + n


def _write_rejects(writers: ParquetTables, summary: SegmentSummary, rejects: pa.Table) -> None:
    summary.causes.add_table(rejects)
    writers.write("rejects", rejects)


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
    writers: ParquetTables,
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
        name = "codec unknown" if codec is None else str(codec)  # (a partial batch, or no header)
        summary.codecs[name] = summary.codecs.get(name, 0) + 1

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
    _write_rejects(writers, summary, table)
    if topic in INTERNAL and n_rec:
        _typed(path, topic, partition, pos, batches, records, writers, summary)


def _typed(
    path: Path,
    topic: str,
    partition: int | None,
    pos: int,
    batches: pa.Table,
    records: pa.Table,
    writers: ParquetTables,
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
        _write_rejects(writers, summary, pa.table(rejects, schema=REJECTS))
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
    writers: ParquetTables,
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
