"""`pip install .` and `pip install -e .` both work, map the fixed top-level folders into the
arrowkafka namespace, and install no top-level package named `kernels`, `specs` or
`spark_integration`."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

CHECK = """
import importlib.util, pathlib, sys
import arrowkafka as ak, arrowkafka.kernels, arrowkafka.spark, arrowkafka.specs
for top in ("kernels", "specs", "spark_integration"):
    assert importlib.util.find_spec(top) is None, top
assert len(ak.load_specs()) == 258
assert pathlib.Path(arrowkafka.kernels.__file__).parent.name == "kernels"
print(pathlib.Path(ak.__file__).parent)
"""


def project_copy(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for rel in files:
        src = ROOT / rel
        if src.is_symlink():  # arrowkafka/kernels and arrowkafka/spark
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).symlink_to(src.readlink())
        elif src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_pip_install(tmp_path: Path, editable: bool) -> None:
    src = project_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # Reuse this environment's dependencies (pyarrow, numba, ...) rather than download them.
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    Path(purelib, "_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    cmd = [str(py), "-m", "pip", "install", "-q", "--no-deps"]
    cmd += ["-e", str(src)] if editable else [str(src)]
    subprocess.run(cmd, check=True, cwd=tmp_path)
    out = subprocess.run([str(py), "-c", CHECK], check=True, capture_output=True, text=True, cwd=tmp_path)
    location = Path(out.stdout.strip())
    if editable:
        assert location == src / "arrowkafka"
    else:
        assert location.parent == Path(purelib)
        assert not (Path(purelib) / "kernels").exists()
        assert (Path(purelib) / "arrowkafka" / "specs" / "LICENSE").is_file()
        data = Path(purelib) / "arrowkafka" / "data"  # what `arrowkafka sample` reads, installed
        assert (data / "tansu_confluent.pcap").is_file()
        assert len(list(data.glob("segments/*/*.log"))) == 5
    cli = subprocess.run(
        [str(venv / "bin" / "arrowkafka"), "specs", "--type", "header"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "RequestHeader" in cli.stdout
