"""The report's numbers, each an Arrow table computed from the Parquet tables ``arrowkafka decode``
writes (``OUTDIR/<Message>.parquet``, ``record_batches``, ``record_markers``, ``rejects``).

Every function takes the output folder and returns a ``pa.Table``; one with no rows means the
capture holds nothing for it. Tables are read with ``pyarrow.parquet`` one record batch at a time,
only the columns a number needs (nested fields by their leaf columns: the high watermarks and
error codes of Fetch responses are read without their records). Counts, sums, minima and
maxima are aggregated per batch and the partial results merged, so memory follows the number
of groups (connections, clients, partitions ...), not the capture. What is held whole (one row
per item, the listed columns only): latencies (``latency``: api, version, bucket, latency),
produced batches with a producer id (``sequences``, ``producers``), consumer-group requests
and responses (``group_events``), the partitions of offset commits and OffsetFetch answers
(``committed_offsets``) and of Fetch responses (``lag``), transactions (``transactions``).

Time series cut the capture into buckets of ``Timeline.width_us`` from its first frame
(``timeline``): at most ``MAX_BUCKETS``, each a round width (1 ms, 2 ms, 5 ms, 10 ms ... 1 h).
Each time-series table carries ``bucket`` (0, 1, ...) and ``t`` (the bucket's start, seconds
from the capture's first frame), and its schema metadata says the width.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrowkafka.report.errors import error_name

__all__ = [
    "MAX_BUCKETS",
    "SECTIONS",
    "SLOWEST",
    "Timeline",
    "apis",
    "committed_offsets",
    "compression",
    "connections",
    "error_fields",
    "errors",
    "errors_over_time",
    "group_events",
    "group_summary",
    "lag",
    "latency",
    "latency_over_time",
    "markers",
    "member_lanes",
    "message_tables",
    "not_decode_output",
    "overview",
    "producers",
    "rejects",
    "sequences",
    "slowest",
    "throughput_by_client",
    "throughput_by_partition",
    "throughput_by_topic",
    "throughput_over_time",
    "timeline",
    "transactions",
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
    leaves = [f.schema.column(i).path for i in range(len(f.schema))]
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
    # cost ~100 MB more at the peak, for tables this narrow
    for part in _parts(p):
        with pq.ParquetFile(part) as f:
            leaves = _leaves(f, columns)
            for batch in f.iter_batches(batch_size=BATCH_ROWS, columns=leaves, use_threads=False):
                if batch.num_rows:
                    yield pa.Table.from_batches([batch])


def _read(outdir: str | Path, table: str, columns: Sequence[str]) -> pa.Table | None:
    p = _path(outdir, table)
    if p is None:
        return None
    return pa.concat_tables(pq.read_table(f, columns=list(columns), use_threads=False) for f in _parts(p))


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


def connections(outdir: str | Path) -> pa.Table:
    """Per connection (client address, broker address): the client id its requests gave (the
    smallest, should they give several), requests, responses, first and last frame. Kept for
    the last two folders while their tables are unchanged (three sections use it)."""
    return _connections(_state(outdir), str(outdir))


@functools.lru_cache(maxsize=2)
def _connections(key: tuple[tuple[str, int, int], ...], outdir: str) -> pa.Table:
    schema = pa.schema(
        [
            ("client", pa.string()),
            ("broker", pa.string()),
            ("client_id", pa.string()),
            ("requests", pa.int64()),
            ("responses", pa.int64()),
            ("first", pa.timestamp("us", "UTC")),
            ("last", pa.timestamp("us", "UTC")),
        ]
    )

    def parts() -> Iterator[pa.Table]:
        for message in message_tables(outdir):
            request = message.endswith("Request")
            for part in _batches(
                outdir, message, ["_client", "_broker", "_client_id", "_ts_first", "_ts_last"]
            ):
                n = part.num_rows
                ids = part["_client_id"] if request else pa.nulls(n, pa.string())  # responses carry none
                yield pa.table(
                    {
                        "client": part["_client"],
                        "broker": part["_broker"],
                        "client_id": pc.cast(ids, pa.string()),
                        "req": pa.array(np.full(n, int(request)), pa.int64()),
                        "resp": pa.array(np.full(n, int(not request)), pa.int64()),
                        "first": pc.cast(part["_ts_first"], pa.timestamp("us", "UTC")),
                        "last": pc.cast(part["_ts_last"], pa.timestamp("us", "UTC")),
                    }
                )

    t = _aggregate(
        parts(),
        ["client", "broker"],
        [
            ("client_id", "min", "client_id"),
            ("req", "sum", "requests"),
            ("resp", "sum", "responses"),
            ("first", "min", "first"),
            ("last", "max", "last"),
        ],
        schema,
    )
    return t.cast(schema).sort_by([("first", "ascending"), ("client", "ascending")])


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


def overview(outdir: str | Path) -> pa.Table:
    """One row: the capture's first and last frame, its duration, how many capture files,
    connections, client addresses, client ids, brokers, requests, responses, their frames' bytes
    on the wire, APIs (and API versions), rejects, record batches (all: data, control and
    partial), records (of the data batches: no transaction markers), the batches' bytes, control
    batches and partial batches (cut at the end of a Fetch response)."""
    tl = timeline(outdir)
    conns = connections(outdir)
    api = apis(outdir)
    rej = rejects(outdir)
    captures: set[str] = set()
    for message in message_tables(outdir):
        for part in _batches(outdir, message, ["_capture"]):
            captures.update(pc.unique(part["_capture"]).to_pylist())
    totals = _record_totals(outdir)
    row = {
        "first": pa.array([tl.start_us], pa.timestamp("us", "UTC")),
        "last": pa.array([tl.end_us], pa.timestamp("us", "UTC")),
        "duration_s": [tl.seconds],
        "captures": [len(captures)],
        "connections": [conns.num_rows],  # one row per (client, broker)
        "client_addresses": [pc.count_distinct(conns["client"]).as_py()],
        "client_ids": [pc.count_distinct(conns["client_id"]).as_py()],  # nulls not counted
        "brokers": [pc.count_distinct(conns["broker"]).as_py()],
        "requests": [int(pc.sum(api["requests"]).as_py() or 0)],
        "responses": [int(pc.sum(api["responses"]).as_py() or 0)],
        # (null if any table lacks ``_size``: a folder written by an older arrowkafka)
        "frame_bytes": [_total(api["request_bytes"], api["response_bytes"])],
        "apis": [len(set(api["api"].to_pylist()))],
        "api_versions": [api.num_rows],
        "rejects": [int(pc.sum(rej["count"]).as_py() or 0)],
        **{k: [v] for k, v in totals.items()},
    }
    return pa.table(row)


# ---------------------------------------------------------------------------------------------
# latency


_LATENCY_SCHEMA = pa.schema(
    [
        ("api", pa.string()),
        ("version", pa.int16()),
        ("bucket", pa.int64()),
        ("responses", pa.int64()),
        ("p50_ms", pa.float64()),
        ("p99_ms", pa.float64()),
        ("max_ms", pa.float64()),
    ]
)


def _latency_table(outdir: str | Path, tl: Timeline, by_bucket: bool) -> pa.Table:
    """Per API, version (and bucket of request time): responses, p50, p99 and max latency.
    One response table at a time: memory holds one API's latencies (about 18 bytes each)."""
    out = []
    for message in message_tables(outdir):
        if not message.endswith("Response"):
            continue
        versions, buckets, values = [], [], []
        for part in _batches(outdir, message, ["_version", "_request_ts", "_latency_ns"]):
            part = part.filter(pc.is_valid(part["_latency_ns"]))
            versions.append(part["_version"].to_numpy())
            buckets.append(
                tl.bucket(_us(part["_request_ts"])) if by_bucket else np.zeros(part.num_rows, np.int64)
            )
            values.append(pc.divide(pc.cast(part["_latency_ns"], pa.float64()), 1e6).to_numpy())
        if values and sum(len(v) for v in values):
            out.append(_quantiles(_api(message), *map(np.concatenate, (versions, buckets, values))))
    t = pa.concat_tables(out) if out else _LATENCY_SCHEMA.empty_table()
    t = t.sort_by([("api", "ascending"), ("version", "ascending"), ("bucket", "ascending")])
    return t if by_bucket else t.drop_columns(["bucket"])


def _quantiles(api: str, versions: np.ndarray, buckets: np.ndarray, values: np.ndarray) -> pa.Table:
    """Per (version, bucket): responses, p50, p99 and max (quantiles by linear interpolation
    between the closest ranks, as DuckDB's quantile_cont and numpy's default)."""
    order = np.lexsort((values, buckets, versions))
    versions, buckets, values = versions[order], buckets[order], values[order]
    change = np.ones(len(values), bool)
    change[1:] = (versions[1:] != versions[:-1]) | (buckets[1:] != buckets[:-1])
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], len(values))
    p50 = [float(np.quantile(values[s:e], 0.5)) for s, e in zip(starts, ends, strict=True)]
    p99 = [float(np.quantile(values[s:e], 0.99)) for s, e in zip(starts, ends, strict=True)]
    return pa.table(
        {
            "api": pa.array([api] * len(starts), pa.string()),
            "version": pa.array(versions[starts], pa.int16()),
            "bucket": pa.array(buckets[starts], pa.int64()),
            "responses": pa.array(ends - starts, pa.int64()),
            "p50_ms": pa.array(p50, pa.float64()),
            "p99_ms": pa.array(p99, pa.float64()),
            "max_ms": pa.array(values[ends - 1], pa.float64()),
        }
    )


def latency(outdir: str | Path) -> pa.Table:
    """Per API and version: responses, p50, p99 and max latency (ms: the response's first segment
    minus its request's)."""
    return _latency_table(outdir, timeline(outdir), by_bucket=False)


def latency_over_time(outdir: str | Path) -> pa.Table:
    """Per API, version and bucket of request time: responses, p50, p99, max latency (ms)."""
    tl = timeline(outdir)
    return tl.with_t(_latency_table(outdir, tl, by_bucket=True))


def slowest(outdir: str | Path, n: int = SLOWEST) -> pa.Table:
    """The ``n`` slowest responses: API, version, connection, client id (its connection's, as in
    ``connections``), correlation id, request time and latency, to find them in the tables."""
    cols = ["_client", "_broker", "_client_id", "_correlation_id", "_version", "_request_ts", "_latency_ns"]
    schema = pa.schema(
        [
            ("api", pa.string()),
            ("version", pa.int16()),
            ("client", pa.string()),
            ("broker", pa.string()),
            ("client_id", pa.string()),
            ("correlation_id", pa.int32()),
            ("request_ts", pa.timestamp("us", "UTC")),
            ("latency_ms", pa.float64()),
        ]
    )
    best = schema.empty_table()
    for message in message_tables(outdir):
        if not message.endswith("Response"):
            continue
        for part in _batches(outdir, message, [c for c in cols if c != "_client_id"]):
            part = part.filter(pc.is_valid(part["_latency_ns"]))
            top = part.take(pc.select_k_unstable(part, n, [("_latency_ns", "descending")]))
            t = pa.table(
                {
                    "api": pa.array([_api(message)] * top.num_rows, pa.string()),
                    "version": top["_version"],
                    "client": top["_client"],
                    "broker": top["_broker"],
                    "client_id": pa.nulls(top.num_rows, pa.string()),
                    "correlation_id": top["_correlation_id"],
                    "request_ts": pc.cast(top["_request_ts"], pa.timestamp("us", "UTC")),
                    "latency_ms": pc.divide(pc.cast(top["_latency_ns"], pa.float64()), 1e6),
                }
            ).cast(schema)
            both = pa.concat_tables([best, t])
            best = both.take(pc.select_k_unstable(both, n, [("latency_ms", "descending")]))
    # a response carries no client id: its connection's requests do
    ids = connections(outdir).select(["client", "broker", "client_id"])
    best = best.drop_columns(["client_id"]).join(
        ids, ["client", "broker"], join_type="left outer", use_threads=False
    )
    return best.select(schema.names).sort_by(
        [("latency_ms", "descending"), ("api", "ascending"), ("correlation_id", "ascending")]
    )


# ---------------------------------------------------------------------------------------------
# throughput


_BATCH_COLS = [
    "_message",
    "_client",
    "_broker",
    "_client_id",
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


def throughput_by_client(outdir: str | Path) -> pa.Table:
    """Per client (client id and address), produce and fetch side by side: record batches,
    records, bytes, and records and bytes per second over the capture. The client id is its
    connection's (as in ``connections``): a Fetch response carries none of its own."""
    keys = ["client_id", "client"]

    def parts() -> Iterator[pa.Table]:
        for p in _record_parts(outdir):
            yield p.rename_columns(["client" if c == "_client" else "broker" if c == "_broker" else c
                                    for c in p.column_names])  # fmt: skip

    t = _aggregate(
        parts(),
        ["client", "broker", "side"],
        _SIDE_AGGS,
        _side_schema([("client", pa.string()), ("broker", pa.string())]),
    )
    ids = connections(outdir).select(["client", "broker", "client_id"])
    t = t.join(ids, ["client", "broker"], join_type="left outer", use_threads=False)
    t = _group(t, [*keys, "side"], [(n, "sum") for _, _, n in _SIDE_AGGS], [n for _, _, n in _SIDE_AGGS])
    return _side_by_side(t, keys, timeline(outdir).seconds)


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
# consumer groups


# A response to its request: the connection, the correlation id and the request's first segment
# time (a request's ``_ts_first``, its response's ``_request_ts``). The time keeps the join one to
# one where a connection's correlation ids come back (ports reused, a client restarted): on
# those ids alone a long capture's join grew with the square of the repeats. The connection is
# one number (``_conn``), not its capture file, client and broker as text: commits and group
# requests are held a row each, and those strings were most of their bytes.
_LINK = ["_conn", "_correlation_id", "_link_ts"]
_CAPTURES: dict[int, str] = {}  # a capture file's ``_cap`` number -> its name


def _ids(texts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A number per value, the same in every table read in this process: Python's hash of the
    text (worked out once per distinct value of the batch)."""
    enc = pc.dictionary_encode(texts)
    enc = enc.combine_chunks() if isinstance(enc, pa.ChunkedArray) else enc
    ids = np.array([hash(v) for v in enc.dictionary.to_pylist()], np.int64)
    return ids[enc.indices.to_numpy(zero_copy_only=False)]


def _codes(texts: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A small number per distinct value (its index in the values met), for numpy to sort by."""
    enc = pc.dictionary_encode(texts)
    return (enc.combine_chunks() if isinstance(enc, pa.ChunkedArray) else enc).indices.to_numpy()


def _cap(captures: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The capture files as numbers (``_cap``); their names are kept in ``_CAPTURES``."""
    for name in pc.unique(captures).to_pylist():
        _CAPTURES[hash(name)] = name
    return pa.array(_ids(captures))


def _compact(part: pa.Table, ts: str, keep: list[str]) -> pa.Table:
    """A batch of a request or response table as ``keep`` and the link: ``_conn`` (its
    connection), ``_link_ts`` (its request's time) and, if asked, ``_cap`` (its capture file)."""
    conn = _ids(pc.binary_join_element_wise(part["_capture"], part["_client"], part["_broker"], "\x00"))
    out = {c: part[c] for c in keep if c not in ("_conn", "_cap", "_link_ts")}
    if "_cap" in keep:
        out["_cap"] = _cap(part["_capture"])
    return pa.table(
        {**out, "_conn": pa.array(conn), "_link_ts": pc.cast(part[ts], pa.timestamp("ns", "UTC"))}
    )


def _linked(
    outdir: str | Path, message: str, columns: Sequence[str], partitions: list[str] | None = None
) -> pa.Table | None:
    """The ``columns`` of a request or response table with its link (``_compact``): its rows, or
    with ``partitions`` one row per partition with those fields (``_partitions``). None if the
    table is missing or empty."""
    ts = "_ts_first" if message.endswith("Request") else "_request_ts"
    keep = list(columns)
    made = ("_conn", "_cap", "_link_ts")  # (made by _compact, not read)
    read = [c for c in dict.fromkeys(["_capture", "_client", "_broker", ts, *keep]) if c not in made]

    def prepare(part: pa.Table) -> pa.Table:
        return _compact(part, ts, keep)

    if partitions is not None:
        return _partitions(outdir, message, read, partitions, prepare)
    parts = [prepare(part) for part in _batches(outdir, message, read)]
    return pa.concat_tables(parts) if parts else None


# the type of each response column ``_pairs`` reads, for a capture without the response table
_RESPONSE_TYPES = {
    "error_code": pa.int16(),
    "member_id": pa.string(),
    "generation_id": pa.int32(),
    "member_epoch": pa.int32(),
    "producer_id": pa.int64(),
    "producer_epoch": pa.int16(),
}


def _pairs(
    outdir: str | Path, api: str, request_cols: Sequence[str], response_cols: Sequence[str]
) -> pa.Table | None:
    """Requests of ``api`` joined with their responses (left: a request with no response in the
    capture keeps its row, response columns null). Response columns are prefixed ``r_``."""
    req = _linked(
        outdir,
        f"{api}Request",
        [*_LINK, "_cap", "_client", "_client_id", "_ts_first", "_version", *request_cols],
    )
    if req is None:
        return None
    resp = _linked(outdir, f"{api}Response", [*_LINK, "_latency_ns", *response_cols])
    if resp is None:
        # no response table (only client -> broker captured, say): every response column asked
        # for, typed, with no rows; the left join gives each request nulls for them
        resp = pa.table(
            {
                **{c: pa.array([], req[c].type) for c in _LINK},
                "_latency_ns": pa.array([], pa.int64()),
                **{c: pa.array([], _RESPONSE_TYPES.get(c, pa.string())) for c in response_cols},
            }
        )
    resp = resp.rename_columns([c if c in _LINK else f"r_{c}" for c in resp.column_names])
    # the join on the link columns and a row number only: Acero joins no list columns
    keys = req.select(_LINK).append_column("_row", pa.array(np.arange(req.num_rows), pa.int64()))
    joined = keys.join(resp, _LINK, join_type="left outer", use_threads=False).sort_by("_row")
    out = req.take(joined["_row"])
    for c in resp.column_names:
        if c not in _LINK:
            out = out.append_column(c, joined[c])
    return out


def _ts(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.cast(col, pa.timestamp("us", "UTC"))


_EVENT_SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", "UTC")),
        ("api", pa.string()),
        ("group_id", pa.string()),
        ("member_id", pa.string()),
        ("generation_id", pa.int32()),
        ("client", pa.string()),
        ("client_id", pa.string()),
        ("correlation_id", pa.int32()),
        ("error_code", pa.int16()),
        ("error", pa.string()),
    ]
)


def group_events(outdir: str | Path) -> pa.Table:
    """Every JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat and
    ShareGroupHeartbeat request with its response: time, group, member (for JoinGroup and the
    new heartbeats the id the coordinator gave where the request had none, for LeaveGroup v3+
    each member leaving), generation (the new heartbeats: the member epoch the coordinator
    answered, else the one asked: 0 joins, -1 and -2 leave), client, correlation id, error code
    and name (null: no response in the capture)."""
    parts = []
    for api in GROUP_APIS:
        req_cols = {
            "JoinGroup": ["group_id", "member_id"],
            "SyncGroup": ["group_id", "member_id", "generation_id"],
            "Heartbeat": ["group_id", "member_id", "generation_id"],
            "LeaveGroup": ["group_id", "member_id", "members"],
        }.get(api, ["group_id", "member_id", "member_epoch"])
        given = ["member_id", "generation_id" if api == "JoinGroup" else "member_epoch"]
        resp_cols = ["error_code", *(given if api == "JoinGroup" or api in EPOCH_APIS else [])]
        t = _pairs(outdir, api, req_cols, resp_cols)
        if t is None or not t.num_rows:
            continue
        n = t.num_rows
        if api == "JoinGroup" or api in EPOCH_APIS:
            member = pc.if_else(  # (Kleene: no response is false, not null)
                pc.and_kleene(pc.is_valid(t["r_member_id"]), pc.not_equal(t["r_member_id"], "")),
                t["r_member_id"],
                t["member_id"],
            )
            generation = (
                t["r_generation_id"]
                if api == "JoinGroup"
                # an error answer carries no epoch of its own (0 on the wire): the one asked
                else pc.if_else(
                    pc.fill_null(pc.equal(t["r_error_code"], 0), False),
                    t["r_member_epoch"],
                    t["member_epoch"],
                )
            )
        elif api == "LeaveGroup":
            # v3+: a list of members; v0-2: one member_id
            names = []
            for single, many in zip(t["member_id"].to_pylist(), t["members"].to_pylist(), strict=True):
                names.append(", ".join(m["member_id"] for m in many) if many else single)
            member = pa.array(names, pa.string())
            generation = pa.nulls(n, pa.int32())
        else:
            member = t["member_id"]
            generation = t["generation_id"]
        codes = t["r_error_code"]
        parts.append(
            pa.table(
                {
                    "ts": _ts(t["_ts_first"]),
                    "api": pa.array([api] * n, pa.string()),
                    "group_id": t["group_id"],
                    "member_id": member,
                    "generation_id": pc.cast(generation, pa.int32()),
                    "client": t["_client"],
                    "client_id": t["_client_id"],
                    "correlation_id": t["_correlation_id"],
                    "error_code": pc.cast(codes, pa.int16()),
                    "error": _error_names(codes),
                }
            ).cast(_EVENT_SCHEMA)
        )
    if not parts:
        return _EVENT_SCHEMA.empty_table()
    return pa.concat_tables(parts).sort_by(
        [("ts", "ascending"), ("api", "ascending"), ("correlation_id", "ascending")]
    )


def group_summary(outdir: str | Path, events: pa.Table | None = None) -> pa.Table:
    """Per group, API and outcome (error name; ``NO_RESPONSE`` where the capture has none): how
    many requests, and how many distinct members (of ``events``, ``group_events`` of ``outdir``
    if not given: the report has them at hand)."""
    ev = group_events(outdir) if events is None else events
    ev = ev.set_column(ev.schema.get_field_index("error"), "error", pc.fill_null(ev["error"], "NO_RESPONSE"))
    g = _group(
        ev,
        ["group_id", "api", "error"],
        [("correlation_id", "count"), ("member_id", "count_distinct")],
        ["requests", "members"],
    )
    return g.sort_by([("group_id", "ascending"), ("api", "ascending"), ("error", "ascending")])


def member_lanes(
    events: pa.Table, start_us: int, seconds: float, lanes: int, points: int = 400
) -> tuple[list[tuple[str, str]], int, pa.Table]:
    """What the membership plot draws of ``group_events``: the ``lanes`` (group, member) with the
    most requests (sorted), how many members there are, and one dot per API, outcome (ok: error
    NONE), lane and 1/``points`` of the capture: api, ok, t (seconds from the first frame) and
    lane (its index), so a member's heartbeats over hours stay a few hundred points. All in
    Arrow: events may be many."""
    member = pc.fill_null(events["member_id"], "")
    lane = pc.binary_join_element_wise(pc.fill_null(events["group_id"], ""), member, "\x00")
    counts = pa.table({"lane": lane}).group_by("lane", use_threads=False).aggregate([("lane", "count")])
    top = counts.sort_by([("lane_count", "descending"), ("lane", "ascending")]).slice(0, lanes)
    names = sorted(top["lane"].to_pylist())
    step = max(seconds, 1e-3) / points
    us = pc.cast(pc.cast(events["ts"], pa.timestamp("us", "UTC")), pa.int64())
    x = pc.round(pc.divide(pc.divide(pc.cast(pc.subtract(us, start_us), pa.float64()), 1e6), step))
    ok = pc.fill_null(pc.equal(events["error_code"], 0), False)
    marked = pa.table({"api": events["api"], "ok": ok, "x": x, "lane": lane})
    index = pc.index_in(marked["lane"], value_set=pa.array(names, pa.string()))
    marked = marked.set_column(3, "lane", index).filter(pc.is_valid(index))
    dots = marked.group_by(["api", "ok", "x", "lane"], use_threads=False).aggregate([])
    dots = pa.table(
        {
            "api": dots["api"],
            "ok": dots["ok"],
            "t": pc.multiply(dots["x"], step),
            "lane": pc.cast(dots["lane"], pa.int64()),
        }
    ).sort_by([("api", "ascending"), ("ok", "ascending"), ("t", "ascending"), ("lane", "ascending")])
    split = [name.split("\x00", 1) for name in names]
    return [(g, m) for g, m in split], counts.num_rows, dots


def _partitions(
    outdir: str | Path,
    message: str,
    cols: list[str],
    fields: list[str],
    prepare: Callable[[pa.Table], pa.Table] | None = None,
) -> pa.Table | None:
    """One row per ``topics[].partitions[]`` element of every row of ``message``: the row's
    ``cols`` (or the columns ``prepare`` makes of them, a record batch at a time), the topic's
    name as ``topic``, and the partition's ``fields`` (Arrow all the way: no Python object per
    partition)."""
    parts = []
    for part in _batches(
        outdir, message, [*cols, "topics.name", *(f"topics.partitions.{f}" for f in fields)]
    ):
        rows, topics = _unnest(part["topics"].combine_chunks())
        rows2, partitions = _unnest(topics["partitions"])
        at = pa.array(rows[rows2])
        base = prepare(part.select(cols)) if prepare else part.select(cols)
        table = {c: pc.take(base[c], at) for c in base.column_names}
        table["topic"] = pc.take(topics["name"], pa.array(rows2))
        table.update({f: partitions[f] for f in fields})
        parts.append(pa.table(table))
    return pa.concat_tables(parts) if parts else None


COMMIT_APIS = ("OffsetCommit", "TxnOffsetCommit")
_COMMITS = pa.schema(
    [
        ("ts", pa.timestamp("us", "UTC")),
        ("capture_id", pa.int64()),  # the capture file (``_cap``)
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("committed_offset", pa.int64()),
        ("error_code", pa.int16()),
        ("source", pa.string()),
        # a TxnOffsetCommit's transaction: COMMIT, ABORT, FAILED (its EndTxn had an error), or
        # null (no EndTxn after it in the capture); null for the other sources
        ("txn", pa.string()),
        ("txn_at", pa.timestamp("us", "UTC")),  # that EndTxn's time: when a committed one holds
    ]
)


def _commits(outdir: str | Path) -> pa.Table:
    """One row per partition of every OffsetCommit and TxnOffsetCommit request, with its
    response's error (null: no response in the capture) and, for TxnOffsetCommit, how its
    transaction ended; in capture order."""
    keys = [*_LINK, "topic", "partition_index"]
    parts = []
    for api in COMMIT_APIS:
        txn = ["transactional_id", "producer_id"] if api == "TxnOffsetCommit" else []
        req = _linked(outdir, f"{api}Request", [*_LINK, "_cap", "_ts_first", "group_id", *txn],
                      ["partition_index", "committed_offset"])  # fmt: skip
        if req is None or not req.num_rows:
            continue
        resp = _linked(outdir, f"{api}Response", _LINK, ["partition_index", "error_code"])
        if resp is None:
            resp = pa.table(
                {**{k: pa.array([], req[k].type) for k in keys}, "error_code": pa.array([], pa.int16())}
            )
        t = req.join(resp, keys, join_type="left outer", use_threads=False)
        ts = _ts(t["_ts_first"])
        ended = _txn_outcomes(outdir, t, ts) if txn else (pa.nulls(t.num_rows, pa.string()),) * 2
        parts.append(
            pa.table(
                {
                    "ts": ts,
                    "capture_id": t["_cap"],
                    "group_id": t["group_id"],
                    "topic": t["topic"],
                    "partition": t["partition_index"],
                    "committed_offset": t["committed_offset"],
                    "error_code": t["error_code"],
                    "source": pa.array([api] * t.num_rows, pa.string()),
                    "txn": ended[0],
                    "txn_at": ended[1],
                }
            ).cast(_COMMITS)
        )
    if not parts:
        return _COMMITS.empty_table()
    return pa.concat_tables(parts).sort_by([("ts", "ascending")])


def _txn_key(capture: pa.ChunkedArray, txn_id: pa.ChunkedArray, pid: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(
        pc.cast(capture, pa.string()), pc.fill_null(txn_id, ""), pc.cast(pid, pa.string()), "\x00"
    )


def _txn_outcomes(outdir: str | Path, commits: pa.Table, ts: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    """For each TxnOffsetCommit row: how the transaction ended, by the first EndTxn request of the
    same capture file, transactional id and producer id after it (COMMIT or ABORT as the producer
    asked, FAILED where the broker answered it with an error, null where the capture holds none or
    not its response), and that EndTxn's time."""
    ends = _pairs(outdir, "EndTxn", ["transactional_id", "producer_id", "committed"], ["error_code"])
    n = commits.num_rows
    if ends is None or not ends.num_rows or not n:
        return pa.nulls(n, pa.string()), pa.nulls(n, pa.timestamp("us", "UTC"))
    asked = pc.if_else(ends["committed"], "COMMIT", "ABORT")
    outcome = pc.if_else(pc.equal(ends["r_error_code"], 0), asked, "FAILED")  # null: no response
    keys = pa.chunked_array(
        [
            *_txn_key(commits["_cap"], commits["transactional_id"], commits["producer_id"]).chunks,
            *_txn_key(ends["_cap"], ends["transactional_id"], ends["producer_id"]).chunks,
        ],
        pa.string(),
    )
    code = _codes(keys)
    at = np.concatenate([_us(ts), _us(ends["_ts_first"])])
    is_end = np.arange(len(at)) >= n
    order = np.lexsort((is_end, at, code))  # per key in time; an EndTxn after a commit at the same time
    sorted_end = is_end[order]
    # for each place in that order, the first EndTxn at or after it
    nxt = np.where(sorted_end, np.arange(len(order)), len(order))
    nxt = np.minimum.accumulate(nxt[::-1])[::-1]
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    j = nxt[place[:n]]
    found = j < len(order)
    end_row = np.where(found, order[np.minimum(j, len(order) - 1)], n)
    found &= code[end_row] == code[:n]
    at_end = pa.array(np.where(found, end_row - n, 0))
    mask = pa.array(found)
    return (
        pc.if_else(mask, pc.take(outcome, at_end), pa.scalar(None, pa.string())),
        pc.if_else(mask, pc.take(_ts(ends["_ts_first"]), at_end), pa.scalar(None, pa.timestamp("us", "UTC"))),
    )


def _fetched(outdir: str | Path) -> pa.Table:
    """One row per partition of every OffsetFetch response that gave a committed offset (error
    NONE, offset 0 or more): the group's committed offset as the coordinator told a consumer, at
    the response's time. Versions 8 and up name the group in the response; earlier ones in the
    request."""
    parts = []
    offsets = ["partition_index", "committed_offset", "error_code"]
    if _has(outdir, "OffsetFetchResponse", "topics"):  # v0-7: one group, named in the request
        # (a group-level error, v2-7, comes with no partitions: the partitions' errors suffice)
        t = _linked(outdir, "OffsetFetchResponse", [*_LINK, "_cap", "_ts_first"], offsets)
        if t is not None and t.num_rows:
            t = t.append_column("group_error", pa.nulls(t.num_rows, pa.int16()))
            req = _linked(outdir, "OffsetFetchRequest", [*_LINK, "group_id"])
            keys = t.select(_LINK).append_column("_row", pa.array(np.arange(t.num_rows), pa.int64()))
            if req is not None:
                joined = keys.join(req.select([*_LINK, "group_id"]), _LINK, join_type="left outer",
                                   use_threads=False).sort_by("_row")  # fmt: skip
                # (as _pairs: a link key that repeats, a capture read twice, repeats the row)
                parts.append(t.take(joined["_row"]).append_column("group_id", joined["group_id"]))
    v8 = _has(outdir, "OffsetFetchResponse", "groups")  # v8+: groups, each named
    by_group = ["groups.group_id", "groups.error_code", "groups.topics.name"]
    by_group += [f"groups.topics.partitions.{f}" for f in offsets]
    for part in _batches(outdir, "OffsetFetchResponse", ["_capture", "_ts_first", *by_group]) if v8 else ():
        rows, groups = _unnest(part["groups"].combine_chunks())
        rows2, topics = _unnest(groups["topics"])
        rows3, p = _unnest(topics["partitions"])
        g = rows2[rows3]
        parts.append(
            pa.table(
                {
                    "_cap": pc.take(_cap(part["_capture"]), pa.array(rows[g])),
                    "_ts_first": pc.take(part["_ts_first"], pa.array(rows[g])),
                    "group_error": pc.take(groups["error_code"], pa.array(g)),
                    "topic": pc.take(topics["name"], pa.array(rows3)),
                    **{f: p[f] for f in offsets},
                    "group_id": pc.take(groups["group_id"], pa.array(g)),
                }
            )
        )
    out = []
    for t in parts:
        ok = pc.and_(
            pc.fill_null(pc.equal(t["error_code"], 0), False), pc.greater_equal(t["committed_offset"], 0)
        )
        ok = pc.and_(ok, pc.fill_null(pc.equal(t["group_error"], 0), True))
        ok = pc.and_(pc.and_(ok, pc.is_valid(t["group_id"])), pc.is_valid(t["topic"]))
        t = t.filter(ok)
        out.append(
            pa.table(
                {
                    "ts": _ts(t["_ts_first"]),
                    "capture_id": t["_cap"],
                    "group_id": t["group_id"],
                    "topic": t["topic"],
                    "partition": t["partition_index"],
                    "committed_offset": t["committed_offset"],
                    "error_code": t["error_code"],
                    "source": pa.array(["OffsetFetch"] * t.num_rows, pa.string()),
                    "txn": pa.nulls(t.num_rows, pa.string()),
                    "txn_at": pa.nulls(t.num_rows, pa.timestamp("us", "UTC")),
                }
            ).cast(_COMMITS)
        )
    return pa.concat_tables(out).sort_by([("ts", "ascending")]) if out else _COMMITS.empty_table()


def _committed(outdir: str | Path) -> pa.Table:
    """``committed_offsets``, with the capture file of the latest committed offset. Kept for the
    last two folders while their tables are unchanged (``committed_offsets`` and ``lag`` use it)."""
    return _committed_now(_state(outdir), str(outdir))


@functools.lru_cache(maxsize=2)
def _committed_now(key: tuple[tuple[str, int, int], ...], outdir: str) -> pa.Table:
    c = _commits(outdir)
    f = _fetched(outdir)
    keys = ["group_id", "topic", "partition"]
    ok = pc.fill_null(pc.equal(c["error_code"], 0), False)
    txn = pc.equal(c["source"], "TxnOffsetCommit")
    counts = pa.table(
        {
            **{k: c[k] for k in keys},
            "commit": pa.array(np.ones(c.num_rows, np.int64)),
            "ok": pc.cast(ok, pa.int64()),
            "aborted": pc.cast(
                pc.and_(pc.and_(ok, txn), pc.is_in(c["txn"], pa.array(["ABORT", "FAILED"]))), pa.int64()
            ),
            "undecided": pc.cast(pc.and_(pc.and_(ok, txn), pc.is_null(c["txn"])), pa.int64()),
            "fetch": pa.array(np.zeros(c.num_rows, np.int64)),
        }
    )
    counts = pa.concat_tables(
        [
            counts,
            pa.table(
                {
                    **{k: f[k] for k in keys},
                    **{
                        n: pa.array(np.zeros(f.num_rows, np.int64))
                        for n in ("commit", "ok", "aborted", "undecided")
                    },
                    "fetch": pa.array(np.ones(f.num_rows, np.int64)),
                }
            ),
        ]
    )
    totals = _group(
        counts,
        keys,
        [("commit", "sum"), ("ok", "sum"), ("aborted", "sum"), ("undecided", "sum"), ("fetch", "sum")],
        ["commits", "accepted", "aborted", "undecided", "fetched"],
    )
    # what the group holds: accepted commits (a transaction's only once it committed) and what
    # OffsetFetch answers gave, the latest in time
    holds = pc.and_(ok, pc.or_(pc.invert(txn), pc.fill_null(pc.equal(c["txn"], "COMMIT"), False)))
    held = c.filter(holds)  # a transaction's offsets hold from its EndTxn on
    held = held.set_column(0, "ts", pc.coalesce(held["txn_at"], held["ts"]))
    known = pa.concat_tables([held, f])
    last = _since(known, keys).rename_columns(
        [*keys, "committed_offset", "committed_at", "source", "capture"]
    )
    names = [_CAPTURES[i] for i in last["capture"].to_pylist()]  # (one per partition: few)
    last = last.set_column(last.num_columns - 1, "capture", pa.array(names, pa.string()))
    out = totals.join(last, keys, join_type="left outer", use_threads=False)
    cols = [
        *keys,
        "commits",
        "accepted",
        "aborted",
        "undecided",
        "fetched",
        "committed_offset",
        "committed_at",
        "source",
        "capture",
    ]
    return out.select(cols).sort_by([(k, "ascending") for k in keys])


def _since(known: pa.Table, keys: list[str]) -> pa.Table:
    """Per ``keys``: the last ``committed_offset`` in time, and the ``ts``, ``source`` and
    ``capture`` of the first row of its last run of equal offsets: since when the capture shows
    the group holding that offset (an OffsetFetch answer repeating a commit does not move it)."""
    if not known.num_rows:
        return known.select([*keys, "committed_offset", "ts", "source", "capture_id"])
    code = _codes(pc.binary_join_element_wise(*(pc.cast(known[k], pa.string()) for k in keys), "\x00"))
    ts = _us(known["ts"])
    order = np.lexsort((np.arange(len(ts)), ts, code))  # per key in time; ties keep their order
    code, off = code[order], known["committed_offset"].to_numpy()[order]
    starts = np.ones(len(order), bool)
    starts[1:] = (code[1:] != code[:-1]) | (off[1:] != off[:-1])
    last = np.ones(len(order), bool)
    last[:-1] = code[1:] != code[:-1]
    run = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))  # each row's run start
    first_of_last = order[run[last]]
    return known.take(pa.array(first_of_last)).select(
        [*keys, "committed_offset", "ts", "source", "capture_id"]
    )


def committed_offsets(outdir: str | Path) -> pa.Table:
    """Per group, topic and partition: offset commits (OffsetCommit, and TxnOffsetCommit from a
    transactional producer), how many the broker accepted (error NONE), how many of those were in
    a transaction that aborted (or whose EndTxn failed) and how many in one whose end is not in
    the capture, how many OffsetFetch answers gave the partition's offset, and the committed
    offset the group held last: the latest of an accepted commit (a transaction's once it
    committed) and an OffsetFetch answer, when, and from which."""
    return _committed(outdir).drop_columns(["capture"])


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


LAG_UNKNOWN = "high watermark older than the commit"


def lag(outdir: str | Path) -> pa.Table:
    """Per group, topic and partition where the capture holds both an accepted committed offset
    and a high watermark (from a Fetch response without error, in the capture file of the last
    commit): both, when each was seen, and lag = high watermark - committed offset; null, and
    ``lag_unknown`` says why, where the last high watermark was seen before the commit."""
    schema = pa.schema(
        [
            ("group_id", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("committed_offset", pa.int64()),
            ("committed_at", pa.timestamp("us", "UTC")),
            ("high_watermark", pa.int64()),
            ("high_watermark_at", pa.timestamp("us", "UTC")),
            ("lag", pa.int64()),
            ("lag_unknown", pa.string()),
        ]
    )
    hw = _high_watermarks(outdir)
    rows = []
    for r in _committed(outdir).to_pylist():
        k = (r["capture"], r["topic"], r["partition"])
        if r["committed_offset"] is None or k not in hw:
            continue
        h, at = hw[k]
        older = at < r["committed_at"]
        rows.append(
            {
                **{c: r[c] for c in ("group_id", "topic", "partition", "committed_offset", "committed_at")},
                "high_watermark": h,
                "high_watermark_at": at,
                "lag": None if older else h - r["committed_offset"],
                "lag_unknown": LAG_UNKNOWN if older else None,
            }
        )
    return pa.Table.from_pylist(rows, schema)


# ---------------------------------------------------------------------------------------------
# producers


def producers(outdir: str | Path) -> pa.Table:
    """Per producer id and epoch (from produced record batches with a producer id): client id,
    transactional or not, batches, records, partitions written, first and last batch; with the
    transactional id where an InitProducerId response in the capture gave that id."""
    txn_ids: dict[int, str | None] = {}
    pairs = _pairs(outdir, "InitProducerId", ["transactional_id"], ["producer_id", "error_code"])
    if pairs is not None:
        for r in pairs.to_pylist():
            if r["r_error_code"] == 0 and r["r_producer_id"] is not None:
                txn_ids[r["r_producer_id"]] = r["transactional_id"]
    schema = pa.schema(
        [
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int16()),
            ("transactional_id", pa.string()),
            ("client_id", pa.string()),
            ("transactional", pa.bool_()),
            ("batches", pa.int64()),
            ("records", pa.int64()),
            ("partitions", pa.int64()),
            ("first", pa.timestamp("us", "UTC")),
            ("last", pa.timestamp("us", "UTC")),
        ]
    )
    b = _produced(outdir)
    if not b.num_rows:
        return schema.empty_table()
    g = _group(
        b,
        ["producer_id", "producer_epoch", "client_id"],
        [
            ("transactional", "any"),
            ("record_count", "count"),
            ("record_count", "sum"),
            ("tp", "count_distinct"),
            ("ts", "min"),
            ("ts", "max"),
        ],
        ["transactional", "batches", "records", "partitions", "first", "last"],
    )
    txn = pa.array([txn_ids.get(p) for p in g["producer_id"].to_pylist()], pa.string())
    g = g.append_column("transactional_id", txn)
    return g.select(schema.names).cast(schema).sort_by([("first", "ascending"), ("producer_id", "ascending")])


def _produced(outdir: str | Path) -> pa.Table:
    """Produced record batches with a producer id (>= 0), the columns the producer tables use."""
    cols = [
        "_message",
        "_client_id",
        "_ts_first",
        "_correlation_id",
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "record_count",
        "transactional",
        "control",
    ]
    parts = []
    for part in _batches(outdir, "record_batches", cols):
        part = part.filter(
            pc.and_(pc.equal(part["_message"], "ProduceRequest"), pc.greater_equal(part["producer_id"], 0))
        )
        if part.num_rows:
            parts.append(part)
    schema = pa.schema(
        [
            ("client_id", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
            ("correlation_id", pa.int32()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int16()),
            ("base_sequence", pa.int32()),
            ("record_count", pa.int32()),
            ("transactional", pa.bool_()),
            ("tp", pa.string()),
        ]
    )
    if not parts:
        return schema.empty_table()
    t = pa.concat_tables(parts)
    tp = pc.binary_join_element_wise(
        pc.fill_null(t["topic"], ""), pc.cast(t["partition"], pa.string()), "\x00"
    )
    return pa.table(
        {
            "client_id": t["_client_id"],
            "ts": _ts(t["_ts_first"]),
            "correlation_id": t["_correlation_id"],
            "topic": t["topic"],
            "partition": t["partition"],
            "producer_id": t["producer_id"],
            "producer_epoch": t["producer_epoch"],
            "base_sequence": t["base_sequence"],
            "record_count": t["record_count"],
            "transactional": t["transactional"],
            "tp": tp,
        }
    ).cast(schema)


def sequences(outdir: str | Path) -> pa.Table:
    """Per producer id, epoch, topic and partition, the produced batches in capture order: how
    many, first and last sequence, gaps (a batch whose base sequence is past the one expected:
    the previous batch's base + its records, wrapping after 2^31 - 1) and duplicates (a batch at
    or before the one expected: a retry, or one sent twice), and the records the gaps skip."""
    b = _produced(outdir).sort_by(
        [
            ("producer_id", "ascending"),
            ("producer_epoch", "ascending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
            ("ts", "ascending"),
            ("correlation_id", "ascending"),
            ("base_sequence", "ascending"),
        ]
    )
    keys = ["producer_id", "producer_epoch", "topic", "partition"]
    n = b.num_rows
    change = np.zeros(n, bool)  # where a (producer, epoch, topic, partition) starts
    change[:1] = True
    for k in keys:
        col = b[k].combine_chunks()
        if n > 1:
            after, before = col.slice(1), col.slice(0, n - 1)
            differ = pc.fill_null(pc.not_equal(after, before), True)
            same_null = pc.and_(pc.is_null(after), pc.is_null(before))
            change[1:] |= pc.and_(differ, pc.invert(same_null)).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], n)
    group = np.cumsum(change) - 1
    seq = b["base_sequence"].to_numpy().astype(np.int64)
    # unwrapped sequences: a step back of more than 2^30 is the wrap after 2^31 - 1 (and a step
    # forward as far, a batch from before the wrap sent again)
    step = np.diff(seq, prepend=seq[:1])
    step[change] = 0
    wraps = np.cumsum(np.where(step < -(2**30), 1, np.where(step > 2**30, -1, 0)))
    wraps -= np.repeat(wraps[starts], ends - starts)
    u = seq + wraps * 2**31
    end = u + b["record_count"].to_numpy().astype(np.int64)
    # the expected sequence of each batch: the furthest end of the batches before it in its
    # group, by one running maximum over groups lifted apart (2^36 > any unwrapped end + 2^32)
    lift = group * 2**36 + 2**32
    reach = np.maximum.accumulate(end + lift) - lift
    expected = np.empty(n, np.int64)
    expected[1:] = reach[:-1]
    diff = u - expected
    diff[change] = 0
    gap, dup = diff > 0, diff < 0
    at = starts

    def per_group(x: np.ndarray) -> np.ndarray:
        return np.add.reduceat(x.astype(np.int64), starts) if n else np.zeros(0, np.int64)

    return pa.table(
        {
            "producer_id": pc.take(b["producer_id"], at),
            "producer_epoch": pc.take(b["producer_epoch"], at),
            "topic": pc.take(b["topic"], at),
            "partition": pc.take(b["partition"], at),
            "batches": pa.array(ends - starts, pa.int64()),
            "first_sequence": pa.array(seq[starts].astype(np.int32), pa.int32()),
            "last_sequence": pa.array(
                ((reach[ends - 1] - 1) % 2**31).astype(np.int32) if n else [], pa.int32()
            ),
            "gaps": pa.array(per_group(gap), pa.int64()),
            "missing_records": pa.array(per_group(np.where(gap, diff, 0)), pa.int64()),
            "duplicates": pa.array(per_group(dup), pa.int64()),
        }
    )


def transactions(outdir: str | Path) -> pa.Table:
    """Every EndTxn request with its response: time, transactional id, producer id and epoch,
    what the producer asked (COMMIT or ABORT) and the broker's answer (error name; null: no
    response in the capture)."""
    schema = pa.schema(
        [
            ("ts", pa.timestamp("us", "UTC")),
            ("transactional_id", pa.string()),
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int16()),
            ("outcome", pa.string()),
            ("client_id", pa.string()),
            ("correlation_id", pa.int32()),
            ("error_code", pa.int16()),
            ("error", pa.string()),
        ]
    )
    t = _pairs(
        outdir, "EndTxn", ["transactional_id", "producer_id", "producer_epoch", "committed"], ["error_code"]
    )
    if t is None or not t.num_rows:
        return schema.empty_table()
    out = pa.table(
        {
            "ts": _ts(t["_ts_first"]),
            "transactional_id": t["transactional_id"],
            "producer_id": t["producer_id"],
            "producer_epoch": t["producer_epoch"],
            "outcome": pc.if_else(t["committed"], "COMMIT", "ABORT"),
            "client_id": t["_client_id"],
            "correlation_id": t["_correlation_id"],
            "error_code": pc.cast(t["r_error_code"], pa.int16()),
            "error": _error_names(t["r_error_code"]),
        }
    ).cast(schema)
    return out.sort_by([("ts", "ascending"), ("correlation_id", "ascending")])


def markers(outdir: str | Path) -> pa.Table:
    """Transaction markers (control records COMMIT and ABORT) seen in the records, per side
    (produce, fetch), topic, partition, producer id (its batch's) and type: how many distinct
    markers (by offset: one fetched twice counts once), and the first and last offset."""
    schema = pa.schema(
        [
            ("side", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("producer_id", pa.int64()),
            ("type", pa.string()),
            ("markers", pa.int64()),
            ("first_offset", pa.int64()),
            ("last_offset", pa.int64()),
        ]
    )
    keys = ["side", "topic", "partition", "batch_id", "type", "record_offset"]
    seen = []  # distinct markers: few (one per transaction and partition)
    for part in _batches(
        outdir, "record_markers", ["_message", "topic", "partition", "batch_id", "type", "record_offset"]
    ):
        part = part.filter(
            pc.and_(
                pc.is_in(part["type"], pa.array(["COMMIT", "ABORT"])),
                pc.is_in(part["_message"], pa.array(list(SIDES))),
            )
        )
        if part.num_rows:
            sides = pa.array([SIDES[m] for m in part["_message"].to_pylist()], pa.string())
            seen.append(
                part.append_column("side", sides).select(keys).group_by(keys, use_threads=False).aggregate([])
            )
    if not seen:
        return schema.empty_table()
    t = pa.concat_tables(seen)
    # the producer id of each marker's batch (a control batch: as few as the markers)
    ids = pa.array(pc.unique(t["batch_id"]).to_pylist(), pa.int64())
    pids = []
    for part in _batches(outdir, "record_batches", ["batch_id", "producer_id"]):
        part = part.filter(pc.is_in(part["batch_id"], ids))
        if part.num_rows:
            pids.append(part)
    pid = pa.concat_tables(pids) if pids else pa.table({"batch_id": pa.array([], pa.int64()),
                                                       "producer_id": pa.array([], pa.int64())})  # fmt: skip
    t = t.join(pid, "batch_id", join_type="left outer", use_threads=False)
    t = t.group_by(
        ["side", "topic", "partition", "producer_id", "type", "record_offset"], use_threads=False
    ).aggregate([])
    g = _group(
        t,
        ["side", "topic", "partition", "producer_id", "type"],
        [("record_offset", "count"), ("record_offset", "min"), ("record_offset", "max")],
        ["markers", "first_offset", "last_offset"],
    )
    return g.cast(schema).sort_by(
        [
            ("side", "descending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
            ("producer_id", "ascending"),
            ("type", "ascending"),
        ]
    )


SECTIONS: dict[str, list[Callable[[str | Path], pa.Table]]] = {
    "overview": [overview, connections, apis, rejects],
    "latency": [latency, latency_over_time, slowest],
    "throughput": [
        throughput_by_topic,
        throughput_by_partition,
        throughput_by_client,
        throughput_over_time,
        compression,
    ],
    "errors": [errors, errors_over_time],
    "groups": [group_summary, group_events, committed_offsets, lag],
    "producers": [producers, sequences, transactions, markers],
}
