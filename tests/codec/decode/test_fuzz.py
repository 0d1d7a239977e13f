"""Random bit flips, random bytes and forged lengths never crash and never hang: the kernels
run in a subprocess, so a segfault fails this test instead of killing the run. The child's
kernels are compiled with NUMBA_BOUNDSCHECK=1 (into a cache of its own), so an out-of-bounds
index raises there instead of reading memory it does not own."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SHARED


def test_mutated_bodies_never_crash(tmp_path: Path) -> None:
    child = Path(__file__).with_name("fuzz_child.py")
    rounds = 6 if os.environ.get("NUMBA_DISABLE_JIT") == "1" else 200
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(child), str(SHARED / "vectors"), str(rounds)],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    seen = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert sum(seen.values()) == 5 * rounds
    assert seen["Truncated"] > 0 and seen["Corrupt"] > 0 and seen["ok"] >= 0
