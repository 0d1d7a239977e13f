"""The ``arrowkafka`` command.

``arrowkafka specs``                   lists messages: api key, type, valid and flexible versions
``arrowkafka schema NAME``             prints the Arrow schema of a message (``--version V`` for one)
``arrowkafka decode CAPTURE -o DIR``   captured traffic to one Parquet table per message type
``arrowkafka segments PATH -o DIR``    Kafka log segments (files or log folders) to record tables
``arrowkafka sample``                  ``decode`` on the bundled real capture

Every command takes ``--specs DIR`` (repeatable) to use a spec folder of your own instead of
the vendored specs; a later folder overrides an earlier one by message name.

Exit status (``EXIT`` below): 0 all decoded; 1 done, but some input went to the rejects table
(a frame or batch that did not decode, a capture file cut mid-record);
2 nothing done, a mistake in the command (a bad option, a file that is not there or not a
capture, an output folder that cannot be written or holds an earlier run); 130 interrupted;
141 the reader of the output went away (``arrowkafka specs | head``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from arrowkafka.errors import ArrowKafkaError

if TYPE_CHECKING:
    from arrowkafka.api import SpecSet

__all__ = ["command", "main"]

SAMPLE = "tansu_confluent.pcap"

EXIT = """exit status:
  0    everything decoded (`sample`: the job ran)
  1    done, but some input went to the rejects table (a frame or batch that did not
       decode, a capture file cut mid-record: the summary says what and why)
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


def cmd_decode(args: argparse.Namespace) -> int:
    from arrowkafka.traffic import decode_capture

    for capture in args.captures:  # every capture readable, and a capture, before anything is written
        _check_capture(capture)
    specs = _specs(args)
    _output_folder(Path(args.output), args.overwrite, list(specs))
    bound_heap()
    _say_if_compiling()

    summary = decode_capture(args.captures, args.output, specs, broker_ports=args.port or (9092,),
                             progress=_progress if sys.stderr.isatty() else None,
                             payloads=not getattr(args, "no_payloads", False))  # fmt: skip
    print(summary.render())
    print(f"\nwrote {len(summary.tables)} tables, the record tables and rejects.parquet to {args.output}/")
    clean = summary.rejects == 0 and summary.record_rejects == 0 and summary.frames_in == summary.rows
    return 0 if clean else 1  # a cut capture file is a reject row too


def _check_capture(path: str) -> None:
    """A file that opens and starts as pcap or pcapng does (else a ``UserError`` naming it)."""
    from arrowkafka.traffic.pcap import looks_like_capture

    with open(path, "rb") as f:  # OSError: missing, a folder, not readable
        if not os.path.isfile(path):  # a pipe (``<(zcat x.pcap.gz)``): its bytes read once only
            raise UserError(f"{path}: not a regular file (a capture is read twice: save it to a file)")
        head = f.read(4)
    if not looks_like_capture(head):
        what = "an empty file" if not head else f"it starts with {head.hex()}"
        raise UserError(f"{path}: not a pcap or pcapng capture ({what})")


def _output_folder(out: Path, overwrite: bool, messages: Sequence[str] = ()) -> None:
    """The output folder: made if missing. One holding an earlier run's tables (ours: named
    after a message, ``rejects``, a record table or an internal topic's table) is refused unless
    ``--overwrite``, which deletes those tables and nothing else, so no earlier table is left
    beside the new ones."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder")
    from arrowkafka.segments import INTERNAL_TABLES, segment_schemas

    names = {*messages, *segment_schemas()}  # rejects and the record tables, as a capture job's
    earlier = (
        sorted(p for p in out.glob("*.parquet") if p.stem in names or p.stem.startswith(INTERNAL_TABLES))
        if out.is_dir()
        else []
    )
    if folders := [p for p in earlier if not p.is_file()]:  # Spark writes a table as a folder of parts
        raise UserError(
            f"{folders[0]}: a folder where a table goes (a Spark job's output?); choose another folder"
        )
    if earlier and not overwrite:
        raise UserError(
            f"{out}: holds {len(earlier)} tables of an earlier run; "
            "choose another folder, or --overwrite to replace them"
        )
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    if not os.access(out, os.W_OK | os.X_OK):
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise UserError(f"{out}: cannot write in this folder")
    for table in earlier:
        table.unlink()


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


def cmd_segments(args: argparse.Namespace) -> int:
    from arrowkafka.segments import decode_segments, segment_files

    if not segment_files(args.paths):  # every path readable before anything is written
        raise UserError("no *.log segment files in " + ", ".join(args.paths))
    _output_folder(Path(args.output), args.overwrite)
    summary = decode_segments(args.paths, args.output, payloads=not args.no_payloads,
                              progress=_progress if sys.stderr.isatty() else None)  # fmt: skip
    print(summary.render())
    print(f"\nwrote record_batches, records, record_markers and rejects to {args.output}/")
    return 0 if summary.rejects == 0 else 1


def cmd_sample(args: argparse.Namespace) -> int:
    from importlib.resources import files

    capture = str(files("arrowkafka.data").joinpath(SAMPLE))
    print(f"decoding the bundled sample {SAMPLE} (librdkafka 2.16 and a Tansu broker, 245 frames)\n")
    args.captures = [capture]
    cmd_decode(args)  # its one reject is a known peer oddity: the sample ran, status 0
    table = str(Path(args.output, "FetchResponse.parquet").resolve()).replace("'", "''")
    query = f"SELECT _version, count(*) AS n, median(_latency_ns) / 1e6 AS p50_ms FROM '{table}' GROUP BY ALL"
    code = f"import duckdb; duckdb.sql({query!r}).show()"
    print("\nquery it, e.g. with DuckDB (installed by the test extra), as shown from any folder:")
    print(f"  {shlex.quote(sys.executable)} -c {shlex.quote(code)}")
    return 0


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
                   help="leave record keys and values out of records.parquet (their sizes stay)")  # fmt: skip
    p.set_defaults(run=cmd_decode)

    p = command("segments", "decode Kafka log segments (*.log files or log folders) to Parquet", [output])
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="segment files, partition folders or whole log dirs"
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder (made if missing)")
    p.add_argument("--no-payloads", action="store_true",
                   help="leave record keys and values out of records.parquet (their sizes stay)")  # fmt: skip
    p.set_defaults(run=cmd_segments)

    p = command("sample", "run the main job on the bundled capture", [common])
    p.add_argument("-o", "--output", default="arrowkafka-sample", metavar="DIR",
                   help="output folder (default: %(default)s; replaces an earlier run)")  # fmt: skip
    p.add_argument("--port", type=_port, action="append", help=argparse.SUPPRESS)
    p.set_defaults(run=cmd_sample, overwrite=True)
    return parser


def bound_heap() -> None:
    """Fix glibc's mmap threshold at 4 MB: blocks that large come from the system and go back
    to it at once; smaller ones from the heap, whose freed memory the next chunk reuses. Left
    to itself glibc raises the threshold as large blocks are freed, after which each chunk's
    arrays come from a heap that fragments, and the process's memory grows with the capture
    though nothing is kept. A lower threshold keeps memory as flat but maps every mid-sized
    array afresh, and each fresh page costs a fault on its first write. And the heap keeps up
    to 64 MB freed at its top (glibc's default is 128 KB): each chunk's mid-sized arrays would
    otherwise fault in pages the last chunk gave back. Process-wide settings, so the CLI makes
    them, not the library (the figures behind them: ``bench/scale.py``)."""
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


def command() -> None:
    """The installed ``arrowkafka`` command (and ``python -m arrowkafka``): ``main`` for this
    process, which leaves at once when interrupted."""
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
        self.seen, self.leave = False, leave
        self.again: threading.Timer | None = None

    @classmethod
    def install(cls, leave: bool) -> _Interrupt:
        it = cls(leave)
        # only where Python's own handler is on (not in a thread, not where SIGINT is ignored)
        if threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                it.previous = signal.signal(signal.SIGINT, it._on_sigint)
        return it

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if _in_llvm(frame):
            # a KeyboardInterrupt raised in a callback from LLVM (Numba's compiler) is swallowed
            # there and the job goes on: ask again once the stack has left it
            self.again = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
            self.again.daemon = True
            self.again.start()
            return
        raise KeyboardInterrupt

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


def _reader_gone() -> int:
    """The pipe's reader closed it (``| head``): stop quietly. What is still buffered for stdout
    goes to /dev/null, else Python's exit would flush it and report the broken pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":  # pragma: no cover
    command()
