"""kernels/memory.copy_bytes: the same bytes as a slice copy, compiled and as Python (the
plain-Python tier's stand-in), at every length and offset around the sizes memcpy switches
strategy at; nothing outside the target range is touched."""

from __future__ import annotations

import numpy as np
from numba import njit

from arrowkafka.kernels import tiers
from arrowkafka.kernels.memory import copy_bytes


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
            for n in (0, 1, 7, 8, 15, 16, 17, 31, 33, 255, 1000)
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
