"""The main job: captures to ``<Message>.parquet`` per message type and ``rejects.parquet``,
a chunk at a time (``pairing.row_chunks`` then ``decode.decode_rows``), each chunk's rows
appended as row groups, so memory is bounded by the chunk whatever the capture's size."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from arrowkafka.api import SpecSet
from arrowkafka.output import ParquetTables
from arrowkafka.records.tables import CONTROL_TABLES
from arrowkafka.traffic.chunks import CHUNK_BYTES
from arrowkafka.traffic.columns import REJECT_SCHEMA
from arrowkafka.traffic.decode import decode_rows
from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS
from arrowkafka.traffic.pairing import row_chunks
from arrowkafka.traffic.records import (
    SOURCES,
    record_schemas,
    records_of,
    rejects_without_payloads,
    without_payloads,
)
from arrowkafka.traffic.summary import Summary
from arrowkafka.traffic.topic_names import learn_topic_names, name_topics

__all__ = ["decode_capture"]


# Decoded rows held, over all tables, before each table's are written as a row group, counted
# by the bytes of the frames they came from: few, large row groups, whose count is what the
# writers keep in memory until they close. Written in the background (a second core), half
# that, a row group per 32 MB chunk: each chunk's rows are written while the next chunk is
# decoded, and nothing overlaps the last writing, so it had better be short (80 and 240 MB of
# control-plane copies on two cores, 2026-11-29: see bench/results/NOTES.md, Captures to Parquet).
HELD_BYTES = 64 << 20


def decode_capture(
    captures: Sequence[str | Path | BinaryIO],
    outdir: str | Path | None,
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int | None], None] | None = None,
    payloads: bool = True,
    compression: str = "snappy",
    background: bool | None = None,
) -> Summary:
    """Decode captures into Parquet tables under ``outdir`` (nothing written if None): a chunk
    at a time, the rows of every chunk or two (``HELD_BYTES``) appended to the tables as a row
    group, so memory is bounded by the chunk whatever the capture's size. ``progress``: see ``frame_chunks``.

    The records of Produce requests and Fetch responses also go to ``record_batches``,
    ``records`` and ``record_markers`` (``traffic.records``). ``payloads=False`` leaves record
    bytes out of everything written: keys and values (their sizes stay), the message tables'
    ``records`` fields, and the raw bytes of rejects. ``compression``: the Parquet pages'
    codec, one of ``output.COMPRESSIONS``. ``background``: the tables written by a thread of
    their own while the next chunk is decoded (``output.ParquetTables``); None: where the
    process has a second core."""
    summary = Summary()
    out = None if outdir is None else Path(outdir)
    # (a bad codec: refused before the folder)
    written = ParquetTables(out, compression=compression, background=background)
    held_most = HELD_BYTES // 2 if written.background else HELD_BYTES
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    held: dict[str, list[pa.Table]] = defaultdict(list)  # rows not written yet, per message
    schemas: dict[str, pa.Schema] = {}  # every table held: written with no rows if it gets none
    held_bytes = 0
    # per capture, topic id -> name: what its Metadata responses said so far (one capture's
    # names never name another's topics, as in the Spark job)
    names_of: dict[str, dict[bytes, str]] = defaultdict(dict)

    def write(message: str) -> None:
        # few, large row groups: each costs metadata kept in memory until the file is closed
        if held[message]:
            schemas.setdefault(message, held[message][0].schema)
            written.write(message, pa.concat_tables(held[message]))
        held[message] = []

    try:
        chunks = row_chunks(captures, specs, broker_ports, summary, chunk_bytes, progress)
        for headers, rows, rejects in chunks:
            tables, bad = decode_rows(headers, rows, specs, summary)
            if not payloads:  # frames that did not decode may hold records
                rejects = rejects_without_payloads(rejects)
                bad = [rejects_without_payloads(b) for b in bad]
            held["rejects"] += [rejects, *bad]
            for table in (rejects, *bad):
                summary.causes.add_table(table)
            topic_names = names_of[headers.capture]
            learn_topic_names(tables, topic_names)
            for message, parts in tables.items():
                tables[message] = [name_topics(t, specs, message, topic_names) for t in parts]
            for message in [m for m in tables if m in SOURCES]:  # in the tables' order: reproducible
                for part in tables[message]:
                    rt = records_of(
                        part, message, summary.record_batches, payloads, headers.capture, topic_names
                    )
                    if not rt.found:
                        summary.records_not_found.add(message)
                    summary.record_batches += rt.batches.num_rows
                    summary.records += rt.records.num_rows
                    summary.record_rejects += rt.rejects.num_rows
                    held["record_batches"].append(rt.batches)
                    held["records"].append(rt.records)
                    held["record_markers"].append(rt.markers)
                    for name, table in rt.control.items():
                        held[CONTROL_TABLES + name].append(table)
                        summary.control[CONTROL_TABLES + name] = (
                            summary.control.get(CONTROL_TABLES + name, 0) + table.num_rows
                        )
                    held["rejects"].append(rt.rejects)  # (no payloads: decode_records kept no raw bytes)
                    summary.causes.add_table(rt.rejects)
            if not payloads:  # the record batches in the message tables hold keys and values
                tables = {m: [without_payloads(t) for t in parts] for m, parts in tables.items()}
            for message, parts in tables.items():
                summary.tables[message] = summary.tables.get(message, 0) + sum(t.num_rows for t in parts)
                held[message] += parts
            held_bytes += len(rows.a.data)
            if held_bytes >= held_most:
                for message in list(held):
                    write(message)
                written.step()
                held_bytes = 0
        for message in list(held):
            write(message)
        # the rejects and record tables are there even when empty, as is every message table seen
        written.close({"rejects": REJECT_SCHEMA, **record_schemas(payloads), **schemas})
    except BaseException:  # an interrupt too: the tables go (each would pass for a whole one)
        written.abort()
        raise
    return summary
