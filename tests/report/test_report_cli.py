"""``arrowkafka report`` and ``arrowkafka decode --report``: the report's path printed, and each
mistake said in one line with exit status 2, no traceback, nothing left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrowkafka.cli import main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arrowkafka", *args], capture_output=True, text=True, timeout=300
    )


def _one_line(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("arrowkafka: error: ") and text in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_the_report_of_a_decoded_folder(decoded: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "mine.html"
    proc = _run("report", str(decoded["noida_kafka_python"]), "-o", str(out))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == f"wrote the report to {out}\n"
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["mine.html"]  # no temporary file left


@pytest.mark.parametrize(("capture", "status"), [("noida_kafka_python", 0), ("tansu_confluent", 1)])
def test_decode_with_report(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], capture: str, status: int
) -> None:
    """The report follows the decode, also when some input went to rejects (status 1)."""
    out = tmp_path / "out"
    assert (
        main(["decode", str(shared / "captures" / f"{capture}.pcap"), "-o", str(out), "--report"]) == status
    )
    printed = capsys.readouterr().out
    assert printed.rstrip("\n").splitlines()[-1] == f"wrote the report to {out / 'report.html'}"
    assert (out / "report.html").is_file()


def test_a_folder_that_is_missing_or_not_decode_output(tmp_path: Path) -> None:
    _one_line(_run("report", str(tmp_path / "nowhere")), f"{tmp_path / 'nowhere'}: no such folder")
    _one_line(_run("report", str(tmp_path)), "not a folder `arrowkafka decode` wrote")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")  # Parquet, but not ours
    _one_line(_run("report", str(tmp_path)), "not a folder `arrowkafka decode` wrote")
    (tmp_path / "file").write_text("x")
    _one_line(_run("report", str(tmp_path / "file")), "not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "other.parquet"]


def test_an_output_that_cannot_be_written(decoded: dict[str, Path], tmp_path: Path) -> None:
    folder = str(decoded["kafka091_legacy"])
    _one_line(
        _run("report", folder, "-o", str(tmp_path / "missing" / "r.html")), "no such folder for the report"
    )
    _one_line(_run("report", folder, "-o", str(tmp_path)), "is a folder")
    (tmp_path / "file").write_text("x")
    _one_line(
        _run("report", folder, "-o", str(tmp_path / "file" / "r.html")), "no such folder for the report"
    )
    # /proc takes no new files, even from root (who may write anywhere chmod forbids)
    _one_line(_run("report", folder, "-o", "/proc/arrowkafka-report.html"), "cannot write the report")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_decode_whose_report_fails(
    shared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tables are written, the report is not: status 1 (not 2, "nothing written"), and the
    one line on stderr says both."""
    import arrowkafka.report

    def fail(folder: str, output: str | None) -> Path:
        raise arrowkafka.report.ReportError("no room")

    monkeypatch.setattr(arrowkafka.report, "build_report", fail)
    out = tmp_path / "out"
    status = main(
        ["decode", str(shared / "captures" / "noida_kafka_python.pcap"), "-o", str(out), "--report"]
    )
    err = capsys.readouterr().err
    assert status == 1 and (out / "record_batches.parquet").is_file() and not (out / "report.html").exists()
    assert err == f"arrowkafka: error: the tables were written to {out}/; the report failed: no room\n"


def _run_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "arrowkafka", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def _tmp(tmp_path: Path) -> dict[str, str]:
    """A temporary folder of the test's own for the report's spill folders (TMPDIR)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp_path / "tmp")}


def test_a_table_damaged_after_decode(decoded: dict[str, Path], tmp_path: Path) -> None:
    """A table cut after decode wrote it: the error names the file, and no spill folder or
    half report is left."""
    folder = tmp_path / "cut"
    folder.mkdir()
    for p in decoded["tansu_confluent"].glob("*.parquet"):
        (folder / p.name).write_bytes(p.read_bytes())
    whole = (folder / "JoinGroupRequest.parquet").read_bytes()
    (folder / "JoinGroupRequest.parquet").write_bytes(whole[: len(whole) // 2])
    _one_line(_run_env(_tmp(tmp_path), "report", str(folder)), f"{folder / 'JoinGroupRequest.parquet'}")
    assert not (folder / "report.html").exists() and not list(folder.glob(".report-*"))
    assert not list((tmp_path / "tmp").iterdir())  # no spill folder left


def test_the_memory_cap(decoded: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ARROWKAFKA_REPORT_MEMORY is the cap DuckDB runs under: too small says so in one line,
    a cap that is no size too; every table under a cap of 32 MB equals the default's."""
    import arrowkafka.report as rep

    folder = str(decoded["tansu_confluent"])
    out = tmp_path / "out"
    out.mkdir()
    for cap, says in (
        ("1MB", "needs more than its memory cap (1MB): set ARROWKAFKA_REPORT_MEMORY higher"),
        ("lots", "ARROWKAFKA_REPORT_MEMORY: 'lots' is not a size such as 256MB"),
        # (DuckDB would take a negative size as no cap at all)
        ("-5MB", "ARROWKAFKA_REPORT_MEMORY: '-5MB' is not a size such as 256MB"),
    ):
        env = {"ARROWKAFKA_REPORT_MEMORY": cap, **_tmp(tmp_path)}
        _one_line(_run_env(env, "report", folder, "-o", str(out / "r.html")), says)
    assert not list(out.iterdir()) and not list((tmp_path / "tmp").iterdir())
    from arrowkafka.report import spill

    monkeypatch.setenv("ARROWKAFKA_REPORT_MEMORY", "32MB")
    with spill.Spill() as db:  # (DuckDB's MB is 1000^2 bytes)
        assert db.table("SELECT current_setting('memory_limit') AS m")["m"][0].as_py() == "30.5 MiB"
    small = {f.__name__: f(folder) for fs in rep.SECTIONS.values() for f in fs}
    monkeypatch.delenv("ARROWKAFKA_REPORT_MEMORY")
    for name, table in small.items():
        assert table.equals(getattr(rep, name)(folder)), name
