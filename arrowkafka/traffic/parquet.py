"""The main job: captures to ``<Message>.parquet`` per message type and ``rejects.parquet``,
a chunk at a time (``pairing.row_chunks`` then ``decode.decode_rows``), each chunk's rows
appended as row groups, so memory is bounded by the chunk whatever the capture's size."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from arrowkafka.api import SpecSet
from arrowkafka.records.tables import CONTROL_TABLES
from arrowkafka.schema import portable_table
from arrowkafka.traffic.chunks import CHUNK_BYTES
from arrowkafka.traffic.columns import REJECT_SCHEMA
from arrowkafka.traffic.decode import decode_rows
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
# writers keep in memory until they close.
HELD_BYTES = 64 << 20


def decode_capture(
    captures: Sequence[str | Path | BinaryIO],
    outdir: str | Path | None,
    specs: SpecSet,
    *,
    broker_ports: Iterable[int] = (9092,),
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[str, int, int | None], None] | None = None,
    payloads: bool = True,
) -> Summary:
    """Decode captures into Parquet tables under ``outdir`` (nothing written if None): a chunk
    at a time, each chunk's rows appended to the tables as a row group, so memory is bounded
    by the chunk whatever the capture's size. ``progress``: see ``frame_chunks``.

    The records of Produce requests and Fetch responses also go to ``record_batches``,
    ``records`` and ``record_markers`` (``traffic.records``). ``payloads=False`` leaves record
    bytes out of everything written: keys and values (their sizes stay), the message tables'
    ``records`` fields, and the raw bytes of rejects."""
    summary = Summary()
    out = None if outdir is None else Path(outdir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    writers: dict[str, pq.ParquetWriter] = {}
    made: list[Path] = []  # tables written empty
    held: dict[str, list[pa.Table]] = defaultdict(list)  # rows not written yet, per message
    held_bytes = 0
    # per capture, topic id -> name: what its Metadata responses said so far (one capture's
    # names never name another's topics, as in the Spark job)
    names_of: dict[str, dict[bytes, str]] = defaultdict(dict)

    def write(message: str, schema: pa.Schema) -> None:
        # few, large row groups: each costs metadata kept in memory until the file is closed
        if out is not None and held[message]:
            table = portable_table(pa.concat_tables(held[message]))  # types every reader takes
            if message not in writers:
                writers[message] = pq.ParquetWriter(
                    out / f"{message}.parquet", table.schema, **_writer_options(table.schema)
                )
            writers[message].write_table(table)
        held[message] = []

    try:
        chunks = row_chunks(captures, specs, broker_ports, summary, chunk_bytes, progress)
        for headers, rows, rejects in chunks:
            tables, bad = decode_rows(headers, rows, specs, summary)
            if not payloads:  # frames that did not decode may hold records
                rejects = rejects_without_payloads(rejects)
                bad = [rejects_without_payloads(b) for b in bad]
            held["rejects"] += [rejects, *bad]
            topic_names = names_of[headers.capture]
            learn_topic_names(tables, topic_names)
            for message, parts in tables.items():
                tables[message] = [name_topics(t, specs, message, topic_names) for t in parts]
            for message in [m for m in tables if m in SOURCES]:  # in the tables' order: reproducible
                for part in tables[message]:
                    rt = records_of(
                        part, message, summary.record_batches, payloads, headers.capture, topic_names
                    )
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
            if not payloads:  # the record batches in the message tables hold keys and values
                tables = {m: [without_payloads(t) for t in parts] for m, parts in tables.items()}
            for message, parts in tables.items():
                summary.tables[message] = summary.tables.get(message, 0) + sum(t.num_rows for t in parts)
                held[message] += parts
            held_bytes += len(rows.a.data)
            if held_bytes >= HELD_BYTES:
                for message, parts in list(held.items()):
                    if parts:
                        write(message, parts[0].schema)
                held_bytes = 0
        for message, parts in list(held.items()):
            if parts:
                write(message, parts[0].schema)
        if out is not None:
            empty = {"rejects": REJECT_SCHEMA, **record_schemas(payloads)}
            for name, schema in empty.items():
                if name not in writers:
                    made.append(out / f"{name}.parquet")
                    pq.write_table(portable_table(schema.empty_table()), made[-1])
        for w in writers.values():
            w.close()
    except BaseException:  # an interrupt too: the tables go (each would pass for a whole one)
        for w in writers.values():
            with contextlib.suppress(Exception):
                w.close()
        for table in [*(out / f"{m}.parquet" for m in writers), *made] if out is not None else []:
            with contextlib.suppress(OSError):
                table.unlink()
        raise
    return summary


def _writer_options(schema: pa.Schema) -> dict[str, Any]:
    """How a table is written: dictionaries for its strings and binaries only; statistics for
    its top-level columns only (what readers skip row groups by: times, ids, versions); values
    handed to the encoders 64K at a time, not 1K."""
    return {
        "use_dictionary": _byte_array_columns(schema),
        "write_statistics": [f.name for f in schema if not pa.types.is_nested(f.type)],
        "write_batch_size": 1 << 16,
    }


# binary leaves that hold data, not names: no dictionary (``records`` fields, record keys,
# values and header values; unknown tags' values, which rarely repeat either)
PAYLOADS = {"records", "key", "value"}


def _byte_array_columns(schema: pa.Schema) -> list[str]:
    """The Parquet paths of the string and binary leaves of ``schema``: the columns worth a
    dictionary (hosts, topics, client ids repeat). Numbers are written plain: dictionaries for
    every leaf of the nested tables cost more writing time than they save in size. So are
    payloads (``records`` fields, record keys, values and header values): they rarely repeat,
    and trying a dictionary on them took a tenth of a bulk capture's time, for the same size."""
    out: list[str] = []

    def walk(path: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{path}.{f.name}", f.type)
        elif pa.types.is_map(t):
            walk(f"{path}.key_value.key", t.key_type)
            walk(f"{path}.key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{path}.list.element", t.value_type)
        elif pa.types.is_string(t) or (pa.types.is_binary(t) and path.rsplit(".", 1)[-1] not in PAYLOADS):
            out.append(path)

    for f in schema:
        walk(f.name, f.type)
    return out
