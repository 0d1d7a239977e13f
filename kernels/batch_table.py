"""The batches table of ``decode_records``: its columns from ``hdr``, in Arrow's layout.

One pass over the batches writes every fixed-width column, bit-packed booleans and validity
bitmaps, and the two string columns. The same rules as numpy expressions took 0.35 ms a call
(some forty array operations and a conversion per column type), a third of a call to
``decode_records`` on a few batches.
"""

from __future__ import annotations

import numpy as np

from .jit import njit
from .memory import zeros
from .records import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TRANSACTIONAL,
    B_OK,
    B_PARTIAL,
    CODEC_MASK,
    H_ATTR,
    H_BASE_OFFSET,
    H_BASE_SEQ,
    H_BASE_TS,
    H_COUNT,
    H_CRC,
    H_CRC_CALC,
    H_EPOCH,
    H_FIRST_INNER,
    H_INNER,
    H_LAST_DELTA,
    H_LAST_INNER,
    H_LENGTH,
    H_MAGIC,
    H_MAX_TS,
    H_NREC,
    H_PEPOCH,
    H_PID,
    H_POS,
    H_REGION_END,
    H_REGION_START,
    H_ROW,
    H_SIZE,
    H_STATUS,
    R_LENGTH,
    V2_HEADER,
)

# The columns ``batch_columns`` computes, in the order of ``_values``: the fixed-width ones,
# then the two strings (an index into the names the caller packs: the codec, 0-7, and the
# timestamp type, 0-1, after them)
COLUMNS = (
    "row", "position", "size", "partial", "magic", "base_offset", "last_offset", "batch_length",
    "partition_leader_epoch", "crc", "crc_ok", "transactional", "control", "delete_horizon",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "record_count", "records_size", "uncompressed_size", "codec", "timestamp_type",
)  # fmt: skip
NC = len(COLUMNS)
STRINGS = 2  # the last two
CODEC_NAMES = 8  # names of the codec column, first in the packed names; then the timestamp types

# how a column is stored (``kind``): bytes a value, bit-packed (a boolean), or a string
BITS = 0
STRING = -1


@njit(inline="always")
def _values(hdr, b, v, ok):
    """Batch b's value and validity of every column of ``COLUMNS``, into v and ok."""
    magic = hdr[H_MAGIC, b]
    status = hdr[H_STATUS, b]
    size = hdr[H_SIZE, b]
    partial = status == B_PARTIAL
    good = status == B_OK
    read = not partial and 0 <= magic <= 2 and status != R_LENGTH  # the header fields are there
    v2 = read and magic == 2
    legacy = read and magic < 2
    attr = hdr[H_ATTR, b]
    codec = attr & CODEC_MASK
    base = hdr[H_BASE_OFFSET, b]
    # magic 0/1 wrappers: the first and last inner records' offsets. A broker writes the last
    # one as the wrapper's own offset; a producer may write 0 there (the broker assigns them).
    wrapped = legacy and codec != 0 and good
    shift = base - hdr[H_LAST_INNER, b] if wrapped and magic == 1 and base != 0 else 0
    last = base + hdr[H_LAST_DELTA, b] if v2 else base
    if wrapped:
        base, last = hdr[H_FIRST_INNER, b] + shift, hdr[H_LAST_INNER, b] + shift
    region = hdr[H_REGION_END, b] - hdr[H_REGION_START, b]
    stored = region
    if hdr[H_INNER, b] == 1:  # decompressed: the region is in the other buffer
        stored = size - 12 - (V2_HEADER - 12 if v2 else 0)
    base_ts, max_ts = hdr[H_BASE_TS, b], hdr[H_MAX_TS, b]
    crc = hdr[H_CRC, b]
    _set(v, ok, 0, hdr[H_ROW, b], True)
    _set(v, ok, 1, hdr[H_POS, b], True)
    _set(v, ok, 2, size, True)
    _set(v, ok, 3, partial, True)
    _set(v, ok, 4, magic, 0 <= magic <= 127)
    _set(v, ok, 5, base, not partial or size >= 8)
    _set(v, ok, 6, last, read and (good or v2))
    _set(v, ok, 7, hdr[H_LENGTH, b], not partial or size >= 12)
    _set(v, ok, 8, hdr[H_EPOCH, b], v2)
    _set(v, ok, 9, crc, read)
    _set(v, ok, 10, crc == hdr[H_CRC_CALC, b], read and hdr[H_CRC_CALC, b] >= 0)
    _set(v, ok, 11, v2 and attr & ATTR_TRANSACTIONAL != 0, read)
    _set(v, ok, 12, v2 and attr & ATTR_CONTROL != 0, read)
    _set(v, ok, 13, base_ts, v2 and attr & ATTR_DELETE_HORIZON != 0)
    _set(v, ok, 14, hdr[H_LAST_DELTA, b], v2)
    _set(v, ok, 15, base_ts, v2 and base_ts != -1)
    _set(v, ok, 16, max_ts, read and magic >= 1 and max_ts != -1)
    _set(v, ok, 17, hdr[H_PID, b], v2)
    _set(v, ok, 18, hdr[H_PEPOCH, b], v2)
    _set(v, ok, 19, hdr[H_BASE_SEQ, b], v2)
    _set(v, ok, 20, hdr[H_COUNT, b] if v2 else hdr[H_NREC, b] if good else 0, v2 or (legacy and good))
    _set(v, ok, 21, stored, read and hdr[H_REGION_END, b] > 0)
    _set(v, ok, 22, region, good)
    _set(v, ok, 23, codec, read)
    _set(v, ok, 24, CODEC_NAMES + ((attr >> 3) & 1), read and magic >= 1)


@njit(inline="always")
def _set(v, ok, j, value, valid):
    v[j] = value
    ok[j] = valid


@njit(inline="always")
def _low(x, mask):
    """The low bytes of x (``mask``: all ones), as a signed number of that width."""
    sign = (mask >> 1) + 1
    return ((x & mask) ^ sign) - sign


@njit(cache=True, nogil=True)
def batch_columns(hdr, kind, slot, out8, out4, out2, out1, bits, valid, whole, str_offsets, str_data,
                  names, name_starts, name_lengths):  # fmt: skip
    """Write the columns of every batch of ``hdr``. Column j of ``COLUMNS`` is stored as
    ``kind[j]`` says (8, 4, 2, 1 bytes a value, ``BITS`` or ``STRING``) in row ``slot[j]`` of
    the array for its kind (``out8`` int64 ... ``out1`` int8, ``bits`` and the strings' arrays);
    its validity bitmap is ``valid[j]``, and ``whole[j]`` is left 1 when every value is valid.
    ``bits`` and ``valid`` come zeroed; ``str_offsets`` with room for one more than the
    batches; ``names`` the packed names the string columns index."""
    nb = hdr.shape[1]
    v = zeros(NC, np.int64)
    ok = zeros(NC, np.bool_)
    whole[:] = 1
    for s in range(str_offsets.shape[0]):
        str_offsets[s, 0] = 0
    for b in range(nb):
        _values(hdr, b, v, ok)
        byte, bit = b >> 3, np.uint8(1 << (b & 7))
        for j in range(NC):
            k, s, x = kind[j], slot[j], v[j]
            if ok[j]:
                valid[j, byte] |= bit
            else:
                whole[j] = 0
            if k == 8:
                out8[s, b] = x
            elif k == 4:  # (a CRC, uint32, as the same 4 bytes)
                out4[s, b] = _low(x, 0xFFFFFFFF)
            elif k == 2:
                out2[s, b] = _low(x, 0xFFFF)
            elif k == 1:
                out1[s, b] = _low(x, 0xFF)
            elif k == BITS:
                if x:
                    bits[s, byte] |= bit
            else:  # a string: the name's bytes, none where null
                at = str_offsets[s, b]
                n = name_lengths[x] if ok[j] else 0
                for i in range(n):
                    str_data[s, at + i] = names[name_starts[x] + i]
                str_offsets[s, b + 1] = at + n
