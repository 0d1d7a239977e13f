"""Stage 4: the decode kernel, one Numba interpreter of plans (numpy and numba only).

``run`` walks a batch of message bodies with a plan's program. It is called twice:

- pass 1 (``fill=False``): checks every length against the bytes left, every varint, marker,
  tag order and UTF-8 string, and counts, per output node, slots (``counts``) and var-length
  bytes (``dcounts``). Nothing is written but counters.
- pass 2 (``fill=True``): the caller has allocated each buffer once from those counts; the
  same walk now writes values, offsets and validity bytes at the node cursors.

State layout
    configuration   code/consts/const_bytes/tag_table/runs (the plan), data/starts/ends (input)
    cursors         counts[node], dcounts[node]: slots and data bytes written so far
    buffer bases    fixed_base (bytes into a8, the views a16/a32/a64 share its memory),
                    off_base (int32 offsets), data_base (bytes), valid_base (-1: no validity);
                    a negative data_base marks a view (``decode(views=True)``): the value is
                    not copied, its 16-byte Arrow view goes to a8 at byte
                    -1 - data_base + 16 * slot (``_put_view``)
    hops            the generated kernels only: hops[k, j] is where value j of the range's
                    k-th view node (``Plan.view_nodes``) ends, noted by pass 1
                    (``hints.hop_mark``; j counts from hop_from[node], the node's cursor when
                    the range began; a null value gets none); pass 1 prefetches by their
                    spacing, pass 2 with views from the notes themselves
    stack           frames of (kind, a, b, c, d): LIST (body pc, remaining, total, after pc),
                    CALL (return pc, expected end or -1, saved end), SECTION (start, count or
                    -1 for the draft buffer, end)

Kernels never raise and never read outside ``data[starts[i]:ends[i]]``: the first failure is
written to ``status`` (code, message, byte offset, pc, two details, list depth, list indices,
and in slot 15 the FIXED_RUN row that failed)
and, with ``null_mode``, each bad message is recorded, its counters rolled back and a row of
defaults written instead.
"""

from __future__ import annotations

import numpy as np

from .hints import message_ahead
from .isa import (
    DEF_FIXED,
    DEF_LIST,
    DEF_MAP,
    DEF_STRUCT,
    DEF_UUID,
    DEF_VARBIN,
    E_FORGED_COUNT,
    E_LONG_STRING,
    E_MARKER,
    E_NEGATIVE,
    E_NULL,
    E_TAG_ORDER,
    E_TAG_SIZE,
    E_TRAILING,
    E_TRUNCATED,
    E_UTF8,
    E_VARINT_BIG,
    E_VARINT_LONG,
    EL_BOOL,
    EL_F64,
    EL_INT,
    EL_UINT,
    EL_UUID,
    ENC_ZIGZAG,
    F_CALL,
    F_LIST,
    F_SECTION,
    FIXED_RUN,
    INT,
    LEN_INT16,
    LEN_INT32,
    LIST,
    LIST_FIXED,
    LIST_NEXT,
    MAX_STRING,
    NSTRUCT,
    OK,
    OPTBUF,
    RET,
    SECTION_END,
    STRUCT,
    TAGGED,
    TAGS,
    VARBIN,
    write_status,
)
from .jit import njit
from .memory import copy_bytes, zeros
from .memory import raw as bare  # (``raw`` is a local name in run)

_write_status = njit(inline="always")(write_status)


@njit(inline="always")
def _be(data, pos, nbytes):
    """Big-endian unsigned integer of 1, 2, 4 or 8 bytes at pos (caller checked the bounds)."""
    p = np.uint64(pos)  # unsigned: no negative-index wraparound on each byte
    if nbytes == 4:
        return (
            (np.uint64(data[p]) << np.uint64(24))
            | (np.uint64(data[p + np.uint64(1)]) << np.uint64(16))
            | (np.uint64(data[p + np.uint64(2)]) << np.uint64(8))
            | np.uint64(data[p + np.uint64(3)])
        )
    if nbytes == 2:
        return (np.uint64(data[p]) << np.uint64(8)) | np.uint64(data[p + np.uint64(1)])
    if nbytes == 1:
        return np.uint64(data[p])
    v = np.uint64(0)
    for k in range(8):
        v = (v << np.uint64(8)) | np.uint64(data[p + np.uint64(k)])
    return v


@njit(inline="always")
def _signed(v, bits):
    """Reinterpret the low ``bits`` bits of uint64 ``v`` as two's complement."""
    if bits == 64:
        return np.int64(v)
    mask = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    v = v & mask
    if v >> np.uint64(bits - 1):
        return np.int64(v) - (np.int64(1) << np.int64(bits))
    return np.int64(v)


@njit(cache=True)
def _uvarint(data, pos, end, bits):
    """Unsigned LEB128 of at most ceil(bits/7) bytes -> (value, new pos, error)."""
    v = np.uint64(0)
    shift = np.uint64(0)
    maxbytes = (bits + 6) // 7
    for _ in range(maxbytes):
        if pos >= end:
            return np.uint64(0), pos, E_TRUNCATED
        b = data[pos]
        pos += 1
        v |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            if bits < 64 and (v >> np.uint64(bits)) != np.uint64(0):
                return np.uint64(0), pos, E_VARINT_BIG
            if bits == 64 and shift == np.uint64(63) and b > 1:
                return np.uint64(0), pos, E_VARINT_BIG
            return v, pos, OK
        shift += np.uint64(7)
    return np.uint64(0), pos, E_VARINT_LONG


# The same, inlined where it is the rare path of a loop: a call to a compiled function costs
# its caller on every path, not just the one that calls (the record walk: 27 -> 11 ns a record).
_uvarint_inline = njit(inline="always")(getattr(_uvarint, "py_func", _uvarint))


@njit(cache=True)
def _utf8_ok(data, pos, n):
    """Is data[pos:pos+n] well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF)?"""
    i = pos
    stop = pos + n
    while i < stop:
        b = data[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            k = 1
        elif 0xE0 <= b <= 0xEF:
            k = 2
        elif 0xF0 <= b <= 0xF4:
            k = 3
        else:
            return False
        if i + k >= stop:  # the sequence runs past the string
            return False
        c1 = data[i + 1]
        if (c1 & 0xC0) != 0x80:
            return False
        if k == 2:
            if (b == 0xE0 and c1 < 0xA0) or (b == 0xED and c1 > 0x9F):
                return False
        elif k == 3:
            if (b == 0xF0 and c1 < 0x90) or (b == 0xF4 and c1 > 0x8F):
                return False
        for j in range(2, k + 1):
            if (data[i + j] & 0xC0) != 0x80:
                return False
        i += k + 1
    return True


@njit(inline="always")
def _varint(data, pos, end, bits):
    """``_uvarint`` as the message readers use it: a varint cut short by the end of the body
    leaves pos at its first byte, where the failure is reported from (see ``_settle``)."""
    v, after, err = _uvarint(data, pos, end, bits)
    if err == E_TRUNCATED:
        return v, pos, err
    return v, after, err


@njit(inline="always")
def _read_len(data, pos, end, kind):
    """A length or count (kind 0 int16, 1 int32, 2 compact uvarint N+1) -> (n, pos, err);
    n == -1 is null. On an error n is the bytes the read needs when it ran out (2, 4, or 0
    for a varint, at whose first byte pos stays), else 0."""
    if kind == LEN_INT16:
        if end - pos < 2:
            return np.int64(2), pos, E_TRUNCATED
        return _signed(_be(data, pos, 2), 16), pos + 2, OK
    if kind == LEN_INT32:
        if end - pos < 4:
            return np.int64(4), pos, E_TRUNCATED
        return _signed(_be(data, pos, 4), 32), pos + 4, OK
    if pos < end and data[pos] < 0x80:  # one-byte varint: nearly every compact length
        return np.int64(data[pos]) - 1, pos + 1, OK
    v, pos, err = _varint(data, pos, end, 32)
    if err != OK:
        return np.int64(0), pos, err
    return np.int64(v) - 1, pos, err


@njit(inline="always")
def _nullable_len(data, pos, end, kind, wire_nullable):
    """A length or count with the null rules -> (n, pos, err, is_null). A null (-1 classic,
    0 compact) is only allowed where the field is nullable in this version; it reads as n=0."""
    n, pos, err = _read_len(data, pos, end, kind)
    if err != OK:
        return n, pos, err, False
    if n < -1:
        return n, pos, E_NEGATIVE, False
    if n == -1:
        if wire_nullable == 0:
            return np.int64(0), pos, E_NULL, False
        return np.int64(0), pos, OK, True
    return n, pos, OK, False


@njit(inline="always")
def _settle(err, at, pos, end, d1, d2):
    """A failure's (offset, d1, d2) as the status reports them, one rule for every tier: a
    varint cut short by the end of the body (``E_TRUNCATED`` with d1 == 0: how many bytes it
    needs is unknown until its last one) is reported at its first byte, where the reader left
    ``pos``, with the bytes left from there."""
    if err == E_TRUNCATED and d1 == 0:
        return pos, d1, end - pos
    return at, d1, d2


@njit(inline="always")
def _put_view(a8, a32, at, src, pos, n, buffer):
    """Arrow's 16-byte view of src[pos:pos + n] at byte ``at`` of ``a8`` (16-aligned, zeroed by
    the allocation): the length, then the value itself up to 12 bytes, or its first 4 bytes,
    the buffer it lies in (0: the input, 1: the plan's constants) and its offset there. Written
    while the value's bytes are in the cache: read later, each prefix was a miss."""
    a32[at >> 2] = np.int32(n)
    if n <= 12:
        for k in range(n):
            a8[at + 4 + k] = src[pos + k]
    else:
        for k in range(4):
            a8[at + 4 + k] = src[pos + k]
        a32[(at >> 2) + 2] = np.int32(buffer)
        a32[(at >> 2) + 3] = np.int32(pos)


@njit(inline="always")
def _put(a8, a16, a32, a64, byte_at, width, v):
    """Store the low ``width`` bytes of int64 ``v`` (little-endian) at byte offset byte_at."""
    at = np.uint64(byte_at)
    if width == 1:
        a8[at] = np.uint8(v & 0xFF)
    elif width == 2:
        a16[at >> np.uint64(1)] = np.int16(v)
    elif width == 4:
        a32[at >> np.uint64(2)] = np.int32(v)
    else:
        a64[at >> np.uint64(3)] = np.int64(v)


@njit(cache=True, nogil=True)
def run(
    code,
    consts,
    const_bytes,
    tag_table,
    runs,
    root_default_pc,
    max_depth,
    data,
    starts,
    ends,
    first,
    last,
    fill,
    null_mode,
    bad,
    counts,
    dcounts,
    fixed_base,
    off_base,
    data_base,
    valid_base,
    a8,
    a16,
    a32,
    a64,
    offs,
    bytes_out,
    valid,
    hops,
    hop_from,
    status,
    reject_code,
    reject_offset,
    reject_pc,
):
    """Decode messages ``first..last-1`` (see the module docstring). Returns 0, or the error
    code of the first failure when not in ``null_mode``. ``hops`` and ``hop_from`` are the
    generated kernels' (where view values end, for their prefetches): unused here."""
    # what the helpers are handed, as bare pointers (``memory.raw``): an array handed to a
    # function, even an inlined one, can cost two atomic reference counts a call
    data_p, starts_p, ends_p, const_bytes_p = bare(data), bare(starts), bare(ends), bare(const_bytes)
    a8_p, a16_p, a32_p, a64_p, bytes_out_p = bare(a8), bare(a16), bare(a32), bare(a64), bare(bytes_out)
    nnodes = counts.shape[0]
    stack = zeros((max_depth, 5), np.int64)
    snap_counts = zeros(nnodes, np.int64)
    snap_dcounts = zeros(nnodes, np.int64)
    i = first
    while i < last:
        message_ahead(data_p, starts_p, ends_p, i, last)
        msg_start = starts_p[i]
        msg_end = ends_p[i]
        pos = msg_start
        end = msg_end
        sp = 0
        defaults_only = bad[i] != 0
        pc = root_default_pc if defaults_only else 0
        if null_mode and not fill and not defaults_only:
            for k in range(nnodes):
                snap_counts[k] = counts[k]
                snap_dcounts[k] = dcounts[k]
        err = OK
        err_pos = pos
        run_row = -1
        d1 = np.int64(0)
        d2 = np.int64(0)
        # a tag section's fault, held until the known values before it are read
        dfr_err, dfr_at, dfr_pos, dfr_d1, dfr_d2, dfr_pc = err, err_pos, pos, d1, d2, pc
        while True:
            upc = np.uint64(pc)  # unsigned indices: no negative-index wraparound
            op = code[upc, 0]
            node = code[upc, 1]
            un = np.uint64(node)  # (node is -1 in FIXED_RUN, which never indexes by it)
            err_pos = pos
            if op == FIXED_RUN:
                r0 = code[upc, 2]
                rn = code[upc, 3]
                if end - pos < code[upc, 4]:  # find the field that does not fit
                    for r in range(r0, r0 + rn):
                        if end - pos < runs[r, 2]:
                            err = E_TRUNCATED
                            err_pos = pos
                            run_row = r
                            d1 = runs[r, 2]
                            d2 = end - pos
                            break
                        pos += runs[r, 2]
                    break
                if fill:
                    p = pos
                    for r in range(r0, r0 + rn):
                        ur = np.uint64(r)
                        nd = np.uint64(runs[ur, 0])
                        kind = runs[ur, 1]
                        wb = runs[ur, 2]
                        w = runs[ur, 3]
                        slot = counts[nd]
                        base = fixed_base[nd]
                        # the common shapes first, each a plain load and store
                        if kind <= EL_UINT and wb == 4 and w == 4:
                            a32_p[np.uint64((base >> 2) + slot)] = np.int32(np.uint32(_be(data_p, p, 4)))
                        elif kind <= EL_UINT and wb == 2 and w == 2:
                            a16_p[np.uint64((base >> 1) + slot)] = np.int16(np.uint16(_be(data_p, p, 2)))
                        elif kind <= EL_UINT and wb == 8:
                            a64_p[np.uint64((base >> 3) + slot)] = np.int64(_be(data_p, p, 8))
                        elif kind == EL_UUID:
                            dst = base + slot * 16
                            copy_bytes(data_p, p, 16, a8_p, dst)
                        elif kind == EL_BOOL:  # any non-zero byte is true
                            a8_p[np.uint64(base + slot)] = 1 if data_p[np.uint64(p)] != 0 else 0
                        elif kind == EL_F64:  # kept as its bits
                            a64_p[np.uint64((base >> 3) + slot)] = np.int64(_be(data_p, p, 8))
                        else:  # int8, and narrower wire than output (KIP-625 fixed32 in int64)
                            raw = _be(data_p, p, wb)
                            v = _signed(raw, wb * 8) if kind == EL_INT else np.int64(raw)
                            _put(a8_p, a16_p, a32_p, a64_p, base + slot * w, w, v)
                        counts[nd] = slot + 1
                        p += wb
                else:
                    for r in range(r0, r0 + rn):
                        counts[np.uint64(runs[np.uint64(r), 0])] += 1
                pos += code[upc, 4]
                pc += 1
            elif op == INT:  # KIP-625 varints
                raw, pos, err = _varint(data_p, pos, end, code[upc, 3])
                if err != OK:
                    break
                if code[upc, 2] == ENC_ZIGZAG:
                    v = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
                else:
                    v = _signed(raw, code[upc, 3])
                if fill:
                    w = code[upc, 4]
                    _put(a8_p, a16_p, a32_p, a64_p, fixed_base[un] + counts[un] * w, w, v)
                counts[un] += 1
                pc += 1
            elif op == LIST_FIXED:
                child = code[upc, 2]
                n, pos, err, null = _nullable_len(data_p, pos, end, code[upc, 3], code[upc, 4])
                if err != OK:
                    d1 = n  # (see _read_len and _nullable_len)
                    d2 = end - pos
                    break
                slot = counts[un]
                if fill and valid_base[un] >= 0:
                    valid[np.uint64(valid_base[un] + slot)] = 0 if null else 1
                eb = code[upc, 6]
                if n * eb > end - pos:
                    err = E_FORGED_COUNT
                    d1 = n
                    d2 = end - pos
                    break
                if fill:
                    ek = code[upc, 5]
                    c0 = counts[child]
                    if ek == EL_UUID:  # 16 raw bytes each
                        dst = fixed_base[child] + c0 * 16
                        for k in range(n * 16):
                            a8_p[dst + k] = data_p[pos + k]
                    elif ek == EL_BOOL:
                        dst = fixed_base[child] + c0
                        for k in range(n):
                            a8_p[dst + k] = 1 if data_p[pos + k] != 0 else 0
                    elif ek == EL_F64 or eb == 8:
                        dst = np.uint64((fixed_base[child] >> 3) + c0)
                        for k in range(n):
                            a64_p[dst + np.uint64(k)] = np.int64(_be(data_p, pos + k * 8, 8))
                    elif eb == 4:
                        dst = np.uint64((fixed_base[child] >> 2) + c0)
                        for k in range(n):
                            a32_p[dst + np.uint64(k)] = np.int32(_be(data_p, pos + k * 4, 4))
                    elif eb == 2:
                        dst = np.uint64((fixed_base[child] >> 1) + c0)
                        for k in range(n):
                            a16_p[dst + np.uint64(k)] = np.int16(_be(data_p, pos + k * 2, 2))
                    else:
                        dst = np.uint64(fixed_base[child] + c0)
                        for k in range(n):
                            a8_p[dst + np.uint64(k)] = data_p[np.uint64(pos + k)]
                    offs[np.uint64(off_base[un] + slot + 1)] = np.int32(c0 + n)
                counts[child] += n
                counts[un] += 1
                pos += n * eb
                pc += 1
            elif op == STRUCT:
                if fill and valid_base[un] >= 0:
                    valid[np.uint64(valid_base[un] + counts[un])] = 1
                counts[un] += 1
                pc += 1
            elif op == VARBIN:
                n, pos, err, null = _nullable_len(data_p, pos, end, code[upc, 2], code[upc, 3])
                if err != OK:
                    d1 = n  # (see _read_len and _nullable_len)
                    d2 = end - pos
                    break
                slot = counts[un]
                if null:
                    if fill and valid_base[un] >= 0:
                        valid[np.uint64(valid_base[un] + slot)] = 0
                else:
                    if n > MAX_STRING and code[upc, 4] != 0:  # Kafka's limit, compact or not
                        err = E_LONG_STRING
                        d1 = n
                        d2 = end - pos
                        break
                    if n > end - pos:
                        err = E_TRUNCATED
                        d1 = n
                        d2 = end - pos
                        break
                    if not fill and code[upc, 4] != 0 and not _utf8_ok(data_p, pos, n):
                        err = E_UTF8
                        break
                    if fill:
                        if valid_base[un] >= 0:
                            valid[np.uint64(valid_base[un] + slot)] = 1
                        dst = data_base[un]
                        if dst >= 0:
                            dst += dcounts[un]
                            copy_bytes(data_p, pos, n, bytes_out_p, dst)
                        else:  # a view (see the state layout)
                            _put_view(a8_p, a32_p, -1 - dst + 16 * slot, data_p, pos, n, 0)
                dcounts[un] += n
                if fill:
                    offs[np.uint64(off_base[un] + slot + 1)] = np.int32(dcounts[un])
                counts[un] += 1
                pos += n
                pc += 1
            elif op == LIST:
                n, pos, err, null = _nullable_len(data_p, pos, end, code[upc, 2], code[upc, 3])
                if err != OK:
                    d1 = n  # (see _read_len and _nullable_len)
                    d2 = end - pos
                    break
                slot = counts[un]
                child = node + 1  # pre-order: a list's only child comes next
                if fill and valid_base[un] >= 0:
                    valid[np.uint64(valid_base[un] + slot)] = 0 if null else 1
                # Kafka's bound: every element takes at least a byte. A tighter one would
                # report Truncated ahead of a fault inside the elements.
                if n > end - pos:
                    err = E_FORGED_COUNT
                    d1 = n
                    d2 = end - pos
                    break
                if fill:
                    offs[np.uint64(off_base[un] + slot + 1)] = np.int32(counts[child] + n)
                counts[un] += 1
                if n > 0:
                    stack[sp, 0] = F_LIST
                    stack[sp, 1] = pc + 1
                    stack[sp, 2] = n
                    stack[sp, 3] = n
                    stack[sp, 4] = code[upc, 5]
                    sp += 1
                    pc += 1
                else:
                    pc = code[upc, 5]
            elif op == LIST_NEXT:
                top = np.uint64(sp - 1)
                left = stack[top, 2] - 1
                stack[top, 2] = left
                if left > 0:
                    pc = stack[top, 1]
                else:
                    pc = stack[top, 4]
                    sp -= 1
            elif op == NSTRUCT:
                present = False
                if code[upc, 2] == 0:
                    if end - pos < 1:
                        err = E_TRUNCATED
                        d1 = 1
                        d2 = 0
                        break
                    m = _signed(np.uint64(data_p[pos]), 8)
                    pos += 1
                    if m == 1:
                        present = True
                    elif m != -1:
                        err = E_MARKER
                        d1 = m
                        break
                else:
                    mv, pos, err = _varint(data_p, pos, end, 32)
                    if err != OK:
                        break
                    if mv == 1:
                        present = True
                    elif mv != 0:
                        err = E_MARKER
                        d1 = np.int64(mv)
                        break
                if fill and valid_base[un] >= 0:
                    valid[np.uint64(valid_base[un] + counts[un])] = 1 if present else 0
                counts[un] += 1
                if present:
                    pc += 1
                else:
                    stack[sp, 0] = F_CALL
                    stack[sp, 1] = code[upc, 3]
                    stack[sp, 2] = -1
                    stack[sp, 3] = end
                    sp += 1
                    pc = code[upc, 4]
            elif op == TAGS and code[upc, 6] != 0 and pos < end and data_p[pos] == 0:
                # The common case: an empty tag section where no tag is known.
                if fill:
                    offs[np.uint64(off_base[un] + counts[un] + 1)] = np.int32(counts[code[upc, 2]])
                counts[un] += 1
                pos += 1
                pc += 1
            elif op == TAGS or op == OPTBUF:
                keynode = code[upc, 2]
                valnode = code[upc, 3]
                tstart = code[upc, 4]
                tn = code[upc, 5]
                pnode = code[upc, 7]
                count = np.int64(-1)
                if op == TAGS:
                    cv, pos, err = _varint(data_p, pos, end, 32)
                    if err != OK:
                        break
                    count = np.int64(cv)
                sec_start = pos
                last_tag = np.int64(-1)
                k = np.int64(0)
                framed = code[upc, 6] == 0  # known tags: their values are read after the walk
                while op == OPTBUF or k < count:
                    k += 1
                    err_pos = pos
                    if op == TAGS:
                        tv, pos, err = _varint(data_p, pos, end, 32)
                        if err != OK:
                            break
                        sv, pos, err = _varint(data_p, pos, end, 32)
                        if err != OK:
                            break
                        tag = np.int64(tv)
                        size = np.int64(sv)
                    else:
                        zv, pos, err = _varint(data_p, pos, end, 32)
                        if err != OK:
                            break
                        size = np.int64(zv >> np.uint64(1)) ^ -np.int64(zv & np.uint64(1))
                        if size == 0:
                            break
                        if size < 0:
                            err = E_NEGATIVE
                            d1 = size
                            break
                        if end - pos < 2:
                            err = E_TRUNCATED
                            d1 = 2
                            d2 = end - pos
                            break
                        tag = _signed(_be(data_p, pos, 2), 16)
                        pos += 2
                    if tag <= last_tag:
                        err = E_TAG_ORDER
                        d1 = tag
                        d2 = last_tag
                        break
                    last_tag = tag
                    if size > end - pos:
                        err = E_TRUNCATED
                        d1 = size
                        d2 = end - pos
                        break
                    known = False
                    for t in range(tstart, tstart + tn):
                        if tag_table[t] == tag:
                            known = True
                    if known and pnode >= 0:  # recorded, so encoding writes it back
                        if fill:
                            a32_p[(fixed_base[pnode + 1] >> 2) + counts[pnode + 1]] = np.int32(tag)
                        counts[pnode + 1] += 1
                    if not known:
                        if fill:
                            a32_p[(fixed_base[keynode] >> 2) + counts[keynode]] = np.int32(tag)
                            dst = data_base[valnode] + dcounts[valnode]
                            copy_bytes(data_p, pos, size, bytes_out_p, dst)
                        counts[keynode] += 1
                        dcounts[valnode] += size
                        if fill:
                            offs[np.uint64(off_base[valnode] + counts[valnode] + 1)] = np.int32(
                                dcounts[valnode]
                            )
                        counts[valnode] += 1
                    pos += size
                limit = pos
                held = err != OK
                if held:
                    if not framed:
                        break
                    # The first fault in byte order wins: known values before this field may
                    # hold an earlier one. Read them (the walk stops here), then report this.
                    dfr_err, dfr_at, dfr_pos, dfr_d1, dfr_d2, dfr_pc = err, err_pos, pos, d1, d2, pc
                    err = OK
                    d1 = np.int64(0)  # as if no fault: a later one may leave them unset
                    d2 = np.int64(0)
                    limit = err_pos
                if fill:
                    offs[np.uint64(off_base[un] + counts[un] + 1)] = np.int32(counts[keynode])
                counts[un] += 1
                if pnode >= 0:
                    if fill:
                        offs[np.uint64(off_base[pnode] + counts[pnode] + 1)] = np.int32(counts[pnode + 1])
                    counts[pnode] += 1
                if code[upc, 6] != 0:  # no known tags: no frame, nothing to look up
                    pc += 1
                    continue
                stack[sp, 0] = F_SECTION
                stack[sp, 1] = sec_start
                stack[sp, 2] = count
                stack[sp, 3] = -1 if held else pos  # -1: a fault waits at SECTION_END
                stack[sp, 4] = limit
                sp += 1
                pc += 1
            elif op == TAGGED:
                want = np.int64(code[upc, 2])
                top = sp - 1
                p = stack[top, 1]
                count = stack[top, 2]
                limit = stack[top, 4]
                found = False
                fstart = np.int64(0)
                fsize = np.int64(0)
                k = np.int64(0)
                # Already validated by TAGS/OPTBUF up to limit: walk again to find the tag.
                while (count < 0 or k < count) and p < limit:
                    k += 1
                    if count >= 0:
                        tv, p, _e = _uvarint(data_p, p, end, 32)
                        sv, p, _e = _uvarint(data_p, p, end, 32)
                        tag = np.int64(tv)
                        size = np.int64(sv)
                    else:
                        zv, p, _e = _uvarint(data_p, p, end, 32)
                        size = np.int64(zv >> np.uint64(1)) ^ -np.int64(zv & np.uint64(1))
                        if size == 0:
                            break
                        tag = _signed(_be(data_p, p, 2), 16)
                        p += 2
                    if tag == want:
                        found = True
                        fstart = p
                        fsize = size
                        break
                    if tag > want:
                        break
                    p += size
                stack[sp, 0] = F_CALL
                stack[sp, 1] = pc + 1
                stack[sp, 3] = end
                if found:
                    stack[sp, 2] = fstart + fsize
                    pos = fstart
                    end = fstart + fsize
                    pc = code[upc, 3]
                else:
                    stack[sp, 2] = -1
                    pc = code[upc, 4]
                sp += 1
            elif op == SECTION_END:
                sp -= 1
                if stack[sp, 3] < 0:  # the walk's fault, now that no earlier one was found
                    err, err_pos, pos, d1, d2, pc = dfr_err, dfr_at, dfr_pos, dfr_d1, dfr_d2, dfr_pc
                    break
                pos = stack[sp, 3]
                pc += 1
            elif op == RET:
                sp -= 1
                if stack[sp, 2] >= 0 and pos != stack[sp, 2]:
                    err = E_TAG_SIZE
                    d1 = stack[sp, 2] - pos
                    sp += 1
                    break
                end = stack[sp, 3]
                pc = stack[sp, 1]
            elif op == DEF_FIXED:
                if fill:
                    w = code[upc, 3]
                    _put(a8_p, a16_p, a32_p, a64_p, fixed_base[un] + counts[un] * w, w, consts[code[upc, 2]])
                counts[un] += 1
                pc += 1
            elif op == DEF_VARBIN:
                slot = counts[un]
                n = code[upc, 3]
                if fill:
                    if valid_base[un] >= 0:
                        valid[np.uint64(valid_base[un] + slot)] = 0 if code[upc, 4] != 0 else 1
                    dst = data_base[un]
                    if dst >= 0:
                        dst += dcounts[un]
                        for k in range(n):
                            bytes_out_p[dst + k] = const_bytes_p[code[upc, 2] + k]
                    else:
                        _put_view(a8_p, a32_p, -1 - dst + 16 * slot, const_bytes_p, code[upc, 2], n, 1)
                    offs[np.uint64(off_base[un] + slot + 1)] = np.int32(dcounts[un] + n)
                dcounts[un] += n
                counts[un] += 1
                pc += 1
            elif op == DEF_UUID:
                if fill:
                    dst = fixed_base[un] + counts[un] * 16
                    for k in range(16):
                        a8_p[dst + k] = const_bytes_p[code[upc, 2] + k]
                counts[un] += 1
                pc += 1
            elif op == DEF_LIST or op == DEF_MAP:
                slot = counts[un]
                if fill:
                    if valid_base[un] >= 0:
                        valid[np.uint64(valid_base[un] + slot)] = 0 if code[upc, 2] != 0 else 1
                    offs[np.uint64(off_base[un] + slot + 1)] = np.int32(counts[node + 1])
                counts[un] += 1
                pc += 1
            elif op == DEF_STRUCT:
                if fill and valid_base[un] >= 0:
                    valid[np.uint64(valid_base[un] + counts[un])] = 0 if code[upc, 2] != 0 else 1
                counts[un] += 1
                pc += 1
            else:  # END
                if not defaults_only and pos != end:
                    err = E_TRAILING
                    d1 = end - pos
                break
        if err == OK:
            i += 1
            continue
        # A tagged field's bytes are bounded by its size: running past them is a size lie.
        if err == E_TRUNCATED:
            for k in range(sp):
                if stack[k, 0] == F_CALL and stack[k, 2] >= 0:
                    err = E_TAG_SIZE
        err_pos, d1, d2 = _settle(err, err_pos, pos, msg_end, d1, d2)
        if null_mode and not fill:
            reject_code[i] = err
            reject_offset[i] = err_pos - msg_start
            reject_pc[i] = pc
            for k in range(nnodes):
                counts[k] = snap_counts[k]
                dcounts[k] = snap_dcounts[k]
            bad[i] = 1  # decode it again as a row of defaults
            continue
        _write_status(status, err, i, err_pos - msg_start, pc, d1, d2, stack, sp, run_row)
        return err
    return OK
