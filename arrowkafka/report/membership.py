"""The report's consumer-group membership tables (``group_events``, ``group_summary``) and the
membership plot's lanes and dots (``member_lanes``), computed on DuckDB.

``compute``'s versions pair every JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ConsumerGroupHeartbeat and ShareGroupHeartbeat request with its response in Arrow, a row per
request held in memory, and sort and group them there: memory grows with the capture (a long
capture's heartbeats are most of it). Here DuckDB reads the Parquet itself, with its memory
capped and spilling to disk (``spill.Spill``): a SQL query per API (``_api_events``) pairs its
requests with their responses (``spill.pairs``) and applies the API's rules for member and
generation, into one table of events on disk (``_store_events``) that the three functions
query. Only a row per (group, API, outcome, member), per lane or lane dot, or the ``limit``
first events come back to Python (all events, as before, when ``group_events`` is asked for
the whole table).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrowkafka.report import compute
from arrowkafka.report.spill import Spill, pairs

__all__ = ["group_events", "group_summary", "member_lanes"]

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

# the type of each request column an API may lack in a capture (a table written by a tool that
# decoded only some versions, a synthetic one): it reads as null, as in a part without it
_REQUEST_TYPES = {
    "group_id": "VARCHAR",
    "member_id": "VARCHAR",
    "generation_id": "INTEGER",
    "member_epoch": "INTEGER",
}
_RESPONSE_TYPES = {"error_code": "SMALLINT", **_REQUEST_TYPES}

# capture order: DuckDB's virtual columns of the request (part, row) and of its response (a
# request answered twice keeps both rows, in the responses' order)
_ORDER = "ts NULLS LAST, api NULLS LAST, correlation_id NULLS LAST, q_part, q_row, r_part, r_row"
_EVENT_COLS = ", ".join(f.name for f in _EVENT_SCHEMA if f.name != "error")


def _columns(parts: list[Path]) -> set[str]:
    """The columns any of the Parquet files has (from their footers)."""
    return {name for p in parts for name in pq.read_schema(p).names}


def _table_parts(outdir: str | Path, table: str) -> list[Path]:
    p = compute._path(outdir, table)
    return compute._parts(p) if p is not None else []


def _api_events(api: str, req: list[Path], resp: list[Path]) -> str:
    """A SQL query: the requests of ``api`` (its request table's files ``req``) with their
    responses (``resp``: none if the capture has no response table), as ``_store_events``'s columns."""
    have_q, have_r = _columns(req), _columns(resp)
    epochs = api in compute.EPOCH_APIS
    asked = {
        "JoinGroup": ["group_id", "member_id"],
        "SyncGroup": ["group_id", "member_id", "generation_id"],
        "Heartbeat": ["group_id", "member_id", "generation_id"],
        "LeaveGroup": ["group_id", "member_id", "members"],
    }.get(api, ["group_id", "member_id", "member_epoch"])
    given = ["member_id", "generation_id" if api == "JoinGroup" else "member_epoch"]
    answered = ["error_code", *(given if api == "JoinGroup" or epochs else [])]
    q_cols = [c for c in asked if c in have_q]
    # without the response table ``pairs`` types the answer's columns itself; with it, a column
    # it lacks is a typed null here
    r_cols = [c for c in answered if not resp or c in have_r]
    base = ["_ts_first", "_client", "_client_id", "_correlation_id", "file_index", "file_row_number"]
    r_virtual = ["file_index", "file_row_number"] if resp else []
    src = pairs(req, resp, [*base, *q_cols], [*r_cols, *r_virtual])

    def q(c: str) -> str:
        return f'"{c}"' if c in q_cols else f"NULL::{_REQUEST_TYPES[c]}"

    def r(c: str) -> str:
        return f'"r_{c}"' if c in r_cols else f"NULL::{_RESPONSE_TYPES[c]}"

    if api == "JoinGroup" or epochs:
        # the id the coordinator gave where it gave one (a first join asks with none)
        member = f"CASE WHEN {r('member_id')} <> '' THEN {r('member_id')} ELSE {q('member_id')} END"
        generation = (
            r("generation_id")
            if api == "JoinGroup"
            # an error answer carries no epoch of its own (0 on the wire): the one asked
            else f"CASE WHEN {r('error_code')} = 0 THEN {r('member_epoch')} ELSE {q('member_epoch')} END"
        )
    elif api == "LeaveGroup":
        # v3+: a list of members; v0-2: one member_id
        member = (
            'CASE WHEN len("members") > 0 THEN array_to_string(list_transform("members", '
            f"lambda m: m.member_id), ', ') ELSE {q('member_id')} END"
            if "members" in q_cols
            else q("member_id")
        )
        generation = "NULL"
    else:
        member, generation = q("member_id"), q("generation_id")
    r_part = '"r_file_index"' if resp else "NULL::UBIGINT"
    r_row = '"r_file_row_number"' if resp else "NULL::BIGINT"
    return (
        f"SELECT \"_ts_first\" AS ts, '{api}' AS api, {q('group_id')} AS group_id, "
        f"{member} AS member_id, ({generation})::INTEGER AS generation_id, "
        '"_client" AS client, "_client_id" AS client_id, "_correlation_id" AS correlation_id, '
        f"({r('error_code')})::SMALLINT AS error_code, "
        f'"file_index" AS q_part, "file_row_number" AS q_row, {r_part} AS r_part, {r_row} AS r_row '
        f"FROM {src}"
    )


_NO_EVENTS = (
    "SELECT NULL::TIMESTAMPTZ AS ts, NULL::VARCHAR AS api, NULL::VARCHAR AS group_id, "
    "NULL::VARCHAR AS member_id, NULL::INTEGER AS generation_id, NULL::VARCHAR AS client, "
    "NULL::VARCHAR AS client_id, NULL::INTEGER AS correlation_id, NULL::SMALLINT AS error_code, "
    "NULL::UBIGINT AS q_part, NULL::BIGINT AS q_row, NULL::UBIGINT AS r_part, NULL::BIGINT AS r_row "
    "WHERE false"
)


def _store_events(db: Spill, outdir: str | Path) -> None:
    """The table ``events`` in ``db``: every group request of the folder with its response, as
    ``group_events``'s columns (no error name) and the capture order (q_part, q_row, r_part,
    r_row). One API at a time: its join alone under the memory cap (the joins of one query run
    side by side, their hash tables all held, and ran out of memory where one at a time spills)."""
    db.con.execute(f"CREATE TABLE events AS {_NO_EVENTS}")
    for api in compute.GROUP_APIS:
        req = _table_parts(outdir, f"{api}Request")
        if req:
            resp = _table_parts(outdir, f"{api}Response")
            db.con.execute(f"INSERT INTO events {_api_events(api, req, resp)}")


def _named(t: pa.Table) -> pa.Table:
    """The events' columns as ``compute``'s: error names added, ``ts`` in tz "UTC"."""
    t = t.append_column("error", compute._error_names(t["error_code"]))
    return t.cast(_EVENT_SCHEMA)


def group_events(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Every JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat and
    ShareGroupHeartbeat request with its response, as ``compute.group_events``: time, group,
    member, generation, client, correlation id, error code and name (null: no response), by
    time, API and correlation id (ties in capture order). With ``limit``, the first ``limit``
    rows and the whole table's row count (``total_rows`` metadata)."""
    with Spill() as db:
        _store_events(db, outdir)
        if limit is None:
            return _named(db.table(f"SELECT {_EVENT_COLS} FROM events ORDER BY {_ORDER}"))
        total = db.con.execute("SELECT count(*) FROM events").fetchall()[0][0]
        top = db.table(f"SELECT {_EVENT_COLS} FROM events ORDER BY {_ORDER} LIMIT {max(int(limit), 0)}")
    out = _named(top)
    return out.replace_schema_metadata({**(out.schema.metadata or {}), b"total_rows": str(total).encode()})


def group_summary(outdir: str | Path, events: pa.Table | None = None) -> pa.Table:
    """Per group, API and outcome (error name; ``NO_RESPONSE`` where the capture has none): how
    many requests, and how many distinct members, as ``compute.group_summary``. ``events`` (what
    ``compute``'s version takes to save reading the folder again) is not read: the folder is."""
    del events  # the folder's events, from DuckDB, whatever the caller holds
    with Spill() as db:
        _store_events(db, outdir)
        # per (group, API, code, member) first: a plain aggregate, which spills, where a
        # count(DISTINCT) would hold each group's members in memory; then per (group, API, code)
        g = db.table(
            "SELECT group_id, api, error_code, sum(n)::BIGINT AS requests, count(member_id) AS members "
            "FROM (SELECT group_id, api, error_code, member_id, count(correlation_id) AS n "
            "FROM events GROUP BY ALL) GROUP BY ALL"
        )
    # a code has one name (the names are distinct): named after grouping, a row per key
    error = pc.fill_null(compute._error_names(g["error_code"]), "NO_RESPONSE")
    out = pa.table(
        {
            "group_id": g["group_id"],
            "api": g["api"],
            "error": error,
            "requests": pc.cast(g["requests"], pa.int64()),
            "members": pc.cast(g["members"], pa.int64()),
        }
    )
    return out.sort_by([("group_id", "ascending"), ("api", "ascending"), ("error", "ascending")])


def member_lanes(
    source: str | Path | pa.Table, start_us: int, seconds: float, lanes: int, points: int = 400
) -> tuple[list[tuple[str, str]], int, pa.Table]:
    """What the membership plot draws, as ``compute.member_lanes`` of the folder's
    ``group_events``: the ``lanes`` (group, member) with the most requests (sorted), how many
    members there are, and one dot per API, outcome (ok: error NONE), lane and 1/``points`` of
    the capture (api, ok, t, lane). ``source`` is the folder, or events already at hand."""
    step = max(seconds, 1e-3) / points
    with Spill() as db:
        if isinstance(source, pa.Table):
            db.con.register("given", source.select(["ts", "api", "group_id", "member_id", "error_code"]))
            events = "given"
        else:
            _store_events(db, source)
            events = "events"
        db.con.execute(
            "CREATE VIEW ev AS SELECT ts, api, coalesce(group_id, '') AS g, coalesce(member_id, '') AS m, "
            f"error_code FROM {events}"
        )
        # a row per lane (member): the top is picked in Arrow, exactly as compute picks it
        counts = db.table("SELECT g, m, count(*) AS n FROM ev GROUP BY ALL")
        lane = pc.binary_join_element_wise(counts["g"], counts["m"], "\x00")
        by = pa.table({"lane": lane, "lane_count": counts["n"]})
        top = by.sort_by([("lane_count", "descending"), ("lane", "ascending")]).slice(0, lanes)
        names = sorted(top["lane"].to_pylist())
        split = [name.split("\x00", 1) for name in names]
        schema = pa.schema([("g", pa.string()), ("m", pa.string()), ("lane", pa.int64())])
        chosen = [[g for g, _ in split], [m for _, m in split], list(range(len(split)))]
        db.store("lanes", [pa.table(chosen, schema=schema)])
        # x as compute rounds it: float64 seconds / step, half to even
        dots = db.table(
            "SELECT DISTINCT e.api, coalesce(e.error_code = 0, false) AS ok, "
            "round_even(((epoch_us(e.ts) - $1)::DOUBLE / 1e6) / $2, 0) AS x, l.lane "
            "FROM ev e JOIN lanes l ON e.g = l.g AND e.m = l.m",
            [int(start_us), float(step)],
        )
    dots = pa.table(
        {
            "api": pc.cast(dots["api"], pa.string()),
            "ok": pc.cast(dots["ok"], pa.bool_()),
            "t": pc.multiply(pc.cast(dots["x"], pa.float64()), step),
            "lane": pc.cast(dots["lane"], pa.int64()),
        }
    ).sort_by([("api", "ascending"), ("ok", "ascending"), ("t", "ascending"), ("lane", "ascending")])
    return [(g, m) for g, m in split], counts.num_rows, dots
