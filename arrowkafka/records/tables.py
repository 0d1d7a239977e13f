"""The Arrow tables of records: their schemas, and the kernel's columns turned into arrays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.assembly import blocks
from arrowkafka.assembly.arrays import binary_array, int64_array, string_array
from arrowkafka.kernels import batch_table as kb
from arrowkafka.records.codecs import CODECS
from arrowkafka.records.control import MARKERS_SCHEMA, SPECS, control_schema

__all__ = [
    "BATCHES_SCHEMA",
    "CONTROL_TABLES",
    "FORMATS",
    "RECORDS_SCHEMA",
    "RECORDS_VIEW_SCHEMA",
    "REJECTS_SCHEMA",
    "RecordColumns",
    "TIMESTAMP_TYPES",
    "batches_table",
    "linked_control",
    "linked_control_schemas",
    "rejects_table",
]

TS = pa.timestamp("ms", tz="UTC")
# the KRaft control records decoded through their specs, one table per spec, as the jobs write
# them: ``record_control.LeaderChangeMessage`` ...
CONTROL_TABLES = "record_control."
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")  # by the timestamp-type attribute bit
FORMATS = {0: "MessageSet", 1: "MessageSet", 2: "RecordBatch"}  # what errors call each magic
HEADER = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])

BATCHES_SCHEMA = pa.schema(
    [
        pa.field("row", pa.int64(), nullable=False),  # the input element the batch is in
        pa.field("position", pa.int64(), nullable=False),  # its first byte inside that element
        pa.field("size", pa.int64(), nullable=False),  # bytes: 12 + batch_length, or those present
        pa.field("partial", pa.bool_(), nullable=False),  # the element ends inside the batch
        pa.field("magic", pa.int8()),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("batch_length", pa.int32()),
        pa.field("partition_leader_epoch", pa.int32()),  # magic 2
        pa.field("crc", pa.uint32()),
        pa.field("crc_ok", pa.bool_()),  # null when not checked
        pa.field("codec", pa.string()),
        pa.field("timestamp_type", pa.string()),  # CreateTime or LogAppendTime; magic 1 and 2
        pa.field("transactional", pa.bool_()),
        pa.field("control", pa.bool_()),
        pa.field("delete_horizon", TS),  # magic 2 with the delete-horizon attribute
        pa.field("last_offset_delta", pa.int32()),  # magic 2
        pa.field("base_timestamp", TS),  # magic 2
        pa.field("max_timestamp", TS),  # magic 2; the message's timestamp in magic 1
        pa.field("producer_id", pa.int64()),  # magic 2 (-1: none)
        pa.field("producer_epoch", pa.int16()),
        pa.field("base_sequence", pa.int32()),
        pa.field("record_count", pa.int32()),  # magic 2: as the batch claims; 0/1: as found
        pa.field("records_size", pa.int64()),  # bytes of the records as stored (compressed)
        pa.field("uncompressed_size", pa.int64()),  # bytes of the records once decompressed
        pa.field("error", pa.string()),  # why the batch did not decode; null when it did
    ]
)

RECORDS_SCHEMA = pa.schema(
    [
        pa.field("batch", pa.int64(), nullable=False),  # row in the batches table
        pa.field("record_offset", pa.int64(), nullable=False),  # the record's offset in its partition
        pa.field("timestamp", TS),  # null in magic 0 and where the writer put -1 (no timestamp)
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(pa.field("item", HEADER, nullable=False)), nullable=False),
        pa.field("size", pa.int32(), nullable=False),  # bytes of the record as written
        pa.field("key_size", pa.int32()),  # null for a null key
        pa.field("value_size", pa.int32()),
    ]
)

# ``decode_records(views=True)``: keys and values as Arrow's binary_view, pointing into the input
RECORDS_VIEW_SCHEMA = pa.schema(
    [f.with_type(pa.binary_view()) if f.name in ("key", "value") else f for f in RECORDS_SCHEMA]
)

REJECTS_SCHEMA = pa.schema(
    [
        pa.field("row", pa.int64(), nullable=False),
        pa.field("batch", pa.int64(), nullable=False),  # row in the batches table
        pa.field("position", pa.int64(), nullable=False),
        pa.field("error", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        # the batch's bytes, as far as the element holds them (null with payloads=False)
        pa.field("raw", pa.binary()),
    ]
)


def linked_schemas(link: list[pa.Field], payloads: bool = True) -> dict[str, pa.Schema]:
    """The record tables a job writes (``record_batches``, ``records``, ``record_markers``):
    ``link`` (where each batch came from, and a ``batch_id``) in place of the row and batch
    indices of ``decode_records``' tables; keys and values only with ``payloads``."""
    records = [
        f for f in RECORDS_SCHEMA if f.name != "batch" and (payloads or f.name not in ("key", "value"))
    ]
    return {
        "record_batches": pa.schema([*link, *(f for f in BATCHES_SCHEMA if f.name != "row")]),
        "records": pa.schema([*link, *records]),
        "record_markers": pa.schema(
            [*link, *(f for f in MARKERS_SCHEMA if f.name not in ("record", "batch"))]
        ),
    }


def linked_control(
    control: dict[str, pa.Table], records: pa.Table, link: Callable[[pa.Array], pa.Table]
) -> dict[str, pa.Table]:
    """``decode_records``' KRaft control tables as a job writes them (``CONTROL_TABLES``): each
    row's ``record`` index turned into its batch's link columns (``link`` of the batch indices,
    as the job links its records) and its ``record_offset``, then the spec's columns."""
    out = {}
    for name, table in control.items():
        rec = table.column("record")
        lead = link(pc.take(records.column("batch"), rec))
        own = table.drop_columns(_NOT_LINKED)
        out[name] = pa.Table.from_arrays(
            [*lead.columns, pc.take(records.column("record_offset"), rec), *own.columns],
            names=[*lead.column_names, "record_offset", *own.column_names],
        )
    return out


# what a linked control table leaves out of decode_records' own: the record's row, and the
# version its value was read at, which is its ``version`` field (each value names its own, and
# a capture's link columns have a ``_version`` of their own: the frame's)
_NOT_LINKED = ["record", "_version"]


def linked_control_schemas(link: list[pa.Field]) -> dict[str, pa.Schema]:
    """The schemas of ``linked_control``'s tables, of every KRaft control spec, by the names a
    job writes them under (``record_control.LeaderChangeMessage`` ...)."""
    offset = pa.field("record_offset", pa.int64(), nullable=False)
    own = {n: [f for f in control_schema(n) if f.name not in _NOT_LINKED] for n in SPECS.values()}
    return {CONTROL_TABLES + n: pa.schema([*link, offset, *fields]) for n, fields in own.items()}


def _validity(mask: np.ndarray) -> pa.Buffer | None:
    if mask.all():
        return None
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


# the names the string columns of the batches table index: the codecs (attributes & 7), then
# the timestamp types
_BATCH_NAMES = (*CODECS, *(f"unknown {c}" for c in range(len(CODECS), kb.CODEC_NAMES)), *TIMESTAMP_TYPES)


_Names = tuple[np.ndarray, np.ndarray, np.ndarray]  # packed names: bytes, starts, lengths


class _BatchLayout(NamedTuple):
    """How ``batch_columns`` stores the columns of ``kb.COLUMNS``: ``kinds[j]`` (bytes a value,
    ``BITS``, ``STRING``) and ``slots[j]``, its row in the array of that kind; the rows each
    kind takes; ``columns``: (kind, slot, type, j) for each column of the table in its order
    (but ``error``, the last); the packed names (bytes, starts, lengths)."""

    kinds: np.ndarray
    slots: np.ndarray
    rows: dict[int, int]
    columns: list[tuple[int, int, pa.DataType, int]]
    names: _Names


@lru_cache(maxsize=1)
def _batch_layout() -> _BatchLayout:
    assert {*kb.COLUMNS, "error"} == set(BATCHES_SCHEMA.names), "the kernel writes every column but error"
    assert BATCHES_SCHEMA.names[-1] == "error"
    kinds, slots, types = [], [], []
    rows = dict.fromkeys((8, 4, 2, 1, kb.BITS, kb.STRING), 0)
    for name in kb.COLUMNS:
        t = BATCHES_SCHEMA.field(name).type
        kind = kb.STRING if t == pa.string() else kb.BITS if t == pa.bool_() else t.bit_width // 8
        kinds.append(kind)
        slots.append(rows[kind])
        rows[kind] += 1
        types.append(t)
    columns = [(kinds[j], slots[j], types[j], j) for j in map(kb.COLUMNS.index, BATCHES_SCHEMA.names[:-1])]
    encoded = [x.encode() for x in _BATCH_NAMES]
    lengths = np.array([len(x) for x in encoded], np.int64)
    name_starts = np.concatenate([[0], np.cumsum(lengths[:-1])]).astype(np.int64)
    names = np.frombuffer(b"".join(encoded), np.uint8)
    return _BatchLayout(np.array(kinds, np.int64), np.array(slots, np.int64), rows, columns,
                        (names, name_starts, lengths))  # fmt: skip


# (arrays built from buffers, here and below: pyarrow's own conversion imports pandas, most of a
# process's first decode where pandas is installed)
def batches_table(hdr: np.ndarray, errors: list[str | None]) -> pa.Table:
    """The batches table from ``hdr`` (``errors``: each batch's reason, None where it decoded),
    its columns written by one kernel, straight into the buffers of their arrays (one Arrow
    buffer per kind, sliced: this runs once per call, and per column it cost a third more)."""
    layout = _batch_layout()
    rows, names = layout.rows, layout.names
    nb = hdr.shape[1]
    nbytes = -(-nb // 8)
    by_kind = {w: np.empty((rows[w], nb), dtype) for w, dtype in ((8, np.int64), (4, np.int32),
                                                                   (2, np.int16), (1, np.int8))}  # fmt: skip
    by_kind[kb.BITS] = np.zeros((rows[kb.BITS], nbytes), np.uint8)
    valid = np.zeros((kb.NC, nbytes), np.uint8)
    whole = np.empty(kb.NC, np.uint8)
    str_offsets = np.empty((rows[kb.STRING], nb + 1), np.int32)
    str_data = np.empty((rows[kb.STRING], nb * int(names[2].max())), np.uint8)
    kb.batch_columns(hdr, layout.kinds, layout.slots, by_kind[8], by_kind[4], by_kind[2], by_kind[1],
                     by_kind[kb.BITS], valid, whole, str_offsets, str_data, *names)  # fmt: skip
    # each kind's rows in one Arrow buffer, sliced per column (a row is ``step`` bytes; not the
    # array's stride, which numpy may set to the itemsize where a dimension is 0)
    buffers = {kind: (pa.py_buffer(a), a.shape[1] * a.itemsize) for kind, a in by_kind.items()}
    valid_buffer, all_valid = pa.py_buffer(valid), whole.tolist()
    arrays = []
    for kind, s, type_, j in layout.columns:
        validity = None if all_valid[j] else valid_buffer.slice(j * nbytes, nbytes)
        if kind == kb.STRING:
            text = [pa.py_buffer(str_offsets[s]), pa.py_buffer(str_data[s, : str_offsets[s, nb]])]
            arrays.append(pa.Array.from_buffers(type_, nb, [validity, *text]))
        else:
            data, step = buffers[kind]
            arrays.append(pa.Array.from_buffers(type_, nb, [validity, data.slice(s * step, step)]))
    arrays.append(pa.nulls(nb, pa.string()) if not any(errors) else string_array(errors))
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=BATCHES_SCHEMA)])


def rejects_table(rows: np.ndarray, batches: np.ndarray, positions: np.ndarray, reasons: list[str],
                  raw: list[bytes] | None) -> pa.Table:  # fmt: skip
    """``raw`` None: every row's ``raw`` is null."""
    if raw is None:
        raw_array = pa.nulls(len(reasons), pa.binary())
    else:
        raw_array = binary_array(raw) if sum(map(len, raw)) < 2**31 else pa.array(raw, pa.binary())
    return pa.Table.from_pydict(
        {
            "row": int64_array(rows),
            "batch": int64_array(batches),
            "position": int64_array(positions),
            "error": string_array(["Corrupt"] * len(reasons)),
            "reason": string_array(reasons),
            "raw": raw_array,
        },
        REJECTS_SCHEMA,
    )


_DTYPES = {8: np.int64, 4: np.int32, 1: np.uint8}


@dataclass
class RecordColumns:
    """The buffers ``walk_records`` fills, in Arrow's layout: int32 sizes and offsets (each
    offsets array one longer than its column). ``allocate`` takes capacities; ``used`` cuts
    the columns to what was written."""

    batch: np.ndarray
    offset: np.ndarray
    ts: np.ndarray
    size: np.ndarray
    key_size: np.ndarray
    value_size: np.ndarray
    key_offsets: np.ndarray
    key_data: np.ndarray
    value_offsets: np.ndarray
    value_data: np.ndarray
    header_offsets: np.ndarray
    hkey_offsets: np.ndarray
    hkey_data: np.ndarray
    hvalue_size: np.ndarray
    hvalue_offsets: np.ndarray
    hvalue_data: np.ndarray
    key_views: np.ndarray  # 16 bytes a record with views, else empty
    value_views: np.ndarray
    # no size or timestamp below 0 (the walk says so): every row of those columns is valid
    all_valid: bool = field(default=False, kw_only=True)

    @classmethod
    def allocate(
        cls, n: int, nh: int, key: int, value: int, hkey: int, hvalue: int, views: bool = False
    ) -> RecordColumns:
        # one allocation for every column, each at a 64-byte boundary, from the blocks kept for
        # reuse: fresh pages fault in 4 KiB at a time (on a VM those faults cost as much as the
        # walk that fills the columns), and a dozen arrays of a few MB each would each fault
        lengths = [
            (n, 8), (n, 8), (n, 8), (n, 4), (n, 4), (n, 4), (n + 1, 4), (key, 1), (n + 1, 4),
            (value, 1), (n + 1, 4), (nh + 1, 4), (hkey, 1), (nh, 4), (nh + 1, 4), (hvalue, 1),
            (16 * n * views, 1), (16 * n * views, 1),
        ]  # fmt: skip
        starts = list(accumulate((-(-m * w // 64) * 64 for m, w in lengths), initial=0))
        raw = blocks.block(starts[-1] + 64)
        shift = -raw.ctypes.data % 64
        block = raw[shift : shift + starts[-1]]
        return cls(
            *(block[a : a + m * w].view(_DTYPES[w]) for (m, w), a in zip(lengths, starts[:-1], strict=True))
        )

    def capacity(self) -> np.ndarray:
        """What the columns have room for, in the order of ``walk_records``' cursors."""
        cols = self.batch, self.key_data, self.value_data, self.hvalue_size, self.hkey_data, self.hvalue_data
        return np.array([len(x) for x in cols], np.int64)

    def used(self, t: np.ndarray, copy: bool = False, all_valid: bool = False) -> RecordColumns:
        """The columns cut to what the walk wrote (``t``: its cursors), with the last offsets
        (the totals) written; ``copy``: into a block of their own size. ``all_valid``: the walk
        wrote no size or timestamp below 0."""
        n, key, value, nh, hkey, hvalue = (int(x) for x in t)
        for offsets, m, total in ((self.key_offsets, n, key), (self.value_offsets, n, value),
                                  (self.header_offsets, n, nh), (self.hkey_offsets, nh, hkey),
                                  (self.hvalue_offsets, nh, hvalue)):  # fmt: skip
            offsets[m] = total
        cut = RecordColumns(
            self.batch[:n], self.offset[:n], self.ts[:n], self.size[:n], self.key_size[:n],
            self.value_size[:n], self.key_offsets[: n + 1], self.key_data[:key],
            self.value_offsets[: n + 1], self.value_data[:value], self.header_offsets[: n + 1],
            self.hkey_offsets[: nh + 1], self.hkey_data[:hkey], self.hvalue_size[:nh],
            self.hvalue_offsets[: nh + 1], self.hvalue_data[:hvalue],
            self.key_views[: 16 * n], self.value_views[: 16 * n], all_valid=all_valid,
        )  # fmt: skip
        if not copy:
            return cut
        out = RecordColumns.allocate(n, nh, key, value, hkey, hvalue, len(self.key_views) > 0)
        for mine, theirs in zip(cut.kernel_args(), out.kernel_args(), strict=True):
            theirs[:] = mine  # (allocate gives each column exactly the cut's length)
        out.all_valid = all_valid
        return out

    def kernel_args(self) -> tuple[Any, ...]:
        return (self.batch, self.offset, self.ts, self.size, self.key_size, self.value_size,
                self.key_offsets, self.key_data, self.value_offsets, self.value_data, self.header_offsets,
                self.hkey_offsets, self.hkey_data, self.hvalue_size, self.hvalue_offsets,
                self.hvalue_data, self.key_views, self.value_views)  # fmt: skip

    def to_batch(
        self, kept: np.ndarray | None = None, windows: list[pa.Buffer] | None = None
    ) -> pa.RecordBatch:
        """``kept``: records whose key and value bytes were copied (all when None); the others
        get null keys and values here (their sizes stay in ``key_size``, ``value_size``).
        ``windows``: the buffers the views point into, when the walk wrote views."""
        n = len(self.batch)
        valid = _no_check if self.all_valid else _valid_where
        key_valid, value_valid = valid(self.key_size), valid(self.value_size)
        kept_key, kept_value = key_valid, value_valid
        if kept is not None:
            kept_key, kept_value = _valid_where(self.key_size, kept), _valid_where(self.value_size, kept)
        headers = pa.Array.from_buffers(
            HEADER,
            len(self.hvalue_size),
            [None],
            children=[
                _wrap(pa.string(), self.hkey_offsets, None, self.hkey_data),
                _wrap(pa.binary(), self.hvalue_offsets, valid(self.hvalue_size), self.hvalue_data),
            ],
        )
        return pa.RecordBatch.from_arrays(
            [
                _wrap(pa.int64(), self.batch),
                _wrap(pa.int64(), self.offset),
                _wrap(TS, self.ts, valid(self.ts)),
                _views(self.key_views, n, kept_key, windows)
                if windows is not None
                else _wrap(pa.binary(), self.key_offsets, kept_key, self.key_data),
                _views(self.value_views, n, kept_value, windows)
                if windows is not None
                else _wrap(pa.binary(), self.value_offsets, kept_value, self.value_data),
                _wrap(_HEADERS, self.header_offsets, children=[headers]),
                _wrap(pa.int32(), self.size),
                _wrap(pa.int32(), self.key_size, key_valid),
                _wrap(pa.int32(), self.value_size, value_valid),
            ],
            schema=RECORDS_SCHEMA if windows is None else RECORDS_VIEW_SCHEMA,
        )


_HEADERS = RECORDS_SCHEMA.field("headers").type


def _valid_where(values: np.ndarray, kept: np.ndarray | None = None) -> pa.Buffer | None:
    """The validity bitmap of a column whose nulls hold -1 (sizes, timestamps), and where
    ``kept`` is given, of only its rows kept; None where every row is valid. (Asked where the
    walk wrote a value below 0, or with ``kept``: a minimum, which allocates nothing, settles
    the usual case.)"""
    if kept is None and (len(values) == 0 or values.min() >= 0):
        return None
    mask = values != -1
    return _validity(mask if kept is None else mask & kept)


def _no_check(values: np.ndarray) -> None:
    """``_valid_where`` where the walk saw no value below 0: every row valid."""
    return None


def _views(views: np.ndarray, n: int, validity: pa.Buffer | None, windows: list[pa.Buffer]) -> pa.Array:
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), *windows])


def _wrap(
    type_: pa.DataType,
    first: np.ndarray,
    validity: pa.Buffer | None = None,
    data: np.ndarray | None = None,
    children: list[pa.Array] | None = None,
) -> pa.Array:
    """An Arrow array over the kernel's buffers as they are: ``first`` is the values (fixed
    width) or the offsets (binary and string: ``data`` holds the bytes; list: ``children``)."""
    buffers = [validity, pa.py_buffer(first)]
    if data is not None:
        return pa.Array.from_buffers(type_, len(first) - 1, [*buffers, pa.py_buffer(data)])
    if children is not None:
        return pa.Array.from_buffers(type_, len(first) - 1, buffers, children=children)
    return pa.Array.from_buffers(type_, len(first), buffers)
