"""The asv suite in bench/ (README: Performance) works against the library as it is: `asv check`
finds no problem, and `asv run --quick` in this environment runs every benchmark once, each
succeeding, on the small inputs of ARROWKAFKA_BENCH_SMOKE=1 (bench/benchmarks/data.py: batches a
hundred times smaller, one workload). Nothing is written into the repository: asv gets a copy of
bench/asv.conf.json whose results, html and env folders are temporary, and a home folder of its
own for its machine file."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.jit]  # (every benchmark warms and checks the JIT's kernels)

pytest.importorskip("asv")

BENCH = ROOT / "bench"
MACHINE = "arrowkafka-smoke"


@pytest.fixture(scope="module")
def asv(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Runs the venv's asv in bench/ on a temporary copy of its config: ``asv(*args)``."""
    tmp = tmp_path_factory.mktemp("asv")
    conf = json.loads((BENCH / "asv.conf.json").read_text())
    conf.update(
        repo=str(ROOT),
        benchmark_dir=str(BENCH / "benchmarks"),
        env_dir=str(tmp / "env"),
        results_dir=str(tmp / "results"),
        html_dir=str(tmp / "html"),
    )
    config = tmp / "asv.conf.json"
    config.write_text(json.dumps(conf, indent=1))
    env = {
        **os.environ,
        "ARROWKAFKA_BENCH_SMOKE": "1",
        # asv keeps its machine file in ~; the generated kernels stay where they were
        "HOME": str(tmp / "home"),
        "ARROWKAFKA_CACHE_DIR": os.environ.get("ARROWKAFKA_CACHE_DIR")
        or str(Path.home() / ".cache" / "arrowkafka"),
    }
    (tmp / "home").mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asv", *args, f"--config={config}"],
            cwd=BENCH, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    run.results = tmp / "results"  # type: ignore[attr-defined]
    out = run("machine", "--yes", f"--machine={MACHINE}")
    assert out.returncode == 0, out.stdout + out.stderr
    return run


def test_asv_check(asv: Any) -> None:
    out = asv("check", "--python=same")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No problems found" in out.stdout, out.stdout + out.stderr


def test_every_benchmark_runs_once_and_succeeds(asv: Any) -> None:
    # --set-commit-hash: asv saves the results of a run in this environment (to the temporary
    # results folder), so that each benchmark's outcome is read from them, not from the log
    out = asv(
        "run", "--python=same", "--quick", "--show-stderr", f"--machine={MACHINE}", "--set-commit-hash=HEAD"
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log  # asv exits 2 when a benchmark failed
    benchmarks = json.loads((asv.results / "benchmarks.json").read_text())
    names = {name for name in benchmarks if name != "version"}
    assert len(names) >= 14, sorted(names)
    (saved,) = (asv.results / MACHINE).glob("*-existing-*.json")
    run = json.loads(saved.read_text())
    column = run["result_columns"].index("result")
    results = {name: row[column] for name, row in run["results"].items()}
    assert set(results) == names, log
    failed = {}
    for name, value in results.items():
        values = value if isinstance(value, list) else [value]
        # asv records a failed benchmark (or parameter combination) as None, a skipped one as NaN
        bad = [i for i, v in enumerate(values) if v is None or (isinstance(v, float) and math.isnan(v))]
        if not values or bad:
            failed[name] = values
    assert not failed, f"failed or skipped: {failed}\n{log}"
