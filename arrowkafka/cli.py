"""The ``arrowkafka`` command.

``arrowkafka specs``                   lists messages: api key, type, valid and flexible versions
``arrowkafka schema NAME``             prints the Arrow schema of a message (``--version V`` for one)
``arrowkafka decode CAPTURE -o DIR``   captured traffic to one Parquet table per message type
``arrowkafka segments PATH -o DIR``    Kafka log segments (files or log folders) to record tables
``arrowkafka sample``                  ``decode`` on the bundled real capture (``--segments``: ``segments``
                                        on the bundled log dir of a real broker)
``arrowkafka compat OLD NEW``          every change between two spec sets, each compatible or not
``arrowkafka what-if CAPTURE --specs D``  captured messages re-encoded under proposed specs, measured
``arrowkafka report DIR``              one self-contained HTML report of a folder ``decode`` wrote

The commands that read specs take ``--specs DIR`` (repeatable) to use a spec folder of your
own instead of the vendored specs; a later folder overrides an earlier one by message name.
Not so ``compat``, which takes its two spec sets as arguments, nor ``what-if``, whose
``--specs`` is the proposal, laid over the specs the traffic was sent with (``--sent-with``,
default the vendored ones).

Exit status (``EXIT`` below): 0 all decoded; 1 done, but some input went to the rejects table
(a frame or batch that did not decode, a capture file cut mid-record);
2 nothing done, a mistake in the command (a bad option, a file that is not there or not a
capture, an output folder that cannot be written or holds an earlier run); 130 interrupted;
141 the reader of the output went away (``arrowkafka specs | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.abc
import os
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from arrowkafka.errors import ArrowKafkaError

if TYPE_CHECKING:
    from arrowkafka.api import SpecSet

__all__ = ["command", "main"]

SAMPLE = "tansu_confluent.pcap"
SAMPLE_SEGMENTS = "segments"  # a Kafka 0.9.0.1 broker's log dir (data/README.md)

EXIT = """exit status:
  0    everything decoded (`sample`: the job ran; its capture holds one known reject)
  1    done, but some input went to the rejects table (a frame or batch that did not
       decode, a capture file cut mid-record: the summary says what and why; `segments`:
       or bytes after damage in which no batch was found, left unread); or with
       `decode --report`, the tables were written but the report failed (said on stderr)
  2    nothing done: a mistake in the command (a bad option, a path that is missing or not
       a capture, an output folder that cannot be written or holds an earlier run)
  130  interrupted
  141  the reader of the output went away (e.g. `arrowkafka specs | head`)"""


class UserError(Exception):
    """A mistake in the command: one line on stderr, exit status 2, nothing written."""


def _specs(args: argparse.Namespace) -> SpecSet:
    # imported here, inside main's handling of Ctrl-C (see ``main``)
    from arrowkafka.api import load_specs

    return load_specs(*args.specs)


def cmd_specs(args: argparse.Namespace) -> int:
    specs = _specs(args)
    rows = [("message", "api key", "type", "valid", "flexible")]
    for spec in specs.values():
        if args.type and spec.type != args.type:
            continue
        key = "" if spec.api_key is None else str(spec.api_key)
        rows.append((spec.name, key, spec.type, str(spec.valid_versions), str(spec.flexible_versions)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(f"\n{len(rows) - 1} messages, {sum(len(specs[r[0]].valid_versions) for r in rows[1:])} versions")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    schema = _specs(args).arrow_schema(args.name, args.version)
    print(schema.to_string(show_field_metadata=args.metadata, show_schema_metadata=args.metadata))
    return 0


def cmd_decode(args: argparse.Namespace, *, banner: str = "") -> int:
    """``banner``: said once the command is checked, just before the decoding (``sample``'s)."""
    from arrowkafka.traffic import decode_capture
    from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS

    # each capture once, however often named (its frames would be decoded twice over)
    args.captures = list({os.path.realpath(c): c for c in args.captures}.values())
    for capture in args.captures:  # every capture readable, and a capture, before anything is written
        _check_capture(capture)
    specs = _specs(args)
    bound_heap()
    earlier, made = _output_folder(Path(args.output), args.overwrite, list(specs))
    with _staged(Path(args.output), earlier, made) as stage:  # (the folder goes if the job does)
        if banner:
            print(banner)
        _say_if_compiling()
        summary = decode_capture(args.captures, stage, specs, broker_ports=args.port or DEFAULT_BROKER_PORTS,
                                 progress=_progress if sys.stderr.isatty() else None,
                                 payloads=not getattr(args, "no_payloads", False),
                                 compression=getattr(args, "compression", "snappy"))  # fmt: skip
    print(summary.render())
    control = f", {len(summary.control)} of KRaft control records" if summary.control else ""
    tables = f"{len(summary.tables)} tables, the record tables{control} and rejects.parquet"
    print(f"\nwrote {tables} to {args.output}/")
    if getattr(args, "report", False):
        try:
            _write_report(args.output, None)
        except Exception as e:  # the tables are written: say so (not status 2, "nothing written")
            why = str(e) if isinstance(e, ArrowKafkaError) else f"{type(e).__name__}: {e}"
            print(f"arrowkafka: error: the tables were written to {args.output}/; the report failed: {why}",
                  file=sys.stderr)  # fmt: skip
            return 1
    clean = summary.rejects == 0 and summary.record_rejects == 0 and summary.frames_in == summary.rows
    return 0 if clean else 1  # a cut capture file is a reject row too


def _check_capture(path: str) -> None:
    """A file that opens and starts as pcap or pcapng does (else a ``UserError`` naming it)."""
    from arrowkafka.traffic.pcap import looks_like_capture

    mode = os.stat(path).st_mode  # OSError: missing
    # a pipe (``<(zcat x.pcap.gz)``): its bytes read once only, and opening one with no writer
    # waits for ever; a folder: the open below says so
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UserError(f"{path}: not a regular file (a capture is read twice: save it to a file)")
    with open(path, "rb") as f:  # OSError: a folder, not readable
        head = f.read(4)
    if not looks_like_capture(head):
        what = "an empty file" if not head else f"it starts with {head.hex()}"
        raise UserError(f"{path}: not a pcap or pcapng capture ({what})")


def _output_folder(out: Path, overwrite: bool, messages: Sequence[str] = ()) -> tuple[list[Path], list[Path]]:
    """The output folder: made if missing. One holding an earlier run's tables (ours: named
    after a message, ``rejects``, a record table, an internal topic's or KRaft control
    records' table) is refused unless ``--overwrite``; those tables are returned, for
    ``_staged`` to delete (and nothing else) once the new ones are written, so no earlier
    table is left beside the new ones; and the folders made here, deepest first, for
    ``_staged`` to remove if the job fails."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    from arrowkafka.output import earlier_tables
    from arrowkafka.segments import job_tables

    earlier = earlier_tables(out, *job_tables(messages))
    if folders := [p for p in earlier if not p.is_file()]:  # Spark writes a table as a folder of parts
        raise UserError(
            f"{folders[0]}: a folder where a table goes (a Spark job's output?); choose another folder"
        )
    if earlier and not overwrite:
        raise UserError(
            f"{out}: holds {len(earlier)} tables of an earlier run; "
            "choose another folder, or --overwrite to replace them"
        )
    made: list[Path] = []
    try:
        _make_folder(out, made)
    except OSError as e:
        _unmake(made)
        raise UserError(f"{out}: cannot make this folder ({e.strerror or e})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        _unmake(made)
        raise UserError(f"{out}: cannot write in this folder")
    return earlier, made


def _make_folder(out: Path, made: list[Path]) -> None:
    """``out`` and its missing parents, made one at a time as the system walks the path
    (``..`` included), each folder this call made put first in ``made``: only those are ever
    removed again, never one that was there."""
    parts = out.parts
    for i in range(len(parts)):
        folder = Path(*parts[: i + 1])
        try:
            os.mkdir(folder)
        except FileExistsError:
            continue  # (not a folder: the next mkdir says so)
        made.insert(0, folder)


def _unmake(made: list[Path]) -> None:
    """Remove the folders a job made (deepest first), each where it is still empty."""
    for folder in made:
        with contextlib.suppress(OSError):
            folder.rmdir()


# the errors of a disk that cannot take the tables (not of a capture or segment being read)
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


@contextlib.contextmanager
def _staged(out: Path, earlier: list[Path], made: list[Path]) -> Iterator[Path]:
    """A hidden folder inside ``out`` for a job to write its tables into, moved into ``out``
    when the job is done: a job that fails or is interrupted leaves no table that passes for a
    whole one, and an earlier run's tables (``--overwrite``) stay until the new ones are there;
    the folders made for it (``made``) go again."""
    done = False
    try:
        try:
            stage = Path(tempfile.mkdtemp(prefix=".arrowkafka-writing-", dir=out))
        except OSError as e:  # (a folder that says it can be written, and cannot: /proc)
            raise UserError(f"{out}: cannot write in this folder ({e.strerror or e})") from None
        try:
            yield stage
            for table in earlier:
                table.unlink()
            for table in sorted(stage.iterdir()):
                os.replace(table, out / table.name)  # one folder, one file system: each move whole
            done = True
        except OSError as e:
            if e.errno in DISK_FULL and e.filename is None:  # (Parquet's writer names no file)
                kept = ", an earlier run's tables kept" if earlier else ""
                raise UserError(f"{out}: the tables could not be written: {os.strerror(e.errno)} "
                                f"(nothing written{kept})") from e  # fmt: skip
            raise
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    finally:
        if not done:
            _unmake(made)


def _say_if_compiling() -> None:
    """Numba compiles the kernels a capture job needs the first time they run on a machine,
    and caches them on disk: a pause of 10-40 s that would otherwise pass in silence. Said on
    stderr when a kernel's cache index is missing (a heuristic: a stale index recompiles too)."""
    from arrowkafka.kernels import capture, decode, records

    indexes = [
        getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)
        for k in (decode.run, capture.parse_packets, records.walk_records)
    ]
    if None in indexes:  # the JIT is off (NUMBA_DISABLE_JIT), or Numba keeps its cache otherwise
        return
    if not all(os.path.exists(str(i)) for i in indexes):
        print("arrowkafka: first run here: compiling the decoder's kernels (once; 10-40 s)", file=sys.stderr)


def _progress(capture: str, done: int, size: int | None) -> None:
    """One line on the terminal, rewritten after each chunk: how far into which capture."""
    name = capture.rsplit("/", 1)[-1]
    if size:
        width = 30
        fill = width * done // size
        sys.stderr.write(f"\r{name} [{'#' * fill}{'.' * (width - fill)}] {done >> 20}/{size >> 20} MiB")
        if done >= size:
            sys.stderr.write("\n")
    else:
        sys.stderr.write(f"\r{name} {done >> 20} MiB")
    sys.stderr.flush()


def cmd_segments(args: argparse.Namespace, *, banner: str = "") -> int:
    """``banner``: as ``cmd_decode``'s."""
    from arrowkafka.segments import decode_segments, segment_files

    files = segment_files(args.paths)  # every path readable, and a folder with segments, first
    # (the files found now: the output folder, made next, may lie under an input folder)
    earlier, made = _output_folder(Path(args.output), args.overwrite)
    with _staged(Path(args.output), earlier, made) as stage:
        if banner:
            print(banner)
        compression = getattr(args, "compression", "snappy")  # (sample has no --compression)
        summary = decode_segments(files, stage, payloads=not args.no_payloads, compression=compression,
                                  progress=_progress if sys.stderr.isatty() else None)  # fmt: skip
    print(summary.render())
    typed = f", {len(summary.tables)} typed tables" if summary.tables else ""  # (named in the summary)
    print(f"\nwrote record_batches, records, record_markers{typed} and rejects to {args.output}/")
    return 0 if summary.rejects == 0 and not summary.unread else 1  # (bytes not read: not all done)


REPORT_EXIT = """exit status:
  0    the report is written (its path printed)
  2    nothing written: a folder that is missing or not one `arrowkafka decode` wrote, or a
       report file that cannot be written, said in one line
  130  interrupted"""


def cmd_report(args: argparse.Namespace) -> int:
    _write_report(args.folder, args.output)
    return 0


def _write_report(folder: str, output: str | None) -> None:
    import pyarrow as pa

    from arrowkafka.report import build_report

    # Arrow's default pool (mimalloc) keeps what the report's scans free on each thread: jemalloc
    # (or the system's allocator) gives it back, a third of the peak on a 1 GB capture's report
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.system_memory_pool())
    path = build_report(folder, output)  # a ReportError: one line, status 2
    print(f"wrote the report to {path}")


def cmd_sample(args: argparse.Namespace) -> int:
    from importlib.resources import files

    data = files("arrowkafka.data")
    if args.segments and (getattr(args, "specs", None) or args.port):
        raise UserError("sample --segments takes no --specs or --port (a log dir holds records, not frames)")
    if args.segments:
        args.output = args.output or "arrowkafka-sample-segments"
        args.paths, args.no_payloads = [str(data.joinpath(SAMPLE_SEGMENTS))], False
        banner = (
            "reading the bundled log dir of a Kafka 0.9.0.1 broker (a topic per codec, __consumer_offsets)\n"
        )
        status = cmd_segments(args, banner=banner)
        table = str(Path(args.output, "records.parquet").resolve()).replace("'", "''")
        query = (
            f"SELECT topic, count(*) AS records, sum(value_size) AS value_bytes FROM '{table}' GROUP BY ALL"
        )
    else:
        args.output = args.output or "arrowkafka-sample"
        args.captures = [str(data.joinpath(SAMPLE))]
        banner = f"decoding the bundled sample {SAMPLE} (librdkafka 2.16 and a Tansu broker, 245 frames)\n"
        cmd_decode(args, banner=banner)  # its one reject is a known peer oddity: the sample ran, status 0
        status = 0
        table = str(Path(args.output, "FetchResponse.parquet").resolve()).replace("'", "''")
        query = (
            f"SELECT _version, count(*) AS n, median(_latency_ns) / 1e6 AS p50_ms FROM '{table}' GROUP BY ALL"
        )
    code = f"import duckdb; duckdb.sql({query!r}).show()"
    print("\nquery it, e.g. with DuckDB (installed with arrowkafka), as shown from any folder:")
    print(f"  {shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    return status


COMPAT_EXIT = """exit status:
  0    every change is compatible (or there is none)
  1    at least one incompatible change (each line marked INCOMPATIBLE names its rule)
  2    nothing compared: a side that cannot be read (a missing folder, one without specs,
       a spec the strict loader refuses, an unknown git revision), said in one line"""


def cmd_compat(args: argparse.Namespace) -> int:
    from arrowkafka.evolution.compat import compare
    from arrowkafka.evolution.sources import load_folder_side, load_git_side

    if args.git:
        old, new = load_git_side(args.git, args.old), load_git_side(args.git, args.new)
        labels = (f"{args.git}@{args.old}", f"{args.git}@{args.new}")
    else:
        old, new = load_folder_side(args.old), load_folder_side(args.new)
        labels = (args.old, args.new)
    report = compare(old, new, old_label=labels[0], new_label=labels[1], partial=args.partial)
    only = args.incompatible_only
    print(report.to_json(only_incompatible=only) if args.json else report.render(only_incompatible=only))
    return 0 if report.compatible else 1


WHAT_IF_EXIT = """exit status:
  0    the proposed specs carry every message body that decodes as sent (the capture's own
       damage, bodies the sending specs refuse and frames that are no message body, is
       counted and named in the report, not in the exit status)
  1    done, but the proposed specs cannot carry some bodies (their version gone, a value
       out of range ...): the report counts and names them
  2    nothing done: a mistake in the command (a capture that is missing or not a capture,
       a spec folder that is missing, holds no specs or that the strict loader refuses),
       said in one line"""


def cmd_what_if(args: argparse.Namespace) -> int:
    from arrowkafka.api import load_specs
    from arrowkafka.evolution.sources import load_folder_side
    from arrowkafka.evolution.whatif import what_if_capture, what_if_outdir
    from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS

    if args.repeat < 1:
        raise UserError(f"--repeat {args.repeat}: time each step at least once")
    outdir = len(args.captures) == 1 and os.path.isdir(args.captures[0])
    for capture in [] if outdir else args.captures:
        if os.path.isdir(capture):
            raise UserError(f"{capture}: a folder among captures: give one OUTDIR alone, or capture files")
        _check_capture(capture)
    sides = {folder: load_folder_side(folder) for folder in [*args.sent_with, *args.specs]}  # each has specs
    before = load_specs(*args.sent_with)
    after = load_specs(*(args.sent_with or [_vendored()]), *args.specs)  # the proposal over the sent specs
    for folder in args.specs:
        for name, spec in sides[folder].items():
            if name not in before:
                print(f"arrowkafka: warning: {spec.source}: {name} replaces no spec the traffic was sent "
                      "with: nothing is measured under it", file=sys.stderr)  # fmt: skip
    _say_if_compiling()
    if outdir:
        report = what_if_outdir(args.captures[0], before, after, latest=args.latest, repeat=args.repeat,
                                kernel=args.kernel)  # fmt: skip
    else:
        report = what_if_capture(args.captures, before, after, broker_ports=args.port or DEFAULT_BROKER_PORTS,
                                 latest=args.latest, repeat=args.repeat, kernel=args.kernel)  # fmt: skip
    print(report.to_json() if args.json else report.render())
    return 0 if report.cannot_carry == 0 else 1


def _vendored() -> str:
    from arrowkafka.api import vendored_specs_dir

    return str(vendored_specs_dir())


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"arrowkafka {version('arrowkafka')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "arrowkafka (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arrowkafka",
        description=__doc__.split("\n")[0],
        epilog=EXIT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--specs",
        action="append",
        default=[],
        metavar="DIR",
        help="spec folder to load instead of the vendored specs (repeatable; later wins)",
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the tables (*.parquet) an earlier run left in the output folder",
    )
    output.add_argument(
        "--compression",
        choices=PARQUET_COMPRESSIONS,
        default="snappy",
        help="the Parquet pages' codec (default: %(default)s; zstd: smaller files, slower to write; "
        "gzip: the slowest; none: the largest)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=parents, help=help, description=help[0].upper() + help[1:] + ".",
                              epilog=EXIT, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip

    p = command("specs", "list message specs", [common])
    p.add_argument("--type", choices=["request", "response", "header", "data", "metadata"],
                   help="only messages of this type")  # fmt: skip
    p.set_defaults(run=cmd_specs)

    p = command("schema", "print a message's Arrow schema", [common])
    p.add_argument("name", help="message name, e.g. FetchRequest")
    p.add_argument("--version", type=int, help="one version (default: the all-versions schema)")
    p.add_argument("--metadata", action="store_true", help="also print the kafka.* field metadata")
    p.set_defaults(run=cmd_schema)

    p = command("decode", "decode captures (pcap, pcapng) to Parquet", [common, output])
    p.add_argument("captures", nargs="+", metavar="CAPTURE", help="capture files (pcap or pcapng)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder (made if missing)")
    p.add_argument("--port", type=_port, action="append",
                   help="a broker's TCP port (repeatable; default 9092)")  # fmt: skip
    p.add_argument("--no-payloads", action="store_true",
                   help="leave record bytes out: keys and values (their sizes stay), the message tables' "
                        "records fields, and rejects' raw bytes")  # fmt: skip
    p.add_argument("--report", action="store_true",
                   help="also write the report, OUTDIR/report.html (`arrowkafka report`)")  # fmt: skip
    p.set_defaults(run=cmd_decode)

    p = command("report", "write one self-contained HTML report of a folder `decode` wrote", [])
    p.add_argument("folder", metavar="OUTDIR", help="a folder `arrowkafka decode` wrote")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="the report's file (default: OUTDIR/report.html; replaced if there)")  # fmt: skip
    p.epilog = REPORT_EXIT
    p.set_defaults(run=cmd_report)

    p = command("segments", "decode Kafka log segments (*.log files or log folders) to Parquet", [output])
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="segment files, partition folders or whole log dirs"
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder (made if missing)")
    p.add_argument("--no-payloads", action="store_true",
                   help="leave record keys and values out of records.parquet (their sizes stay), "
                        "and rejected batches' raw bytes")  # fmt: skip
    p.set_defaults(run=cmd_segments)

    p = command("sample", "run the main job on the bundled capture (or segments on the bundled log dir)",
                [common])  # fmt: skip
    p.add_argument("-o", "--output", metavar="DIR",
                   help="output folder (default: arrowkafka-sample, with --segments "
                        "arrowkafka-sample-segments; replaces an earlier run)")  # fmt: skip
    p.add_argument(
        "--segments",
        action="store_true",
        help="run `segments` on the bundled log dir of a real Kafka 0.9.0.1 broker instead",
    )
    p.add_argument("--port", type=_port, action="append", help=argparse.SUPPRESS)
    p.set_defaults(run=cmd_sample, overwrite=True)

    p = command("compat", "list every change between two spec sets, each compatible or not", [])
    p.epilog = COMPAT_EXIT
    p.add_argument("old", metavar="OLD", help="the earlier specs: a folder, or with --git REV or REV:FOLDER")
    p.add_argument("new", metavar="NEW", help="the later specs, the same way")
    p.add_argument("--git", metavar="REPO",
                   help="read OLD and NEW from this git repository, as REV:FOLDER (no checkout)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the changes as JSON")
    p.add_argument("--incompatible-only", action="store_true", help="print only the incompatible changes")
    p.add_argument("--partial", action="store_true",
                   help="NEW holds only some messages: one missing from it is not a removal")  # fmt: skip
    p.set_defaults(run=cmd_compat)

    p = command("what-if", "re-encode captured messages under proposed specs and measure the change", [])
    p.epilog = WHAT_IF_EXIT
    p.add_argument("captures", nargs="+", metavar="CAPTURE_OR_OUTDIR",
                   help="capture files (pcap or pcapng), or one folder `decode` wrote")  # fmt: skip
    p.add_argument("--specs", action="append", required=True, metavar="DIR",
                   help="the proposed specs, over the sent ones by message name (repeatable)")  # fmt: skip
    p.add_argument("--sent-with", action="append", default=[], metavar="DIR",
                   help="the specs the traffic was sent with (default: the vendored specs)")  # fmt: skip
    p.add_argument("--latest", action="store_true",
                   help="write each message in the proposed spec's highest version")  # fmt: skip
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="time each step N times, keep the best")
    p.add_argument("--kernel", choices=["interpreter", "specialised"], default="interpreter",
                   help="the kernel both sides are timed on (specialised: compiled per plan)")  # fmt: skip
    p.add_argument("--port", type=_port, action="append",
                   help="a broker's TCP port (repeatable; default 9092)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    p.set_defaults(run=cmd_what_if)
    return parser


# output.COMPRESSIONS, named here without loading pyarrow (the command starts before its
# heavy imports; a test holds the two equal)
PARQUET_COMPRESSIONS = ("snappy", "zstd", "lz4", "gzip", "none")


def bound_heap() -> None:
    """Fix glibc's mmap threshold at 4 MB: blocks that large come from the system and go back
    to it at once; smaller ones from the heap, whose freed memory the next chunk reuses. Left
    to itself glibc raises the threshold as large blocks are freed, after which each chunk's
    arrays come from a heap that fragments, and the process's memory grows with the capture
    though nothing is kept. A lower threshold keeps memory as flat but maps every mid-sized
    array afresh, and each fresh page costs a fault on its first write. And the heap keeps up
    to 64 MB freed at its top (glibc's default is 128 KB): each chunk's mid-sized arrays would
    otherwise fault in pages the last chunk gave back. Process-wide settings, so the CLI makes
    them, not the library (the figures behind them: ``bench/scale.py``). Arrow's own pool is
    left as it is (the README's Performance section says why)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        if libc is not None and hasattr(libc, "mallopt"):
            libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
    except OSError:
        pass  # not glibc: nothing to do


class _NoPandas(importlib.abc.MetaPathFinder):
    """pandas, for this process, is not installed. pyarrow imports it, where it is installed,
    at its first conversion of a Python value or numpy array (to check for pandas objects):
    0.5-0.7 s and 35 MB of a command that never uses it (``arrowkafka decode`` on the bundled
    sample: 3.7-3.9 -> 3.0-3.1 s; ``report`` 8.6 -> 7.5 s). pyarrow and the report's libraries
    work as they do where pandas is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(
                f"No module named {name!r} (the arrowkafka command uses none)", name=name
            )


def command() -> None:
    """The installed ``arrowkafka`` command (and ``python -m arrowkafka``): ``main`` for this
    process, which leaves at once when interrupted (and has no pandas: ``_NoPandas``)."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
    sys.exit(main(leave_when_interrupted=True))


def main(argv: Sequence[str] | None = None, *, leave_when_interrupted: bool = False) -> int:
    """Run the command line ``argv``; return the exit status (``EXIT``).
    ``leave_when_interrupted``: after Ctrl-C, end the process as soon as it has said so, without
    Python's teardown (Ctrl-C inside a Numba compile leaves LLVM objects that crash when freed)."""
    interrupted = _Interrupt.install(leave_when_interrupted)
    try:
        args = build_parser().parse_args(argv)
        status = int(args.run(args))
        # an interrupt a library swallowed, or one asked again as the job finished
        return interrupted.say() if interrupted.seen else status
    except (ArrowKafkaError, KeyError, UserError) as e:
        if interrupted.seen:
            return interrupted.say()
        message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"arrowkafka: error: {message}", file=sys.stderr)
        return 2
    except OSError as e:  # a path the user gave: missing, a folder, not readable or writable
        if isinstance(e, BrokenPipeError):
            return _reader_gone()
        if interrupted.seen:
            return interrupted.say()
        where = f"{e.filename}: " if e.filename else ""
        print(f"arrowkafka: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted.say()
    except Exception:
        # Ctrl-C can land in a library's callback that swallows the KeyboardInterrupt (Numba's
        # compiler, through ctypes) and then fails otherwise: still an interruption
        if interrupted.seen:
            return interrupted.say()
        raise
    finally:
        interrupted.uninstall()


def _in_llvm(frame: FrameType | None) -> bool:
    """Is Python code on the stack that LLVM's bindings (llvmlite) run, callbacks included?"""
    while frame is not None:
        if f"llvmlite{os.sep}binding" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class _Interrupt:
    """SIGINT raises KeyboardInterrupt as Python's own handler does, and is remembered."""

    def __init__(self, leave: bool) -> None:
        self.previous: object = None
        self.previous_hook: Any = None
        self.seen, self.leave = False, leave
        self.again: threading.Timer | None = None

    @classmethod
    def install(cls, leave: bool) -> _Interrupt:
        it = cls(leave)
        # only where Python's own handler is on (not in a thread, not where SIGINT is ignored)
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                it.previous = signal.signal(signal.SIGINT, it._on_sigint)
                it.previous_hook, sys.unraisablehook = sys.unraisablehook, it._unraisable
        return it

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if _in_llvm(frame):
            # a KeyboardInterrupt raised in a callback from LLVM (Numba's compiler) is swallowed
            # there and the job goes on: ask again once the stack has left it
            self._ask_again()
            return
        raise KeyboardInterrupt

    def _ask_again(self) -> None:
        self.again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        self.again.daemon = True
        self.again.start()

    def _unraisable(self, what: Any) -> None:
        """An interrupt raised where Python cannot pass it on (a weakref callback, as the import
        system's module locks have; a ``__del__``) would be printed as "Exception ignored", a
        traceback, and lost: it is asked again instead, once the stack has left there."""
        if isinstance(what.exc_value, KeyboardInterrupt) and self.seen:
            self._ask_again()
            return
        self.previous_hook(what)

    def say(self) -> int:
        print("arrowkafka: interrupted", file=sys.stderr)
        if self.leave:
            with contextlib.suppress(OSError):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(130)
        return 130

    def uninstall(self) -> None:
        if self.again is not None:
            self.again.cancel()  # not asked again after the handler is gone
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)  # type: ignore[arg-type]
            sys.unraisablehook = self.previous_hook


def _reader_gone() -> int:
    """The pipe's reader closed it (``| head``): stop quietly. What is still buffered for stdout
    goes to /dev/null, else Python's exit would flush it and report the broken pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":  # pragma: no cover
    command()
