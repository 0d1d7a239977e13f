"""The report's consumer-group membership tables (``group_events``, ``group_summary``) and the
membership plot's lanes and dots (``member_lanes``), computed on DuckDB.

Every JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat and
ShareGroupHeartbeat request paired with its response is a row per request: a long capture's
heartbeats are most of it, too many to hold in memory. Here DuckDB reads the Parquet itself,
with its memory capped and spilling to disk (``spill.Spill``): a SQL query per API
(``_api_events``) pairs its requests with their responses (``spill.pairs``) and applies the
API's rules for member and generation, into one table of events on disk (``_store_events``)
that the three functions query. Only a row per (group, API, outcome, member), per lane or lane
dot, or the ``limit`` first events come back to Python (all events when ``group_events`` is
asked for the whole table).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrowkafka.report import compute
from arrowkafka.report.spill import COLUMN_TYPES, Spill, files, limited, literal, pairs, place

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

# ties in capture order: the request's place (``spill.place``), then its response's (a request
# answered twice keeps both rows, in the responses' order)
_ORDER = "ts NULLS LAST, api NULLS LAST, correlation_id NULLS LAST, q_at, r_at"
_EVENT_COLS = ", ".join(f.name for f in _EVENT_SCHEMA if f.name != "error")


def _columns(parts: list[Path]) -> set[str]:
    """The columns any of the Parquet files has (from their footers)."""
    return {name for p in parts for name in pq.read_schema(p).names}


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
    # a column a table lacks (one written by a tool that decoded only some versions) is a typed
    # null; without the response table ``pairs`` types the answer's columns itself
    q_cols = [c for c in asked if c in have_q]
    r_cols = [c for c in answered if not resp or c in have_r]
    base = ["_ts_first", "_client", "_client_id", "_correlation_id", "file_index", "file_row_number"]
    r_virtual = ["file_index", "file_row_number"] if resp else []
    src = pairs(req, resp, [*base, *q_cols], [*r_cols, *r_virtual])

    def q(c: str) -> str:
        return f'"{c}"' if c in q_cols else f"NULL::{COLUMN_TYPES[c]}"

    def r(c: str) -> str:
        return f'"r_{c}"' if c in r_cols else f"NULL::{COLUMN_TYPES[c]}"

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
    r_at = place("r_") if resp else "NULL::HUGEINT"
    return (
        f'SELECT "_ts_first" AS ts, {literal(api)} AS api, {q("group_id")} AS group_id, '
        f"{member} AS member_id, ({generation})::INTEGER AS generation_id, "
        '"_client" AS client, "_client_id" AS client_id, "_correlation_id" AS correlation_id, '
        f"({r('error_code')})::SMALLINT AS error_code, "
        f"{place()} AS q_at, {r_at} AS r_at "
        f"FROM {src}"
    )


_NO_EVENTS = (
    "SELECT NULL::TIMESTAMPTZ AS ts, NULL::VARCHAR AS api, NULL::VARCHAR AS group_id, "
    "NULL::VARCHAR AS member_id, NULL::INTEGER AS generation_id, NULL::VARCHAR AS client, "
    "NULL::VARCHAR AS client_id, NULL::INTEGER AS correlation_id, NULL::SMALLINT AS error_code, "
    "NULL::HUGEINT AS q_at, NULL::HUGEINT AS r_at "
    "WHERE false"
)


def _store_events(db: Spill, outdir: str | Path) -> None:
    """The table ``events`` in ``db``: every group request of the folder with its response, as
    ``group_events``'s columns (no error name) and the places of the request and its response
    in the capture (``q_at``, ``r_at``). One API at a time: its join alone under the memory cap
    (the joins of one query run side by side, their hash tables all held, and ran out of memory
    where one at a time spills)."""
    db.con.execute(f"CREATE TABLE events AS {_NO_EVENTS}")
    for api in compute.GROUP_APIS:
        req = files(outdir, f"{api}Request")
        if req:
            resp = files(outdir, f"{api}Response")
            db.con.execute(f"INSERT INTO events {_api_events(api, req, resp)}")


def _named(t: pa.Table) -> pa.Table:
    """Events read from ``events`` as ``group_events`` gives them: error names added, the
    schema's types (``ts`` in tz "UTC")."""
    t = t.append_column("error", compute._error_names(t["error_code"]))
    return t.cast(_EVENT_SCHEMA)


def group_events(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Every JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat and
    ShareGroupHeartbeat request with its response: time, group, member, generation, client,
    client id, correlation id, error code and name (null: no response), by time, API and
    correlation id (nulls last; ties in capture order). With ``limit``, the first ``limit`` rows
    and the whole table's row count (``total_rows`` metadata)."""
    with Spill() as db:
        _store_events(db, outdir)
        return limited(db, "events", _ORDER, limit, _named, columns=_EVENT_COLS)


def group_summary(outdir: str | Path) -> pa.Table:
    """Per group, API and outcome (error name; ``NO_RESPONSE`` where the capture has none): how
    many requests, and how many distinct members (a null member is none); by group, API, then
    outcome."""
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
    """What the membership plot draws of the folder's ``group_events``: the ``lanes`` (group,
    member; a null one as "") with the most requests (ties: the first by group, then member),
    sorted; how many (group, member) there are; and one dot per API, outcome (ok: error NONE),
    lane and 1/``points`` of the capture (api, ok, t, lane), sorted. ``source`` is the folder,
    or events already at hand (``group_events``' columns)."""
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
        # the top lanes picked in SQL: a row per (group, member) stays in DuckDB
        members = db.con.execute("SELECT count(*) FROM (SELECT DISTINCT g, m FROM ev)").fetchall()[0][0]
        db.con.execute(
            "CREATE TABLE lanes AS SELECT g, m, (row_number() OVER (ORDER BY g, m) - 1)::BIGINT AS lane "
            "FROM (SELECT g, m FROM ev GROUP BY ALL ORDER BY count(*) DESC, g, m LIMIT $1)",
            [max(int(lanes), 0)],
        )
        chosen = db.table("SELECT g, m FROM lanes ORDER BY lane")
        # a dot's x: its float64 seconds into the capture / step, rounded half to even
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
    return list(zip(chosen["g"].to_pylist(), chosen["m"].to_pylist(), strict=True)), members, dots
