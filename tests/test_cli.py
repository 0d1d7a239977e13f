from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arrowkafka.cli import main
from tests.conftest import SPEC_FOLDERS


def test_specs_lists_every_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["specs"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["message", "api", "key", "type", "valid", "flexible"]
    fetch = next(line for line in lines if line.startswith("FetchRequest "))
    assert fetch.split() == ["FetchRequest", "1", "request", "0-17", "12+"]
    assert lines[-1] == "258 messages, 783 versions"


def test_specs_from_a_users_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["specs", "--specs", str(SPEC_FOLDERS["old-3.0.0"]), "--type", "request"]) == 0
    out = capsys.readouterr().out
    fetch = next(line for line in out.splitlines() if line.startswith("FetchRequest "))
    assert fetch.split() == ["FetchRequest", "1", "request", "0-12", "12+"]


def test_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "ApiVersionsRequest", "--version", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "client_software_name: string not null"
    assert "kafka.about" not in out
    assert main(["schema", "ApiVersionsRequest", "--metadata"]) == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[0] == "_version: int16 not null" and "kafka.about: 'The name of the client.'" in out
    )


def test_errors_are_reported_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "FetchRequst"]) == 2
    assert capsys.readouterr().err == (
        "arrowkafka: error: no message spec named 'FetchRequst'; "
        "did you mean FetchRequest, ShareFetchRequest, OffsetFetchRequest?\n"
    )
    assert main(["schema", "FetchRequest", "--version", "40"]) == 2
    assert "FetchRequest has no version 40 (valid versions: 0-17)" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_an_unreadable_capture_is_one_line(tmp_path: Path, kind: str) -> None:
    """Through the installed command: one line naming the file, exit status 2, no traceback,
    and no output folder left behind."""
    capture = tmp_path / "capture.pcap"
    if kind == "folder":
        capture.mkdir()
    out = tmp_path / "out"
    command = Path(sys.executable).with_name("arrowkafka")
    proc = subprocess.run(
        [str(command), "decode", str(capture), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    reason = "No such file or directory" if kind == "missing" else "Is a directory"
    assert proc.stderr == f"arrowkafka: error: {capture}: {reason}\n"
    assert not out.exists()
