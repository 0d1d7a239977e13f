"""kernels/memory.copy_bytes: the same bytes as a slice copy, compiled and as Python (the plain-
Python tier's stand-in), at every length up to 40 (it copies 1-3 bytes one at a time, 4-16 as
two words that may overlap, the rest by memcpy) and around the sizes memcpy switches strategy
at, at several offsets; nothing outside the target range is touched. ``raw``: a bare pointer
that reads as its array, for C-contiguous arrays only. ``zeros``: ``np.zeros`` for 1 and 2
dimensions, whose compiled kernels need none of Numba's array module to load."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from arrowkafka.kernels import tiers
from arrowkafka.kernels.memory import copy_bytes, load_u32, load_u64, raw, store_u32, store_u64, zeros


@njit
def _copy_many(src, dst, cases):
    for k in range(cases.shape[0]):
        copy_bytes(src, cases[k, 0], cases[k, 1], dst, cases[k, 2])


def test_copy_bytes_is_a_slice_copy() -> None:
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, 4096, dtype=np.uint8)
    cases = np.array(
        [
            (pos, n, at)
            for n in (*range(41), 63, 64, 65, 255, 1000)
            for pos, at in ((0, 0), (5, 3), (100, 2000))
        ],
        np.int64,
    )
    for case in cases:
        pos, n, at = (int(x) for x in case)
        want = np.full(4096, 0xAA, np.uint8)
        want[at : at + n] = src[pos : pos + n]
        got = np.full(4096, 0xAA, np.uint8)
        _copy_many(src, got, case[None, :])
        assert np.array_equal(got, want), (pos, n, at)
        plain = np.full(4096, 0xAA, np.uint8)
        tiers.copy_bytes_py(src, pos, n, plain, at)
        assert np.array_equal(plain, want), (pos, n, at)


@njit
def _scratch(n, m):
    a = zeros((n, m), np.int64)
    b = zeros(n, np.bool_)
    c = zeros(m, np.uint8)
    if n and m:
        a[n - 1, m - 1] = 7  # C order: the last element of the buffer
    return a, b, c


def test_zeros_is_np_zeros() -> None:
    """Each call a new zeroed array (not a reused one: the first call's results are written to
    before the second), of the shape, dtype and order asked for."""
    first = _scratch(3, 5)
    first[1][:] = True
    first[2][:] = 9
    a, b, c = _scratch(3, 5)
    want = np.zeros((3, 5), np.int64)
    want[2, 4] = 7
    assert a.dtype == np.int64 and a.flags.c_contiguous and np.array_equal(a, want)
    assert b.dtype == np.bool_ and b.shape == (3,) and not b.any()
    assert c.dtype == np.uint8 and c.shape == (5,) and not c.any()
    assert _scratch(1, 0)[0].shape == (1, 0)


@njit
def _read_raw(a, out):
    p = raw(a)
    for i in range(out.shape[0]):
        out[i] = p[i]


@pytest.mark.jit  # (a typing check: with the JIT off ``raw`` is the array itself)
def test_raw_reads_as_the_array_and_refuses_strides() -> None:
    """A bare pointer indexes as its array does; a strided array (a pointer knows no strides)
    is refused when the kernel is typed, not read wrongly."""
    a = np.arange(10, dtype=np.int64)
    out = np.zeros(10, np.int64)
    _read_raw(a, out)
    assert out.tolist() == a.tolist()
    with pytest.raises(TypingError, match="C-contiguous"):
        _read_raw(a.reshape(5, 2)[:, 1], np.zeros(5, np.int64))


def test_ranges_with_strided_starts_decode_as_contiguous_ones() -> None:
    """Ranges' starts and ends go to the kernels contiguous, whatever the caller's layout."""
    import arrowkafka as ak
    from arrowkafka.codec.decode import Ranges
    from tests.conftest import SHARED

    body = (SHARED / "vectors" / "produce_request_v9.bin").read_bytes()
    n = 40
    data = np.frombuffer(body * n, np.uint8)
    pairs = np.array([[k * len(body), (k + 1) * len(body)] for k in range(n)], np.int64)
    got = ak.decode(Ranges(data, pairs[:, 0], pairs[:, 1]), "ProduceRequest", 9, kernel="interpreter")
    assert got.equals(ak.decode([body] * n, "ProduceRequest", 9, kernel="interpreter"))


@njit
def _words(src, dst, dst32, at):
    """The words at every offset from ``at`` on: (u32, u64) read, and each written back at the
    same offset of ``dst`` (u64) and ``dst32`` (u32), a window at a time."""
    n = len(src) - 8 - at
    out32, out64 = np.empty(n, np.uint64), np.empty(n, np.uint64)
    for i in range(n):
        out32[i] = load_u32(src, at + i)
        out64[i] = load_u64(src, at + i)
        store_u64(dst, at + i, out64[i])
        store_u32(dst32, at + i, out32[i])
    return out32, out64


def test_words_are_little_endian_at_any_offset() -> None:
    """``load_u32``/``load_u64`` read the little-endian word at any byte (unaligned), and
    ``store_u32``/``store_u64`` write one there, touching nothing else (compiled, and as Python where
    NUMBA_DISABLE_JIT)."""
    rng = np.random.default_rng(5)
    src = rng.integers(0, 256, 64, dtype=np.uint8)
    for at in (0, 1, 3, 7):
        dst, dst32 = np.full(64, 0xAA, np.uint8), np.full(64, 0xAA, np.uint8)
        w32, w64 = _words(src, dst, dst32, at)
        for i in range(len(w32)):
            assert int(w32[i]) == int.from_bytes(src[at + i : at + i + 4].tobytes(), "little"), (at, i)
            assert int(w64[i]) == int.from_bytes(src[at + i : at + i + 8].tobytes(), "little"), (at, i)
        # each store wrote src's 8 bytes at its offset: together, src from ``at`` on
        last = at + len(w64) - 1 + 8
        assert np.array_equal(dst[at:last], src[at:last])
        assert (dst[:at] == 0xAA).all() and (dst[last:] == 0xAA).all()
        last32 = at + len(w32) - 1 + 4
        assert np.array_equal(dst32[at:last32], src[at:last32])
        assert (dst32[:at] == 0xAA).all() and (dst32[last32:] == 0xAA).all()


@njit
def _store_wide(dst, v32, v64):
    store_u32(dst, 1, v32)
    store_u64(dst, 5, v64)


def test_a_store_keeps_the_low_bits_of_a_wider_value() -> None:
    """A value past the word's width, or negative, is written as its low bits: the compiled
    stores cast, and their Python stand-ins (NUMBA_DISABLE_JIT) do the same."""
    dst = np.zeros(16, np.uint8)
    _store_wide(dst, np.int64(0x1_2345_6789), np.int64(-2))
    assert dst[1:5].tobytes() == (0x2345_6789).to_bytes(4, "little")
    assert dst[5:13].tobytes() == b"\xfe" + b"\xff" * 7
    assert (dst[:1] == 0).all() and (dst[13:] == 0).all()
