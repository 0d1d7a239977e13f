"""Hints to the CPU that change no result: fetch a cache line before the kernel reads it.

A kernel that hops from one message (or record) to the next makes every first read of the next
one wait on memory, since that address comes out of the bytes being parsed; a prefetch names
it ahead, so the wait overlaps the work on this one. Where the kernels run as Python (the
plain-Python tier, ``NUMBA_DISABLE_JIT=1``) the prefetches do nothing.
"""

from __future__ import annotations

from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.extending import intrinsic

from .jit import njit
from .memory import data_pointer

__all__ = [
    "HOPS_AHEAD",
    "HOPS_STRIDES",
    "MESSAGES_AHEAD",
    "hop_ahead",
    "hop_mark",
    "message_ahead",
    "prefetch",
    "stride_ahead",
]

MESSAGES_AHEAD = 16  # how far ahead: 100,000 Produce v9 bodies of 2.2 KB, 421 -> 316 ns a body
# (a message's first two lines, where its first fields may cross into the second, and its last:
# Produce v9 with views 15.0 -> 18.5 GB/s, with copies 6.2 -> 6.7, in bench/compare.py's turns)
# A ``bytes`` or ``records`` value is jumped over where it is not copied, so what follows it
# (a Fetch response's next partition, 1 KB on) is a wait on memory. Pass 1 notes where each
# value ends (``hop_mark``) and prefetches where the value HOPS_STRIDES on would end if the
# values kept their spacing (Fetch partitions, Produce bodies often do); pass 2, with views,
# prefetches where the value HOPS_AHEAD on ends, as pass 1 noted (``hop_ahead``). Both fetch
# that line and the next: what follows a value (a Fetch partition's 30 bytes of fixed fields)
# crosses into the next line about half the time, and a prefetch of one line had left that wait
# (a third of the kernel's time in Fetch v12 with views, its input not in the cache); with
# both, bench/compare.py's turns: Fetch v12 with views 8.5-9.4 -> 13.4 GB/s, Produce v9 11.2 ->
# 14.9 (2026-11-29)
HOPS_STRIDES = 4
HOPS_AHEAD = 8
LINE = 64  # bytes in a cache line


@intrinsic
def _prefetch(typingctx, arr, i):
    """LLVM's ``prefetch`` of the cache line of arr[i]: never faults, reads nothing the kernel
    sees."""
    sig = types.void(arr, i)

    def codegen(context, builder, signature, args):
        data = data_pointer(context, builder, signature.args[0], args[0])
        at = context.cast(builder, args[1], signature.args[1], types.intp)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        ptr = builder.bitcast(builder.gep(data, [at]), i8p)
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])  # read, keep in every cache level, data
        return context.get_dummy_value()

    return sig, codegen


if getattr(config, "DISABLE_JIT", False):

    def prefetch(arr, i):
        pass

    def _two_lines(arr, i, last):
        pass

    def message_ahead(data, starts, ends, i, last):
        pass

    def hop_ahead(data, ndata, hops, width, slot, j):
        pass

else:

    @njit(inline="always")
    def prefetch(arr, i):
        _prefetch(arr, i)

    @njit(inline="always")
    def _two_lines(arr, i, last):
        """Prefetch the line of arr[i] and the next, not past arr[last] (``i <= last``): the
        fields that follow a hop cross into the next line about half the time (above)."""
        _prefetch(arr, i)
        _prefetch(arr, min(i + LINE, last))

    @njit(inline="always")
    def message_ahead(data, starts, ends, i, last):
        """Prefetch where message i + MESSAGES_AHEAD starts (two lines) and ends (its tagged
        fields)."""
        j = i + MESSAGES_AHEAD
        if j < last and ends[j] > starts[j]:
            _two_lines(data, starts[j], ends[j] - 1)
            _prefetch(data, ends[j] - 1)

    @njit(inline="always")
    def hop_ahead(data, ndata, hops, width, slot, j):
        """Pass 2, at value j of view node ``slot``: prefetch where value j + HOPS_AHEAD ends,
        as pass 1 noted (clamped into ``data``, ``ndata`` bytes: a slot may hold anything,
        where the value was null or its message failed, since the room is reused as it is).
        ``hops``: the notes flat, ``width`` a node (``memory.raw`` pointers, as the
        generated kernels hand them)."""
        j += HOPS_AHEAD
        if j < width:
            _two_lines(data, min(max(hops[slot * width + j], 0), ndata - 1), ndata - 1)


@njit(inline="always")
def stride_ahead(prev, at, n):
    """Where the value HOPS_STRIDES on would end if values kept the spacing of the last two
    (ending at ``prev`` and ``at``), or -1: past ``n`` (the input's end), or when ``prev`` is
    no note of the value before (a null value or an absent tag leaves none, and the notes'
    room is not cleared). With 0 <= prev < at <= n the sum cannot overflow."""
    if 0 <= prev < at:
        guess = at + HOPS_STRIDES * (at - prev)
        if guess < n:
            return guess
    return -1


@njit(inline="always")
def hop_mark(data, ndata, hops, width, slot, j, at):
    """Pass 1: value j of view node ``slot`` ends at ``at`` (noted while the node's ``width``
    has room), and the prefetch of where value j + HOPS_STRIDES would end (``stride_ahead``);
    arguments as ``hop_ahead``'s."""
    if j < width:
        hops[slot * width + j] = at
        if j > 0:
            guess = stride_ahead(hops[slot * width + j - 1], at, ndata)
            if guess >= 0:
                _two_lines(data, guess, ndata - 1)
