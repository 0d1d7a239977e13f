"""Tables into record batches: ``encode_records``, the inverse of ``decode_records``.

Flatten (every column to numpy once, defaults filled in, every value the format cannot carry
refused with its table row and field) -> pass 1, ``size_records`` (each record's exact size,
each batch's records in all) -> the records of each compressed batch written into one scratch
buffer (``write_regions``) and compressed, one call per batch -> the output allocated once ->
pass 2, ``write_batches`` (headers, records or payloads, CRCs) -> one binary value per row.
The kernels are in ``arrowkafka.kernels.records_encode``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from arrowkafka.codec.encode import BAD_OFFSETS, bad_offsets
from arrowkafka.errors import EncodeError
from arrowkafka.kernels import records as kr
from arrowkafka.kernels import records_encode as ke
from arrowkafka.records.codecs import CODECS, compress
from arrowkafka.records.control import CONTROL_TYPES, SPECS, kraft_value_errors
from arrowkafka.records.tables import FORMATS, TIMESTAMP_TYPES

__all__ = ["MAX_LENGTH", "encode_records"]

MAX_LENGTH = (1 << 31) - 1  # int32 lengths: a record, a message, a batch (after its first 12 bytes)
MAX_VALUES = 1 << 28  # output values (each costs an int32 offset, empty ones too): 1 GiB of offsets
INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


def encode_records(batches: Any, records: Any, *, num_values: int | None = None) -> pa.BinaryArray:
    """Write record batches (magic 0, 1 and 2, every codec) from the tables ``decode_records``
    returns: ``encode_records(got.batches, got.records)`` gives the values back.

    Parameters
    ----------
    batches : pa.Table or pa.RecordBatch
        One row per batch (a magic 2 record batch, or a magic 0/1 message: uncompressed, a
        message of one record; compressed, a wrapper of its records). Columns, all optional:

        - ``row`` (0): the output value the batch goes into; a value's batches are written in
          the order they come here.
        - ``magic`` (2), ``codec`` ("none"; none, gzip, snappy, lz4, zstd, the last magic 2
          only), ``timestamp_type`` ("CreateTime"; "LogAppendTime": magic 1 and 2).
        - magic 2 only: ``base_offset`` (its first record's offset, or 0),
          ``last_offset_delta`` (its last record's offset less the base, or 0),
          ``base_timestamp`` (its first record's timestamp), ``max_timestamp`` (its records'
          largest), ``partition_leader_epoch``, ``producer_id``, ``producer_epoch``,
          ``base_sequence`` (each -1), ``transactional``, ``control`` (False),
          ``delete_horizon`` (none; when set, it is what the base timestamp field holds).
          A null timestamp is -1 on the wire, as ``decode_records`` reads it.
        - magic 1 wrappers: ``max_timestamp``, the wrapper's timestamp (its records' largest).

        Offsets and timestamps of magic 0/1 messages come from their records (a
        ``base_offset`` or ``max_timestamp`` given for one must be what its records make, and
        its other fields null, as ``decode_records`` gives them). Columns the
        writer computes (``crc``, ``batch_length``, ``size``, ``record_count``, ...) are not
        read; a batch that is ``partial`` or has an ``error`` cannot be written.
    records : pa.Table or pa.RecordBatch
        One row per record, in their batch's order: ``batch`` (the row in ``batches``; may be
        left out when there is one batch), ``record_offset`` (absolute; left out: the batch's
        ``base_offset`` or 0, counting up), ``timestamp`` (null: none, -1 on the wire),
        ``key``, ``value`` (null when left out), ``headers`` (``list<struct<key string,
        value binary>>``; none when left out). Other columns are not read.
    num_values : int, optional
        Length of the output (values no batch goes into are empty); by default one more than
        the largest ``row``.

    Returns
    -------
    pa.BinaryArray
        One value per output row: its batches back to back, as Kafka lays them out. Compressed
        payloads are written as Kafka's Java client writes them (gzip members, xerial-framed
        snappy in 32 KiB blocks, Kafka's LZ4 frame of independent 64 KiB blocks with the
        KAFKA-3160 header checksum in magic 0, zstd frames), at each codec's default level.

    Raises
    ------
    EncodeError
        A value the format cannot carry, naming the table, row and field, e.g.
        ``offset 2147483648 is 2147483648 from its batch's base_offset 0: the delta must fit
        int32 at records[3].offset (row 3, RecordBatch v2)``.
    """
    bt, rt = _as_table(batches, "batches"), _as_table(records, "records")
    if num_values is not None and (
        isinstance(num_values, bool)  # (True is an int to Python, and no count)
        or not isinstance(num_values, int | np.integer)
        or not 0 <= num_values <= MAX_VALUES
    ):
        raise ValueError(f"num_values must be an int from 0 to {MAX_VALUES}, not {num_values!r}")
    b = _Batches(bt)
    r = _Records(rt, b)
    bh = _header_rows(b, r)
    rsize = np.empty(r.n, np.int64)
    ke.size_records(bh, r.perm, r.rec, r.hdrs, rsize)
    _check_sizes(b, r, bh, rsize)
    payloads = _compress(b, r, bh, rsize)
    nv = num_values if num_values is not None else (int(b.row.max()) + 1 if b.nb else 0)
    out, value_offsets = _place(b, r, bh, nv)
    data = (r.k_data, r.v_data, r.hk_data, r.hv_data)
    ke.write_batches(out, bh, r.perm, r.rec, r.hdrs, rsize, *data, payloads, kr.CRC32_TABLE, kr.CRC32C_TABLE)
    return pa.Array.from_buffers(pa.binary(), nv, [None, pa.py_buffer(value_offsets), pa.py_buffer(out)])


# ---- columns ---------------------------------------------------------------------------------


def _as_table(data: Any, name: str) -> pa.Table:
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data
    raise TypeError(f"{name} must be a pa.Table or pa.RecordBatch, not {type(data).__name__}")


def _array(t: pa.Table, name: str, table: str = "") -> pa.Array | None:
    at = t.schema.get_all_field_indices(name)
    if not at:
        return None
    if len(at) > 1:
        raise _column_err(f"{len(at)} columns named {name}", table or "a table", name)
    col = t.column(at[0])
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _err(reason: str, table: str, row: int, field: str, magic: int = -1) -> EncodeError:
    known = magic in FORMATS  # (an unknown magic is no format's version)
    return EncodeError(reason, path=f"{table}[{row}].{field}", row=row, message=FORMATS.get(magic, "records"),
                       version=magic if known else -1)  # fmt: skip


def _column_err(reason: str, table: str, name: str) -> EncodeError:
    """A whole column is wrong (its type): no row to name."""
    return EncodeError(reason, path=f"{table}.{name}", row=-1, message=table)


def _check_offsets(offs: np.ndarray, limit: int, table: str, name: str) -> None:
    """Offsets as Arrow requires them (``codec.encode.bad_offsets``): the kernel copies by them."""
    bad = bad_offsets(offs, limit)
    if bad is not None:
        raise _column_err(f"{BAD_OFFSETS} (element {bad})", table, name)


def _first(mask: np.ndarray) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if len(hit) else None


def _ints(arr: pa.Array, table: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """int64 values (0 where null) and where they are null; timestamps in milliseconds."""
    t = arr.type
    try:
        if pa.types.is_timestamp(t):
            if t.unit != "ms":
                arr = arr.cast(pa.timestamp("ms", t.tz))
        elif not (pa.types.is_integer(t) or pa.types.is_null(t)):
            raise TypeError(f"a column of {t} where integers are expected")
        arr = arr.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError) as e:
        raise _column_err(str(e), table, name) from None
    nulls = arr.is_null().to_numpy(zero_copy_only=False)
    return np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), np.int64), nulls


def _bools(arr: pa.Array, table: str, name: str) -> np.ndarray:
    if not (pa.types.is_boolean(arr.type) or pa.types.is_null(arr.type)):
        raise _column_err(f"a column of {arr.type} where booleans are expected", table, name)
    return np.asarray(arr.cast(pa.bool_()).fill_null(False).to_numpy(zero_copy_only=False), bool)


def _names(arr: pa.Array, names: tuple[str, ...], table: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Index of each value in ``names`` (-1: not one of them) and where they are null."""
    try:
        arr = arr.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise _column_err(str(e), table, name) from None
    nulls = arr.is_null().to_numpy(zero_copy_only=False)
    index = pc.index_in(arr, value_set=pa.array(names, pa.string())).fill_null(-1)
    return np.asarray(index.to_numpy(zero_copy_only=False), np.int64), nulls


_EMPTY = np.zeros(0, np.uint8)
_EMPTY.flags.writeable = False  # every byte buffer read-only: one kernel signature


def _binary(arr: pa.Array, table: str, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, start of each value, its length; -1 null) of a binary or string column."""
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        otype: type = np.int32
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        otype = np.int64
    else:
        try:
            arr = arr.cast(pa.large_binary())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise _column_err(f"a column of {t} where bytes are expected", table, name) from None
        return _binary(arr, table, name)
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return _EMPTY, np.zeros(n, np.int64), np.full(n, -1, np.int64)
    width = np.dtype(otype).itemsize
    offs = np.frombuffer(bufs[1], otype, count=n + 1, offset=arr.offset * width).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else _EMPTY
    data.flags.writeable = False
    _check_offsets(offs, len(data), table, name)
    lengths = np.diff(offs)
    if arr.null_count:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = -1
    return data, offs[:-1], lengths


# ---- batches ---------------------------------------------------------------------------------


class _Batches:
    """The batch columns, in input order, checked; the fields that depend on the records are
    finished in ``_header_rows``."""

    def __init__(self, t: pa.Table) -> None:
        self.t = t
        nb = self.nb = t.num_rows
        self.magic = np.full(nb, -1, np.int64)  # until the column is read: errors name no format
        self.row = self._required("row", 0)
        for name, message in (("partial", "a partial batch (its value ended inside it)"),
                              ("error", "a batch that did not decode")):  # fmt: skip
            arr = _array(t, name, "batches")
            if arr is None:
                continue
            hit = _bools(arr, "batches", name) if name == "partial" else ~arr.is_null().to_numpy(False)
            if (bad := _first(hit)) is not None:
                detail = f" ({arr[bad].as_py()})" if name == "error" else ""
                raise self.err(f"{message}{detail} cannot be written", bad, name)
        if (bad := _first(self.row < 0)) is not None:
            raise self.err(f"row {self.row[bad]} is negative", bad, "row")
        if (bad := _first(self.row >= MAX_VALUES)) is not None:
            raise self.err(f"row {self.row[bad]} is past the {MAX_VALUES} values one call writes", bad, "row")
        magic = self.magic = self._required("magic", 2)
        if (bad := _first((magic < 0) | (magic > 2))) is not None:
            raise _err(f"unknown magic {magic[bad]}", "batches", bad, "magic")
        # codec and timestamp type
        self.codec = np.zeros(nb, np.int64)
        if (arr := _array(t, "codec", "batches")) is not None:
            index, nulls = _names(arr, CODECS, "batches", "codec")
            if (bad := _first((index < 0) & ~nulls)) is not None:
                raise self.err(
                    f"unknown codec {arr[bad].as_py()!r} (one of {', '.join(CODECS)})", bad, "codec"
                )
            self.codec = np.where(nulls, 0, index)
        if (bad := _first((self.codec == 4) & (magic < 2))) is not None:
            raise self.err(
                f"codec zstd does not exist in magic {magic[bad]} (it needs magic 2)", bad, "codec"
            )
        self.log_append = np.zeros(nb, bool)
        if (arr := _array(t, "timestamp_type", "batches")) is not None:
            index, nulls = _names(arr, TIMESTAMP_TYPES, "batches", "timestamp_type")
            if (bad := _first((index < 0) & ~nulls)) is not None:
                raise self.err(f"unknown timestamp type {arr[bad].as_py()!r}", bad, "timestamp_type")
            self.log_append = index == 1
        if (bad := _first(self.log_append & (magic == 0))) is not None:
            raise self.err("magic 0 messages have no timestamp type", bad, "timestamp_type")
        # magic 2 only
        self.transactional = self._flag("transactional")
        self.control = self._flag("control")
        self.horizon, horizon_null = self._optional("delete_horizon")
        self.has_horizon = ~horizon_null if horizon_null is not None else np.zeros(nb, bool)
        if (bad := _first(self.has_horizon & (magic < 2))) is not None:
            raise self.err(f"magic {magic[bad]} batches have no delete horizon", bad, "delete_horizon")
        limits = {"partition_leader_epoch": INT32, "producer_id": INT64,
                  "producer_epoch": (-(1 << 15), (1 << 15) - 1), "base_sequence": INT32}  # fmt: skip
        self.v2: dict[str, np.ndarray] = {}
        for name, (lo, hi) in limits.items():
            values, maybe_nulls = self._optional(name)
            if maybe_nulls is None:
                self.v2[name] = np.full(nb, -1, np.int64)
                continue
            values = np.where(maybe_nulls, -1, values)
            if (bad := _first((values < lo) | (values > hi))) is not None:
                raise self.err(f"{name} {values[bad]} is out of range [{lo}, {hi}]", bad, name)
            if (bad := _first((values != -1) & (magic < 2))) is not None:
                raise self.err(f"magic {magic[bad]} batches have no {name} (only -1 or null)", bad, name)
            self.v2[name] = values

    def err(self, reason: str, b: int, field: str) -> EncodeError:
        return _err(reason, "batches", b, field, int(self.magic[b]))

    def _required(self, name: str, default: int) -> np.ndarray:
        arr = _array(self.t, name, "batches")
        if arr is None:
            return np.full(self.nb, default, np.int64)
        values, nulls = _ints(arr, "batches", name)
        if (bad := _first(nulls)) is not None:
            raise self.err(f"null {name}", bad, name)
        return values

    def _optional(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        """Values and where they are null; None for the nulls when the column is left out."""
        arr = _array(self.t, name, "batches")
        if arr is None:
            return np.zeros(self.nb, np.int64), None
        return _ints(arr, "batches", name)

    def _flag(self, name: str) -> np.ndarray:
        arr = _array(self.t, name, "batches")
        if arr is None:
            return np.zeros(self.nb, bool)
        values = _bools(arr, "batches", name)
        if (bad := _first(values & (self.magic < 2))) is not None:
            raise self.err(f"magic {self.magic[bad]} batches cannot be {name}", bad, name)
        return values


# ---- records ---------------------------------------------------------------------------------


class _Records:
    """The record columns as the kernels read them (``rec``, ``hdrs`` and byte buffers, in
    input order), and their order in the output (``perm``, batch by batch)."""

    def __init__(self, t: pa.Table, b: _Batches) -> None:
        n = self.n = t.num_rows
        self.b = b
        arr = _array(t, "batch", "records")
        if arr is None:
            if b.nb != 1 and n:
                reason = "records need a batch column (there is not exactly one batch)"
                raise _column_err(reason, "records", "batch")
            batch, nulls = np.zeros(n, np.int64), np.zeros(n, bool)
        else:
            batch, nulls = _ints(arr, "records", "batch")
        if (bad := _first(nulls)) is not None:
            raise _err("null batch", "records", bad, "batch")
        if (bad := _first((batch < 0) | (batch >= b.nb))) is not None:
            raise _err(f"batch {batch[bad]} is not a row of batches ({b.nb} rows)", "records", bad, "batch")
        self.batch = batch
        self.magic = b.magic[batch]
        # the output order: batches by row (stable), records by their batch's place (stable)
        self.border = np.argsort(b.row, kind="stable") if np.any(b.row[1:] < b.row[:-1]) else np.arange(b.nb)
        rank = np.empty(b.nb, np.int64)
        rank[self.border] = np.arange(b.nb)
        place = rank[batch]
        self.perm = np.argsort(place, kind="stable") if np.any(place[1:] < place[:-1]) else np.arange(n)
        counts = np.bincount(place, minlength=b.nb).astype(np.int64)  # per batch, output order
        self.ends = np.cumsum(counts)
        self.starts = self.ends - counts
        self.counts = counts[rank]  # per batch, input order
        # each batch's first and last record (input row; -1 when it has none), input order
        some = counts > 0
        first = np.full(b.nb, -1, np.int64)
        last = np.full(b.nb, -1, np.int64)
        first[self.border[some]] = self.perm[self.starts[some]]
        last[self.border[some]] = self.perm[self.ends[some] - 1]
        self.first, self.last = first, last
        self._columns(t)

    def err(self, reason: str, j: int, field: str) -> EncodeError:
        return _err(reason, "records", j, field, int(self.magic[j]))

    def _columns(self, t: pa.Table) -> None:
        n, b = self.n, self.b
        rec = self.rec = np.empty((ke.NR, n), np.int64)
        # offsets
        arr = _array(t, "record_offset", "records")
        if arr is None and "offset" in t.column_names:  # the column's name before record_offset
            raise self.err(
                "no record_offset column, but an offset column: record offsets are read from record_offset",
                0,
                "offset",
            )
        if arr is None:
            base, nulls = b._optional("base_offset")
            base = np.where(nulls, 0, base) if nulls is not None else base
            counting = np.arange(n) - np.repeat(self.starts, self.ends - self.starts)  # place in its batch
            rec[ke.R_OFFSET, self.perm] = counting + base[self.batch[self.perm]]
        else:
            rec[ke.R_OFFSET], nulls = _ints(arr, "records", "record_offset")
            if (bad := _first(nulls)) is not None:
                raise self.err("null record_offset", bad, "record_offset")
        # timestamps (-1: none)
        arr = _array(t, "timestamp", "records")
        if arr is None:
            rec[ke.R_TS] = -1
        else:
            ts, nulls = _ints(arr, "records", "timestamp")
            rec[ke.R_TS] = np.where(nulls, -1, ts)
        if (bad := _first((rec[ke.R_TS] != -1) & (self.magic == 0))) is not None:
            raise self.err("magic 0 messages have no timestamp (only null)", bad, "timestamp")
        self.k_data = self._payload(t, "key", ke.R_KEY_AT, ke.R_KEY_LEN)
        self.v_data = self._payload(t, "value", ke.R_VALUE_AT, ke.R_VALUE_LEN)
        self._headers(_array(t, "headers", "records"))
        if (bad := _first((rec[ke.R_HEADERS_N] > 0) & (self.magic < 2))) is not None:
            raise self.err(f"magic {self.magic[bad]} messages have no headers", bad, "headers")

    def _payload(self, t: pa.Table, name: str, at: int, length: int) -> np.ndarray:
        """The key or value column into rec[at], rec[length]; its bytes."""
        arr = _array(t, name, "records")
        if arr is None:
            sizes = _array(t, f"{name}_size", "records")
            if sizes is not None and sizes.null_count < len(sizes):
                reason = f"records have {name}_size but no {name} column (decoded with payloads=False?)"
                raise _column_err(reason, "records", name)
            self.rec[at], self.rec[length] = 0, -1
            return _EMPTY
        data, self.rec[at], self.rec[length] = _binary(arr, "records", name)
        return data

    def _headers(self, arr: pa.Array | None) -> None:
        """A record's headers are entries R_HEADERS_AT.. of the list's child columns, read in
        place (the child may hold entries no record refers to)."""
        rec = self.rec
        self.hk_data = self.hv_data = _EMPTY
        none = np.zeros(0, np.int64)
        self.hdrs = (none, none, none, none)
        if arr is None or pa.types.is_null(arr.type):
            rec[ke.R_HEADERS_AT], rec[ke.R_HEADERS_N] = 0, 0
            return
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise _column_err(
                f"a column of {arr.type} where list<struct<key, value>> is expected", "records", "headers"
            )
        offs = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), np.int64)
        _check_offsets(offs, len(arr.values), "records", "headers")
        count = np.diff(offs)
        if arr.null_count:
            count[arr.is_null().to_numpy(zero_copy_only=False)] = 0  # a null list: no headers
        rec[ke.R_HEADERS_AT], rec[ke.R_HEADERS_N] = offs[:-1], count
        if not count.any():
            return
        items = arr.values
        fields = ("key", "value")  # (a struct with ``Value`` or ``val`` is a mistake, not null values)
        if not pa.types.is_struct(items.type) or any(items.type.get_field_index(f) < 0 for f in fields):
            raise _column_err(
                f"headers of {items.type} (needs struct<key string, value binary>)", "records", "headers"
            )
        keys = items.field("key")
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            try:
                keys = keys.cast(pa.large_string())  # checks UTF-8
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise _column_err(f"header keys: {e}", "records", "headers.key") from None
        self.hk_data, k_at, k_len = _binary(keys, "records", "headers.key")
        if items.null_count or keys.null_count:
            null_item = items.is_null().to_numpy(zero_copy_only=False)
            bad_items = null_item | (k_len < 0)
            # the items some record refers to: +1 where a list starts, -1 where it ends
            edges = np.zeros(len(items) + 1, np.int64)
            np.add.at(edges, offs[:-1], count > 0)
            np.add.at(edges, offs[:-1] + count, np.where(count > 0, -1, 0))
            if (h := _first(bad_items & (np.cumsum(edges)[:-1] > 0))) is not None:
                j = int(np.flatnonzero((offs[:-1] <= h) & (h < offs[:-1] + count))[0])
                where = f"headers[{h - offs[j]}]"
                raise self.err(
                    *(
                        ("a null header", j, where)
                        if null_item[h]
                        else ("a null header key", j, where + ".key")
                    )
                )
        self.hv_data, v_at, v_len = _binary(items.field("value"), "records", "headers.value")
        self.hdrs = (np.ascontiguousarray(k_at), k_len, np.ascontiguousarray(v_at), v_len)


# ---- the fields that depend on both tables ----------------------------------------------------


def _outside(a: np.ndarray, base: np.ndarray, batch: np.ndarray, lo: int, hi: int) -> np.ndarray | None:
    """Where a - base[batch] overflows int64 or falls outside [lo, hi]; None when nowhere can
    (told by the ranges alone, as most tables are far from the limits)."""
    if not len(a) or (int(a.min()) - int(base.max()) >= lo and int(a.max()) - int(base.min()) <= hi):
        return None
    b = base[batch]
    d = a - b  # wraps where it overflows: a and b of unlike signs, d's sign unlike a's
    return (((a ^ b) & (a ^ d)) < 0) | (d < lo) | (d > hi)


def _legacy_fields(b: _Batches, legacy: np.ndarray, off_first: np.ndarray, ts_first: np.ndarray) -> None:
    """Magic 0/1 messages take their offsets and timestamps from their records and have no
    other batch fields: a value given for one must be what the records make (as
    ``decode_records`` reads it back), or null, not left behind without a word."""
    m1_plain = legacy & (b.magic == 1) & (b.codec == 0)
    checks: list[tuple[str, np.ndarray, np.ndarray | None]] = [
        ("base_offset", legacy, off_first),  # its first record's offset
        ("last_offset_delta", legacy, None),
        ("base_timestamp", legacy, None),
        ("max_timestamp", legacy & (b.magic == 0), None),
        ("max_timestamp", m1_plain, ts_first),  # the message's timestamp (a wrapper's is written)
    ]
    for name, where, want in checks:
        values, nulls = b._optional(name)
        if nulls is None:
            continue
        given = where & ~nulls
        if want is None and (bad := _first(given)) is not None:
            raise b.err(f"a magic {b.magic[bad]} message has no {name} (leave it null)", bad, name)
        if want is not None and (bad := _first(given & (values != want))) is not None:
            raise b.err(
                f"{name} {values[bad]} is not what the records of this magic {b.magic[bad]} message make"
                f" ({want[bad]}): magic 0/1 messages take it from their records",
                bad,
                name,
            )


def _where(mask: np.ndarray, bad: np.ndarray | None) -> int | None:
    return None if bad is None else _first(mask & bad)


def _header_rows(b: _Batches, r: _Records) -> np.ndarray:
    """``bh``, the kernels' batch rows in output order, after the checks that need records."""
    nb, rec, batch = b.nb, r.rec, r.batch
    off, ts = rec[ke.R_OFFSET], rec[ke.R_TS]
    has = r.counts > 0
    fst, lst = np.maximum(r.first, 0), np.maximum(r.last, 0)
    off_first = np.where(has, off[fst] if r.n else 0, 0)
    off_last = np.where(has, off[lst] if r.n else 0, 0)
    ts_first = np.where(has, ts[fst] if r.n else -1, -1)
    ts_max = np.full(nb, -1, np.int64)
    if r.n:
        some = np.flatnonzero(r.counts[r.border] > 0)
        ts_max[r.border[some]] = np.maximum.reduceat(ts[r.perm], r.starts[some])
    v2, legacy = b.magic == 2, b.magic < 2
    wrapper = legacy & (b.codec != 0)

    # magic 0/1: one record per uncompressed message, at least one per wrapper
    if (bad := _first(legacy & (b.codec == 0) & (r.counts != 1))) is not None:
        reason = f"an uncompressed magic {b.magic[bad]} message holds exactly one record, not {r.counts[bad]}"
        raise b.err(reason, bad, "records")
    if (bad := _first(wrapper & ~has)) is not None:
        raise b.err("a compressed magic 0/1 message holds at least one record", bad, "records")
    # Kafka writes an empty batch uncompressed (an empty xerial stream, say, reads nowhere else)
    if (bad := _first(v2 & (b.codec != 0) & ~has)) is not None:
        raise b.err(
            "a compressed batch holds at least one record (write an empty one uncompressed)", bad, "records"
        )

    base, nulls = b._optional("base_offset")
    base = np.where(nulls, off_first, base) if nulls is not None else off_first
    last_delta, nulls = b._optional("last_offset_delta")
    default_delta = np.where(has, off_last - base, 0)
    last_delta = np.where(nulls, default_delta, last_delta) if nulls is not None else default_delta
    base_ts, nulls = b._optional("base_timestamp")
    base_ts = np.where(nulls, -1, base_ts) if nulls is not None else ts_first
    base_ts = np.where(b.has_horizon, b.horizon, base_ts)
    max_ts, nulls = b._optional("max_timestamp")
    max_ts = np.where(nulls, -1, max_ts) if nulls is not None else ts_max

    _legacy_fields(b, legacy, off_first, ts_first)

    # per record: deltas that fit, LogAppendTime timestamps
    rv2 = r.magic == 2
    if (bad := _where(rv2, _outside(off, base, batch, *INT32))) is not None:
        at, at0 = int(off[bad]), int(base[batch[bad]])
        reason = f"offset {at} is {at - at0} from its batch's base_offset {at0}: the delta must fit int32"
        raise r.err(reason, bad, "record_offset")
    if (bad := _first(v2 & ((last_delta < INT32[0]) | (last_delta > INT32[1])))) is not None:
        raise b.err(f"last_offset_delta {last_delta[bad]} does not fit int32", bad, "last_offset_delta")
    if (bad := _where(rv2, _outside(ts, base_ts, batch, *INT64))) is not None:
        reason = f"timestamp {ts[bad]} is too far from its batch's base timestamp {base_ts[batch[bad]]}"
        raise r.err(reason + " (the delta must fit int64)", bad, "timestamp")
    if b.log_append.any():
        stamped = b.log_append[batch] & (rv2 | wrapper[batch])
        if (bad := _first(stamped & (ts != max_ts[batch]))) is not None:
            reason = f"timestamp {ts[bad]} differs from its LogAppendTime batch's max_timestamp"
            raise r.err(f"{reason} {max_ts[batch[bad]]} (every record of it reads as that)", bad, "timestamp")
    _check_control(b, r)

    # a negative offset in a message set reads three ways (ours, kafka-python's, Java refuses it)
    if (bad := _first(~rv2 & (off < 0))) is not None:
        raise r.err(
            f"offset {off[bad]} is negative: magic 0/1 message sets hold offsets from 0", bad, "record_offset"
        )
    # magic 1 wrappers: inner offsets relative to the first (the wrapper carries the last);
    # a last offset of 0 would read as absolute inner offsets, so they are written so
    relative = wrapper & (b.magic == 1) & (off_last != 0)
    inner_base = np.where(relative, off_first, 0)
    if (bad := _where(relative[batch], _outside(off, inner_base, batch, *INT64))) is not None:
        reason = f"offset {off[bad]} is too far from its wrapper's first offset {inner_base[batch[bad]]}"
        raise r.err(reason, bad, "record_offset")

    attr: np.ndarray = b.codec | np.where(b.log_append, kr.ATTR_LOG_APPEND_TIME, 0)
    attr |= np.where(b.transactional, kr.ATTR_TRANSACTIONAL, 0) | np.where(b.control, kr.ATTR_CONTROL, 0)
    attr |= np.where(b.has_horizon, kr.ATTR_DELETE_HORIZON, 0)
    bh = np.zeros((ke.NB, nb), np.int64)
    o = r.border
    bh[ke.B_MAGIC] = b.magic[o]
    bh[ke.B_ATTR] = attr[o]
    bh[ke.B_BASE_OFFSET] = np.where(v2, base, off_last)[o]
    bh[ke.B_EPOCH] = b.v2["partition_leader_epoch"][o]
    bh[ke.B_LAST_DELTA] = last_delta[o]
    bh[ke.B_BASE_TS] = base_ts[o]
    bh[ke.B_MAX_TS] = max_ts[o]
    bh[ke.B_PID] = b.v2["producer_id"][o]
    bh[ke.B_PEPOCH] = b.v2["producer_epoch"][o]
    bh[ke.B_BASE_SEQ] = b.v2["base_sequence"][o]
    bh[ke.B_FIRST] = r.starts
    bh[ke.B_END] = r.ends
    bh[ke.B_INNER_BASE] = inner_base[o]
    bh[ke.B_PAYLOAD] = -1
    return bh


def _check_control(b: _Batches, r: _Records) -> None:
    """Control records: a key of version int16 (>= 0) and type int16; an ABORT or COMMIT
    value of version int16 and coordinator epoch int32; a KRaft one at least its version."""
    control = b.control[r.batch] & (r.magic == 2)
    if not control.any():
        return
    rec = r.rec
    klen, vlen = rec[ke.R_KEY_LEN], rec[ke.R_VALUE_LEN]
    if (bad := _first(control & (klen < 4))) is not None:
        size = "a null key" if klen[bad] < 0 else f"a key of {klen[bad]} bytes"
        raise r.err(f"{size} on a control record (needs 4: version int16, type int16)", bad, "key")
    rows = np.flatnonzero(control)
    at, k = rec[ke.R_KEY_AT, rows], r.k_data

    def i16(p: np.ndarray) -> np.ndarray:
        v = (k[p].astype(np.int64) << 8) | k[p + 1]
        return np.where(v >= 1 << 15, v - (1 << 16), v)

    version, kind, vlen = i16(at), i16(at + 2), vlen[rows]
    if (bad := _first(version < 0)) is not None:
        raise r.err(f"control record key version {version[bad]} (must be >= 0)", int(rows[bad]), "key")
    if (bad := _first(((kind == 0) | (kind == 1)) & (vlen < 6))) is not None:
        reason = f"a {CONTROL_TYPES[int(kind[bad])]} marker value of {max(int(vlen[bad]), 0)} bytes"
        raise r.err(reason + " (needs 6: version int16, coordinator epoch int32)", int(rows[bad]), "value")
    if (bad := _first(np.isin(kind, list(SPECS)) & (vlen < 2))) is not None:
        reason = (
            f"a {SPECS[int(kind[bad])]} value of {max(int(vlen[bad]), 0)} bytes (needs its version int16)"
        )
        raise r.err(reason, int(rows[bad]), "value")
    # KRaft values: what decode_records would refuse, by its own check (the spec's plan)
    vat = rec[ke.R_VALUE_AT, rows]
    for code, name in SPECS.items():
        pick = np.flatnonzero(kind == code)
        if len(pick):
            values = [r.v_data[vat[i] : vat[i] + vlen[i]].tobytes() for i in pick]
            if failed := kraft_value_errors(name, [int(rows[i]) for i in pick], values):
                row = min(failed)
                raise r.err(failed[row], row, "value")


def _check_sizes(b: _Batches, r: _Records, bh: np.ndarray, rsize: np.ndarray) -> None:
    """Records, messages and batches whose length does not fit int32."""
    if r.n and rsize.max() > MAX_LENGTH:
        legacy = bh[ke.B_MAGIC, np.searchsorted(r.ends, np.arange(r.n), side="right")] < 2
        length = np.where(legacy, rsize - 12, rsize)  # the length a record or message states
        if (bad := _first(length > MAX_LENGTH)) is not None:
            j = int(r.perm[bad])
            parts = {"key": r.rec[ke.R_KEY_LEN, j], "value": r.rec[ke.R_VALUE_LEN, j]}
            field = max(parts, key=lambda p: parts[p])
            raise r.err(f"a record of {length[bad]} bytes (key {max(parts['key'], 0)}, value "
                        f"{max(parts['value'], 0)}) is longer than {MAX_LENGTH}", j, field)  # fmt: skip
    length = bh[ke.B_REGION] + np.where(bh[ke.B_MAGIC] == 2, kr.V2_HEADER - 12, -12)
    if (bad := _first(length > MAX_LENGTH)) is not None:
        reason = f"its records take {bh[ke.B_REGION, bad]} bytes: the batch would be longer than {MAX_LENGTH}"
        raise b.err(reason, int(r.border[bad]), "records")


# ---- compression -------------------------------------------------------------------------------


def _compress(b: _Batches, r: _Records, bh: np.ndarray, rsize: np.ndarray) -> np.ndarray:
    """The compressed payload of every compressed batch, back to back; ``bh`` notes where."""
    codec = bh[ke.B_ATTR] & kr.CODEC_MASK
    todo = np.flatnonzero(codec != 0)
    if not len(todo):
        return _EMPTY
    region = bh[ke.B_REGION, todo]
    at = np.cumsum(region) - region
    scratch = np.empty(int(region.sum()), np.uint8)
    data = (r.k_data, r.v_data, r.hk_data, r.hv_data)
    ke.write_regions(scratch, at, todo, bh, r.perm, r.rec, r.hdrs, rsize, *data, kr.CRC32_TABLE)
    view = scratch.data
    zstd = zstandard.ZstdCompressor(level=3)  # one per call: a context is not shared across threads
    pieces = []
    pos = 0
    for t, s in enumerate(todo):
        piece = compress(int(codec[s]), int(bh[ke.B_MAGIC, s]), view[at[t] : at[t] + region[t]], zstd)
        pieces.append(piece)
        bh[ke.B_PAYLOAD, s] = pos
        bh[ke.B_PAYLOAD_LEN, s] = len(piece)
        pos += len(piece)
    # numpy allocates with huge pages, bytes.join does not (fresh pages are dear on a VM)
    payloads = np.concatenate([np.frombuffer(p, np.uint8) for p in pieces]) if pieces else _EMPTY
    length = np.where(bh[ke.B_MAGIC, todo] == 2, kr.V2_HEADER - 12, _legacy_min(bh[ke.B_MAGIC, todo]))
    length = length + bh[ke.B_PAYLOAD_LEN, todo]
    if (bad := _first(length > MAX_LENGTH)) is not None:
        raise b.err(f"compressed, the batch would be {length[bad]} bytes long, more than {MAX_LENGTH}",
                    int(r.border[todo[bad]]), "codec")  # fmt: skip
    return payloads if len(payloads) else _EMPTY


def _legacy_min(magic: np.ndarray) -> np.ndarray:
    """Bytes of an empty magic 0/1 message after its length (the kernels' LEGACY_MIN)."""
    return np.where(magic == 1, kr.LEGACY_MIN[1], kr.LEGACY_MIN[0])


# ---- output --------------------------------------------------------------------------------------


def _place(b: _Batches, r: _Records, bh: np.ndarray, nv: int) -> tuple[np.ndarray, np.ndarray]:
    """Each batch's size and place, the output buffer and the values' offsets."""
    magic = bh[ke.B_MAGIC]
    compressed = bh[ke.B_PAYLOAD] >= 0
    legacy_head = 12 + _legacy_min(magic)
    size = np.where(magic == 2, kr.V2_HEADER + np.where(compressed, bh[ke.B_PAYLOAD_LEN], bh[ke.B_REGION]),
                    np.where(compressed, legacy_head + bh[ke.B_PAYLOAD_LEN], bh[ke.B_REGION]))  # fmt: skip
    ends = np.cumsum(size)
    bh[ke.B_POS] = ends - size
    rows = b.row[r.border]  # ascending
    if (bad := _first(rows >= nv)) is not None:
        raise b.err(
            f"row {rows[bad]} is past the output's {nv} values (num_values)", int(r.border[bad]), "row"
        )
    if b.nb and ends[-1] > MAX_LENGTH:
        at = int(r.border[np.searchsorted(ends, MAX_LENGTH, side="right")])
        raise b.err("over 2 GiB of record batches in one array: encode fewer batches at a time", at, "row")
    upto = np.searchsorted(rows, np.arange(nv), side="right")  # batches in values 0..v
    value_offsets = np.zeros(nv + 1, np.int32)
    value_offsets[1:] = np.where(upto > 0, ends[upto - 1] if b.nb else 0, 0)
    return np.empty(int(ends[-1]) if b.nb else 0, np.uint8), value_offsets
