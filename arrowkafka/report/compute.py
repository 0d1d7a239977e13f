"""The report's streamed numbers, each an Arrow table computed from the Parquet tables
``arrowkafka decode`` writes (``OUTDIR/<Message>.parquet``, ``record_batches``, ``record_markers``,
``rejects``), and the reading they share with the DuckDB modules beside this one.

Every function takes the output folder and returns a ``pa.Table``; one with no rows means the
capture holds nothing for it. Tables are read with ``pyarrow.parquet`` one record batch at a time,
only the columns a number needs (nested fields by their leaf columns: the high watermarks and
error codes of Fetch responses are read without their records). Counts, sums, minima and
maxima are aggregated per batch and the partial results merged, so memory follows the number
of groups: API versions, error codes, topics, partitions, time buckets. What needs a whole table
at once, or groups as many as the connections (joins of requests and responses, orders per key,
quantiles, per connection and per member), is in ``clients``, ``latencies``, ``membership``,
``offsets`` and ``producing``, on DuckDB with its memory capped (``spill``).

Time series cut the capture into buckets of ``Timeline.width_us`` from its first frame
(``timeline``): at most ``MAX_BUCKETS``, each a round width (1 ms, 2 ms, 5 ms, 10 ms ... 1 h).
Each time-series table carries ``bucket`` (0, 1, ...) and ``t`` (the bucket's start, seconds
from the capture's first frame), and its schema metadata says the width.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrowkafka.report.errors import error_name

__all__ = [
    "MAX_BUCKETS",
    "SLOWEST",
    "Timeline",
    "apis",
    "compression",
    "error_fields",
    "errors",
    "errors_over_time",
    "message_tables",
    "not_decode_output",
    "rejects",
    "throughput_by_partition",
    "throughput_by_topic",
    "throughput_over_time",
    "timeline",
]

MAX_BUCKETS = 60
SLOWEST = 20
BATCH_ROWS = 64 * 1024
_STEPS_US = [
    s * m
    for m in (1_000, 1_000_000)  # ms, s
    for s in (1, 2, 5, 10, 20, 50, 100, 200, 500)
    if s * m <= 500_000_000
] + [1_000_000 * s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)]
_STEPS_US = sorted(set(_STEPS_US))
_MESSAGE = re.compile(r"^[A-Z][A-Za-z0-9]*(Request|Response)$")
SIDES = {"ProduceRequest": "produce", "FetchResponse": "fetch", "ShareFetchResponse": "fetch"}
# the classic group protocol, then the heartbeats of KIP-848 consumer groups and KIP-932 share
# groups (one API each: a member joins with epoch 0 and leaves with epoch -1 or -2)
GROUP_APIS = (
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "ConsumerGroupHeartbeat",
    "ShareGroupHeartbeat",
)
EPOCH_APIS = GROUP_APIS[4:]


# ---------------------------------------------------------------------------------------------
# reading


def not_decode_output(outdir: str | Path) -> str | None:
    """Why ``outdir`` is not a folder ``arrowkafka decode`` (or ``arrowkafka.spark``'s
    ``decode_captures``) wrote (None if it is one)."""
    out = Path(outdir)
    if not out.exists():
        return f"{out}: no such folder"
    if not out.is_dir():
        return f"{out}: not a folder"
    if not (out / "rejects.parquet").exists() or not message_tables(out):
        return f"{out}: not a folder `arrowkafka decode` wrote (no rejects.parquet and message tables)"
    return None


def _parts(p: Path) -> list[Path]:
    """A table's Parquet files: the file itself, or the part files of the folder a Spark job
    writes a table as (``part-*.parquet``; ``_SUCCESS`` and hidden files are not parts)."""
    if p.is_file():
        return [p]
    if not p.is_dir():
        return []
    return sorted(f for f in p.glob("*.parquet") if f.is_file() and not f.name.startswith(("_", ".")))


def message_tables(outdir: str | Path) -> dict[str, Path]:
    """The message tables in the folder (files, or Spark's folders of parts): message name -> path."""
    return {p.stem: p for p in sorted(Path(outdir).glob("*.parquet")) if _MESSAGE.match(p.stem) and _parts(p)}


def _path(outdir: str | Path, table: str) -> Path | None:
    p = Path(outdir) / f"{table}.parquet"
    return p if _parts(p) else None


def _schema(p: Path) -> pa.Schema:
    return pq.read_schema(_parts(p)[0])


def _leaves(f: pq.ParquetFile, columns: Sequence[str]) -> list[str]:
    """Parquet column paths for ``columns``: a top-level name as it is, a nested field by its
    path through structs and lists (``responses.partitions.error_code``) as the leaf columns
    under it. Reading leaves leaves out their siblings: a Fetch response's records, say."""
    out = []
    # the paths as the first row group's column chunks name them: asking the file for its
    # Parquet schema (``f.schema``) keeps ~3 MB a file of a 20 GB capture's tables for good
    # (pyarrow 26), and the report opens every table several times
    meta = f.metadata
    if not meta.num_row_groups:
        return []  # (no rows to read)
    first = meta.row_group(0)
    leaves = [first.column(i).path_in_schema for i in range(meta.num_columns)]
    for c in columns:
        if "." not in c:
            out.append(c)
            continue
        for leaf in leaves:
            logical = re.sub(r"\.(list\.(element|item)|key_value)(?=\.|$)", "", leaf)
            if logical == c or logical.startswith(c + "."):
                out.append(leaf)
    return out


def _batches(outdir: str | Path, table: str, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The table's rows, ``columns`` only (nested fields by path: see ``_leaves``), a record
    batch at a time (nothing if the table is missing)."""
    p = _path(outdir, table)
    if p is None:
        return
    # one row group read at a time, on this thread: a dataset scanner's read-ahead and threads
    # cost ~100 MB more at the peak, for tables this narrow; and a reader per row group, since
    # one reader over a whole file keeps what it read (54 MB for two timestamp columns of 5 M
    # rows, pyarrow 26): memory would follow the table, not the row group
    for part in _parts(p):
        try:
            f = pq.ParquetFile(part)
        except (pa.ArrowInvalid, OSError) as e:  # (a file cut or damaged since decode wrote it)
            raise pa.ArrowInvalid(f"{part}: {e}") from None
        with f:
            leaves = _leaves(f, columns)
            for group in range(f.num_row_groups):
                for batch in f.iter_batches(
                    batch_size=BATCH_ROWS, row_groups=[group], columns=leaves, use_threads=False
                ):
                    if batch.num_rows:
                        yield pa.Table.from_batches([batch])


def _us(ts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Timestamps as int64 microseconds (a null as the int64 minimum)."""
    return pc.fill_null(pc.cast(pc.cast(ts, pa.timestamp("us", "UTC")), pa.int64()), -(2**63)).to_numpy()


# ---------------------------------------------------------------------------------------------
# aggregation in bounded memory: per batch, then the partial results merged


_MERGE = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}


def _group(t: pa.Table, keys: list[str], aggs: Sequence[tuple[str, str]], names: Sequence[str]) -> pa.Table:
    """``t`` grouped by ``keys``: the keys, then each (column, function) aggregate named as
    ``names`` says (by name: pyarrow's column order has changed between versions)."""
    g = t.group_by(keys, use_threads=False).aggregate(list(aggs))
    return pa.table([*(g[k] for k in keys), *(g[f"{c}_{f}"] for c, f in aggs)], names=[*keys, *names])


def _aggregate(
    parts: Iterator[pa.Table], keys: list[str], aggs: list[tuple[str, str, str]], empty: pa.Schema
) -> pa.Table:
    """Group ``parts`` by ``keys``: ``aggs`` is (column, function, output name) with a function of
    count, sum, min, max. Each part is grouped on its own and the partials merged."""
    partials = []
    for part in parts:
        partials.append(_group(part, keys, [(c, f) for c, f, _ in aggs], [n for _, _, n in aggs]))
        if len(partials) >= 8:  # merge as we go: memory follows the groups
            partials = [_merge(partials, keys, aggs)]
    if not partials:
        return empty.empty_table()
    return _merge(partials, keys, aggs)


def _merge(partials: list[pa.Table], keys: list[str], aggs: list[tuple[str, str, str]]) -> pa.Table:
    t = pa.concat_tables(partials, promote_options="permissive")
    return _group(t, keys, [(n, _MERGE[f]) for _, f, n in aggs], [n for _, _, n in aggs])


# ---------------------------------------------------------------------------------------------
# time


@dataclass(frozen=True)
class Timeline:
    """The capture's first and last frame times (us since the epoch) and the bucket width."""

    start_us: int
    end_us: int
    width_us: int

    @property
    def seconds(self) -> float:
        return (self.end_us - self.start_us) / 1e6

    def bucket(self, us: np.ndarray) -> np.ndarray:
        return (us - self.start_us) // self.width_us

    def with_t(self, table: pa.Table) -> pa.Table:
        """Add ``t`` (the bucket's start, seconds from the first frame) after ``bucket``, and the
        width as schema metadata."""
        t = pc.divide(pc.multiply(pc.cast(table["bucket"], pa.float64()), float(self.width_us)), 1e6)
        table = table.add_column(table.schema.get_field_index("bucket") + 1, "t", t)
        return table.replace_schema_metadata(
            {"bucket_seconds": str(self.width_us / 1e6), "start_us": str(self.start_us)}
        )


def _width(span_us: int) -> int:
    for step in _STEPS_US:
        if span_us < step * MAX_BUCKETS:
            return step
    return _STEPS_US[-1] * (span_us // (_STEPS_US[-1] * MAX_BUCKETS) + 1)


def _state(outdir: str | Path) -> tuple[tuple[str, int, int], ...]:
    """What the folder's tables are now (path, mtime, size of each file): a cache key."""
    return tuple(
        (str(f.resolve()), f.stat().st_mtime_ns, f.stat().st_size)
        for p in sorted(Path(outdir).glob("*.parquet"))
        for f in _parts(p)
    )


def timeline(outdir: str | Path) -> Timeline:
    """The first and last frame of the capture (every message table's ``_ts_first`` and
    ``_ts_last``) and the width of the time series' buckets. Kept per folder while its tables are
    unchanged (every section needs it)."""
    return _timeline(_state(outdir), str(outdir))


@functools.lru_cache(maxsize=8)
def _timeline(key: tuple[tuple[str, int, int], ...], outdir: str) -> Timeline:
    lo, hi = None, None
    for message in message_tables(outdir):
        for part in _batches(outdir, message, ["_ts_first", "_ts_last"]):
            a, b = pc.min(part["_ts_first"]).value, pc.max(part["_ts_last"]).value
            lo = a if lo is None or a < lo else lo
            hi = b if hi is None or b > hi else hi
    if lo is None or hi is None:
        return Timeline(0, 0, _STEPS_US[0])
    start = int(pa.scalar(lo, pa.timestamp("us", "UTC")).cast(pa.int64()).as_py())
    end = int(pa.scalar(hi, pa.timestamp("us", "UTC")).cast(pa.int64()).as_py())
    return Timeline(start, end, _width(end - start))


# ---------------------------------------------------------------------------------------------
# the capture at a glance


def _api(message: str) -> str:
    """The API a request or response message belongs to: ``FetchResponse`` -> ``Fetch``."""
    kind = "Request" if message.endswith("Request") else "Response"
    return message.removesuffix(kind)


def _has(outdir: str | Path, table: str, column: str) -> bool:
    p = _path(outdir, table)
    return p is not None and column in _schema(p).names


def apis(outdir: str | Path) -> pa.Table:
    """Per API and version: the requests and responses decoded (rejected frames are counted in
    ``rejects``) and their frames' bytes on the wire (null for a folder written before the
    tables had ``_size``)."""
    rows: dict[tuple[str, int], dict[str, int | None]] = {}
    for message in message_tables(outdir):
        api, kind = _api(message), "requests" if message.endswith("Request") else "responses"
        sized = _has(outdir, message, "_size")
        counts = _aggregate(
            _batches(outdir, message, ["_version", "_size"] if sized else ["_version"]),
            ["_version"],
            [("_version", "count", "n"), *([("_size", "sum", "bytes")] if sized else [])],
            pa.schema([("_version", pa.int16()), ("n", pa.int64()), ("bytes", pa.int64())]),
        )
        sizes = counts["bytes"].to_pylist() if sized else [None] * counts.num_rows
        for v, n, size in zip(counts["_version"].to_pylist(), counts["n"].to_pylist(), sizes, strict=True):
            row = rows.setdefault(
                (api, v), {"requests": 0, "responses": 0, "request_bytes": 0, "response_bytes": 0}
            )
            row[kind] = (row[kind] or 0) + n
            b = f"{kind[:-1]}_bytes"
            row[b] = None if size is None or row[b] is None else row[b] + size
    keys = sorted(rows)
    counts = ("requests", "responses", "request_bytes", "response_bytes")
    return pa.table(
        {
            "api": pa.array([a for a, _ in keys], pa.string()),
            "version": pa.array([v for _, v in keys], pa.int16()),
            **{c: pa.array([rows[k][c] for k in keys], pa.int64()) for c in counts},
        }
    )


def rejects(outdir: str | Path) -> pa.Table:
    """What did not decode, per error, reason and message: how many."""
    schema = pa.schema(
        [("error", pa.string()), ("reason", pa.string()), ("message", pa.string()), ("count", pa.int64())]
    )
    t = _aggregate(
        _batches(outdir, "rejects", ["error", "reason", "message"]),
        ["error", "reason", "message"],
        [("error", "count", "count")],
        schema,
    )
    return t.cast(schema).sort_by([("count", "descending"), ("error", "ascending"), ("reason", "ascending")])


def _record_totals(outdir: str | Path) -> dict[str, int]:
    """Every record batch and its bytes; the records of data batches (a control batch's record
    is a transaction marker, not a record written); control and partial batches apart."""
    out = {"record_batches": 0, "records": 0, "record_bytes": 0, "control_batches": 0, "partial_batches": 0}
    for part in _batches(outdir, "record_batches", ["record_count", "size", "control", "partial"]):
        control = pc.fill_null(part["control"], False)
        out["record_batches"] += part.num_rows
        out["records"] += int(pc.sum(part.filter(pc.invert(control))["record_count"]).as_py() or 0)
        out["record_bytes"] += int(pc.sum(part["size"]).as_py() or 0)
        out["control_batches"] += int(pc.sum(pc.cast(control, pa.int64())).as_py() or 0)
        out["partial_batches"] += int(pc.sum(pc.cast(part["partial"], pa.int64())).as_py() or 0)
    return out


def _total(*columns: pa.ChunkedArray | pa.Array) -> int | None:
    """The sum of ``columns``, or None if any value is null."""
    if any(c.null_count for c in columns):
        return None
    return sum(int(pc.sum(c).as_py() or 0) for c in columns)


# ---------------------------------------------------------------------------------------------
# throughput


_BATCH_COLS = [
    "_message",
    "_ts_first",
    "topic",
    "partition",
    "record_count",
    "size",
    "records_size",
    "uncompressed_size",
    "codec",
    "control",
    "partial",
]


def _record_parts(outdir: str | Path, columns: Sequence[str] = _BATCH_COLS) -> Iterator[pa.Table]:
    """The whole data batches of Produce requests and Fetch responses, with ``side`` (produce,
    fetch): no control batch (its one record is a transaction marker: ``markers``) and no
    partial batch (cut at the end of a Fetch response: sent again whole in a later one)."""
    for part in _batches(outdir, "record_batches", columns):
        side = pc.cast(part["_message"], pa.string())
        keep = pc.and_(
            pc.and_(pc.is_in(side, pa.array(list(SIDES))), pc.invert(pc.fill_null(part["control"], False))),
            pc.invert(part["partial"]),
        )
        part = part.filter(keep)
        if not part.num_rows:
            continue
        sides = pa.array([SIDES[m] for m in part["_message"].to_pylist()], pa.string())
        yield part.append_column("side", sides)


_SIDE_AGGS = [("record_count", "sum", "records"), ("size", "sum", "bytes"), ("size", "count", "batches")]


def _side_by_side(t: pa.Table, keys: list[str], seconds: float) -> pa.Table:
    """Rows of (keys, side, batches, records, bytes) turned into one row per key with produce_*
    and fetch_* columns (0 where a side has none), and per-second rates over ``seconds``."""
    # null keys (a record batch of a response carries no client id) are grouped as one, as SQL
    # does: joined by a stand-in value, then null again
    absent = "\x00null"
    t = t.cast(pa.schema([pa.field(f.name, f.type) for f in t.schema]))  # nullable, for the outer join
    filled = t
    for k in keys:
        if pa.types.is_string(t[k].type):
            filled = filled.set_column(filled.schema.get_field_index(k), k, pc.fill_null(t[k], absent))
    metrics = ("batches", "records", "bytes")
    sides = []
    for side in ("produce", "fetch"):
        one = filled.filter(pc.equal(filled["side"], side)).select([*keys, *metrics])
        sides.append(one.rename_columns([*keys, *(f"{side}_{m}" for m in metrics)]))
    out = sides[0].join(sides[1], keys, join_type="full outer", use_threads=False)
    cols: dict[str, pa.ChunkedArray] = {}
    for k in keys:
        cols[k] = (
            pc.if_else(pc.equal(out[k], absent), None, out[k]) if pa.types.is_string(out[k].type) else out[k]
        )
    for side in ("produce", "fetch"):
        for m in metrics:
            cols[f"{side}_{m}"] = pc.fill_null(out[f"{side}_{m}"], 0)
        for m in ("records", "bytes"):
            rate = pc.divide(pc.cast(cols[f"{side}_{m}"], pa.float64()), seconds) if seconds > 0 else None
            cols[f"{side}_{m}_per_s"] = rate if rate is not None else pa.nulls(out.num_rows, pa.float64())
    result = pa.table(cols)
    return result.sort_by([(k, "ascending") for k in keys])


def _side_schema(keys: list[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema(
        [
            *keys,
            ("side", pa.string()),
            ("records", pa.int64()),
            ("bytes", pa.int64()),
            ("batches", pa.int64()),
        ]
    )


def throughput_by_partition(outdir: str | Path) -> pa.Table:
    """Per topic and partition, produce and fetch side by side: record batches, records and
    bytes (the batches' bytes on the wire), and records and bytes per second over the capture."""
    keys = ["topic", "partition"]
    t = _aggregate(
        _record_parts(outdir),
        [*keys, "side"],
        _SIDE_AGGS,
        _side_schema([("topic", pa.string()), ("partition", pa.int32())]),
    )
    return _side_by_side(t, keys, timeline(outdir).seconds)


def throughput_by_topic(outdir: str | Path) -> pa.Table:
    """Per topic, produce and fetch side by side: record batches, records and bytes, and records
    and bytes per second over the capture."""
    t = _aggregate(
        _record_parts(outdir), ["topic", "side"], _SIDE_AGGS, _side_schema([("topic", pa.string())])
    )
    return _side_by_side(t, ["topic"], timeline(outdir).seconds)


def throughput_over_time(outdir: str | Path) -> pa.Table:
    """Per bucket of frame time, side (produce, fetch) and topic: records, bytes, and records and
    bytes per second in that bucket."""
    tl = timeline(outdir)

    def parts() -> Iterator[pa.Table]:
        for p in _record_parts(outdir):
            yield p.append_column("bucket", pa.array(tl.bucket(_us(p["_ts_first"])), pa.int64()))

    t = _aggregate(
        parts(),
        ["bucket", "side", "topic"],
        _SIDE_AGGS[:2],
        pa.schema(
            [
                ("bucket", pa.int64()),
                ("side", pa.string()),
                ("topic", pa.string()),
                ("records", pa.int64()),
                ("bytes", pa.int64()),
            ]
        ),
    )
    t = t.sort_by([("bucket", "ascending"), ("side", "descending"), ("topic", "ascending")])
    width_s = tl.width_us / 1e6
    t = t.append_column("records_per_s", pc.divide(pc.cast(t["records"], pa.float64()), width_s))
    t = t.append_column("bytes_per_s", pc.divide(pc.cast(t["bytes"], pa.float64()), width_s))
    return tl.with_t(t)


def compression(outdir: str | Path) -> pa.Table:
    """Per side, topic and codec, over the whole data batches (no control or partial batch):
    batches, those that did not decode (their records could not be read or decompressed),
    records, and over the batches that decoded: the records' bytes as sent and uncompressed, and
    the ratio (uncompressed / sent; 1 for batches sent uncompressed)."""

    def parts() -> Iterator[pa.Table]:
        for p in _record_parts(outdir):
            good = pc.is_valid(p["uncompressed_size"])
            yield p.append_column("undecoded", pc.cast(pc.invert(good), pa.int64())).set_column(
                p.schema.get_field_index("records_size"),
                "records_size",
                pc.if_else(good, p["records_size"], pa.scalar(None, pa.int64())),
            )

    t = _aggregate(
        parts(),
        ["side", "topic", "codec"],
        [
            ("size", "count", "batches"),
            ("undecoded", "sum", "undecoded"),
            ("record_count", "sum", "records"),
            ("records_size", "sum", "sent_bytes"),
            ("uncompressed_size", "sum", "uncompressed_bytes"),
        ],
        pa.schema(
            [
                ("side", pa.string()),
                ("topic", pa.string()),
                ("codec", pa.string()),
                ("batches", pa.int64()),
                ("undecoded", pa.int64()),
                ("records", pa.int64()),
                ("sent_bytes", pa.int64()),
                ("uncompressed_bytes", pa.int64()),
            ]
        ),
    )
    ratio = pc.if_else(
        pc.greater(t["sent_bytes"], 0),
        pc.divide(pc.cast(t["uncompressed_bytes"], pa.float64()), pc.cast(t["sent_bytes"], pa.float64())),
        pa.scalar(None, pa.float64()),
    )
    t = t.append_column("ratio", ratio)
    return t.sort_by([("side", "descending"), ("topic", "ascending"), ("codec", "ascending")])


# ---------------------------------------------------------------------------------------------
# errors


def _is_error_field(name: str, type_: pa.DataType) -> bool:
    """The one rule for an error field: an integer named ``error_code`` or ``*_error_code``."""
    return (name == "error_code" or name.endswith("_error_code")) and pa.types.is_integer(type_)


def error_fields(schema: pa.Schema) -> list[str]:
    """Paths of every field named ``error_code`` or ``*_error_code``, nested ones too
    (``responses[].partitions[].error_code``)."""
    out: list[str] = []

    def walk(fields: Sequence[pa.Field], prefix: str) -> None:
        for f in fields:
            if _is_error_field(f.name, f.type):
                out.append(prefix + f.name)
            elif pa.types.is_struct(f.type):
                walk(list(f.type), prefix + f.name + ".")
            elif (pa.types.is_list(f.type) or pa.types.is_large_list(f.type)) and pa.types.is_struct(
                f.type.value_type
            ):
                walk(list(f.type.value_type), prefix + f.name + "[].")

    walk([schema.field(i) for i in range(len(schema))], "")
    return out


def _error_values(table: pa.Table) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(path, row, code) of every error field of every row of ``table``."""

    def walk(
        arrays: dict[str, pa.Array], rows: np.ndarray, prefix: str
    ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        for name, arr in arrays.items():
            t = arr.type
            if _is_error_field(name, t):
                valid = pc.is_valid(arr).to_numpy(zero_copy_only=False)
                yield prefix + name, rows[valid], pc.drop_null(arr).to_numpy(zero_copy_only=False)
            elif pa.types.is_struct(t):
                yield from walk(
                    dict(zip([f.name for f in t], arr.flatten(), strict=True)), rows, prefix + name + "."
                )
            elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
                parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
                flat = pc.list_flatten(arr)
                children = dict(zip([f.name for f in t.value_type], flat.flatten(), strict=True))
                yield from walk(children, rows[parents], prefix + name + "[].")

    table = table.combine_chunks()
    arrays = {
        n: table[n].chunk(0) if table[n].num_chunks else pa.array([], table[n].type)
        for n in table.column_names
    }
    yield from walk(arrays, np.arange(table.num_rows), "")


def _error_columns(outdir: str | Path, message: str) -> list[str]:
    p = _path(outdir, message)
    if p is None:
        return []
    return [path.replace("[]", "") for path in error_fields(_schema(p))]  # paths to their leaves


def _error_parts(outdir: str | Path, tl: Timeline) -> Iterator[pa.Table]:
    """One row per non-zero error code in a response: api, version, field, code, bucket."""
    for message in message_tables(outdir):
        if not message.endswith("Response"):
            continue
        cols = _error_columns(outdir, message)
        if not cols:
            continue
        for part in _batches(outdir, message, ["_version", "_ts_first", *cols]):
            buckets = tl.bucket(_us(part["_ts_first"]))
            versions = part["_version"].to_numpy()
            for path, rows, codes in _error_values(part.drop_columns(["_version", "_ts_first"])):
                nz = codes != 0
                if not nz.any():
                    continue
                r = rows[nz]
                yield pa.table(
                    {
                        "api": pa.array([_api(message)] * len(r), pa.string()),
                        "version": pa.array(versions[r], pa.int16()),
                        "field": pa.array([path] * len(r), pa.string()),
                        "error_code": pa.array(codes[nz].astype(np.int16), pa.int16()),
                        "bucket": pa.array(buckets[r], pa.int64()),
                        "one": pa.array(np.ones(len(r), np.int64)),
                    }
                )


def _error_names(codes: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Kafka's name of each error code (null for null), without a Python object per code."""
    distinct = [c for c in pc.unique(codes).to_pylist() if c is not None]
    lookup = pa.array(distinct, pa.int64())
    at = pc.index_in(pc.cast(codes, pa.int64()), value_set=lookup)
    return pc.take(pa.array([error_name(c) for c in distinct], pa.string()), at)


def _with_names(t: pa.Table) -> pa.Table:
    names = _error_names(t["error_code"])
    return t.add_column(t.schema.get_field_index("error_code") + 1, "error", names)


def errors(outdir: str | Path) -> pa.Table:
    """Per API, version, error field and non-zero error code (with Kafka's name for it): how
    many times a response carried it."""
    t = _aggregate(
        _error_parts(outdir, timeline(outdir)),
        ["api", "version", "field", "error_code"],
        [("one", "sum", "count")],
        pa.schema(
            [
                ("api", pa.string()),
                ("version", pa.int16()),
                ("field", pa.string()),
                ("error_code", pa.int16()),
                ("count", pa.int64()),
            ]
        ),
    )
    t = t.sort_by(
        [("api", "ascending"), ("version", "ascending"), ("field", "ascending"), ("error_code", "ascending")]
    )
    return _with_names(t)


def errors_over_time(outdir: str | Path) -> pa.Table:
    """Per bucket of response time, API and non-zero error code: how many."""
    tl = timeline(outdir)
    t = _aggregate(
        _error_parts(outdir, tl),
        ["bucket", "api", "error_code"],
        [("one", "sum", "count")],
        pa.schema(
            [("bucket", pa.int64()), ("api", pa.string()), ("error_code", pa.int16()), ("count", pa.int64())]
        ),
    )
    t = t.sort_by([("bucket", "ascending"), ("api", "ascending"), ("error_code", "ascending")])
    return tl.with_t(_with_names(t))


# ---------------------------------------------------------------------------------------------
# the high watermarks Fetch responses gave (``offsets.lag``: a row per partition)


def _ts(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.cast(col, pa.timestamp("us", "UTC"))


def _unnest(arr: pa.Array) -> tuple[np.ndarray, dict[str, pa.Array]]:
    """A list<struct> array's elements: the row each came from, and the struct's fields."""
    parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(arr)
    return parents, dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))


def _high_watermarks(outdir: str | Path) -> dict[tuple[str, str, int], tuple[int, object]]:
    """(capture file, topic, partition) -> the last high watermark a Fetch response without error
    gave, and when (the records inside are never turned into Python objects)."""
    parts = []
    wanted = ["_capture", "_ts_first", "responses.topic"] + [
        f"responses.partitions.{f}" for f in ("partition_index", "high_watermark", "error_code")
    ]
    for part in _batches(outdir, "FetchResponse", wanted):
        rows, topics = _unnest(part["responses"].combine_chunks())
        rows2, p = _unnest(topics["partitions"])
        t = pa.table(
            {
                "capture": pc.take(part["_capture"], pa.array(rows[rows2])),
                "topic": pc.take(topics["topic"], pa.array(rows2)),
                "partition": p["partition_index"],
                "hw": p["high_watermark"],
                "error_code": p["error_code"],
                "ts": pc.take(_ts(part["_ts_first"]), pa.array(rows[rows2])),
            }
        )
        keep = pc.and_(
            pc.and_(pc.equal(t["error_code"], 0), pc.greater_equal(t["hw"], 0)), pc.is_valid(t["topic"])
        )
        parts.append(_last_watermarks([t.filter(keep)]))
        if len(parts) >= 8:  # merged as we go: memory follows the partitions, not the responses
            parts = [_last_watermarks(parts)]
    if not parts:
        return {}
    g = _last_watermarks(parts)
    return {
        (capture, topic, part): (hw, ts)
        for capture, topic, part, hw, ts in zip(
            *(g[c].to_pylist() for c in ("capture", "topic", "partition", "hw", "ts")), strict=True
        )
    }


def _last_watermarks(parts: list[pa.Table]) -> pa.Table:
    """Per capture file, topic and partition of ``parts`` (in capture order), the high watermark
    of the latest response, and its time: of a tie, the later row (a stable sort)."""
    t = pa.concat_tables(parts).sort_by([("ts", "ascending")])
    return _group(t, ["capture", "topic", "partition"], [("hw", "last"), ("ts", "last")], ["hw", "ts"])
