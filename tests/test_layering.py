"""The stages keep their layering: the spec stage imports neither pyarrow nor numba, the
kernels import neither pyarrow nor pyspark, and core never imports pyspark."""

from __future__ import annotations

import subprocess
import sys

import pytest


def imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return {name.split(".")[0] for name in out.stdout.split()}


@pytest.mark.parametrize(
    ("statement", "banned"),
    [
        (
            "import arrowkafka.spec as s, arrowkafka.specs as v, pathlib; "
            "s.load_folder(pathlib.Path(v.__file__).parent)",
            {"pyarrow", "numba", "pyspark"},
        ),
        ("import arrowkafka.kernels", {"pyarrow", "pyspark"}),
        ("import arrowkafka as ak; ak.arrow_schema('FetchRequest', 12)", {"pyspark", "numba"}),
    ],
)
def test_layering(statement: str, banned: set[str]) -> None:
    assert not imported_after(statement) & banned
