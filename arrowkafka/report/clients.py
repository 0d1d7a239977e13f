"""The report's per-connection tables (``connections``, ``overview``, ``throughput_by_client``)
computed on DuckDB.

A capture can hold millions of connections (short-lived clients, ports reused), so nothing here
holds a row per connection in Python. DuckDB reads the message tables' Parquet itself (the
columns a connection needs), with its memory capped and spilling to disk (``spill.Spill``): each
message table is aggregated per connection (client and broker address) and capture file into the
table ``frames`` (one message table at a time), which every number here aggregates further.

- ``connections``: the aggregate per connection, sorted in SQL; with a ``limit`` only that many
  rows come back (and the whole table's row count, as metadata), kept per folder (bounded).
- ``overview``: the connection counts (connections, client addresses, client ids, brokers) and
  the capture files are counted in SQL; its other numbers (APIs, rejects, record totals,
  timeline) are ``compute``'s, a row per key already.
- ``throughput_by_client``: the whole data batches aggregated per connection and side (produce,
  fetch), given their connection's client id, summed per (client id, client) and put side by
  side, in one query.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.report import compute
from arrowkafka.report.spill import Spill, files, limited, literal, parquet, with_total

__all__ = ["PER_CONNECTION", "connections", "overview", "stage", "throughput_by_client"]

_CONNECTIONS = pa.schema(
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

_METRICS = ("batches", "records", "bytes")
_COUNTS = [(side, m) for side in ("produce", "fetch") for m in _METRICS]

_BY_CLIENT = pa.schema(
    [
        ("client_id", pa.string()),
        ("client", pa.string()),
        *(
            field
            for side in ("produce", "fetch")
            for field in [
                *((f"{side}_{m}", pa.int64()) for m in _METRICS),
                (f"{side}_records_per_s", pa.float64()),
                (f"{side}_bytes_per_s", pa.float64()),
            ]
        ),
    ]
)


_FRAMES = """CREATE TABLE frames (client VARCHAR, broker VARCHAR, capture VARCHAR, client_id VARCHAR,
    requests BIGINT, responses BIGINT, first TIMESTAMPTZ, last TIMESTAMPTZ)"""


def stage(db: Spill, outdir: str | Path, requests_only: bool = False, among: str | None = None) -> None:
    """Fill the table ``frames`` of ``db``: per message table, its frames aggregated per
    connection (``client``, ``broker``) and capture file: the smallest ``client_id`` (a
    request's: a response carries none), ``requests``, ``responses``, ``first``, ``last``.
    Empty if the folder has no message table. ``requests_only``: the request tables alone (all
    the client ids need); ``among``: only the connections of that table of ``db`` (its
    ``_client`` and ``_broker``), say a few rows that want their client ids."""
    tables = {
        m: p for m, p in compute.message_tables(outdir).items() if m.endswith("Request") or not requests_only
    }
    db.con.execute(_FRAMES)
    # one table at a time: a UNION ALL of every table's scan runs them side by side, each with its
    # read buffers, and runs out of the memory cap
    for message, path in tables.items():
        request = message.endswith("Request")
        named = request and compute._has(outdir, message, "_client_id")
        ids = "_client_id::VARCHAR" if named else "NULL::VARCHAR"
        # (a folder without ``_capture`` still has connections: only the overview counts files)
        capture = "_capture::VARCHAR" if compute._has(outdir, message, "_capture") else "NULL::VARCHAR"
        only = (
            f'SEMI JOIN {among} c ON f."_client" = c."_client" AND f."_broker" = c."_broker"' if among else ""
        )
        db.con.execute(
            f"""INSERT INTO frames SELECT _client::VARCHAR, _broker::VARCHAR, {capture},
                min({ids}), {"count(*), 0" if request else "0, count(*)"}, min(_ts_first), max(_ts_last)
            FROM {parquet(compute._parts(path))} f {only} GROUP BY 1, 2, 3"""
        )


# a row per connection (client, broker), from ``frames``: the smallest client id of its requests
PER_CONNECTION = """SELECT client, broker, min(client_id) AS client_id, sum(requests)::BIGINT AS requests,
    sum(responses)::BIGINT AS responses, min(first) AS first, max(last) AS last
    FROM frames GROUP BY client, broker"""


def connections(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Per connection (client address, broker address): the client id its requests gave (the
    smallest, should they give several), requests, responses, first and last frame; by first
    frame, client, then broker (nulls last). With a ``limit``: its first ``limit`` rows and the
    whole table's row count (``total_rows`` metadata), kept for the last folders while their
    tables are unchanged (bounded: ``limit`` rows each)."""
    if limit is None:
        return _connections(str(outdir), None)
    return _cached(compute._state(outdir), str(outdir), limit)


@functools.lru_cache(maxsize=4)
def _cached(key: tuple[tuple[str, int, int], ...], outdir: str, limit: int) -> pa.Table:
    return _connections(outdir, limit)


def _connections(outdir: str, limit: int | None) -> pa.Table:
    order = "first NULLS LAST, client NULLS LAST, broker NULLS LAST"
    with Spill() as db:
        stage(db, outdir)
        db.con.execute(f"CREATE TABLE result AS {PER_CONNECTION}")
        return limited(db, "result", order, limit, lambda t: t.cast(_CONNECTIONS))


def _counts(outdir: str | Path) -> dict[str, int]:
    """Capture files, connections, client addresses, client ids and brokers (a null capture file
    counts as one file: a folder written without ``_capture`` still has one; a null address or
    id counts as none)."""
    with Spill() as db:
        stage(db, outdir)

        # each distinct count a DISTINCT subquery: a hash aggregate, which spills, where
        # count(DISTINCT) would hold every value in memory
        def distinct(column: str, source: str) -> str:
            return f"(SELECT count(*) FROM (SELECT DISTINCT {column} FROM {source}))"

        row = db.table(
            f"""WITH c AS MATERIALIZED ({PER_CONNECTION})
            SELECT (SELECT count(*) FROM c) AS connections,
                {distinct("client", "c WHERE client IS NOT NULL")} AS client_addresses,
                {distinct("client_id", "c WHERE client_id IS NOT NULL")} AS client_ids,
                {distinct("broker", "c WHERE broker IS NOT NULL")} AS brokers,
                {distinct("capture", "frames")} AS captures"""
        ).to_pylist()[0]
    return {k: int(v or 0) for k, v in row.items()}


def overview(outdir: str | Path) -> pa.Table:
    """One row, the capture at a glance: first and last frame, duration, capture files,
    connections, client addresses, client ids, brokers, requests, responses, frame bytes, APIs,
    API versions, rejects and the record totals."""
    # DuckDB first, closed before compute's pyarrow readings: their peaks do not add up
    counts = _counts(outdir)
    tl = compute.timeline(outdir)
    api = compute.apis(outdir)
    rej = compute.rejects(outdir)
    totals = compute._record_totals(outdir)
    n_api = api.to_pydict()
    row = {
        "first": pa.array([tl.start_us], pa.timestamp("us", "UTC")),
        "last": pa.array([tl.end_us], pa.timestamp("us", "UTC")),
        "duration_s": [tl.seconds],
        "captures": [counts["captures"]],
        "connections": [counts["connections"]],
        "client_addresses": [counts["client_addresses"]],
        "client_ids": [counts["client_ids"]],
        "brokers": [counts["brokers"]],
        "requests": [sum(n_api["requests"])],
        "responses": [sum(n_api["responses"])],
        # (null if any table lacks ``_size``: a folder written by an older arrowkafka)
        "frame_bytes": [compute._total(api["request_bytes"], api["response_bytes"])],
        "apis": [len(set(n_api["api"]))],
        "api_versions": [api.num_rows],
        "rejects": [sum(rej["count"].to_pylist())],
        **{k: [v] for k, v in totals.items()},
    }
    return pa.table(row)


def throughput_by_client(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Per client (client id and address), produce and fetch side by side: record batches,
    records, bytes, and records and bytes per second over the capture; by client id, then
    client. The client id is its connection's (as in ``connections``): a Fetch response carries
    none of its own. With a ``limit``: its first ``limit`` rows and the whole table's row count
    (``total_rows`` metadata)."""
    batches = files(outdir, "record_batches")
    if not batches:
        return with_total(_BY_CLIENT.empty_table(), 0, limit)
    side = (
        "CASE "
        + " ".join(f"WHEN m = {literal(m)} THEN {literal(s)}" for m, s in compute.SIDES.items())
        + " END"
    )
    names = ", ".join(literal(m) for m in compute.SIDES)
    # whole data batches only (the records the other throughput tables count): no control batch,
    # no partial one (a null ``partial`` is not known whole: left out too)
    per_connection = f"""(SELECT client, broker, {side} AS side, sum(record_count) AS records,
            sum(size) AS bytes, count(size) AS batches
        FROM (SELECT _message::VARCHAR AS m, _client::VARCHAR AS client, _broker::VARCHAR AS broker,
                record_count, size, control, partial FROM {parquet(batches)})
        WHERE m IN ({names}) AND NOT coalesce(control, false) AND NOT partial
        GROUP BY client, broker, side)"""
    cols = [
        f"coalesce(sum(b.{m}) FILTER (WHERE b.side = {literal(s)}), 0)::BIGINT AS {s}_{m}" for s, m in _COUNTS
    ]
    # a batch on a connection no request names, or with a null address, has a null client id
    # (a join never matches null keys)
    select = f"""SELECT i.client_id, b.client, {", ".join(cols)}
        FROM {per_connection} b LEFT JOIN ({PER_CONNECTION}) i ON b.client = i.client AND b.broker = i.broker
        GROUP BY i.client_id, b.client"""
    with Spill() as db:
        # a connection with no request has no row in ``frames`` then: a null client id all the same
        stage(db, outdir, requests_only=True)
        keys = [pa.field(f, pa.string()) for f in ("client_id", "client")]
        schema = pa.schema([*keys, *(pa.field(f"{s}_{m}", pa.int64()) for s, m in _COUNTS)])
        db.con.execute(f"CREATE TABLE result AS {select}")
        t = limited(db, "result", "client_id NULLS LAST, client NULLS LAST", limit, lambda t: t.cast(schema))
    # the rates (float64 counts over the capture's seconds, as the other throughput tables), after
    # DuckDB is closed: the timeline's own reading of the tables does not add to DuckDB's memory
    seconds = compute.timeline(outdir).seconds
    out: dict[str, pa.ChunkedArray] = {}
    for name in _BY_CLIENT.names:
        if name.endswith("_per_s"):
            count = pc.cast(t[name.removesuffix("_per_s")], pa.float64())
            out[name] = pc.divide(count, seconds) if seconds > 0 else pa.nulls(t.num_rows, pa.float64())
        else:
            out[name] = t[name]
    return pa.table(out, schema=_BY_CLIENT.with_metadata(t.schema.metadata))
