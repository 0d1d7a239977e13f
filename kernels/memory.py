"""Bytes copied from one array to another as one ``memcpy``.

Numba compiles a slice assignment (``dst[a:b] = src[c:d]``) into two array views and a loop
that copies a byte at a time: with it, FetchResponse v12 (112 KB bodies) decoded at 2.0 GB/s
on the generated kernel and ProduceRequest v9 at 2.1 GB/s on the interpreter; with
``copy_bytes``, 4.7 and 4.2 GB/s (one core). Up to 16 bytes (record keys, header keys and
values) it copies two words that may overlap, or 1-3 bytes one at a time, with no call:
records of 100-byte values with 3 headers each, 11.3 -> 10.9 ms for 32 MB. Callers check the
bounds first, as for every other write of the kernels. Where the kernels run as Python
(``NUMBA_DISABLE_JIT=1``; the plain-Python tier, ``tiers.py``), numpy's slice copy, bounds
checked.

``zeros`` is ``np.zeros`` for a kernel's scratch arrays: Numba's own ``np.zeros`` is a function
of Numba's array module with an environment there, so every process that loads a kernel using
it from the cache imports that module first (35-100 ms in a fresh process).

``load_u32``, ``load_u64``, ``store_u32`` and ``store_u64`` read and write a word at any byte
offset, as one instruction (a loop of byte loads and shifts is not always merged into one), in
the CPU's byte order: little-endian, as Arrow's and as the callers assume, where ``LITTLE``.

``raw`` turns an array into a bare pointer for the helpers a kernel calls per record or per
value: Numba counts a reference, atomically, each time an array is handed to a function, even
one it inlines, and where its pruning pass cannot pair the counts up they stay in the loop (a
third of the record walk's time, 200-byte records: 45-60 ns a record before, 16-28 after).
"""

from __future__ import annotations

import sys

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .jit import njit
from .tiers import copy_bytes_py, raw_py

__all__ = ["copy_bytes", "load_u32", "load_u64", "memcpy", "raw", "store_u32", "store_u64", "zeros"]


@intrinsic
def memcpy(typingctx, dst, at, src, pos, n):
    """dst[at:at + n] = src[pos:pos + n], unchecked: LLVM's ``memcpy`` of the two arrays'
    data."""
    sig = types.void(dst, at, src, pos, n)

    def codegen(context, builder, signature, args):
        d = data_pointer(context, builder, signature.args[0], args[0])
        s = data_pointer(context, builder, signature.args[2], args[2])
        at_, pos_, n_ = (context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 3, 4))
        cgutils.raw_memcpy(builder, builder.gep(d, [at_]), builder.gep(s, [pos_]), n_, 1)
        return context.get_dummy_value()

    return sig, codegen


def _word_at(context, builder, signature, args, bits):
    """A pointer to the ``bits``-bit word at byte args[1] of array (or ``raw`` pointer) args[0]."""
    base = data_pointer(context, builder, signature.args[0], args[0])
    at = context.cast(builder, args[1], signature.args[1], types.intp)
    return builder.bitcast(builder.gep(base, [at]), ir.IntType(bits).as_pointer())


def _word_loader(bits):
    """An intrinsic reading the unsigned ``bits``-bit word at byte i of arr (unaligned)."""

    @intrinsic
    def load(typingctx, arr, i):
        def codegen(context, builder, signature, args):
            return builder.load(_word_at(context, builder, signature, args, bits), align=1)

        return types.Integer(f"uint{bits}")(arr, i), codegen

    return load


_load_u32, _load_u64 = _word_loader(32), _word_loader(64)


def _word_storer(bits):
    """An intrinsic writing v as the ``bits``-bit word at byte i of arr (unaligned)."""

    @intrinsic
    def store(typingctx, arr, i, v):
        word_type = types.Integer(f"uint{bits}")

        def codegen(context, builder, signature, args):
            word = _word_at(context, builder, signature, args, bits)
            builder.store(context.cast(builder, args[2], signature.args[2], word_type), word, align=1)
            return context.get_dummy_value()

        return types.void(arr, i, word_type), codegen

    return store


_store_u32, _store_u64 = _word_storer(32), _word_storer(64)


def _load_u32_py(arr, i):
    return np.uint32(int.from_bytes(arr[i : i + 4].tobytes(), sys.byteorder))


def _load_u64_py(arr, i):
    return np.uint64(int.from_bytes(arr[i : i + 8].tobytes(), sys.byteorder))


# (the low bits of a wider or negative value, as the compiled stores' cast keeps them)
def _store_u32_py(arr, i, v):
    arr[i : i + 4] = np.frombuffer((int(v) & 0xFFFFFFFF).to_bytes(4, sys.byteorder), np.uint8)


def _store_u64_py(arr, i, v):
    arr[i : i + 8] = np.frombuffer((int(v) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, sys.byteorder), np.uint8)


def data_pointer(context, builder, ty, value):
    """The first byte of an array, or a pointer as it is (``raw``)."""
    if isinstance(ty, types.CPointer):
        return value
    return context.make_array(ty)(context, builder, value).data


@intrinsic
def _raw(typingctx, arr):
    if not isinstance(arr, types.Array) or arr.layout != "C":  # a pointer has no strides
        raise TypingError(f"raw takes a C-contiguous array, not {arr}")
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return sig, codegen


@intrinsic
def _zeros(typingctx, shape, dtype):
    """A new zeroed C-order array of ``shape`` (an integer, or a tuple of them) and ``dtype``
    (``np.int64``, ...). Sizes are the caller's and not checked: small, never negative."""
    if isinstance(shape, types.Integer):
        ndim = 1
    elif isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer) for t in shape):
        ndim = len(shape)
    else:
        raise TypingError(f"zeros takes an integer or a tuple of them, not {shape}")
    if not isinstance(dtype, types.NumberClass):
        raise TypingError(f"zeros takes a numpy scalar type, not {dtype}")
    array = types.Array(dtype.instance_type, ndim, "C")

    def codegen(context, builder, signature, args):
        from numba.np.arrayobj import populate_array  # (compiling: Numba's registries are loaded)

        intp = context.get_value_type(types.intp)
        if ndim == 1:
            dims = [context.cast(builder, args[0], shape, types.intp)]
        else:
            parts = zip(cgutils.unpack_tuple(builder, args[0]), shape, strict=True)
            dims = [context.cast(builder, d, t, types.intp) for d, t in parts]
        data_type = context.get_data_type(array.dtype)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(data_type))
        strides = [itemsize]
        for d in reversed(dims[1:]):
            strides.insert(0, builder.mul(strides[0], d))
        size = builder.mul(strides[0], dims[0])
        align = context.get_preferred_array_alignment(array.dtype)
        meminfo = context.nrt.meminfo_alloc_aligned(builder, size, align)  # (a MemoryError if none)
        data = context.nrt.meminfo_data(builder, meminfo)
        cgutils.memset(builder, data, size, 0)
        out = context.make_array(array)(context, builder)
        populate_array(
            out,
            data=builder.bitcast(data, data_type.as_pointer()),
            shape=cgutils.pack_array(builder, dims, ty=intp),
            strides=cgutils.pack_array(builder, strides, ty=intp),
            itemsize=itemsize,
            meminfo=meminfo,
        )
        return out._getvalue()

    return array(shape, dtype), codegen


# (words in the CPU's byte order: little-endian, as Arrow's, wherever ``LITTLE`` says so)
LITTLE = sys.byteorder == "little"

if getattr(config, "DISABLE_JIT", False):
    copy_bytes = copy_bytes_py
    raw = raw_py
    zeros = np.zeros
    load_u32, load_u64, store_u32, store_u64 = _load_u32_py, _load_u64_py, _store_u32_py, _store_u64_py

else:
    # arr's data as a bare pointer, indexed as arr is but with no negative indices (the caller
    # checks bounds, as for every read), and no reference count (see above): valid while arr
    # is, which the caller holds. The intrinsic itself: a function around it takes the array.
    raw = _raw  # type: ignore[assignment]
    zeros = _zeros  # type: ignore[assignment]
    load_u32, load_u64 = _load_u32, _load_u64
    store_u32, store_u64 = _store_u32, _store_u64

    @njit(inline="always")
    def copy_bytes(src, pos, n, dst, at):
        """dst[at:at + n] = src[pos:pos + n] (the caller checked both ranges)."""
        if 8 <= n <= 16:  # two words that may overlap, in place of a call
            a, b = _load_u64(src, pos), _load_u64(src, pos + n - 8)
            _store_u64(dst, at, a)
            _store_u64(dst, at + n - 8, b)
        elif 4 <= n < 8:
            c, d = _load_u32(src, pos), _load_u32(src, pos + n - 4)
            _store_u32(dst, at, c)
            _store_u32(dst, at + n - 4, d)
        elif n < 4:
            for k in range(n):
                dst[at + k] = src[pos + k]
        else:
            memcpy(dst, at, src, pos, n)
