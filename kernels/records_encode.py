"""Record batches, the other way: the kernels of ``arrowkafka.records.encode``.

The caller checks every value in Python first (vectorised: offsets and timestamps that do not
fit their deltas, null header keys, control record keys, ...), so these kernels trust their
input and never fail. Three steps, the message encoder's two passes with compression between:

1. ``size_records``: each record's exact size (``rsize``) and each batch's records in all
   (``bh[B_REGION]``, uncompressed).
2. ``write_regions``: the records of the compressed batches, each at its place in a scratch
   buffer; the caller compresses each region and notes where its payload lies.
3. ``write_batches``: every batch at ``bh[B_POS]``: its header, its records (or its compressed
   payload), then its CRC (CRC-32C of attributes..end for magic 2, CRC-32 of magic..end for
   every magic 0/1 message, inner messages too).

Layout: batches in output order, one int64 row of ``bh`` per field ``B_*``; batch ``b`` holds
the records ``perm[bh[B_FIRST, b]:bh[B_END, b]]``, indices into ``rec`` (one int64 row per
field ``R_*``, records in input order). Keys, values, header keys and header values are slices
(start, length; -1 null) of their own byte buffers; a record's headers are ``R_HEADERS_N``
entries of ``hdrs`` (a tuple of int64 arrays, one per field ``H_*``) from ``R_HEADERS_AT``.
"""

from __future__ import annotations

import numpy as np
from numba import config

from .encode import _put_uv, _uvlen, _zigzag
from .jit import njit
from .memory import memcpy, raw
from .records import (
    AT_LENGTH,
    AT_MAGIC,
    ATTR_LOG_APPEND_TIME,
    CODEC_MASK,
    LEGACY_ATTR,
    LEGACY_CRC,
    LEGACY_CRC_FROM,
    LEGACY_MIN,
    LEGACY_TS,
    V2_ATTR,
    V2_BASE_SEQ,
    V2_BASE_TS,
    V2_COUNT,
    V2_CRC,
    V2_EPOCH,
    V2_HEADER,
    V2_LAST_DELTA,
    V2_MAX_TS,
    V2_PEPOCH,
    V2_PID,
    batch_crc_v2,
    crc32_legacy,
)

# ---- one int64 row of ``bh`` per field; batches in output order ----
B_MAGIC = 0
B_ATTR = 1  # attributes as written (magic 0/1: one byte)
B_BASE_OFFSET = 2  # magic 2: base offset; magic 0/1 wrapper: its own offset
B_EPOCH = 3  # partition leader epoch (magic 2)
B_LAST_DELTA = 4
B_BASE_TS = 5  # the base timestamp field (the delete horizon when that attribute is set)
B_MAX_TS = 6  # magic 2: max timestamp; magic 1 wrapper: its timestamp
B_PID = 7
B_PEPOCH = 8
B_BASE_SEQ = 9
B_FIRST = 10  # its records: perm[B_FIRST:B_END]
B_END = 11
B_INNER_BASE = 12  # magic 0/1 wrapper: subtracted from each record's offset (magic 1 relative offsets)
B_REGION = 13  # set by size_records: bytes of its records, uncompressed
B_POS = 14  # where it starts in ``out``
B_PAYLOAD = 15  # compressed: where its payload starts in ``payloads``; -1 when uncompressed
B_PAYLOAD_LEN = 16
NB = 17

# ---- one int64 row of ``rec`` per field; records in input order ----
R_OFFSET = 0  # absolute
R_TS = 1  # -1: none
R_KEY_AT = 2
R_KEY_LEN = 3  # -1: null
R_VALUE_AT = 4
R_VALUE_LEN = 5
R_HEADERS_AT = 6  # its first entry of ``hdrs``
R_HEADERS_N = 7
NR = 8

# ---- ``hdrs``: a tuple of one int64 array per field ----
H_KEY_AT = 0
H_KEY_LEN = 1
H_VALUE_AT = 2
H_VALUE_LEN = 3  # -1: null
NHF = 4


# The hot helpers are inlined into Numba's IR (a call that passes arrays costs reference
# counting); the others are plain functions, each compiled once.


@njit(inline="always")
def _zz_len(v):
    """Bytes of ``v`` as a zigzag varint."""
    return _uvlen(_zigzag(np.int64(v)))


@njit(inline="always")
def _put_zz(out, pos, v):
    """Write ``v`` as a zigzag varint at pos -> new pos."""
    return _put_uv(out, pos, _zigzag(np.int64(v)))


@njit
def _put_be(out, pos, v, nbytes):
    """Write the low ``nbytes`` bytes of int64 ``v`` big-endian at pos."""
    for k in range(nbytes - 1, -1, -1):
        out[pos + k] = v & 0xFF
        v >>= 8


@njit(inline="always")
def _v2_body(ts_delta, offset_delta, k, v, nh, h0, hk_len, hv_len):
    """Bytes of a magic 2 record after its length varint (``hk_len``, ``hv_len``: the header
    keys' and values' lengths, bare pointers)."""
    n = 1 + _zz_len(ts_delta) + _zz_len(offset_delta)
    n += _zz_len(k) + max(k, 0) + _zz_len(v) + max(v, 0)
    n += _zz_len(nh)
    for h in range(h0, h0 + nh):
        hk = hk_len[h]
        hv = hv_len[h]
        n += _zz_len(hk) + hk + _zz_len(hv) + max(hv, 0)
    return n


@njit(cache=True, nogil=True)
def size_records(bh, perm, rec, hdrs, rsize):
    """rsize[i] = bytes of record perm[i] (magic 2: after its length varint; magic 0/1: the
    whole message, offset and size fields included); bh[B_REGION] = bytes of each batch's
    records as they are before compression."""
    hk_len, hv_len = raw(hdrs[H_KEY_LEN]), raw(hdrs[H_VALUE_LEN])  # (see _write_records)
    for b in range(bh.shape[1]):
        total = 0
        legacy = bh[B_MAGIC, b] < 2
        base_ts, base_offset = bh[B_BASE_TS, b], bh[B_BASE_OFFSET, b]
        for i in range(bh[B_FIRST, b], bh[B_END, b]):
            j = perm[i]
            if legacy:
                n = 12 + LEGACY_MIN[bh[B_MAGIC, b]] + max(rec[R_KEY_LEN, j], 0) + max(rec[R_VALUE_LEN, j], 0)
                total += n
            else:
                ts_delta, offset_delta = rec[R_TS, j] - base_ts, rec[R_OFFSET, j] - base_offset
                k, v = rec[R_KEY_LEN, j], rec[R_VALUE_LEN, j]
                nh, h0 = rec[R_HEADERS_N, j], rec[R_HEADERS_AT, j]
                n = _v2_body(ts_delta, offset_delta, k, v, nh, h0, hk_len, hv_len)
                total += _zz_len(n) + n
            rsize[i] = n
        bh[B_REGION, b] = total


if getattr(config, "DISABLE_JIT", False):  # run as Python: numpy's slice copy, bounds checked

    def _copy(src, at, n, out, pos):
        if n > 0:
            out[pos : pos + n] = src[at : at + n]
        return pos + max(n, 0)

else:

    @njit(inline="always")
    def _copy(src, at, n, out, pos):
        """out[pos:pos + n] = src[at:at + n] -> pos + n (Numba's slice assignment copies byte by
        byte and costs seconds of compile time at each use)."""
        if n > 16:
            memcpy(out, pos, src, at, n)
        else:  # a call to memcpy costs more than a short loop
            for k in range(n):
                out[pos + k] = src[at + k]
        return pos + max(n, 0)


@njit(cache=True, nogil=True)
def _write_records(out, pos, bh, b, perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data, crc32_table):
    """The records of batch b from ``pos``: magic 2 records, or magic 0/1 messages (one for an
    uncompressed batch: the whole batch; a wrapper's inner message set otherwise)."""
    # what runs per record takes bare pointers (``memory.raw``): an array handed to a helper,
    # even an inlined one, costs two atomic reference counts that stay in the loop
    o, kd, vd, hkd, hvd = raw(out), raw(k_data), raw(v_data), raw(hk_data), raw(hv_data)
    hk_at, hk_len = raw(hdrs[H_KEY_AT]), raw(hdrs[H_KEY_LEN])
    hv_at, hv_len = raw(hdrs[H_VALUE_AT]), raw(hdrs[H_VALUE_LEN])
    magic = bh[B_MAGIC, b]
    attr = bh[B_ATTR, b]
    if magic < 2:
        # inner messages carry no codec, only the timestamp type (as Kafka's producer writes them)
        if attr & CODEC_MASK:
            attr = attr & ATTR_LOG_APPEND_TIME
    for i in range(bh[B_FIRST, b], bh[B_END, b]):
        j = perm[i]
        n = rsize[i]
        if magic == 2:
            pos = _put_zz(o, pos, n)
            o[pos] = 0  # record attributes: unused
            pos = _put_zz(o, pos + 1, rec[R_TS, j] - bh[B_BASE_TS, b])
            pos = _put_zz(o, pos, rec[R_OFFSET, j] - bh[B_BASE_OFFSET, b])
            k = rec[R_KEY_LEN, j]
            pos = _copy(kd, rec[R_KEY_AT, j], k, o, _put_zz(o, pos, k))
            v = rec[R_VALUE_LEN, j]
            pos = _copy(vd, rec[R_VALUE_AT, j], v, o, _put_zz(o, pos, v))
            nh = rec[R_HEADERS_N, j]
            pos = _put_zz(o, pos, nh)
            h0 = rec[R_HEADERS_AT, j]
            for h in range(h0, h0 + nh):
                k = hk_len[h]
                pos = _copy(hkd, hk_at[h], k, o, _put_zz(o, pos, k))
                v = hv_len[h]
                pos = _copy(hvd, hv_at[h], v, o, _put_zz(o, pos, v))
        else:
            start = pos
            _put_be(o, pos, rec[R_OFFSET, j] - bh[B_INNER_BASE, b], 8)
            _put_be(o, pos + AT_LENGTH, n - 12, 4)
            o[pos + AT_MAGIC] = magic
            o[pos + LEGACY_ATTR] = attr
            pos += 18
            if magic == 1:
                _put_be(o, pos, rec[R_TS, j], 8)
                pos += 8
            k = rec[R_KEY_LEN, j]
            _put_be(o, pos, k, 4)
            pos = _copy(kd, rec[R_KEY_AT, j], k, o, pos + 4)
            v = rec[R_VALUE_LEN, j]
            _put_be(o, pos, v, 4)
            pos = _copy(vd, rec[R_VALUE_AT, j], v, o, pos + 4)
            _put_be(o, start + 12, np.int64(crc32_legacy(crc32_table, out, start + LEGACY_CRC_FROM, pos)), 4)
    return pos


@njit(cache=True, nogil=True)
def write_regions(buf, at, todo, bh, perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data, crc32_table):
    """The records of batches ``todo`` into ``buf``, batch todo[t] from at[t]."""
    for t in range(todo.shape[0]):
        _write_records(buf, at[t], bh, todo[t], perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data,
                       crc32_table)  # fmt: skip


@njit(cache=True, nogil=True)
def write_batches(out, bh, perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data, payloads, crc32_table,
                  crc32c_table):  # fmt: skip
    """Every batch at bh[B_POS]: header, records or compressed payload, CRC."""
    for b in range(bh.shape[1]):
        pos = bh[B_POS, b]
        magic = bh[B_MAGIC, b]
        compressed = bh[B_PAYLOAD, b] >= 0
        if magic == 2:
            at = pos + V2_HEADER
            if compressed:
                end = _copy(payloads, bh[B_PAYLOAD, b], bh[B_PAYLOAD_LEN, b], out, at)
            else:
                end = _write_records(out, at, bh, b, perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data,
                                     crc32_table)  # fmt: skip
            _put_be(out, pos, bh[B_BASE_OFFSET, b], 8)
            _put_be(out, pos + AT_LENGTH, end - pos - 12, 4)
            _put_be(out, pos + V2_EPOCH, bh[B_EPOCH, b], 4)
            out[pos + AT_MAGIC] = 2
            _put_be(out, pos + V2_ATTR, bh[B_ATTR, b], 2)
            _put_be(out, pos + V2_LAST_DELTA, bh[B_LAST_DELTA, b], 4)
            _put_be(out, pos + V2_BASE_TS, bh[B_BASE_TS, b], 8)
            _put_be(out, pos + V2_MAX_TS, bh[B_MAX_TS, b], 8)
            _put_be(out, pos + V2_PID, bh[B_PID, b], 8)
            _put_be(out, pos + V2_PEPOCH, bh[B_PEPOCH, b], 2)
            _put_be(out, pos + V2_BASE_SEQ, bh[B_BASE_SEQ, b], 4)
            _put_be(out, pos + V2_COUNT, bh[B_END, b] - bh[B_FIRST, b], 4)
            _put_be(out, pos + V2_CRC, batch_crc_v2(crc32c_table, out, pos, end), 4)
        elif not compressed:
            _write_records(out, pos, bh, b, perm, rec, hdrs, rsize, k_data, v_data, hk_data, hv_data,
                           crc32_table)  # fmt: skip
        else:
            # a wrapper: a message whose value is the compressed inner message set; null key
            p = pos + LEGACY_TS
            if magic == 1:
                _put_be(out, p, bh[B_MAX_TS, b], 8)
                p += 8
            _put_be(out, p, -1, 4)
            _put_be(out, p + 4, bh[B_PAYLOAD_LEN, b], 4)
            end = _copy(payloads, bh[B_PAYLOAD, b], bh[B_PAYLOAD_LEN, b], out, p + 8)
            _put_be(out, pos, bh[B_BASE_OFFSET, b], 8)
            _put_be(out, pos + AT_LENGTH, end - pos - 12, 4)
            out[pos + AT_MAGIC] = magic
            out[pos + LEGACY_ATTR] = bh[B_ATTR, b]
            crc = np.int64(crc32_legacy(crc32_table, out, pos + LEGACY_CRC_FROM, end))
            _put_be(out, pos + LEGACY_CRC, crc, 4)
