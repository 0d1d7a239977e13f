"""Stage 4, the other way: the encode kernel, one Numba interpreter of the decode plans.

``run`` walks a batch of rows with the same program the decoder reads bytes with, and writes
bytes instead. It is called twice:

- pass 1 (``fill=False``): checks what the wire cannot hold (a null where the version does not
  allow one, a value too wide for its KIP-625 encoding, a string over 32767 bytes, which
  Kafka refuses in every version, compact or not) and sums every message's exact size into
  ``sizes``; each tagged value's size goes to ``cache`` in walk order (Kafka's generator
  keeps the same cache for the same reason).
- pass 2 (``fill=True``): writes each message at ``out_starts[i]``, taking tagged-value sizes
  from ``cache`` in the same order.

``checks[pc]`` is 1 where a FIXED_RUN has a nullable column or a narrowing (KIP-625) one for
pass 1 to check; the others it only sizes.

Input layout (built by ``arrowkafka.codec.encode``): every plan node's Arrow array, flattened into
arenas the way the decoder fills them: fixed-width values in ``a8`` (views a16/a32/a64),
offsets in ``offs``, var-length bytes in ``data``, validity and tagged-field presence bytes in
``valid`` and ``present`` (base -1: no nulls / not tagged). A node's slot is the cursor of its
``owner``: the row for top-level fields, the element index for a list's element subtree
(struct children share their parent's slot).

What the encoder checks in Python before this runs (vectorised, once per column): fields the
target version lacks, unknown-tag order and clashes, uuid widths. Kernels never raise; the
first failure goes to ``status`` as (code, row, -, pc, detail, detail, list depth, list
indices, ..., FIXED_RUN row), the decoder's layout, so the same code names the field path.
"""

from __future__ import annotations

import numpy as np

from .isa import (
    E_LONG_STRING,
    E_NULL,
    E_RANGE,
    E_SIZE,
    EL_BOOL,
    EL_UUID,
    ENC_ZIGZAG,
    END,
    F_CALL,
    F_LIST,
    F_SECTION,
    FIXED_RUN,
    INT,
    LEN_INT16,
    LEN_INT32,
    LEN_UVARINT,
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

_write_status = njit(inline="always")(write_status)


@njit(inline="always")
def _get(a8, a16, a32, a64, byte_at, width):
    """The signed value of ``width`` little-endian bytes at byte offset byte_at."""
    if width == 1:
        v = np.int64(a8[byte_at])
        return v - 256 if v >= 128 else v
    if width == 2:
        return np.int64(a16[byte_at >> 1])
    if width == 4:
        return np.int64(a32[byte_at >> 2])
    return np.int64(a64[byte_at >> 3])


# Values travel as int64 (a uint64 varint above 2^63 as its negative two's complement), so the
# same code runs compiled and as plain Python: >> 7 then masks off the sign to shift logically.
_LOW57 = (1 << 57) - 1


@njit(inline="always")
def _put_be(out, pos, v, nbytes):
    """Write the low ``nbytes`` bytes of int64 ``v`` big-endian at pos (the common widths
    spelled out, at unsigned indices: Numba then drops the negative-index fix-up and the
    stores merge into one byte-swapped store; uint64 + 1 is int64, so each sum is converted)."""
    if nbytes == 4:
        out[np.uint64(pos)] = (v >> 24) & 0xFF
        out[np.uint64(pos + 1)] = (v >> 16) & 0xFF
        out[np.uint64(pos + 2)] = (v >> 8) & 0xFF
        out[np.uint64(pos + 3)] = v & 0xFF
    elif nbytes == 2:
        out[np.uint64(pos)] = (v >> 8) & 0xFF
        out[np.uint64(pos + 1)] = v & 0xFF
    elif nbytes == 1:
        out[np.uint64(pos)] = v & 0xFF
    else:
        for k in range(nbytes - 1, -1, -1):
            out[np.uint64(pos + k)] = v & 0xFF
            v >>= 8


def _put_be_plain(out, pos, v, nbytes):
    """``_put_be`` for the plain-Python tier, where the index conversions only cost time."""
    if nbytes == 4:
        out[pos] = (v >> 24) & 0xFF
        out[pos + 1] = (v >> 16) & 0xFF
        out[pos + 2] = (v >> 8) & 0xFF
        out[pos + 3] = v & 0xFF
    elif nbytes == 2:
        out[pos] = (v >> 8) & 0xFF
        out[pos + 1] = v & 0xFF
    else:
        for k in range(nbytes - 1, -1, -1):
            out[pos + k] = v & 0xFF
            v >>= 8


if njit.__module__.endswith(".tiers"):  # (tiers.py runs this file with its stand-in njit)
    _put_be = _put_be_plain


@njit(inline="always")
def _uvlen(v):
    """Bytes in the unsigned varint of ``v`` (int64 read as unsigned)."""
    n = 1
    while v < 0 or v >= 0x80:
        v = (v >> 7) & _LOW57
        n += 1
    return n


@njit(inline="always")
def _put_uv(out, pos, v):
    """Write ``v`` (int64 read as unsigned) as an unsigned varint at pos -> new pos."""
    while v < 0 or v >= 0x80:
        out[pos] = (v & 0x7F) | 0x80
        v = (v >> 7) & _LOW57
        pos += 1
    out[pos] = v
    return pos + 1


@njit(inline="always")
def _zigzag(v):
    return (v << 1) ^ (v >> 63)


@njit(inline="always")
def _len_size(kind, n):
    """Bytes of a length or count (kind 0 int16, 1 int32, 2 compact N+1; n == -1 is null)."""
    if kind == LEN_INT16:
        return 2
    if kind == LEN_INT32:
        return 4
    return _uvlen(n + 1)


@njit(inline="always")
def _put_len(out, pos, kind, n):
    if kind == LEN_UVARINT and n < 126:  # nearly every compact length: one byte
        out[pos] = n + 1
        return pos + 1
    if kind == LEN_INT16:
        _put_be(out, pos, n, 2)
        return pos + 2
    if kind == LEN_INT32:
        _put_be(out, pos, n, 4)
        return pos + 4
    return _put_uv(out, pos, n + 1)


@njit(inline="always")
def _len(out, pos, fill, kind, n):
    """A length or count: written at pos in pass 2, only counted in pass 1 -> new pos."""
    if fill:
        return _put_len(out, pos, kind, n)
    return pos + _len_size(kind, n)


@njit(inline="always")
def _entry_size(optbuf, tag, n):
    """Header bytes of a tagged entry (tag, size) or a draft optional entry (size, int16 tag)."""
    if optbuf:
        return _uvlen(2 * n) + 2
    return _uvlen(tag) + _uvlen(n)


@njit(inline="always")
def _put_entry(out, pos, optbuf, tag, n):
    if optbuf:
        pos = _put_uv(out, pos, 2 * n)
        _put_be(out, pos, tag, 2)
        return pos + 2
    pos = _put_uv(out, pos, tag)
    return _put_uv(out, pos, n)


@njit(inline="always")
def _unknown_at(out, pos, fill, optbuf, e, kb, ob, db, a32, offs, data):
    """Size of (and with ``fill``, write) unknown-tag entry ``e`` of a map, its raw bytes kept:
    the map's key base kb (in int32s), value offsets base ob and value data base db."""
    tag = np.int64(a32[np.uint64(kb + e)]) & 0xFFFFFFFF
    b0 = np.int64(offs[np.uint64(ob + e)])
    n = np.int64(offs[np.uint64(ob + e + 1)]) - b0
    if not fill:
        return pos + _entry_size(optbuf, tag, n) + n
    pos = _put_entry(out, pos, optbuf, tag, n)
    copy_bytes(data, db + b0, n, out, pos)
    return pos + n


@njit(inline="always")
def _section_tail(out, pos, fill, optbuf, e0, e1, kb, ob, db, a32, offs, data):
    """How a tag section ends: its unknown entries e0..e1 (those above every known tag), then,
    in the draft's optional-field buffer, the end mark (a zero size)."""
    for e in range(e0, e1):
        pos = _unknown_at(out, pos, fill, optbuf, e, kb, ob, db, a32, offs, data)
    if optbuf:
        if fill:
            out[pos] = 0
        pos += 1
    return pos


@njit(inline="always")
def _unknown(out, pos, fill, optbuf, e, keynode, valnode, fixed_base, off_base, data_base, a32, offs, data):
    """``_unknown_at`` for the map of key node ``keynode`` and value node ``valnode``."""
    return _unknown_at(out, pos, fill, optbuf, e, fixed_base[keynode] >> 2, off_base[valnode],
                       data_base[valnode], a32, offs, data)  # fmt: skip


@njit(cache=True, nogil=True)
def run(
    code,
    runs,
    checks,
    tag_table,
    owner,
    max_depth,
    first,
    last,
    fill,
    fixed_base,
    off_base,
    data_base,
    valid_base,
    present_base,
    a8,
    a16,
    a32,
    a64,
    offs,
    data,
    valid,
    present,
    out,
    out_starts,
    sizes,
    cache,
    cache_at,
    status,
):
    """Encode rows ``first..last-1`` (see the module docstring). Returns 0, or the error code
    of the first failure (pass 1 only: pass 2 meets no input pass 1 did not check)."""
    nnodes = owner.shape[0]
    cur = zeros(nnodes, np.int64)
    stack = zeros((max_depth, 6), np.int64)
    ci = cache_at[0]
    i = first
    while i < last:
        cur[0] = i
        pos = out_starts[i] if fill else np.int64(0)
        sp = 0
        pc = 0
        err = OK
        run_row = -1
        d1 = np.int64(0)
        while True:
            op = code[pc, 0]
            node = code[pc, 1]
            if op == FIXED_RUN:
                r0 = code[pc, 2]
                rn = code[pc, 3]
                if fill:
                    p = pos
                    for r in range(r0, r0 + rn):
                        nd = runs[r, 0]
                        wb = runs[r, 2]
                        w = runs[r, 3]
                        at = fixed_base[nd] + cur[owner[nd]] * w
                        # the common shapes first, each a plain load and store
                        if wb == 4 and w == 4:
                            _put_be(out, p, np.int64(a32[at >> 2]), 4)
                        elif wb == 2 and w == 2:
                            _put_be(out, p, np.int64(a16[at >> 1]), 2)
                        elif wb == 8 and w == 8:
                            _put_be(out, p, a64[at >> 3], 8)
                        elif runs[r, 1] == 4:  # uuid
                            copy_bytes(a8, at, 16, out, p)
                        elif runs[r, 1] == 3:  # bool
                            out[p] = 1 if a8[at] != 0 else 0
                        else:
                            _put_be(out, p, _get(a8, a16, a32, a64, at, w), wb)
                        p += wb
                elif checks[pc] != 0:
                    for r in range(r0, r0 + rn):
                        nd = runs[r, 0]
                        wb = runs[r, 2]
                        w = runs[r, 3]
                        slot = cur[owner[nd]]
                        if valid_base[nd] >= 0 and valid[valid_base[nd] + slot] == 0:
                            err = E_NULL
                            run_row = r
                            break
                        if wb < w and runs[r, 1] == 0:  # KIP-625: an int64 written as fixed32
                            v = _get(a8, a16, a32, a64, fixed_base[nd] + slot * w, w)
                            half = np.int64(1) << np.int64(wb * 8 - 1)
                            if v < -half or v >= half:
                                err = E_RANGE
                                run_row = r
                                d1 = v
                                break
                    if err != OK:
                        break
                pos += code[pc, 4]
                pc += 1
            elif op == INT:  # KIP-625 varints
                slot = cur[owner[node]]
                bits = code[pc, 3]
                w = code[pc, 4]
                if valid_base[node] >= 0 and valid[valid_base[node] + slot] == 0:
                    err = E_NULL
                    break
                v = _get(a8, a16, a32, a64, fixed_base[node] + slot * w, w)
                if bits < 64:
                    half = np.int64(1) << np.int64(bits - 1)
                    if v < -half or v >= half:
                        err = E_RANGE
                        d1 = v
                        break
                if code[pc, 2] == ENC_ZIGZAG:
                    u = _zigzag(v)
                elif bits < 64:
                    u = v & ((np.int64(1) << bits) - 1)
                else:
                    u = v
                if fill:
                    pos = _put_uv(out, pos, u)
                else:
                    pos += _uvlen(u)
                pc += 1
            elif op == VARBIN:
                slot = cur[owner[node]]
                kind = code[pc, 2]
                if valid_base[node] >= 0 and valid[valid_base[node] + slot] == 0:
                    if code[pc, 3] == 0:
                        err = E_NULL
                        break
                    pos = _len(out, pos, fill, kind, -1)
                else:
                    b0 = np.int64(offs[off_base[node] + slot])
                    n = np.int64(offs[off_base[node] + slot + 1]) - b0
                    if code[pc, 4] != 0 and n > MAX_STRING:  # a string, in any version
                        err = E_LONG_STRING
                        d1 = n
                        break
                    pos = _len(out, pos, fill, kind, n)
                    if fill:
                        src = data_base[node] + b0
                        copy_bytes(data, src, n, out, pos)
                    pos += n
                pc += 1
            elif op == LIST or op == LIST_FIXED:
                slot = cur[owner[node]]
                kind = code[pc, 2] if op == LIST else code[pc, 3]
                nullable = code[pc, 3] if op == LIST else code[pc, 4]
                after = code[pc, 5] if op == LIST else pc + 1
                if valid_base[node] >= 0 and valid[valid_base[node] + slot] == 0:
                    if nullable == 0:
                        err = E_NULL
                        break
                    pos = _len(out, pos, fill, kind, -1)
                    pc = after
                    continue
                e0 = np.int64(offs[off_base[node] + slot])
                n = np.int64(offs[off_base[node] + slot + 1]) - e0
                pos = _len(out, pos, fill, kind, n)
                if op == LIST_FIXED:
                    child = code[pc, 2]
                    ek = code[pc, 5]
                    eb = code[pc, 6]
                    if not fill:
                        if valid_base[child] >= 0:
                            for k in range(n):
                                if valid[valid_base[child] + e0 + k] == 0:
                                    err = E_NULL
                                    d1 = k + 1  # 0 would be the list itself
                                    break
                            if err != OK:
                                break
                    else:
                        at = fixed_base[child] + e0 * eb
                        if ek == EL_UUID:
                            copy_bytes(a8, at, n * 16, out, pos)
                        elif ek == EL_BOOL:
                            for k in range(n):
                                out[pos + k] = 1 if a8[at + k] != 0 else 0
                        elif eb == 4:
                            for k in range(n):
                                _put_be(out, pos + k * 4, a32[(at >> 2) + k], 4)
                        elif eb == 8:
                            for k in range(n):
                                _put_be(out, pos + k * 8, a64[(at >> 3) + k], 8)
                        elif eb == 2:
                            for k in range(n):
                                _put_be(out, pos + k * 2, a16[(at >> 1) + k], 2)
                        else:
                            copy_bytes(a8, at, n, out, pos)
                    pos += n * eb
                    pc += 1
                elif n > 0:
                    cur[node + 1] = e0  # pre-order: a list's only child comes next
                    stack[sp, 0] = F_LIST
                    stack[sp, 1] = pc + 1
                    stack[sp, 2] = n
                    stack[sp, 3] = n
                    stack[sp, 4] = after
                    sp += 1
                    pc += 1
                else:
                    pc = after
            elif op == LIST_NEXT:
                top = sp - 1
                stack[top, 2] -= 1
                if stack[top, 2] > 0:
                    cur[node + 1] += 1
                    pc = stack[top, 1]
                else:
                    pc = stack[top, 4]
                    sp -= 1
            elif op == STRUCT:
                if valid_base[node] >= 0 and valid[valid_base[node] + cur[owner[node]]] == 0:
                    err = E_NULL
                    break
                pc += 1
            elif op == NSTRUCT:
                is_present = valid_base[node] < 0 or valid[valid_base[node] + cur[owner[node]]] != 0
                if code[pc, 2] == 0:  # int8 -1 / 1
                    if fill:
                        out[pos] = 1 if is_present else 0xFF
                    pos += 1
                else:  # in a tagged field: uvarint 0 / 1
                    if fill:
                        out[pos] = 1 if is_present else 0
                    pos += 1
                pc = pc + 1 if is_present else code[pc, 3]
            elif (
                op == TAGS
                and code[pc, 6] != 0
                and offs[off_base[node] + cur[owner[node]]] == offs[off_base[node] + cur[owner[node]] + 1]
            ):  # the common case: no tag known here, none kept: an empty section
                if fill:
                    out[pos] = 0
                pos += 1
                pc += 1
            elif op == TAGS or op == OPTBUF:
                optbuf = op == OPTBUF
                keynode = code[pc, 2]
                valnode = code[pc, 3]
                slot = cur[owner[node]]
                u0 = np.int64(offs[off_base[node] + slot])
                u1 = np.int64(offs[off_base[node] + slot + 1])
                if not optbuf:
                    count = u1 - u0
                    for k in range(code[pc, 5]):  # the TAGGED rows follow
                        tn = code[pc + 1 + k, 1]
                        if present[present_base[tn] + cur[owner[tn]]] != 0:
                            count += 1
                    if fill:
                        pos = _put_uv(out, pos, count)
                    else:
                        pos += _uvlen(count)
                if code[pc, 6] != 0:  # no known tags: the unknown ones, then done
                    pos = _section_tail(out, pos, fill, optbuf, u0, u1, fixed_base[keynode] >> 2,
                                        off_base[valnode], data_base[valnode], a32, offs, data)  # fmt: skip
                    pc += 1
                    continue
                stack[sp, 0] = F_SECTION
                stack[sp, 1] = pc
                stack[sp, 2] = u0
                stack[sp, 3] = u1
                sp += 1
                pc += 1
            elif op == TAGGED:
                top = sp - 1
                spc = stack[top, 1]
                optbuf = code[spc, 0] == OPTBUF
                keynode = code[spc, 2]
                valnode = code[spc, 3]
                tag = np.int64(code[pc, 2])
                # unknown tags below this one go first: the section is in ascending tag order
                while stack[top, 2] < stack[top, 3]:
                    e = stack[top, 2]
                    if np.int64(a32[(fixed_base[keynode] >> 2) + e]) & 0xFFFFFFFF > tag:
                        break
                    pos = _unknown(out, pos, fill, optbuf, e, keynode, valnode,
                                   fixed_base, off_base, data_base, a32, offs, data)  # fmt: skip
                    stack[top, 2] = e + 1
                if present[present_base[node] + cur[owner[node]]] == 0:
                    pc += 1
                    continue
                stack[sp, 0] = F_CALL
                stack[sp, 1] = pc + 1
                stack[sp, 2] = ci
                stack[sp, 3] = pos
                stack[sp, 4] = tag
                stack[sp, 5] = 1 if optbuf else 0
                sp += 1
                if fill:
                    pos = _put_entry(out, pos, optbuf, tag, cache[ci])
                ci += 1
                pc = code[pc, 3]
            elif op == RET:
                sp -= 1
                if not fill:  # the value's size is known now: its header comes before it
                    n = pos - stack[sp, 3]
                    cache[stack[sp, 2]] = n
                    pos += _entry_size(stack[sp, 5] != 0, stack[sp, 4], n)
                pc = stack[sp, 1]
            elif op == SECTION_END:
                sp -= 1
                spc = stack[sp, 1]
                keynode = code[spc, 2]
                valnode = code[spc, 3]
                pos = _section_tail(out, pos, fill, code[spc, 0] == OPTBUF, stack[sp, 2], stack[sp, 3],
                                    fixed_base[keynode] >> 2, off_base[valnode], data_base[valnode], a32,
                                    offs, data)  # fmt: skip
                pc += 1
            elif op == END:
                if fill and pos != out_starts[i + 1]:
                    err = E_SIZE
                    d1 = pos - out_starts[i]
                break
            else:  # DEF_*: a column the wire of this version does not carry
                pc += 1
        if err == OK:
            if not fill:
                sizes[i] = pos
            i += 1
            continue
        _write_status(status, err, i, 0, pc, d1, 0, stack, sp, run_row)
        return err
    cache_at[0] = ci
    return OK


# ---- calls for the kernels generated per plan (arrowkafka/codegen/encode.py) ---------------------
# Compiled once per machine (cached here), not again for every plan; LLVM inlines them into each
# kernel. Indices are unsigned: Numba then skips the negative-index fix-up.


@njit(cache=True, nogil=True)
def g_uvlen(v):
    return _uvlen(v)


@njit(cache=True, nogil=True)
def g_put_uv(out, pos, v):
    return _put_uv(out, pos, v)


@njit(cache=True, nogil=True)
def g_be2(out, pos, v):
    _put_be(out, pos, v, 2)


@njit(cache=True, nogil=True)
def g_be4(out, pos, v):
    _put_be(out, pos, v, 4)


@njit(cache=True, nogil=True)
def g_be8(out, pos, v):
    _put_be(out, pos, v >> 32, 4)
    _put_be(out, pos + 4, v, 4)


@njit(cache=True, nogil=True)
def g_i8(v):
    """An int8 stored as a byte, as int64."""
    v = np.int64(v)
    return v - 256 if v >= 128 else v


@njit(cache=True, nogil=True)
def g_copy(out, at, src, start, n):
    """``out[at : at + n] = src[start : start + n]``."""
    copy_bytes(src, start, n, out, at)


@njit(cache=True, nogil=True)
def g_unknown(out, pos, fill, optbuf, e, kb, ob, db, a32, offs, data):
    return _unknown_at(out, pos, fill, optbuf, e, kb, ob, db, a32, offs, data)


@njit(cache=True, nogil=True)
def g_section_tail(out, pos, fill, optbuf, e0, e1, kb, ob, db, a32, offs, data):
    return _section_tail(out, pos, fill, optbuf, e0, e1, kb, ob, db, a32, offs, data)
