"""Record batches into Arrow tables: ``decode_records``.

The kernels in ``arrowkafka.kernels.records`` find and check batches and walk records in two
passes; this module runs them, decompresses what is compressed between the passes, turns the
kernel's columns into Arrow arrays, renders errors, and decodes control records.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from arrowkafka.codec.decode import byte_ranges
from arrowkafka.errors import Corrupt
from arrowkafka.kernels import records as k
from arrowkafka.records import tables
from arrowkafka.records.codecs import CODECS, CodecError, TooBig, decompress
from arrowkafka.records.control import decode_control

__all__ = ["Records", "decode_records", "MAX_UNCOMPRESSED"]

MAX_UNCOMPRESSED = 256 << 20  # bytes one batch may decompress to, unless the caller says more
OFFSETS_LIMIT = (1 << 31) - 1  # int32 Arrow offsets: a column chunk holds less than this
INNER_GUESS = 8  # decompressed bytes first reserved per compressed byte (reserved, not touched)
WALK_GROUP = 256 << 10  # decompressed bytes the counting walk follows at a time (L2-sized)

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
        ``False`` leaves keys and values out (their sizes stay), for data that must not be copied.
    verify_crc : bool
        Check every batch's CRC-32C (magic 2) or CRC-32 (magic 0/1, inner messages too).
    max_uncompressed : int
        Bytes one compressed batch may decompress to; past it the batch fails (a decompression bomb).
    views : bool
        ``True``: keys and values come as ``binary_view`` arrays pointing into the input (and into
        the decompressed records) instead of copies: no bytes move, and the records table keeps
        the input's buffer alive. Some Arrow compute functions do not take views yet; Parquet,
        DuckDB and Polars do, and ``.cast(pa.binary())`` makes a copy when one is needed.
    """
    if errors not in ("raise", "null"):
        raise ValueError(f"errors must be 'raise' or 'null', not {errors!r}")
    if not 0 < max_uncompressed <= OFFSETS_LIMIT:
        raise ValueError(f"max_uncompressed must be between 1 and {OFFSETS_LIMIT} (int32 Arrow offsets)")
    data, starts, ends = byte_ranges(records)
    counts = np.empty(len(starts), np.int64)
    nb = int(k.count_batches(data, starts, ends, counts))
    hdr = np.zeros((k.NH, nb), np.int64)
    k.read_batches(data, starts, ends, hdr, k.CRC32_TABLE, k.CRC32C_TABLE, verify_crc)
    messages: dict[int, str] = {}
    # views of values over 1 GiB could not name a 2 GiB window holding them: copy those (rare) inputs
    point = views and payloads and _under_a_gib(hdr[k.H_SIZE])
    inner, totals = _decompress_and_count(data, hdr, max_uncompressed, messages, payloads, point)
    if point and not _under_a_gib(
        np.where(hdr[k.H_INNER] == 1, hdr[k.H_REGION_END] - hdr[k.H_REGION_START], 0)
    ):
        point = False  # counted again for copies: a batch decompressed to 1 GiB or more
        none = tables.RecordColumns.allocate(0, 0, 0, 0, 0, 0).kernel_args()
        totals = k.walk_records(data, inner, hdr, 0, nb, False, k.CRC32_TABLE, payloads, False, 0, *none)
    bad = np.flatnonzero(hdr[k.H_STATUS] >= k.R_LENGTH)
    if errors == "raise" and len(bad):
        raise _error(hdr, int(bad[0]), starts, ends, messages)
    batches = tables.batches_table(hdr, _reasons(hdr, bad, messages))
    recs = _fill(data, inner, hdr, totals, payloads, point)
    if views and payloads and not point:
        recs = recs.cast(tables.RECORDS_VIEW_SCHEMA)
    rejects = tables.rejects_table(
        hdr[k.H_ROW, bad],
        bad,
        hdr[k.H_POS, bad],
        [_reason(hdr, int(b), messages) for b in bad],
        [data[int(hdr[k.H_ABS, b]) : int(hdr[k.H_ABS, b] + hdr[k.H_SIZE, b])].tobytes() for b in bad],
    )
    markers, control = decode_control(recs, batches, errors)
    if not payloads:
        recs = recs.drop_columns(["key", "value"])
    return Records(batches, recs, rejects, markers, control)


def _decompress_and_count(
    data: np.ndarray, hdr: np.ndarray, cap: int, messages: dict[int, str], payloads: bool, views: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Decompress the region of every good compressed batch into one buffer and point the batch
    there (a payload the codec refuses fails its batch), and run the counting walk over every
    batch -> (the buffer, the walk's totals).

    The walk follows the decompression a group of batches at a time, while their records are
    still in the cache: walked later, 50 MB of decompressed records cost a second trip to memory.
    """
    status, attr = hdr[k.H_STATUS], hdr[k.H_ATTR]
    todo = np.flatnonzero((status == k.B_OK) & ((attr & k.CODEC_MASK) != 0))
    # numpy's allocation, not bytes objects kept and joined: numpy asks for huge pages, and on a VM
    # a fresh 4 KiB page costs microseconds. Pages never written cost nothing, so the first guess
    # may be generous (within what any machine lets a process reserve).
    compressed = int((hdr[k.H_REGION_END, todo] - hdr[k.H_REGION_START, todo]).sum())
    inner = np.empty(max(min(INNER_GUESS * compressed, 1 << 31), 1), np.uint8)
    totals = np.zeros(6, np.int64)
    none = tables.RecordColumns.allocate(0, 0, 0, 0, 0, 0).kernel_args()  # counting writes no column
    at = walked = group = 0
    view = data.data
    for b in todo:
        codec = int(attr[b] & k.CODEC_MASK)
        try:
            if codec == 4 and hdr[k.H_MAGIC, b] < 2:
                raise CodecError(f"zstd in a magic {hdr[k.H_MAGIC, b]} message (zstd needs magic 2)")
            out = decompress(codec, view[hdr[k.H_REGION_START, b] : hdr[k.H_REGION_END, b]], cap)
        except TooBig:
            hdr[k.H_STATUS, b], hdr[k.H_D1, b] = k.R_TOO_BIG, cap
            hdr[k.H_ERR_AT, b] = hdr[k.H_POS, b]
            continue
        except CodecError as e:
            hdr[k.H_STATUS, b] = k.R_DECOMPRESS
            hdr[k.H_ERR_AT, b] = hdr[k.H_POS, b]
            messages[int(b)] = f"{CODECS[codec]} data does not decompress ({e})"
            continue
        n = len(out)
        if at + n > len(inner):  # a rare copy: the guess above allows a high ratio
            grown = np.empty(at + max(len(inner), n), np.uint8)
            grown[:at] = inner[:at]  # (only what was written: the rest stays untouched)
            inner = grown
        inner[at : at + n] = np.frombuffer(out, np.uint8)
        hdr[k.H_INNER, b] = 1
        hdr[k.H_REGION_START, b] = at
        at += n
        hdr[k.H_REGION_END, b] = at
        group += n
        if group >= WALK_GROUP:
            totals += k.walk_records(
                data, _read_only(inner), hdr, walked, b + 1, False, k.CRC32_TABLE, payloads, views, 0, *none
            )
            walked, group = int(b) + 1, 0
    nb = hdr.shape[1]
    inner = _read_only(inner[: max(at, 1)])
    totals += k.walk_records(data, inner, hdr, walked, nb, False, k.CRC32_TABLE, payloads, views, 0, *none)
    return inner, totals


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


def _fill(
    data: np.ndarray, inner: np.ndarray, hdr: np.ndarray, totals: np.ndarray, payloads: bool, views: bool
) -> pa.Table:
    """The records table, in chunks whose byte columns and header lists each stay under 2 GiB
    (int32 offsets): a record or header counts as one more byte."""
    sizes = hdr[k.H_KEY_BYTES] + hdr[k.H_VALUE_BYTES] + hdr[k.H_HKEY_BYTES] + hdr[k.H_HVALUE_BYTES]
    sizes += hdr[k.H_NREC] + hdr[k.H_NHEADERS]
    nb = hdr.shape[1]
    cuts = [0]
    if int(totals.sum()) > OFFSETS_LIMIT:
        cum = np.cumsum(sizes)
        while cum[-1] - (cum[cuts[-1] - 1] if cuts[-1] else 0) > OFFSETS_LIMIT:
            base = cum[cuts[-1] - 1] if cuts[-1] else 0
            cuts.append(max(int(np.searchsorted(cum, base + OFFSETS_LIMIT, side="right")), cuts[-1] + 1))
    cuts.append(nb)
    windows = _windows(data) if views else []
    chunks = []
    for b0, b1 in itertools.pairwise(cuts):
        good = hdr[k.H_STATUS, b0:b1] == k.B_OK
        n = int(hdr[k.H_NREC, b0:b1][good].sum())
        nh = int(hdr[k.H_NHEADERS, b0:b1][good].sum())
        cols = tables.RecordColumns.allocate(
            n,
            nh,
            int(hdr[k.H_KEY_BYTES, b0:b1][good].sum()),
            int(hdr[k.H_VALUE_BYTES, b0:b1][good].sum()),
            int(hdr[k.H_HKEY_BYTES, b0:b1][good].sum()),
            int(hdr[k.H_HVALUE_BYTES, b0:b1][good].sum()),
            views,
        )
        k.walk_records(
            data, inner, hdr, b0, b1, True, k.CRC32_TABLE, payloads, views, len(windows) if views else 0,
            *cols.kernel_args(),
        )  # fmt: skip
        kept = None
        if not payloads:  # only control records' keys and values were copied
            control = ((hdr[k.H_ATTR] & k.ATTR_CONTROL) != 0) & (hdr[k.H_MAGIC] == 2)
            kept = control[cols.batch]
        chunks.append(cols.to_batch(kept, windows + _windows(inner) if views else None))
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
        version=magic,
    )
