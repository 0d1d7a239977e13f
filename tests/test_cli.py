from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
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


def test_a_specs_folder_that_is_not_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{}")
    for folder, said in ((tmp_path / "nope", "no such folder"), (tmp_path / "f.json", "not a folder")):
        assert main(["decode", str(SAMPLE), "-o", str(tmp_path / "out"), "--specs", str(folder)]) == 2
        assert capsys.readouterr().err == f"arrowkafka: error: {folder}: {said}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


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


COMMAND = Path(sys.executable).with_name("arrowkafka")  # the installed entry point
SAMPLE = Path(__file__).parents[1] / "arrowkafka" / "data" / "tansu_confluent.pcap"


def test_the_command_imports_no_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas where it is installed (it is here: the test extra), on its first
    conversion of a Python value: the command keeps it out of its process, and still writes
    and reports (matplotlib and DuckDB too run as where pandas is not installed)."""
    import importlib.util

    assert importlib.util.find_spec("pandas") is not None  # else this test could not fail

    def imported(*args: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "arrowkafka", *args],
                              capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr[-2000:]  # (1: the sample holds a reject)
        return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}

    out = tmp_path / "out"
    modules = imported("decode", str(SAMPLE), "-o", str(out)) | imported("report", str(out))
    assert "pyarrow.lib" in modules and "duckdb" in modules and "matplotlib" in modules
    # (-X importtime lists the refused attempts as "pandas" too: pandas' own modules are what
    # an import of it brings)
    assert not {m for m in modules if m.startswith("pandas.")}
    assert (out / "FetchResponse.parquet").exists() and (out / "report.html").stat().st_size > 100_000


def _run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(COMMAND), *args], capture_output=True, text=True, **kw)  # type: ignore[call-overload, no-any-return]


def _one_line(proc: subprocess.CompletedProcess[str], text: str) -> None:
    """A mistake in the command: exit status 2, one line on stderr that says it, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("arrowkafka: error: ") and text in proc.stderr, proc.stderr


def _usage_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    """An option argparse refuses: the usage, then one line saying which and why; status 2."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("usage: arrowkafka"), proc.stderr
    last = proc.stderr.rstrip("\n").splitlines()[-1]
    assert re.match(r"arrowkafka( \w+)?: error: ", last) and text in last, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_an_unreadable_capture_is_one_line(tmp_path: Path, kind: str) -> None:
    """Through the installed command: one line naming the file, exit status 2, no traceback,
    and no output folder left behind."""
    capture = tmp_path / "capture.pcap"
    if kind == "folder":
        capture.mkdir()
    out = tmp_path / "out"
    proc = _run("decode", str(capture), "-o", str(out))
    assert proc.returncode == 2
    reason = "No such file or directory" if kind == "missing" else "Is a directory"
    assert proc.stderr == f"arrowkafka: error: {capture}: {reason}\n"
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"hello, not a capture\n", b"\xd4\xc3"])
def test_a_file_that_is_not_a_capture_is_named_before_anything_is_written(
    tmp_path: Path, content: bytes
) -> None:
    bad = tmp_path / "notes.pcap"
    bad.write_bytes(content)
    out = tmp_path / "out"
    proc = _run("decode", str(SAMPLE), str(bad), "-o", str(out))  # the good one first: still nothing written
    _one_line(proc, f"{bad}: not a pcap or pcapng capture")
    assert not out.exists()


@pytest.mark.slow
def test_a_pipe_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        f"{COMMAND} decode <(cat {SAMPLE}) -o {tmp_path / 'out'}", shell=True, executable="/bin/bash",
        capture_output=True, text=True,
    )  # fmt: skip
    _one_line(proc, "not a regular file (a capture is read twice: save it to a file)")
    assert not (tmp_path / "out").exists()
    # a named pipe no one writes to: opening it waited for a writer, for ever
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    command = f"{COMMAND} decode {fifo} -o {tmp_path / 'out'}"
    proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    _one_line(proc, "not a regular file (a capture is read twice: save it to a file)")


@pytest.mark.slow
def test_output_folders_that_cannot_be_written(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    _one_line(_run("decode", str(SAMPLE), "-o", str(a_file)), f"{a_file}: exists and is not a folder")
    _one_line(_run("decode", str(SAMPLE), "-o", str(a_file / "below")), str(a_file / "below"))
    _one_line(_run("decode", str(SAMPLE), "-o", "/proc/arrowkafka-out"), "/proc/arrowkafka-out")
    _one_line(_run("segments", str(tmp_path), "-o", str(tmp_path / "o")), "no *.log segment files")
    assert a_file.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        _one_line(_run("decode", str(SAMPLE), "-o", str(locked)), f"{locked}: cannot write in this folder")


def test_a_job_that_fails_leaves_no_folder_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The output folder (and its parents) made for a job go again when the job fails; a
    folder that was there stays, as it was."""
    import arrowkafka.segments
    import arrowkafka.traffic

    def fail(*args: Any, **kw: Any) -> None:
        raise RuntimeError("a failure inside the job")

    monkeypatch.setattr(arrowkafka.traffic, "decode_capture", fail)
    monkeypatch.setattr(arrowkafka.segments, "decode_segments", fail)
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(b"")
    for command in (["decode", str(SAMPLE)], ["segments", str(segment)]):
        with pytest.raises(RuntimeError):
            main([*command, "-o", str(tmp_path / "new" / "deeper" / "out")])
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t-0"]
        there = tmp_path / "there"
        there.mkdir()
        (there / "notes.txt").write_text("mine")
        (tmp_path / "empty").mkdir()  # a folder of the user's, empty: removable, and not ours to remove
        for out in (there, tmp_path / "empty", tmp_path / "new" / ".." / "empty"):
            with pytest.raises(RuntimeError):
                main([*command, "-o", str(out)])
            assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "t-0", "there"], out
        assert [p.name for p in there.iterdir()] == ["notes.txt"]
        shutil.rmtree(there)
        (tmp_path / "empty").rmdir()
    # the last folder cannot be made: its parents, made on the way, go too
    assert main(["decode", str(SAMPLE), "-o", str(tmp_path / "new" / ("x" * 300))]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t-0"]


def test_output_folders_the_system_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder that cannot be made, or one that says it can be written and cannot (/proc):
    one line saying so, and no hidden folder's name."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        a_file / "below": f"{a_file / 'below'}: cannot make this folder (Not a directory)",
        Path("/proc/arrowkafka-out"): "/proc/arrowkafka-out: cannot make this folder",
        Path("/proc"): "/proc: cannot write in this folder",
    }
    for out, said in cases.items():
        assert main(["decode", str(SAMPLE), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"arrowkafka: error: {said}") and err.count("\n") == 1, err
        assert ".arrowkafka-writing" not in err
    assert main(["sample", "-o", "/proc/arrowkafka-out"]) == 2  # and nothing said as if it ran
    said = capsys.readouterr()
    assert said.out == "" and said.err.startswith("arrowkafka: error: /proc/arrowkafka-out: cannot make")


@pytest.mark.slow
def test_an_earlier_run_is_refused_or_replaced_on_purpose(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run("decode", str(SAMPLE), "-o", str(out)).returncode == 1  # the sample holds one reject
    tables = sorted(p.name for p in out.iterdir())
    assert {"rejects.parquet", "records.parquet", "FetchResponse.parquet"} <= set(tables)
    (out / "notes.txt").write_text("mine")
    (out / "AlterReplicaLogDirsResponse.parquet").write_bytes(b"an earlier run's table, not in this capture")
    (out / "consumer_offsets.OffsetCommit.parquet").write_bytes(b"an earlier segments run's table")
    (out / "other.parquet").write_bytes(b"a table of the user's own: never counted or deleted")
    _one_line(
        _run("decode", str(SAMPLE), "-o", str(out)),
        f"{out}: holds {len(tables) + 2} tables of an earlier run",
    )
    (out / "ApiVersionsRequest.parquet").unlink()
    (out / "ApiVersionsRequest.parquet").mkdir()  # a Spark job's table: a folder of parts
    _one_line(_run("decode", str(SAMPLE), "-o", str(out), "--overwrite"), "a folder where a table goes")
    assert (out / "rejects.parquet").is_file()  # refused before anything was deleted
    (out / "ApiVersionsRequest.parquet").rmdir()
    proc = _run("decode", str(SAMPLE), "-o", str(out), "--overwrite")
    assert proc.returncode == 1, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*tables, "notes.txt", "other.parquet"]
    )  # the stale tables gone, the user's files kept
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.slow
def test_options_are_checked_and_explained() -> None:
    _usage_error(
        _run("decode", str(SAMPLE), "-o", "x", "--port", "70000"), "'70000' is not a TCP port (1-65535)"
    )
    _usage_error(_run("decode", str(SAMPLE), "-o", "x", "--port", "kafka"), "'kafka' is not a TCP port")
    _usage_error(_run("specs", "--type", "requests"), "invalid choice: 'requests'")
    _usage_error(_run("segments", str(SAMPLE), "-o", "x", "--compression", "lzo"), "invalid choice: 'lzo'")
    _usage_error(_run("decode", str(SAMPLE)), "the following arguments are required: -o/--output")
    version = _run("--version")
    assert version.returncode == 0 and re.fullmatch(r"arrowkafka \d+\.\d+\S*\n", version.stdout), version
    top = _run("--help")
    assert top.returncode == 0 and "exit status:" in top.stdout and "141" in top.stdout
    for command in ("specs", "schema", "decode", "segments", "sample"):
        helped = _run(command, "--help")
        assert helped.returncode == 0 and "exit status:" in helped.stdout
        options = re.findall(
            r"^  (-[^\n]*?)(?:  +(\S[^\n]*))?$", helped.stdout.split("exit status:")[0], re.M
        )
        assert options, helped.stdout
        for option, text in options:  # every option says what it does (on its line or the next)
            assert text or re.search(re.escape(option) + r"\n {10,}\S", helped.stdout), (command, option)


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    # `arrowkafka specs | head -1`; and a reader that is gone before the first write (`true`
    # reads nothing and exits while Python is still starting), so the write surely fails
    for reader, status in (("head -1", None), ("true", "141")):
        proc = subprocess.run(
            f"{COMMAND} specs | {reader}; echo status=${{PIPESTATUS[0]}}",
            shell=True, executable="/bin/bash", capture_output=True, text=True,
        )  # fmt: skip
        if reader.startswith("head"):
            assert proc.stdout.splitlines()[0].startswith("message")
        assert proc.stdout.splitlines()[-1] in (
            {f"status={status}"} if status else {"status=0", "status=141"}
        )
        assert proc.stderr == ""


@pytest.mark.slow
@pytest.mark.parametrize("after", [0.3, 1.5])
def test_an_interrupted_decode_says_so(tmp_path: Path, after: float) -> None:
    # the sample under many names (one path given twice is read once): seconds of work, so the
    # interrupt lands inside the run (loading the specs, compiling or decoding); where a run
    # ends before it all the same, again with four times as many. Ctrl-C as a terminal sends it
    # to a child whose SIGINT is not ignored (a test run in the background inherits it ignored)
    names: list[str] = []
    while True:
        for i in range(len(names), max(40, 4 * len(names))):
            name = tmp_path / "in" / f"sample{i}.pcap"
            name.parent.mkdir(exist_ok=True)
            try:
                os.link(SAMPLE, name)
            except OSError:  # (another file system)
                shutil.copyfile(SAMPLE, name)
            names.append(str(name))
        proc = subprocess.Popen(
            [str(COMMAND), "decode", *names, "-o", str(tmp_path / f"out{len(names)}")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        time.sleep(after)
        if proc.poll() is None:
            break
        proc.communicate()
        assert len(names) < 2000, "the decode always ended before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.endswith("arrowkafka: interrupted\n") and "Traceback" not in err, (
        err
    )


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler, as a command starts with: a test run in the background has
    SIGINT ignored, and a Spark session in this process puts a handler of its own in."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_a_library_swallowed_is_still_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # as Numba's compiler does when Ctrl-C lands in its ctypes callback: the KeyboardInterrupt
    # is lost ("Exception ignored ...") and the compile fails with an error of its own
    def swallowed(args: object) -> int:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        raise RuntimeError("the compile went wrong after the interrupt")

    monkeypatch.setattr("arrowkafka.cli.cmd_specs", swallowed)
    assert main(["specs"]) == 130
    assert capsys.readouterr().err == "arrowkafka: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    # without an interrupt the same error is not hidden
    monkeypatch.setattr("arrowkafka.cli.cmd_specs", lambda args: int("x"))
    with pytest.raises(ValueError):
        main(["specs"])


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_where_python_cannot_raise_it_is_asked_again(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ctrl-C inside a weakref callback (the import system's module locks have one) or a
    # __del__: Python prints "Exception ignored" and a traceback and loses it; the command
    # must instead stop where the interrupt can be raised, and say only that it was
    class Dropped:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)

    def work(args: object) -> int:
        Dropped()  # (freed at once: the interrupt lands in its __del__)
        time.sleep(5)  # where the interrupt asked again lands
        raise AssertionError("not interrupted")

    monkeypatch.setattr("arrowkafka.cli.cmd_specs", work)
    hook = sys.unraisablehook
    assert main(["specs"]) == 130
    assert capsys.readouterr().err == "arrowkafka: interrupted\n"
    assert sys.unraisablehook is hook  # put back


@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_inside_llvm_waits_until_the_stack_leaves_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # code that llvmlite's bindings run (a compile callback) must not see the KeyboardInterrupt,
    # which it would swallow; the code after it must
    inside = {"done": False}
    source = (
        "def callback(kill):\n"
        "    kill()\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 0.3:\n"
        "        pass\n"
    )
    scope: dict[str, Any] = {"time": time}
    exec(compile(source, os.path.join("site-packages", "llvmlite", "binding", "ffi.py"), "exec"), scope)

    def run(args: object) -> int:
        scope["callback"](lambda: os.kill(os.getpid(), signal.SIGINT))
        inside["done"] = True  # the callback ran to its end
        time.sleep(5)
        return 0

    monkeypatch.setattr("arrowkafka.cli.cmd_specs", run)
    started = time.monotonic()
    assert main(["specs"]) == 130
    assert inside["done"] and time.monotonic() - started < 4
    assert capsys.readouterr().err == "arrowkafka: interrupted\n"


def test_the_command_starts_before_its_heavy_imports() -> None:
    """The entry point imports neither the spec loader nor pyarrow nor Numba: those load inside
    ``main``, whose handling of Ctrl-C then covers them (one line, status 130)."""
    heavy = "('arrowkafka.api', 'pyarrow', 'numba')"
    code = f"import sys, arrowkafka.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_the_sample_hint_runs_as_printed(tmp_path: Path) -> None:
    proc = _run("sample", "-o", str(tmp_path / "sample dir"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    hint = proc.stdout.rstrip().splitlines()[-1].strip()
    ran = subprocess.run(
        hint, shell=True, capture_output=True, text=True, cwd="/", env={"PATH": "/usr/bin:/bin"}
    )
    assert ran.returncode == 0, ran.stderr
    assert "p50_ms" in ran.stdout and "16" in ran.stdout  # a row per Fetch version in the sample
    again = _run(
        "sample", "-o", str(tmp_path / "sample dir"), cwd=tmp_path
    )  # the README's command, run twice
    assert again.returncode == 0, again.stderr


@pytest.mark.slow
def test_the_sample_segments_and_their_hint(tmp_path: Path) -> None:
    """``sample --segments``: the bundled log dir of a real Kafka 0.9.0.1 broker (a topic per
    codec it has, 30 records each, and a group's committed offset) into tables, and the query
    it prints runs as printed. (Held to Kafka's DumpLogSegments in test_kafka09_segments.)"""
    proc = _run("sample", "--segments", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "arrowkafka-sample-segments"
    batches = pq.read_table(out / "record_batches.parquet").to_pylist()
    assert {b["topic"]: b["codec"] for b in batches if b["topic"] != "__consumer_offsets"} == {
        f"orders-{c}": c for c in ("none", "gzip", "snappy", "lz4")
    }
    records = pq.read_table(out / "records.parquet").to_pylist()
    for codec in ("none", "gzip", "snappy", "lz4"):
        mine = [r for r in records if r["topic"] == f"orders-{codec}"]
        assert [r["record_offset"] for r in mine] == list(range(30))
        assert mine[7]["value"] == f'{{"order": 7, "codec": "{codec}", "items": 4}}'.encode()
        assert [r["key"] for r in mine[:2]] == [None, b"customer-1"]
    commit = pq.read_table(out / "consumer_offsets.OffsetCommit.parquet").to_pylist()
    assert [(c["key"]["group"], c["key"]["topic"], c["value"]["offset"]) for c in commit] == [
        ("billing", "orders-gzip", 30)
    ]
    hint = proc.stdout.rstrip().splitlines()[-1].strip()
    ran = subprocess.run(
        hint, shell=True, capture_output=True, text=True, cwd="/", env={"PATH": "/usr/bin:/bin"}
    )
    assert ran.returncode == 0 and "orders-snappy" in ran.stdout, ran.stderr
    said = "sample --segments takes no --specs or --port (a log dir holds records, not frames)"
    for option in (["--specs", str(tmp_path)], ["--port", "9093"]):  # frames' options: refused, not ignored
        _one_line(_run("sample", "--segments", *option, "-o", str(tmp_path / "x")), said)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_exit_status_says_whether_anything_went_to_rejects(tmp_path: Path) -> None:
    from tests.conftest import SHARED

    clean = _run("decode", str(SHARED / "captures" / "noida_kafka_python.pcap"), "-o", str(tmp_path / "a"))
    assert clean.returncode == 0 and "rejects 0 (all accounted for)" in clean.stdout, clean.stdout
    # a tcpdump killed mid-write: the file ends inside a packet record
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(SAMPLE.read_bytes()[:1000])
    proc = _run("decode", str(cut), "-o", str(tmp_path / "b"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "but a capture file was cut" in proc.stdout and "capture cut: the file ends" in proc.stdout


@pytest.mark.slow
@pytest.mark.jit
def test_the_first_run_on_a_machine_says_it_is_compiling(tmp_path: Path) -> None:
    # an empty Numba cache is a new machine: the pause of the first compile is announced once
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    capture = str(SAMPLE)
    first = _run("decode", capture, "-o", str(tmp_path / "a"), env=env)
    assert "first run here: compiling the decoder's kernels" in first.stderr, first.stderr
    second = _run("decode", capture, "-o", str(tmp_path / "b"), env=env)
    assert second.returncode == first.returncode == 1 and "compiling" not in second.stderr


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _failing_on(n: int, error: BaseException, real: Any) -> Any:
    """``real`` (a writer's method) that raises ``error`` on its ``n``-th call."""
    calls = [0]

    def write(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] == n:
            raise error
        return real(*args, **kw)

    return write


@pytest.mark.parametrize(
    "command", ["segments", pytest.param("decode", marks=pytest.mark.slow)]
)  # fmt: skip
def test_a_full_disk_or_an_interrupt_leaves_no_table(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that fails as it writes (a full disk) or is interrupted leaves the output folder as
    it was: no table holding part of the rows (each would pass for a whole one), and with
    --overwrite the earlier run's tables, not deleted before the new ones are there."""
    import pyarrow.parquet as pq

    from tests.records.batchtools import Rec, build

    if command == "segments":
        logs = tmp_path / "logs" / "orders-0"
        logs.mkdir(parents=True)
        batches = [build(2, 0, [Rec(b"k%d" % i, b"v" * 100, [], 1_700_000_000_000)]) for i in range(300)]
        (logs / "00000000000000000000.log").write_bytes(b"".join(batches))
        argv = ["segments", str(logs)]
    else:
        argv = ["decode", str(SAMPLE)]
    out = tmp_path / "out"
    assert main([*argv, "-o", str(out)]) in (0, 1)
    before = _contents(out)
    assert "records.parquet" in before
    (out / "notes.txt").write_text("mine")
    before["notes.txt"] = b"mine"
    capsys.readouterr()
    full = OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device")
    for error, status in ((full, 2), (KeyboardInterrupt(), 130)):
        with monkeypatch.context() as m:
            m.setattr(pq.ParquetWriter, "write_table", _failing_on(2, error, pq.ParquetWriter.write_table))
            assert main([*argv, "-o", str(out), "--overwrite"]) == status
        err = capsys.readouterr().err
        if status == 2:
            assert err == (
                f"arrowkafka: error: {out}: the tables could not be written: No space left on device "
                "(nothing written, an earlier run's tables kept)\n"
            )
        else:
            assert err == "arrowkafka: interrupted\n"
        assert _contents(out) == before, error  # nothing half-written, nothing deleted, no stage left
    fresh = tmp_path / "fresh"
    with monkeypatch.context() as m:
        m.setattr(pq.ParquetWriter, "write_table", _failing_on(2, full, pq.ParquetWriter.write_table))
        assert main([*argv, "-o", str(fresh)]) == 2
    assert not fresh.exists()  # made for the job, and gone with it
    # the library's own jobs leave no table either, where the command's hidden folder is not
    import arrowkafka as ak
    from arrowkafka.segments import decode_segments
    from arrowkafka.traffic import decode_capture

    for interruption in (full, KeyboardInterrupt()):
        lib = tmp_path / f"library-{type(interruption).__name__}"
        with monkeypatch.context() as m, pytest.raises(type(interruption)):
            m.setattr(
                pq.ParquetWriter, "write_table", _failing_on(2, interruption, pq.ParquetWriter.write_table)
            )
            if command == "segments":
                decode_segments([logs], lib)
            else:
                decode_capture([SAMPLE], lib, ak.load_specs())
        assert list(lib.iterdir()) == [], interruption
    assert main([*argv, "-o", str(out), "--overwrite"]) in (0, 1)  # and a run that ends replaces them
    assert set(_contents(out)) == set(before)


def test_a_capture_named_twice_is_decoded_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As itself and through a link: its frames were decoded twice over, every table doubled."""
    link = tmp_path / "again.pcap"
    link.symlink_to(SAMPLE)
    said = []
    for captures in ([SAMPLE], [SAMPLE, link, SAMPLE]):
        out = tmp_path / f"out-{len(captures)}"
        assert main(["decode", *map(str, captures), "-o", str(out)]) == 1  # the sample's one reject
        said.append(capsys.readouterr().out.replace(str(out), "OUT"))
    assert said[0] == said[1] and "frames in 245 = " in said[0]


def test_the_tables_are_compressed_as_asked(tmp_path: Path) -> None:
    from tests.test_output import codecs_of

    assert (
        main(["decode", str(SAMPLE), "-o", str(tmp_path / "zstd"), "--compression", "zstd"]) == 1
    )  # (one reject)
    assert codecs_of(tmp_path / "zstd") == {"ZSTD"}
    assert main(["decode", str(SAMPLE), "-o", str(tmp_path / "default")]) == 1
    assert codecs_of(tmp_path / "default") == {"SNAPPY"}
    log = tmp_path / "logs" / "orders-0" / "00000000000000000000.log"
    log.parent.mkdir(parents=True)
    records = pq.read_table(tmp_path / "zstd" / "ProduceRequest.parquet").to_pylist()
    log.write_bytes(records[0]["topic_data"][0]["partition_data"][0]["records"])
    assert (
        main(["segments", str(tmp_path / "logs"), "-o", str(tmp_path / "seg"), "--compression", "none"]) == 0
    )
    assert codecs_of(tmp_path / "seg") == {"UNCOMPRESSED"}
