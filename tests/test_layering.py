"""The stages keep their layering: the import contracts hold (import-linter, on the tree as it
installs), a contract fails when broken on purpose, and importing a stage pulls in no more than
it should (the spec stage neither pyarrow nor numba, the kernels neither pyarrow nor pyspark,
the schema API not numba, core never pyspark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from import_contracts import lint, stage


@pytest.mark.slow
def test_import_contracts_hold(tmp_path: Path) -> None:
    stage(tmp_path)
    result = lint(tmp_path)
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
    ],
)
def test_a_broken_contract_fails(tmp_path: Path, module: str, line: str, broken: str) -> None:
    package = stage(tmp_path)
    path = package / module
    path.write_text(f"{line}  # noqa\n" + path.read_text())
    result = lint(tmp_path)
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
