"""The ``arrowkafka`` command.

``arrowkafka specs``                   lists messages: api key, type, valid and flexible versions
``arrowkafka schema NAME``             prints the Arrow schema of a message (``--version V`` for one)
``arrowkafka decode CAPTURE -o DIR``   captured traffic to one Parquet table per message type
``arrowkafka segments PATH -o DIR``    Kafka log segments (files or log folders) to record tables
``arrowkafka sample``                  ``decode`` on the bundled real capture

Every command takes ``--specs DIR`` (repeatable) to use a spec folder of your own instead of
the vendored specs; a later folder overrides an earlier one by message name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from arrowkafka.api import SpecSet, load_specs
from arrowkafka.errors import ArrowKafkaError

__all__ = ["main"]

SAMPLE = "tansu_confluent.pcap"


def _specs(args: argparse.Namespace) -> SpecSet:
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

    for capture in args.captures:  # every capture readable before anything is written
        with open(capture, "rb"):
            pass

    bound_heap()

    summary = decode_capture(args.captures, args.output, _specs(args), broker_ports=args.port or (9092,),
                             progress=_progress if sys.stderr.isatty() else None,
                             payloads=not getattr(args, "no_payloads", False))  # fmt: skip
    print(summary.render())
    print(f"\nwrote {len(summary.tables)} tables, the record tables and _rejects.parquet to {args.output}/")
    return 0 if summary.frames_in == summary.rows + summary.rejects else 1


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
        print("arrowkafka: error: no *.log segment files in " + ", ".join(args.paths), file=sys.stderr)
        return 2
    summary = decode_segments(args.paths, args.output, payloads=not args.no_payloads,
                              progress=_progress if sys.stderr.isatty() else None)  # fmt: skip
    print(summary.render())
    print(f"\nwrote _record_batches, _records, _record_markers and _rejects to {args.output}/")
    return 0 if summary.rejects == 0 else 1


def cmd_sample(args: argparse.Namespace) -> int:
    from importlib.resources import files

    capture = str(files("arrowkafka.data").joinpath(SAMPLE))
    print(f"decoding the bundled sample {SAMPLE} (librdkafka 2.16 and a Tansu broker, 245 frames)\n")
    args.captures = [capture]
    status = cmd_decode(args)
    query = (
        f"SELECT _version, count(*) AS n, median(_latency_ns) / 1e6 AS p50_ms "
        f"FROM '{args.output}/FetchResponse.parquet' GROUP BY ALL"
    )
    print("\nquery it, e.g. with DuckDB (installed by the test extra):")
    print(f'  python -c "import duckdb; duckdb.sql(\\"{query}\\").show()"')
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arrowkafka", description=__doc__.split("\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--specs",
        action="append",
        default=[],
        metavar="DIR",
        help="spec folder to load instead of the vendored specs (repeatable; later wins)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("specs", parents=[common], help="list message specs")
    p.add_argument("--type", choices=["request", "response", "header", "data", "metadata"])
    p.set_defaults(run=cmd_specs)

    p = sub.add_parser("schema", parents=[common], help="print a message's Arrow schema")
    p.add_argument("name", help="message name, e.g. FetchRequest")
    p.add_argument("--version", type=int, help="one version (default: the all-versions schema)")
    p.add_argument("--metadata", action="store_true", help="also print the kafka.* field metadata")
    p.set_defaults(run=cmd_schema)

    p = sub.add_parser("decode", parents=[common], help="decode captures (pcap, pcapng) to Parquet")
    p.add_argument("captures", nargs="+", help="capture files")
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.add_argument("--port", type=int, action="append", help="broker port (repeatable; default 9092)")
    p.add_argument("--no-payloads", action="store_true",
                   help="leave record keys and values out of _records (their sizes stay)")  # fmt: skip
    p.set_defaults(run=cmd_decode)

    p = sub.add_parser("segments", help="decode Kafka log segments (*.log files or log folders) to Parquet")
    p.add_argument("paths", nargs="+", help="segment files, partition folders or whole log dirs")
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.add_argument("--no-payloads", action="store_true",
                   help="leave record keys and values out of _records (their sizes stay)")  # fmt: skip
    p.set_defaults(run=cmd_segments)

    p = sub.add_parser("sample", parents=[common], help="run the main job on the bundled capture")
    p.add_argument("-o", "--output", default="arrowkafka-sample", help="output folder (default: %(default)s)")
    p.add_argument("--port", type=int, action="append", help=argparse.SUPPRESS)
    p.set_defaults(run=cmd_sample)
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (ArrowKafkaError, KeyError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        print(f"arrowkafka: error: {message}", file=sys.stderr)
        return 2
    except OSError as e:  # a path the user gave: missing, a folder, not readable or writable
        where = f"{e.filename}: " if e.filename else ""
        print(f"arrowkafka: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
