"""The stages keep their layering: the import contracts hold (import-linter, as the test
command runs it), each contract fails when broken on purpose, the links that give the source
tree its installed layout point where pyproject.toml maps the packages, and importing a stage
pulls in no more than it should (the spec stage neither pyarrow nor numba, the kernels
neither pyarrow nor pyspark, the schema API not numba, core never pyspark)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINTER = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(LINTER), "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)


def test_links_give_the_installed_layout() -> None:
    mapped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package in ("arrowkafka.kernels", "arrowkafka.spark"):
        link = ROOT.joinpath(*package.split("."))
        assert link.is_symlink() and link.resolve() == (ROOT / mapped[package]).resolve(), package


@pytest.mark.slow
def test_import_contracts_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # a cycle: the spec IR importing the codec, which imports the IR
        ("ir/model.py", "import arrowkafka.codec.decode", "stages import only the stages below them"),
        # the codec reaching back up to the API that calls it
        ("codec/encode.py", "from arrowkafka.api import SpecSet", "stages import only the stages below them"),
        (
            "codec/encode.py",
            "from arrowkafka.oracle import decode",
            "nothing but the tests imports the oracle",
        ),
        ("ir/load.py", "import pyarrow", "the spec IR imports neither pyarrow nor numba"),
        ("traffic/pcap.py", "import pyspark", "core never imports pyspark"),
        ("kernels/isa.py", "import pyarrow", "the kernels import neither pyarrow, pandas nor pyspark"),
    ],
)
def test_a_broken_contract_fails(tmp_path: Path, module: str, line: str, broken: str) -> None:
    # a copy of the package (through its links) with one import added, first on the path
    package = tmp_path / "arrowkafka"
    shutil.copytree(ROOT / "arrowkafka", package, ignore=shutil.ignore_patterns("__pycache__", "*.pcap"))
    path = package / module
    path.write_text(f"{line}  # noqa\n" + path.read_text())
    result = lint(tmp_path, PYTHONPATH=str(tmp_path))
    assert result.returncode != 0
    assert f"{broken} BROKEN" in result.stdout, result.stdout


def imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return {name.split(".")[0] for name in out.stdout.split()}


@pytest.mark.parametrize(
    ("statement", "banned"),
    [
        (
            "import arrowkafka.ir as s, arrowkafka.specs as v, pathlib; "
            "s.load_folder(pathlib.Path(v.__file__).parent)",
            {"pyarrow", "numba", "pyspark"},
        ),
        ("import arrowkafka.kernels", {"pyarrow", "pyspark"}),
        ("import arrowkafka as ak; ak.arrow_schema('FetchRequest', 12)", {"pyspark", "numba"}),
        ("import arrowkafka.traffic, arrowkafka.topics, arrowkafka.cli", {"pyspark"}),
    ],
)
def test_layering(statement: str, banned: set[str]) -> None:
    assert not imported_after(statement) & banned
