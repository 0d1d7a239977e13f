"""The record kernels' CRCs against independent implementations: CRC-32C (the CPU instruction
where there is one, and the slicing-by-8 tables) against the crc32c library, CRC-32 (the
carry-less multiplication where there is one, and the tables) against zlib, at every alignment
and length around their steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import numpy as np
import pytest

from arrowkafka.kernels import records as k

DATA = np.random.default_rng(3).integers(0, 256, 5000, dtype=np.uint8)
BIG = np.random.default_rng(4).integers(0, 256, 100_000, dtype=np.uint8)
LANES = 3 * k.CRC_LANE  # crc32c_hw's three-lane step
WIDTHS = (False, True) if k.HW_VCLMUL else (False,)  # the folds in 128-bit lanes, and 512-bit
# (and around crc32_clmul's steps: 64 bytes, then 16, then 8)
STEPS = (63, 64, 65, 71, 72, 79, 80, 88, 127, 128, 129, 143, 144, 152, 191, 192, 200)
CASES = [(s, n) for s in range(9) for n in (*range(0, 20), *STEPS, 1000, LANES - 1, LANES, LANES + 9, 4096)]


@pytest.mark.parametrize(("start", "n"), CASES)
def test_crcs_agree_with_the_libraries(start: int, n: int) -> None:
    part = DATA[start : start + n].tobytes()
    want = crc32c.crc32c(part)
    assert int(k.crc32(k.CRC32C_TABLE, DATA, start, start + n)) == want
    if k.HW_CRC32C:
        assert int(k.crc32c_hw(DATA, start, start + n)) == want
        assert int(k.crc32c_hw(DATA, start, start + n, False)) == want  # lanes only
        if k.HW_VCLMUL:
            assert int(k.crc32c_hw(DATA, start, start + n, True)) == want  # the 512-bit fold first
    assert int(k.crc32(k.CRC32_TABLE, DATA, start, start + n)) == zlib.crc32(part)
    assert int(k.crc32_legacy(k.CRC32_TABLE, DATA, start, start + n)) == zlib.crc32(part)
    if k.HW_CLMUL:
        for wide in WIDTHS:
            assert int(k.crc32_clmul(k.CRC32_TABLE, DATA, start, start + n, wide)) == zlib.crc32(part)


LONG = 3 * k.CRC_LONG_LANE  # its step over long inputs
MID = 3 * k.CRC_MID_LANE  # and over middling ones


@pytest.mark.parametrize(
    "n",
    [
        *(3 * k.CRC_LANE * 20 + 5, 100_000 - 3, LONG - 1, LONG, LONG + 3 * k.CRC_LANE + 7, 3 * LONG + 8),
        *(MID - 1, MID, MID + LANES + 7, 2 * MID + 3, LONG + MID + LANES + 9, 16_384, 23_000),
    ],
)
def test_three_lanes_over_long_inputs(n: int) -> None:
    want = crc32c.crc32c(BIG[3 : 3 + n].tobytes())
    assert int(k.crc32(k.CRC32C_TABLE, BIG, 3, 3 + n)) == want
    if k.HW_CRC32C:
        for wide in WIDTHS:
            assert int(k.crc32c_hw(BIG, 3, 3 + n, wide)) == want
    if k.HW_CLMUL:
        for wide in WIDTHS:
            got = int(k.crc32_clmul(k.CRC32_TABLE, BIG, 3, 3 + n, wide))
            assert got == zlib.crc32(BIG[3 : 3 + n].tobytes())


def test_fold_constants_are_the_published_ones() -> None:
    """The CRC-32 folding constants Linux's crc32-pclmul publishes (across 64 bytes, then 16),
    from ``fold_constant``, which makes the others (across 128 bytes; CRC-32C's) the same way."""
    assert [int(x) for x in k.CRC32_FOLD[2:]] == [0x154442BD4, 0x1C6E41596, 0x1751997D0, 0x0CCAA009E]


NARROW = """
import json, zlib
import crc32c, numpy as np
from arrowkafka.kernels import records as k
data = np.random.default_rng(5).integers(0, 256, 300_000, dtype=np.uint8)
parts = [data[3 : 3 + n] for n in (0, 63, 64, 200, 1000, 23_000, 299_990)]
print(json.dumps({
    "wide": k.HW_VCLMUL, "clmul": k.HW_CLMUL,
    "c": [int(k.crc32c_hw(p, 0, len(p))) == crc32c.crc32c(p.tobytes()) for p in parts],
    "ieee": [int(k.crc32_legacy(k.CRC32_TABLE, p, 0, len(p))) == zlib.crc32(p.tobytes()) for p in parts],
    # asked for the 512-bit fold, which this CPU lacks: the lanes all the same
    "c_wide": [int(k.crc32c_hw(p, 0, len(p), True)) == crc32c.crc32c(p.tobytes()) for p in parts],
    "ieee_wide": [int(k.crc32_clmul(k.CRC32_TABLE, p, 0, len(p), True)) == zlib.crc32(p.tobytes())
                  for p in parts],
}))
"""


@pytest.mark.jit
@pytest.mark.skipif(not k.HW_VCLMUL, reason="the CPU has no VPCLMULQDQ: the narrow path is the only one here")
def test_a_cpu_without_the_512_bit_fold_compiles_and_checks_the_same(tmp_path: Path) -> None:
    """Kernels compiled for a CPU without AVX-512 VPCLMULQDQ (``NUMBA_CPU_FEATURES``, as a cache
    built for another machine is) leave its intrinsics out, which LLVM could not compile there,
    and give the same CRCs by their lanes."""
    import llvmlite.binding as ll

    features = ll.get_host_cpu_features().flatten().replace("+vpclmulqdq", "-vpclmulqdq")
    env = {**os.environ, "NUMBA_CPU_FEATURES": features, "NUMBA_CACHE_DIR": str(tmp_path)}
    run = [sys.executable, "-c", NARROW]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    same = {x: [True] * 7 for x in ("c", "ieee", "c_wide", "ieee_wide")}
    assert got == {"wide": False, "clmul": True, **same}
