"""Record batches into Arrow tables: ``decode_records``.

The kernels in ``arrowkafka.kernels.records`` find and check batches and walk records in two
passes; this module runs them, decompresses what is compressed between the passes, turns the
kernel's columns into Arrow arrays, renders errors, and decodes control records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from arrowkafka.assembly.arrays import empty_table
from arrowkafka.codec.decode import byte_ranges
from arrowkafka.errors import Corrupt
from arrowkafka.kernels import lz4 as kl
from arrowkafka.kernels import records as k
from arrowkafka.records import tables
from arrowkafka.records.codecs import CODECS, LZ4_DECOMPRESS, CodecError, Sink, TooBig, decompress_into
from arrowkafka.records.control import MARKERS_SCHEMA, decode_control

__all__ = ["Records", "decode_records", "MAX_UNCOMPRESSED"]

MAX_UNCOMPRESSED = 256 << 20  # bytes one batch may decompress to, unless the caller says more
OFFSETS_LIMIT = (1 << 31) - 1  # int32 Arrow offsets: a column chunk holds less than this
INNER_GUESS = 8  # decompressed bytes guessed per compressed byte, before any batch is decompressed
WALK_GROUP = 1 << 20  # decompressed bytes walked at a time, while they are in the cache (L2-sized)
CHUNK_RECORDS = 1 << 20  # records a chunk of the records table is first given room for
SAMPLE_BATCHES = 8  # batches counted to size the first chunk's columns
# a chunk's columns take one block of at most this (assembly.blocks keeps blocks for the next
# call, where fresh pages cost 0.1-1 ms a MB to fault in on this machine)
CHUNK_BLOCK = 24 << 20
RECORD_BYTES = 48  # a record's fixed-width columns and offsets
CURSORS = 6  # walk_records' cursors (records, key bytes, ...); after them the or of the signs
SLACK = 256 << 10  # bytes each byte column is given beyond its estimate (reserved, touched only if used)
AHEAD_BATCHES = 1 << 16  # batches whose claims a chunk is sized from
SEGMENT = 16 << 20
VIEW_MAX_UNCOMPRESSED = 1 << 29  # a batch in a views buffer ends before 1 GiB (31-bit offsets)

_EMPTY_REJECTS = empty_table(tables.REJECTS_SCHEMA)
_EMPTY_MARKERS = empty_table(MARKERS_SCHEMA)

_REASONS = {
    k.R_LENGTH: "batch length {d1} is below the {d2} bytes its format needs",
    # (a length below 5 ends the value: the batch's bytes are then the rest of it)
    k.R_MAGIC: "unknown magic {d1}",
    k.R_CRC: "{crc} mismatch: stored {d1:#010x}, computed {d2:#010x}",
    k.R_CODEC: "unknown compression codec {d1} for magic {d2}",
    k.R_COUNT: "the batch claims {d1} records and holds {d2}",
    k.R_OVERRUN: "a length of {d1} runs past the end of its record or batch ({d2} bytes left)",
    k.R_RECORD_SIZE: "a record of {d1} bytes whose fields take {d2}",
    k.R_VARINT: "a varint longer or larger than its type allows",
    k.R_NEGATIVE: "a negative length or count ({d1})",
    k.R_UTF8: "a header key of {d1} bytes that is not UTF-8",
    k.R_TRAILING: "{d1} bytes after the last record",
    k.R_NESTED: "a compressed message (codec {d1}) inside a compressed wrapper",
    k.R_INNER_MAGIC: "an inner message of magic {d1} inside a wrapper of magic {d2}",
    k.R_INNER_CRC: "an inner message's CRC-32 mismatch: stored {d1:#010x}, computed {d2:#010x}",
    k.R_TOO_BIG: "the records decompress to more than {d1} bytes (max_uncompressed)",
    k.R_NO_VALUE: "a compressed wrapper message whose value is null",
    k.R_OFFSET_RANGE: "a record whose offset delta {d1} takes the base offset past int64",
    k.R_TS_RANGE: "a record whose timestamp delta {d1} takes the base timestamp past int64",
}


@dataclass
class Records:
    """What ``decode_records`` returns.

    batches : one row per batch found (magic 2 record batch, or magic 0/1 message), partial
        batches at the end of a row and batches that failed included (``error`` says why).
    records : one row per record of every batch that decoded; ``batch`` is its row in
        ``batches``.
    rejects : one row per batch that failed, with its raw bytes (``errors="null"``).
    markers : one row per control record (transaction markers and the KRaft ones).
    control : the KRaft control records decoded through their specs, one table per spec
        (``LeaderChangeMessage``, ``SnapshotHeaderRecord``, ...), ``record`` linking each row.
    """

    batches: pa.Table
    records: pa.Table
    rejects: pa.Table
    markers: pa.Table
    control: dict[str, pa.Table] = field(default_factory=dict)


def decode_records(
    records: Any,
    *,
    errors: str = "raise",
    payloads: bool = True,
    verify_crc: bool = True,
    max_uncompressed: int = MAX_UNCOMPRESSED,
    views: bool = False,
) -> Records:
    """Decode Kafka record batches (magic 0, 1 and 2, every codec) into Arrow tables.

    Parameters
    ----------
    records : pa.BinaryArray, pa.LargeBinaryArray, pa.ChunkedArray of them, list of bytes, or ``Ranges``
        Each element one ``records`` field (of a Produce request or a Fetch response) or the
        bytes of a log segment file: batches back to back. A partial batch at the end of an
        element (a Fetch response cut at its byte limit) is not an error: it gets a batch row
        with ``partial`` set and its size.
    errors : {"raise", "null"}
        ``"raise"``: the first bad batch raises ``Corrupt`` naming the input row, the batch and
        the byte. ``"null"``: bad batches keep their row in ``batches`` (``error`` says why),
        their records are left out, and ``rejects`` holds their raw bytes.
    payloads : bool
        ``False`` leaves keys and values out (their sizes stay), for data that must not be
        copied, and the raw bytes of rejects too (``raw`` is null: a batch holds its records).
    verify_crc : bool
        Check every batch's CRC-32C (magic 2) or CRC-32 (magic 0/1, inner messages too).
    max_uncompressed : int
        Bytes one compressed batch may decompress to; past it the batch fails (a decompression bomb).
    views : bool
        ``True``: keys and values come as ``binary_view`` arrays pointing into the input (and into
        the decompressed records) instead of copies: no bytes move, and the records table keeps
        the input's buffer alive. Some Arrow compute functions do not take views yet; Parquet,
        DuckDB and Polars do, and ``.cast(pa.binary())`` makes a copy when one is needed.
        Views hold 31-bit offsets: with ``max_uncompressed`` above 512 MiB, or a batch of 1 GiB
        or more in the input, keys and values are copied (and come as views all the same).
    """
    if errors not in ("raise", "null"):
        raise ValueError(f"errors must be 'raise' or 'null', not {errors!r}")
    if isinstance(max_uncompressed, bool) or not isinstance(max_uncompressed, (int, np.integer)):
        raise TypeError(f"max_uncompressed must be an int (bytes), not {type(max_uncompressed).__name__}")
    if not 0 < max_uncompressed <= OFFSETS_LIMIT:
        raise ValueError(f"max_uncompressed must be between 1 and {OFFSETS_LIMIT} (int32 Arrow offsets)")
    data, starts, ends = byte_ranges(records)
    counts = np.empty(len(starts), np.int64)
    nb = int(k.count_batches(data, starts, ends, counts))
    hdr = np.zeros((k.NH, nb), np.int64)
    k.read_batches(data, starts, ends, hdr, k.CRC32_TABLE, k.CRC32C_TABLE, verify_crc)
    messages: dict[int, str] = {}
    # views hold 31-bit offsets: into 2 GiB windows of the input, one every GiB, and into buffers
    # of decompressed records under 1 GiB. Inputs with larger values are copied (rare).
    point = views and payloads and _under_a_gib(hdr[k.H_SIZE]) and max_uncompressed <= VIEW_MAX_UNCOMPRESSED
    columns, segments = _walk(data, hdr, max_uncompressed, messages, payloads, point)
    # (every batch is walked: none keeps a CRC left to the walk unchecked)
    assert not (hdr[k.H_CRC_CALC] == k.CRC_IN_WALK).any()
    bad = np.flatnonzero(hdr[k.H_STATUS] >= k.R_LENGTH)
    if errors == "raise" and len(bad):
        raise _error(hdr, int(bad[0]), starts, ends, messages)
    batches = tables.batches_table(hdr, _reasons(hdr, bad, messages))
    recs = _records_table(data, segments, hdr, columns, payloads, point)
    if views and payloads and not point:
        recs = recs.cast(tables.RECORDS_VIEW_SCHEMA)
    # (no rejects and no control batches: the same empty tables each time, where building
    # them took a sixth of a small call)
    rejects = _EMPTY_REJECTS
    if len(bad):
        rejects = tables.rejects_table(
            hdr[k.H_ROW, bad],
            bad,
            hdr[k.H_POS, bad],
            [_reason(hdr, int(b), messages) for b in bad],
            # (no payloads: no batch bytes either, as they hold the keys and values)
            [data[int(hdr[k.H_ABS, b]) : int(hdr[k.H_ABS, b] + hdr[k.H_SIZE, b])].tobytes() for b in bad]
            if payloads
            else None,
        )
    markers: pa.Table = _EMPTY_MARKERS
    control: dict[str, pa.Table] = {}
    if (((hdr[k.H_ATTR] & k.ATTR_CONTROL) != 0) & (hdr[k.H_MAGIC] == 2)).any():
        markers, control = decode_control(recs, batches, errors, ends - starts)
    if not payloads:
        recs = recs.drop_columns(["key", "value"])
    return Records(batches, recs, rejects, markers, control)


def find_batch(data: bytes | memoryview, start: int, stop: int, min_offset: int = 0) -> int | None:
    """The first position in ``data[start:stop]`` where a whole batch lies (in ``data``) whose
    header checks and whose CRC matches, with base offset at least ``min_offset``: where to
    read on after bytes that hold no batch (a damaged log segment). None where there is none,
    or where finding one would take CRCs over more than 16 times ``len(data)`` bytes (bytes
    made to look like batch headers)."""
    buf = np.frombuffer(data, np.uint8)
    budget = 16 * len(buf)
    at = int(k.find_batch(buf, start, stop, min_offset, k.CRC32_TABLE, k.CRC32C_TABLE, budget))
    return at if at >= 0 else None


def _walk(
    data: np.ndarray, hdr: np.ndarray, cap: int, messages: dict[int, str], payloads: bool, views: bool
) -> tuple[list[tables.RecordColumns], list[np.ndarray]]:
    """Decompress the region of every good compressed batch (a payload the codec refuses fails
    its batch) and walk the records of every batch into columns -> (the columns, in chunks,
    and with views the buffers holding the decompressed records).

    One walk checks and writes each record. It follows the decompression a group of batches at
    a time, while their records are still in the cache: walked later, 50 MB of decompressed
    records cost a trip to memory. With copies a group's buffer is reused by the next group.
    With views the buffers are kept, since the views point into them: a new one every
    ``SEGMENT`` bytes, small enough for the allocator to reuse its memory once freed.
    """
    nb = hdr.shape[1]
    chunks = _Chunks(data, hdr, payloads, views)
    codec_of = np.where(hdr[k.H_STATUS] == k.B_OK, hdr[k.H_ATTR] & k.CODEC_MASK, 0)
    # the compressed batches; the others are walked with them, in order, or all at once
    compressed = np.flatnonzero(codec_of)
    if not len(compressed):
        chunks.walk(_NO_INNER, 0, nb, chunks.data_windows)
        return chunks.close(), []
    # each compressed batch's codec and payload: arrays for the lz4 kernel, which reads a run
    # of lz4 batches in one call, and Python lists for the rest (a numpy scalar costs as much
    # as a small batch's decompression)
    codec_arr, start_arr = codec_of[compressed], hdr[k.H_REGION_START, compressed]
    end_arr = hdr[k.H_REGION_END, compressed]
    codecs, starts, ends = codec_arr.tolist(), start_arr.tolist(), end_arr.tolist()
    legacy = (hdr[k.H_MAGIC, compressed] < 2).tolist()
    todo = compressed.tolist()
    lz4_run = LZ4_DECOMPRESS and 3 in codecs
    view = data.data
    sink = Sink(SEGMENT + WALK_GROUP if views else 2 * WALK_GROUP)
    segments: list[np.ndarray] = []  # views: the buffers done
    b = i = 0  # the next batch to walk, the next compressed one
    while b < nb:
        if not views:
            sink.at = 0
        elif sink.at >= SEGMENT:
            segments.append(_read_only(sink.buf[: sink.at]))
            sink = Sink(SEGMENT + WALK_GROUP)
        g, at = nb, sink.at
        done: list[int] = []
        regions: list[int] = []
        while i < len(todo) and sink.at - at < WALK_GROUP:
            c, codec = todo[i], codecs[i]
            if codec == 3 and lz4_run:
                # (the kernel sets the regions of the batches it reads)
                j, sink.at, left = kl.lz4_batches(LZ4_DECOMPRESS, data, codec_arr, start_arr, end_arr,
                                                  compressed, i, sink.buf, sink.at,
                                                  WALK_GROUP - (sink.at - at), cap, hdr)  # fmt: skip
                c, i = todo[j - 1] if j > i else c, j
                g = c + 1 if sink.at - at >= WALK_GROUP else nb
                if left != kl.PYTHON:
                    continue
                c, codec = todo[i], codecs[i]  # read the Python way: it names any error
            start = sink.at
            try:
                if codec == 4 and legacy[i]:
                    raise CodecError(f"zstd in a magic {hdr[k.H_MAGIC, c]} message (zstd needs magic 2)")
                decompress_into(codec, view[starts[i] : ends[i]], cap, sink)
                done.append(c)
                regions += (start, sink.at)
            except CodecError as e:
                _decompress_failed(hdr, c, codec, e, cap, messages)
            i += 1
            g = c + 1 if sink.at - at >= WALK_GROUP else nb
        if done:
            hdr[k.H_INNER, done] = 1
            hdr[k.H_REGION_START : k.H_REGION_END + 1, done] = np.array(regions).reshape(-1, 2).T
        chunks.walk(_read_only(sink.buf), b, g, chunks.data_windows + len(segments))
        b = g
    if views and sink.at:
        segments.append(_read_only(sink.buf[: sink.at]))
    return chunks.close(), segments


def _decompress_failed(
    hdr: np.ndarray, b: int, codec: int, e: CodecError, cap: int, messages: dict[int, str]
) -> None:
    """Batch b's records do not decompress (or pass the cap): the batch fails."""
    hdr[k.H_ERR_AT, b] = hdr[k.H_POS, b]
    if isinstance(e, TooBig):
        hdr[k.H_STATUS, b], hdr[k.H_D1, b] = k.R_TOO_BIG, cap
    else:
        hdr[k.H_STATUS, b] = k.R_DECOMPRESS
        messages[b] = f"{CODECS[codec]} data does not decompress ({e})"


class _Chunks:
    """The columns ``walk_records`` fills, a chunk at a time. A chunk is given room from what
    the batches ahead claim (their record counts and bytes; once chunks are done, what they
    held per record), and closed when a batch does not fit what is left. A batch that does not
    fit an empty chunk is counted first and gets a chunk that fits it. Each byte column stays
    under 2 GiB (int32 offsets) unless one batch needs more."""

    def __init__(self, data: np.ndarray, hdr: np.ndarray, payloads: bool, views: bool) -> None:
        self.data, self.hdr, self.payloads, self.views = data, hdr, payloads, views
        self.data_windows = len(_windows(data)) if views else 0
        self.done: list[tables.RecordColumns] = []
        self.seen = np.zeros(CURSORS, np.int64)  # what the batches walked held (a sample's, then the chunks')
        self.bytes_per_record = 26.0  # in the sample (a magic 0/1 message takes 26 bytes at least)
        self.last = [0.0] * CURSORS  # what the last chunk held per record
        self.cols: tables.RecordColumns | None = None
        self.t = np.zeros(CURSORS + 1, np.int64)  # the walk's cursors in the open chunk, and its signs
        self.cap = self.t

    def walk(self, inner: np.ndarray, b: int, g: int, inner_first: int) -> None:
        """Walk batches b..g (their records are in ``data`` or ``inner``, buffer ``inner_first``
        of the views) into the chunks."""
        while b < g:
            if self.cols is None:
                self._open(inner, b, g, np.zeros(CURSORS, np.int64))
            assert self.cols is not None
            b = int(
                k.walk_records(
                    self.data, inner, self.hdr, b, g, True, k.CRC32_TABLE, k.CRC32C_TABLE, self.payloads,
                    self.views, inner_first, self.t, self.cap, *self.cols.kernel_args(),
                )
            )  # fmt: skip
            if b == g:
                return
            if self.t[0]:
                self._close_chunk()
            else:  # the batch does not fit an empty chunk: one that fits it
                self._open(inner, b, g, self._count(inner, b, b + 1))

    def _count(self, inner: np.ndarray, b0: int, b1: int) -> np.ndarray:
        """What batches b0..b1 hold (the walk's cursors), by a walk that writes no column."""
        t = np.zeros(CURSORS + 1, np.int64)
        none = _no_columns()
        k.walk_records(
            self.data, inner, self.hdr, b0, b1, False, k.CRC32_TABLE, k.CRC32C_TABLE, self.payloads,
            self.views, self.data_windows, t, t, *none,
        )  # fmt: skip
        return t[:CURSORS]

    def _open(self, inner: np.ndarray, b: int, g: int, need: np.ndarray) -> None:
        """A chunk for the batches from b on (b..g are decompressed), with room for ``need``."""
        hdr = self.hdr
        if not self.seen[0]:  # the first chunk: sized from a sample of the batches ahead
            sample = min(g, b + SAMPLE_BATCHES)
            self.seen = self._count(inner, b, sample)
            sampled = int((hdr[k.H_REGION_END, b:sample] - hdr[k.H_REGION_START, b:sample]).sum())
            self.bytes_per_record = max(26.0, sampled / max(1, int(self.seen[0])))
        ahead = min(hdr.shape[1], b + AHEAD_BATCHES)
        claimed = k.claimed_records(hdr, b, ahead, self.bytes_per_record, INNER_GUESS)
        # room per record as in the batches walked so far or in the last chunk, whichever held
        # more, and a quarter again; and some room beyond, for records unlike those
        seen = self.seen.tolist()
        per = [1.25 * max(x / max(seen[0], 1), y) for x, y in zip(seen, self.last, strict=True)]
        if self.views:
            per[1] = per[2] = 0
        # fixed-width columns, 16-byte views, 12 bytes a header
        width = RECORD_BYTES + 32 * self.views + per[1] + per[2] + 12 * per[3] + per[4] + per[5]
        n = min(max(int(claimed), 1), CHUNK_RECORDS, max(1, int((CHUNK_BLOCK - 5 * SLACK) / width)))
        want = [n, *(int(n * x) + SLACK for x in per[1:])]
        want[3] = int(n * per[3]) + SLACK // 12
        if self.views:
            want[1] = want[2] = 0
        want = [max(min(w, OFFSETS_LIMIT), x) for w, x in zip(want, need.tolist(), strict=True)]
        n, key, value, nh, hkey, hvalue = want
        self.cols = tables.RecordColumns.allocate(n, nh, key, value, hkey, hvalue, self.views)
        self.cap = self.cols.capacity()
        self.t = np.zeros(CURSORS + 1, np.int64)

    def _close_chunk(self) -> None:
        if self.cols is not None and self.t[0]:
            t = self.t[:CURSORS]
            # a chunk a quarter full or less is copied out: its rows would keep the block alive
            self.done.append(self.cols.used(t, copy=4 * t[0] <= self.cap[0], all_valid=self.t[CURSORS] >= 0))
            self.seen += t
            self.last = (t / t[0]).tolist()
        self.cols = None

    def close(self) -> list[tables.RecordColumns]:
        self._close_chunk()
        return self.done


_NO_INNER = np.zeros(0, np.uint8)  # ``inner`` of a walk with nothing decompressed
_NO_INNER.flags.writeable = False


@lru_cache(maxsize=1)
def _no_columns() -> tuple[Any, ...]:
    """Columns of no room, for a walk that only counts (the same each time: it writes none)."""
    return tables.RecordColumns.allocate(0, 0, 0, 0, 0, 0).kernel_args()


def _read_only(buf: np.ndarray) -> np.ndarray:
    """A read-only view: the kernels take ``inner`` read-only, so they compile once."""
    view = buf.view()
    view.flags.writeable = False
    return view


def _under_a_gib(sizes: np.ndarray) -> bool:
    return len(sizes) == 0 or int(sizes.max()) < 1 << k.VIEW_WINDOW_BITS


def _windows(buf: np.ndarray) -> list[pa.Buffer]:
    """The buffers views point into: a 2 GiB window every GiB of ``buf`` (views hold int32
    offsets), so a value under 1 GiB lies whole in the window of its first byte."""
    step = 1 << k.VIEW_WINDOW_BITS
    whole = pa.py_buffer(buf)
    return [whole.slice(w, min(len(buf) - w, 2 * step - 1)) for w in range(0, max(len(buf), 1), step)]


def _records_table(
    data: np.ndarray,
    segments: list[np.ndarray],
    hdr: np.ndarray,
    columns: list[tables.RecordColumns],
    payloads: bool,
    views: bool,
) -> pa.Table:
    """The records table from the walk's chunks (with views, over the input's windows and the
    buffers of decompressed records)."""
    windows = _windows(data) + [pa.py_buffer(s) for s in segments] if views else None
    control = ((hdr[k.H_ATTR] & k.ATTR_CONTROL) != 0) & (hdr[k.H_MAGIC] == 2)
    chunks = [
        # without payloads only control records' keys and values were copied
        cols.to_batch(None if payloads else control[cols.batch], windows)
        for cols in columns
    ]
    return pa.Table.from_batches(chunks, tables.RECORDS_VIEW_SCHEMA if views else tables.RECORDS_SCHEMA)


def _reason(hdr: np.ndarray, b: int, messages: dict[int, str]) -> str:
    code = int(hdr[k.H_STATUS, b])
    if code == k.R_DECOMPRESS:
        return messages[b]
    magic = int(hdr[k.H_MAGIC, b])
    text = _REASONS[code].format(
        d1=int(hdr[k.H_D1, b]), d2=int(hdr[k.H_D2, b]), crc="CRC-32C" if magic == 2 else "CRC-32"
    )
    if hdr[k.H_INNER, b] == 1:
        text += f", at byte {int(hdr[k.H_ERR_AT, b])} of the decompressed records"
    return text


def _reasons(hdr: np.ndarray, bad: np.ndarray, messages: dict[int, str]) -> list[str | None]:
    out: list[str | None] = [None] * hdr.shape[1]
    for b in bad:
        out[int(b)] = _reason(hdr, int(b), messages)
    return out


def _error(
    hdr: np.ndarray, b: int, starts: np.ndarray, ends: np.ndarray, messages: dict[int, str]
) -> Corrupt:
    row = int(hdr[k.H_ROW, b])
    pos = int(hdr[k.H_POS, b])
    at = pos if hdr[k.H_INNER, b] == 1 else int(hdr[k.H_ERR_AT, b])
    magic = int(hdr[k.H_MAGIC, b])
    first = int(np.searchsorted(hdr[k.H_ROW], row))
    return Corrupt(
        _reason(hdr, b, messages),
        path=f"batch {b - first} (byte {pos})",
        message_index=row,
        offset=at,
        size=int(ends[row] - starts[row]),
        message=tables.FORMATS.get(magic, "records"),
        version=magic if magic in tables.FORMATS else -1,  # (an unknown magic is no format's version)
    )
