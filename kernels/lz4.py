"""Kafka's LZ4 frames decompressed in a kernel, many batches a call, through the LZ4 library's
own block decoder (``LZ4_decompress_safe``, at an address the caller finds in a wheel that
exports it; ``arrowkafka.records.codecs``).

Read block by block in Python, the frames of small batches cost more in Python than in LZ4
itself: a batch of 40 KB took 10 us of Python around 30 us of decompression. Here one call
reads the frames of a run of batches; anything but the plain case (linked blocks, a block the
output has no room for, a frame that does not read, more than the cap) stops the run at that
batch, which the caller then reads the Python way, where every error is named.

The function's address is an argument, not a global, so the kernel stays in Numba's cache
(an address differs from process to process).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .jit import njit
from .memory import data_pointer
from .records import H_INNER, H_REGION_END, H_REGION_START

LZ4_MAGIC = 0x184D2204
SKIPPABLE = 0x184D2A50  # & 0xFFFFFFF0
BLOCK_MAX = (0, 0, 0, 0, 1 << 16, 1 << 18, 1 << 20, 1 << 22)  # by the descriptor's block size code

# what a batch comes to (``lz4_batches``' status)
DONE = 0
PYTHON = 1  # read this batch the Python way (see above)


@intrinsic
def _decompress_safe(typingctx, fn, src, pos, n, dst, at, room):
    """``LZ4_decompress_safe(src + pos, dst + at, n, room)`` at address ``fn``: the bytes
    written, or a negative number where the block does not decode within ``room``."""
    sig = types.int64(fn, src, pos, n, dst, at, room)

    def codegen(context, builder, signature, args):
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(i32, [i8p, i8p, i32, i32])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        s = data_pointer(context, builder, signature.args[1], args[1])
        d = data_pointer(context, builder, signature.args[4], args[4])
        sp = builder.bitcast(builder.gep(s, [args[2]]), i8p)
        dp = builder.bitcast(builder.gep(d, [args[5]]), i8p)
        got = builder.call(f, [sp, dp, builder.trunc(args[3], i32), builder.trunc(args[6], i32)])
        return builder.sext(got, ir.IntType(64))

    return sig, codegen


@njit(cache=True, nogil=True)
def _u32(data, pos):
    return (
        np.int64(data[pos])
        | (np.int64(data[pos + 1]) << 8)
        | (np.int64(data[pos + 2]) << 16)
        | (np.int64(data[pos + 3]) << 24)
    )


@njit(cache=True, nogil=True)
def _frames(fn, data, pos, end, out, at, cap):
    """The frames of data[pos:end] into out from ``at`` -> the bytes written, or -1: read
    this payload the Python way."""
    start = at
    while pos < end:
        if end - pos < 7:
            return -1
        magic = _u32(data, pos)
        if magic & 0xFFFFFFF0 == SKIPPABLE:
            if end - pos < 8:
                return -1
            size = _u32(data, pos + 4)
            if size > end - pos - 8:
                return -1
            pos += 8 + size
            continue
        flg, bd = data[pos + 4], data[pos + 5]
        if magic != LZ4_MAGIC or flg >> 6 != 1 or flg & 0x20 == 0:  # linked blocks: Python
            return -1
        block_max = BLOCK_MAX[(bd >> 4) & 7]
        if block_max == 0:
            return -1
        block_sum = 4 if flg & 0x10 else 0
        pos += 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1
        while True:
            if end - pos < 4:
                return -1
            word = _u32(data, pos)
            pos += 4
            if word == 0:  # end mark, then the content checksum if there is one
                pos += 4 if flg & 0x04 else 0
                break
            size = word & 0x7FFFFFFF
            if size > end - pos:
                return -1
            # a block may be as long as the frame's maximum (4 MiB in the frames pierrec/lz4
            # writes by default: franz-go, sarama) and no longer than the cap allows; it is
            # tried in the room the output has, and the Python reader, which grows the output,
            # reads the batch where it does not fit (or does not decode: it names why)
            room = min(block_max, cap - (at - start), len(out) - at)
            if word & 0x80000000:  # stored as it is
                if size > room:
                    return -1
                for k in range(size):
                    out[at + k] = data[pos + k]
                got = size
            else:
                got = _decompress_safe(fn, data, pos, size, out, at, room)
                if got < 0:
                    return -1
            at += got
            pos += size + block_sum
        if pos > end:
            return -1
    return at - start


@njit(cache=True, nogil=True)
def lz4_batches(fn, data, codecs, starts, ends, batch_of, i, out, at, group, cap, hdr):
    """Payloads i, i + 1, ... (data[starts[k]:ends[k]]) whose codec is lz4 (3) into out from
    ``at`` on, each at most ``cap`` bytes, until ``group`` bytes are written -> (the payload
    it stopped at, where the output ends, PYTHON when that payload is to be read the Python
    way, else DONE). Payload k is batch ``batch_of[k]``: its header row (``hdr``) gets where
    its records now lie, in ``out`` (here, not by the caller: per group, that bookkeeping
    in Python cost a twentieth of the lz4 batches' decode)."""
    first = at
    while i < len(codecs) and codecs[i] == 3 and at - first < group:
        got = _frames(fn, data, starts[i], ends[i], out, at, cap)
        if got < 0:
            return i, at, PYTHON
        b = batch_of[i]
        hdr[H_INNER, b] = 1
        hdr[H_REGION_START, b] = at
        hdr[H_REGION_END, b] = at + got
        at += got
        i += 1
    return i, at, DONE
