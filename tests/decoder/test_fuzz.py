"""Random bit flips, random bytes and forged lengths never crash and never hang: the kernels
run in a subprocess, so a segfault fails this test instead of killing the run."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SHARED


def test_mutated_bodies_never_crash() -> None:
    child = Path(__file__).with_name("fuzz_child.py")
    proc = subprocess.run(
        [sys.executable, str(child), str(SHARED / "vectors"), "200"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    seen = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert sum(seen.values()) == 5 * 200
    assert seen["Truncated"] > 0 and seen["Corrupt"] > 0 and seen["ok"] >= 0
