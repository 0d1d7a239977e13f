"""Check the import contracts (``[tool.importlinter]`` in pyproject.toml) with import-linter.

import-linter reads a package from its folder, but ``kernels/`` and ``spark_integration/``
become ``arrowkafka.kernels`` and ``arrowkafka.spark`` only when installed, which an editable
install does with an import hook the linter cannot see. So the tree is first laid out as it
installs, in a temporary folder, and the linter reads that copy.

    python tests/import_contracts.py     # exit status 0 when every contract holds
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# where each installed package's source is (pyproject.toml's package-dir), code only
LAYOUT = {
    "arrowkafka": "arrowkafka",
    "arrowkafka/kernels": "kernels",
    "arrowkafka/spark": "spark_integration",
}


def stage(into: Path) -> Path:
    """Copy the package's Python files into ``into`` as they install; the package folder."""
    for target, source in LAYOUT.items():
        shutil.copytree(ROOT / source, into / target, ignore=shutil.ignore_patterns("__pycache__", "*.pcap"))
    return into / "arrowkafka"


def lint(staged: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on a staged tree (the folder ``stage`` filled)."""
    linter = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(staged)}
    cmd = [str(linter), "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    return subprocess.run(cmd, cwd=staged, env=env, capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        stage(Path(tmp))
        result = lint(Path(tmp))
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
