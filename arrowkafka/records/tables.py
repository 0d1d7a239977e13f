"""The Arrow tables of records: their schemas, and the kernel's columns turned into arrays."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.assembly import blocks
from arrowkafka.assembly.arrays import binary_array, int64_array, string_array
from arrowkafka.kernels import records as k
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


# (arrays built from buffers, here and below: pyarrow's own conversion imports pandas, most of a
# process's first decode where pandas is installed)
def _names(index: np.ndarray, names: tuple[str, ...], mask: np.ndarray) -> pa.Array:
    """Strings picked from ``names`` by index, null where ``mask`` is False: each row's bytes
    gathered from the names back to back (a dictionary array cast to strings took 80 us, a
    fifth of a small call to decode_records)."""
    blob, lengths, starts = _packed(names)
    pick = np.where(mask, index, 0)
    n = np.where(mask, lengths[pick], 0)
    offsets = np.zeros(len(pick) + 1, np.int32)
    np.cumsum(n, out=offsets[1:])
    data = blob[np.repeat(starts[pick] - offsets[:-1], n) + np.arange(offsets[-1])]
    return pa.Array.from_buffers(
        pa.string(), len(pick), [_validity(mask), pa.py_buffer(offsets), pa.py_buffer(data)]
    )


@lru_cache(maxsize=16)
def _packed(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``names`` as UTF-8 back to back, with each one's length and start."""
    encoded = [x.encode() for x in names]
    lengths = np.array([len(x) for x in encoded], np.int32)
    starts = np.zeros(len(names), np.int32)
    np.cumsum(lengths[:-1], out=starts[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), lengths, starts


def batches_table(hdr: np.ndarray, errors: list[str | None]) -> pa.Table:
    magic = hdr[k.H_MAGIC]
    status = hdr[k.H_STATUS]
    size = hdr[k.H_SIZE]
    partial = status == k.B_PARTIAL
    ok = status == k.B_OK
    read = ~partial & (magic >= 0) & (magic <= 2) & (status != k.R_LENGTH)  # header fields are there
    v2 = read & (magic == 2)
    legacy = read & (magic < 2)
    attr = hdr[k.H_ATTR]
    codec = attr & k.CODEC_MASK
    wrapper = legacy & (codec != 0)
    # magic 0/1 wrappers: the first and last inner records' offsets. A broker writes the last
    # one as the wrapper's own offset; a producer may write 0 there (the broker assigns them).
    relative = wrapper & (magic == 1) & (hdr[k.H_BASE_OFFSET] != 0)
    shift = np.where(relative, hdr[k.H_BASE_OFFSET] - hdr[k.H_LAST_INNER], 0)
    base_offset = np.where(wrapper & ok, hdr[k.H_FIRST_INNER] + shift, hdr[k.H_BASE_OFFSET])
    last_offset = np.where(v2, hdr[k.H_BASE_OFFSET] + hdr[k.H_LAST_DELTA], hdr[k.H_BASE_OFFSET])
    last_offset = np.where(wrapper & ok, hdr[k.H_LAST_INNER] + shift, last_offset)
    crc_checked = read & (hdr[k.H_CRC_CALC] >= 0)
    base_ts, max_ts = hdr[k.H_BASE_TS], hdr[k.H_MAX_TS]
    region = hdr[k.H_REGION_END] - hdr[k.H_REGION_START]
    decompressed = hdr[k.H_INNER] == 1
    stored = np.where(decompressed, hdr[k.H_SIZE] - 12 - np.where(v2, k.V2_HEADER - 12, 0), region)
    legacy_count = np.where(ok, hdr[k.H_NREC], 0)
    everywhere = np.ones(len(magic), bool)
    # column: (values, valid where); booleans hold 0 or 1
    values = {
        "row": (hdr[k.H_ROW], everywhere),
        "position": (hdr[k.H_POS], everywhere),
        "size": (size, everywhere),
        "partial": (partial, everywhere),
        "magic": (magic, (magic >= 0) & (magic <= 127)),
        "base_offset": (base_offset, ~partial | (size >= 8)),
        "last_offset": (last_offset, read & (ok | v2)),
        "batch_length": (hdr[k.H_LENGTH], ~partial | (size >= 12)),
        "partition_leader_epoch": (hdr[k.H_EPOCH], v2),
        "crc": (hdr[k.H_CRC], read),
        "crc_ok": (hdr[k.H_CRC] == hdr[k.H_CRC_CALC], crc_checked),
        "transactional": (((attr & k.ATTR_TRANSACTIONAL) != 0) & v2, read),
        "control": (((attr & k.ATTR_CONTROL) != 0) & v2, read),
        "delete_horizon": (base_ts, v2 & ((attr & k.ATTR_DELETE_HORIZON) != 0)),
        "last_offset_delta": (hdr[k.H_LAST_DELTA], v2),
        "base_timestamp": (base_ts, v2 & (base_ts != -1)),
        "max_timestamp": (max_ts, read & (magic >= 1) & (max_ts != -1)),
        "producer_id": (hdr[k.H_PID], v2),
        "producer_epoch": (hdr[k.H_PEPOCH], v2),
        "base_sequence": (hdr[k.H_BASE_SEQ], v2),
        "record_count": (np.where(v2, hdr[k.H_COUNT], legacy_count), v2 | (legacy & ok)),
        "records_size": (stored, read & (hdr[k.H_REGION_END] > 0)),
        "uncompressed_size": (region, ok),
    }
    cols = _columns(values, BATCHES_SCHEMA)
    cols["codec"] = _names(codec, (*CODECS, "unknown 5", "unknown 6", "unknown 7"), read)
    cols["timestamp_type"] = _names((attr >> 3) & 1, TIMESTAMP_TYPES, read & (magic >= 1))
    cols["error"] = pa.nulls(len(errors), pa.string()) if not any(errors) else string_array(errors)
    return pa.Table.from_arrays([cols[f.name] for f in BATCHES_SCHEMA], schema=BATCHES_SCHEMA)


def _columns(values: dict[str, tuple[np.ndarray, np.ndarray]], schema: pa.Schema) -> dict[str, pa.Array]:
    """Fixed-width columns of ``schema`` from (values, valid) pairs: each type's columns
    converted in one numpy call and every validity bitmap packed in one (a few calls per
    column took a third of a small call to decode_records)."""
    names = tuple(values)
    pairs = list(values.values())
    n = len(pairs[0][0])
    valid = np.stack([v for _, v in pairs])
    bitmaps = np.packbits(valid, axis=1, bitorder="little")
    whole = np.asarray(valid.all(axis=1)).tolist()
    out = {}
    for t, dtype, group in _groups(schema, names):
        data = np.stack([pairs[i][0] for i in group]).astype(dtype)
        if dtype is bool:
            data = np.packbits(data, axis=1, bitorder="little")
        for j, i in enumerate(group):
            mask = None if whole[i] else pa.py_buffer(bitmaps[i])
            out[names[i]] = pa.Array.from_buffers(t, n, [mask, pa.py_buffer(data[j])])
    return out


@lru_cache(maxsize=4)
def _groups(schema: pa.Schema, names: tuple[str, ...]) -> list[tuple[pa.DataType, Any, list[int]]]:
    """The indices of ``names`` by their type in ``schema``: (Arrow type, numpy dtype, indices)."""
    groups: dict[str, tuple[pa.DataType, Any, list[int]]] = {}
    for i, c in enumerate(names):
        t = schema.field(c).type
        dtype = bool if t == pa.bool_() else np.int64 if pa.types.is_timestamp(t) else t.to_pandas_dtype()
        groups.setdefault(str(t), (t, dtype, []))[2].append(i)
    return list(groups.values())


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
        starts = np.cumsum([0] + [-(-m * w // 64) * 64 for m, w in lengths])
        raw = blocks.block(int(starts[-1]) + 64)
        shift = -raw.ctypes.data % 64
        block = raw[shift : shift + int(starts[-1])]
        dtypes = {8: np.int64, 4: np.int32, 1: np.uint8}
        cols = [block[a : a + m * w].view(dtypes[w]) for (m, w), a in zip(lengths, starts, strict=False)]
        return cls(*cols)

    def capacity(self) -> np.ndarray:
        """What the columns have room for, in the order of ``walk_records``' cursors."""
        cols = self.batch, self.key_data, self.value_data, self.hvalue_size, self.hkey_data, self.hvalue_data
        return np.array([len(x) for x in cols], np.int64)

    def used(self, t: np.ndarray, copy: bool = False) -> RecordColumns:
        """The columns cut to what the walk wrote (``t``: its cursors), with the last offsets
        (the totals) written; ``copy``: into a block of their own size."""
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
            self.key_views[: 16 * n], self.value_views[: 16 * n],
        )  # fmt: skip
        if not copy:
            return cut
        out = RecordColumns.allocate(n, nh, key, value, hkey, hvalue, len(self.key_views) > 0)
        for mine, theirs in zip(cut.kernel_args(), out.kernel_args(), strict=True):
            theirs[:] = mine  # (allocate gives each column exactly the cut's length)
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
        key_valid, value_valid = self.key_size >= 0, self.value_size >= 0
        kept_key, kept_value = key_valid, value_valid
        if kept is not None:
            kept_key, kept_value = key_valid & kept, value_valid & kept
        headers = pa.StructArray.from_arrays(
            [
                _wrap(pa.string(), self.hkey_offsets, self.hkey_data),
                _wrap(pa.binary(), self.hvalue_offsets, self.hvalue_data, self.hvalue_size >= 0),
            ],
            fields=list(HEADER),
        )
        list_type = RECORDS_SCHEMA.field("headers").type
        return pa.RecordBatch.from_arrays(
            [
                _wrap(pa.int64(), self.batch),
                _wrap(pa.int64(), self.offset),
                _wrap(TS, self.ts, valid=self.ts != -1),
                _views(self.key_views, kept_key, windows)
                if windows is not None
                else _wrap(pa.binary(), self.key_offsets, self.key_data, kept_key),
                _views(self.value_views, kept_value, windows)
                if windows is not None
                else _wrap(pa.binary(), self.value_offsets, self.value_data, kept_value),
                pa.Array.from_buffers(
                    list_type, n, [None, pa.py_buffer(self.header_offsets)], children=[headers]
                ),
                _wrap(pa.int32(), self.size),
                _wrap(pa.int32(), self.key_size, valid=key_valid),
                _wrap(pa.int32(), self.value_size, valid=value_valid),
            ],
            schema=RECORDS_SCHEMA if windows is None else RECORDS_VIEW_SCHEMA,
        )


def _views(views: np.ndarray, valid: np.ndarray, windows: list[pa.Buffer]) -> pa.Array:
    return pa.Array.from_buffers(
        pa.binary_view(), len(valid), [_validity(valid), pa.py_buffer(views), *windows]
    )


def _wrap(
    type_: pa.DataType,
    first: np.ndarray,
    data: np.ndarray | None = None,
    valid: np.ndarray | None = None,
    children: list[pa.Array] | None = None,
) -> pa.Array:
    """An Arrow array over the kernel's buffers as they are: ``first`` is the values (fixed
    width) or the offsets (binary and string: ``data`` holds the bytes; list: ``children``)."""
    n = len(first) - (data is not None or children is not None)
    bufs = [None if valid is None else _validity(valid), pa.py_buffer(first)]
    if data is not None:
        bufs.append(pa.py_buffer(data))
    return pa.Array.from_buffers(type_, n, bufs, children=children)
