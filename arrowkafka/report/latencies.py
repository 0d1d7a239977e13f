"""The report's latency tables (``latency``, ``latency_over_time``, ``slowest``) computed on DuckDB.

Exact quantiles need every latency of a group, and the slowest responses' client ids come from
their connections' requests: both would grow with the capture in memory. Here DuckDB reads the
response tables' Parquet itself, with its memory capped and spilling to disk (``spill.Spill``):

- p50 and p99 are exact, from ranks: the count of each distinct latency in its group, summed along
  the latency order (an aggregate and a window, both of which spill), places every rank; the
  group's count picks the two ranks around ``q * (n - 1)``, and numpy interpolates between their
  values as ``np.quantile`` does (its default, "linear", = DuckDB's ``quantile_cont``), bit for
  bit. DuckDB's quantile aggregates would hold a group's values in memory, hence the ranks.
- the slowest responses are a top-n; their client ids are looked up for those n connections only
  (the smallest client id of the connection's requests, as ``connections`` says).

Only a row per API, version (and bucket), or the n slowest rows, come back to Python.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from arrowkafka.report import clients, compute
from arrowkafka.report.spill import Spill, literal, parquet, place

__all__ = ["latency", "latency_over_time", "slowest"]

_QUANTILES = {"p50": 0.5, "p99": 0.99}

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

_SLOWEST_SCHEMA = pa.schema(
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


def _tables(outdir: str | Path, kind: str) -> list[tuple[str, list[Path]]]:
    """(API, Parquet files) of each message table of ``kind`` (Request or Response)."""
    return [
        (compute._api(message), compute._parts(p))
        for message, p in compute.message_tables(outdir).items()
        if message.endswith(kind)
    ]


def _ms(ns: np.ndarray) -> np.ndarray:
    """Nanoseconds as float64 milliseconds (a float64 division: the same bits in every table)."""
    return ns.astype(np.float64) / 1e6


def _lerp(n: np.ndarray, lo: np.ndarray, hi: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of groups of ``n`` values, from the values at ranks ``floor(q * (n - 1))``
    and the next: the same float operations as ``np.quantile``'s "linear" method
    (``_get_indexes``, ``_get_gamma``, ``_lerp`` of numpy 2), so the same bits."""
    virtual = (n - 1) * np.float64(q)
    previous = np.floor(virtual)
    previous[virtual >= n - 1] = -1  # numpy takes the last value twice there (lo == hi)
    gamma = virtual - previous
    diff = hi - lo
    out = lo + diff * gamma
    return np.where(gamma >= 0.5, hi - diff * (1 - gamma), out)


def _latency_table(outdir: str | Path, tl: compute.Timeline | None) -> pa.Table:
    """Per API, version and bucket of request time (0 without ``tl``): responses, p50, p99 and
    max latency (ms); by API, version, then bucket (a row per key: no ties)."""
    tables = _tables(outdir, "Response")
    if not tables:
        return _LATENCY_SCHEMA.empty_table()
    if tl is None:
        bucket = "0::BIGINT"
    else:
        # floor division (DuckDB's // truncates towards zero), as numpy's // in Timeline.bucket
        d, w = f'(epoch_us("_request_ts") - {tl.start_us})', tl.width_us
        bucket = f"(({d} - ((({d} % {w}) + {w}) % {w})) // {w})"
    # the 0-based ranks numpy reads for each quantile: floor(q * (n - 1)) and the next, both the
    # last rank when that is past the end (n = 1)
    ranks = ", ".join(
        f"least(floor((n - 1)::DOUBLE * {q!r}::DOUBLE), n - 1)::BIGINT AS {name}_lo, "
        f"least(floor((n - 1)::DOUBLE * {q!r}::DOUBLE) + 1, n - 1)::BIGINT AS {name}_hi"
        for name, q in _QUANTILES.items()
    )
    # the value at rank r is the smallest latency whose cumulative count passes r
    picks = ", ".join(
        f"min(ns) FILTER (WHERE cum > {name}_{end}) AS {name}_{end}"
        for name in _QUANTILES
        for end in ("lo", "hi")
    )
    # ranks from counts per distinct latency, summed along the latency order (an aggregate and a
    # window: both spill): latencies repeat (whole microseconds of the capture's clock), so this
    # sorts far fewer rows than a row_number over every response, and never more. One query per
    # table: DuckDB holds the footers of every file a query reads, and a union of all the tables
    # made the peak grow with the capture (their row groups)
    parts_out = []
    with Spill() as db:
        for api, parts in tables:
            part = db.table(f"""
                WITH d AS (
                    SELECT "_version" AS version, {bucket} AS bucket, "_latency_ns" AS ns, count(*) AS c
                    FROM {parquet(parts)} WHERE "_latency_ns" IS NOT NULL GROUP BY ALL
                ), w AS (
                    SELECT *, sum(c) OVER (g ORDER BY ns ROWS UNBOUNDED PRECEDING)::BIGINT AS cum,
                        sum(c) OVER g::BIGINT AS n
                    FROM d WINDOW g AS (PARTITION BY version, bucket)
                ), k AS (SELECT *, {ranks} FROM w)
                SELECT {literal(api)} AS api, version, bucket, any_value(n) AS n, {picks}, max(ns) AS top
                FROM k GROUP BY version, bucket
            """)
            if part.num_rows:
                parts_out.append(part)
    if not parts_out:
        return _LATENCY_SCHEMA.empty_table()
    g = pa.concat_tables(parts_out, promote_options="permissive")
    n = g["n"].to_numpy()
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "api": g["api"],
        "version": g["version"],
        "bucket": g["bucket"],
        "responses": g["n"],
    }
    for name, q in _QUANTILES.items():
        lo = _ms(g[f"{name}_lo"].to_numpy())
        hi = _ms(g[f"{name}_hi"].to_numpy())
        columns[f"{name}_ms"] = pa.array(_lerp(n, lo, hi, q), pa.float64())
    columns["max_ms"] = pa.array(_ms(g["top"].to_numpy()), pa.float64())
    t = pa.table(columns).cast(_LATENCY_SCHEMA)
    return t.sort_by([("api", "ascending"), ("version", "ascending"), ("bucket", "ascending")])


def latency(outdir: str | Path) -> pa.Table:
    """Per API and version: responses, p50, p99 and max latency (ms: the response's first segment
    minus its request's)."""
    return _latency_table(outdir, None).drop_columns(["bucket"])


def latency_over_time(outdir: str | Path) -> pa.Table:
    """Per API, version and bucket of request time: responses, p50, p99, max latency (ms)."""
    tl = compute.timeline(outdir)
    return tl.with_t(_latency_table(outdir, tl))


def slowest(outdir: str | Path, n: int = compute.SLOWEST) -> pa.Table:
    """The ``n`` slowest responses: API, version, connection, client id (its connection's, as in
    ``connections``), correlation id, request time and latency, to find them in the tables. By
    latency (slowest first), API, correlation id, then capture order; of responses tied at the
    cut, the earliest in the capture are kept."""
    responses = _tables(outdir, "Response")
    if not responses or n <= 0:
        return _SLOWEST_SCHEMA.empty_table()
    cols = '"_version", "_client", "_broker", "_correlation_id", "_request_ts", "_latency_ns"'
    # capture order (the table's place among the response tables, then the row's in the table):
    # the same result, whatever order DuckDB reads or joins in
    capture = "tbl, place"
    # one query per table (see _latency_table: a union holds every file's footer at once)
    with Spill() as db:
        # a top-n per table, then of those: DuckDB keeps n rows, whatever the capture
        tops = [
            db.table(
                f"SELECT {literal(api)} AS api, {cols}, {i} AS tbl, {place()} AS place "
                f'FROM {parquet(parts)} WHERE "_latency_ns" IS NOT NULL '
                f'ORDER BY "_latency_ns" DESC, place LIMIT {int(n)}'
            )
            for i, (api, parts) in enumerate(responses)
        ]
        db.store("tops", tops)
        db.con.execute(
            f'CREATE TABLE top AS SELECT * FROM tops ORDER BY "_latency_ns" DESC, {capture} LIMIT {int(n)}'
        )
        # a response carries no client id: its connection's requests do (the smallest, as in
        # connections), read for the top's connections only
        clients.stage(db, outdir, requests_only=True, among="top")
        t = db.table(f"""
            SELECT t.api, t."_version" AS version, t."_client" AS client, t."_broker" AS broker,
                i.client_id, t."_correlation_id" AS correlation_id, t."_request_ts" AS request_ts,
                t."_latency_ns" AS ns
            FROM top t LEFT JOIN ({clients.PER_CONNECTION}) i
                ON t."_client" = i.client AND t."_broker" = i.broker
            ORDER BY t."_latency_ns" DESC, t.api, t."_correlation_id" NULLS LAST, {capture}
        """)
    t = t.append_column("latency_ms", pa.array(_ms(t["ns"].to_numpy()), pa.float64()))
    return t.drop_columns(["ns"]).cast(_SLOWEST_SCHEMA)
