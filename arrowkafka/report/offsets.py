"""The report's committed offsets (``committed_offsets``) and consumer lag (``lag``) computed on
DuckDB.

Every partition of every OffsetCommit, TxnOffsetCommit and OffsetFetch answer is a row: too many
to hold in memory for a long capture. Here DuckDB reads the Parquet tables itself, with its
memory capped and spilling to disk (``spill.Spill``), and only a row per group, topic and
partition comes back to Python:

- commits: every partition of every OffsetCommit and TxnOffsetCommit request (``unnest`` in SQL),
  left joined with the partitions of its response on the link (``spill.pairs``' rule) plus topic
  and partition: a repeated link key repeats the row.
- a TxnOffsetCommit's transaction: the first EndTxn (``spill.pairs`` with its response) of the same
  capture file, transactional id (null as "") and producer id at or after the commit, found with a
  window over commits and EndTxns per transaction in time (a commit before an EndTxn of the same
  time: a transaction ends after the commits it sent).
- OffsetFetch answers: v0-7 one group, named in the request (``spill.pairs``), v8+ the groups the
  response names.
- per partition: the counts, and the offset held (accepted commits, a transaction's from its
  EndTxn once it committed, and OffsetFetch answers): the first row of the last run of equal
  offsets in time, ties in capture order (the row's place, ``spill.place``, then the topic's
  and the partition's places in their lists: ``generate_subscripts``), found with aggregates
  per partition (the last row, the last before it with another offset, the first after that),
  not a sort of the rows.

``lag`` adds the high watermarks (``compute._high_watermarks``: a row per partition) to that.
Both are kept per folder while its tables are unchanged (``committed_offsets`` and ``lag``
compute once).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from arrowkafka.report import compute
from arrowkafka.report.spill import LINK, Spill, files, linked, pairs, place, placed

__all__ = ["committed_offsets", "lag"]

COMMIT_APIS = ("OffsetCommit", "TxnOffsetCommit")
LAG_UNKNOWN = "high watermark older than the commit"

_COMMITTED = pa.schema(
    [
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("commits", pa.int64()),
        ("accepted", pa.int64()),
        ("aborted", pa.int64()),
        ("undecided", pa.int64()),
        ("fetched", pa.int64()),
        ("committed_offset", pa.int64()),
        ("committed_at", pa.timestamp("us", "UTC")),
        ("source", pa.string()),
        ("capture", pa.string()),
    ]
)

_LAG = pa.schema(
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

# the commits' partitions (``c``) and the OffsetFetch answers' (``f``), with their places in the
# capture, which break ties of time and API or version: ``p1`` the row's (``spill.place``),
# ``p2`` the places in its lists (``ti << 32 | pi``: list places are int32). (Not the response's
# place: the rows one request's partition has with two responses of its link differ in the error
# only, which no tie decides.)
_TABLES = """
CREATE TABLE c (
    api INTEGER, ts TIMESTAMPTZ, capture VARCHAR, group_id VARCHAR, topic VARCHAR,
    "partition" INTEGER, committed_offset BIGINT, error_code SMALLINT, txn VARCHAR,
    txn_at TIMESTAMPTZ, p1 HUGEINT, p2 HUGEINT);
CREATE TABLE f (
    v INTEGER, ts TIMESTAMPTZ, capture VARCHAR, group_id VARCHAR, topic VARCHAR,
    "partition" INTEGER, committed_offset BIGINT, p1 HUGEINT, p2 HUGEINT);
"""


def _flatten(src: str, keep: Sequence[str], levels: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """A SQL query: a row per element of nested lists of ``src``'s rows (a null or empty list
    gives none) with ``keep`` (columns, or ``expr AS name``). Each level is (its list: a column,
    or a field of the element above, ``e<n-1>.field``; the name of the element's place in it,
    from 1; the fields taken of the element, ``field`` or ``field AS name``). The unnests are in
    the select list: a lateral ``FROM t, unnest(...)`` is many times slower in DuckDB."""
    exprs = list(keep)  # the columns of the next select
    names = [k.partition(" AS ")[2] or k for k in keep]  # their names in the select after it
    sql = src
    for i, (lst, index, take) in enumerate(levels):
        sql = (
            f"(SELECT {', '.join(exprs)}, unnest({lst}) AS e{i}, "
            f"generate_subscripts({lst}, 1) AS {index} FROM {sql})"
        )
        taken = [(f"e{i}.{t.partition(' AS ')[0]}", t.partition(" AS ")[2] or t) for t in take]
        exprs = [*names, index, *(f"{t} AS {n}" for t, n in taken)]
        names = [*names, index, *(n for _, n in taken)]
    return f"(SELECT {', '.join(exprs)} FROM {sql})"


def _commit_rows(outdir: str | Path, api: str) -> str | None:
    """A SQL query: one row per partition of every ``api`` request, with its response's partition
    (left joined on the link, topic and partition: a request or partition the response lacks has
    a null error); None without the request table."""
    req, resp = files(outdir, f"{api}Request"), files(outdir, f"{api}Response")
    if not req:
        return None
    txn = ["transactional_id AS txn_id", "producer_id AS pid"] if api == "TxnOffsetCommit" else []
    q = _flatten(
        placed(req),
        [*LINK, "_ts_first", "group_id", *txn, "_at"],
        [("topics", "ti", ["name AS topic"]),
         ("e0.partitions", "pi", ["partition_index", "committed_offset"])],
    )  # fmt: skip
    if resp:
        r = _flatten(
            placed(resp),
            [*LINK, "_request_ts"],
            [("topics", "ti", ["name AS topic"]), ("e0.partitions", "pi", ["partition_index", "error_code"])],
        )
    else:  # only client -> broker captured: every commit with a null error
        r = """(
        SELECT NULL::VARCHAR AS _capture, NULL::VARCHAR AS _client, NULL::VARCHAR AS _broker,
               NULL::INTEGER AS _correlation_id, NULL::TIMESTAMPTZ AS _request_ts,
               NULL::VARCHAR AS topic, NULL::INTEGER AS partition_index,
               NULL::SMALLINT AS error_code
        WHERE false)"""
    on = " AND ".join([linked("q", "r"), "q.topic = r.topic", "q.partition_index = r.partition_index"])
    txn_cols = ", q.txn_id, q.pid" if txn else ""
    return f"""
        SELECT q._ts_first AS ts, q._capture AS capture, q.group_id, q.topic,
               q.partition_index AS "partition", q.committed_offset, r.error_code{txn_cols},
               q._at AS p1, (q.ti::HUGEINT << 32) | q.pi AS p2
        FROM {q} q LEFT JOIN {r} r ON {on}"""


def _outcome_query(outdir: str | Path, commits: str) -> str:
    """The TxnOffsetCommit rows of ``commits`` with ``txn`` and ``txn_at``: by the first EndTxn
    of the same capture file, transactional id (null as "") and producer id at or after each, in
    time (of EndTxns at one time, the first by connection and correlation id: the same time and
    transaction twice is a capture read twice). COMMIT or ABORT as the producer asked, FAILED where
    the broker answered with an error, null where the capture holds no response."""
    req = files(outdir, "EndTxnRequest")
    if not req:
        return f"SELECT *, NULL::VARCHAR AS txn, NULL::TIMESTAMPTZ AS txn_at FROM ({commits})"
    ends = pairs(
        req,
        files(outdir, "EndTxnResponse"),
        [*LINK, "_ts_first", "transactional_id", "producer_id", "committed"],
        ["error_code"],
    )
    return f"""
        WITH u AS (
            SELECT *, 0 AS is_end FROM ({commits})
            UNION ALL BY NAME
            SELECT 1 AS is_end, _ts_first AS ts, _capture AS capture,
                   transactional_id AS txn_id, producer_id AS pid,
                   CASE WHEN r_error_code IS NULL THEN NULL
                        WHEN r_error_code = 0 THEN
                            CASE WHEN committed THEN 'COMMIT' WHEN NOT committed THEN 'ABORT' END
                        ELSE 'FAILED' END AS e_outcome,
                   _client AS e_client, _broker AS e_broker, _correlation_id AS e_corr,
                   r_error_code AS e_error
            FROM {ends}
        ), w AS (
            SELECT *, first_value(CASE WHEN is_end = 1 THEN {{'o': e_outcome, 'at': ts}} END IGNORE NULLS)
                OVER (PARTITION BY capture, coalesce(txn_id, ''), pid
                      ORDER BY ts ASC NULLS FIRST, is_end, e_client, e_broker, e_corr, e_error
                      ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS e
            FROM u
        )
        SELECT * EXCLUDE (is_end, e_outcome, e_client, e_broker, e_corr, e_error, e),
               e.o AS txn, e.at AS txn_at
        FROM w WHERE is_end = 0"""


def _fetch_queries(outdir: str | Path) -> list[str]:
    """SQL queries for ``f``: every partition of an OffsetFetch answer (before the filter)."""
    out = []
    resp = files(outdir, "OffsetFetchResponse")
    req = files(outdir, "OffsetFetchRequest")
    if req and compute._has(outdir, "OffsetFetchResponse", "topics"):
        # v0-7: one group, named in the request, so an answer counts with its request only (a
        # response whose request is not in the capture has no group to give an offset to)
        virtual = ["file_index", "file_row_number"]
        answered = pairs(req, resp, [*LINK, "group_id"], ["_capture", "_ts_first", "topics", *virtual])
        rows = _flatten(
            answered,
            ["r__ts_first AS ts", "r__capture AS capture", "group_id", *(f"r_{c}" for c in virtual)],
            [("r_topics", "ti", ["name AS topic"]),
             ("e0.partitions", "pi", ["partition_index", "committed_offset", "error_code"])],
        )  # fmt: skip
        # (ties in time: the answer's place in the capture, then the places in its lists)
        out.append(f"""
            SELECT 0 AS v, ts, capture, group_id, topic, partition_index AS "partition",
                   committed_offset, error_code, NULL::SMALLINT AS group_error,
                   {place("r_")} AS p1,
                   (ti::HUGEINT << 32) | pi AS p2
            FROM {rows}""")
    if compute._has(outdir, "OffsetFetchResponse", "groups"):  # v8+: groups, each named
        rows = _flatten(
            placed(resp),
            ["_ts_first AS ts", "_capture AS capture", "_at"],
            [("groups", "gi", ["group_id", "error_code AS group_error"]),
             ("e0.topics", "ti", ["name AS topic"]),
             ("e1.partitions", "pi", ["partition_index", "committed_offset", "error_code"])],
        )  # fmt: skip
        out.append(f"""
            SELECT 1 AS v, ts, capture, group_id, topic, partition_index AS "partition",
                   committed_offset, error_code, group_error,
                   _at AS p1,
                   (gi::HUGEINT << 64) | (ti::HUGEINT << 32) | pi AS p2
            FROM {rows}""")
    return out


# per partition: the counts, and the first row of the last run of equal offsets held. Rows are
# ordered by ``o``: the time held (null first), commits before fetches, the time of the commit
# or answer (null last), API or version, then the place in the capture (null last). With ``L`` the
# last row and ``D`` the last before it whose offset differs (a null differs from all), the run
# starts at the first row after ``D``: three aggregates per partition, no sort of the rows.
_RESULT = """
WITH totals AS (
    SELECT group_id, topic, "partition",
           count(*) FILTER (WHERE src = 0) AS commits,
           count(*) FILTER (WHERE src = 0 AND error_code = 0) AS accepted,
           count(*) FILTER (WHERE src = 0 AND error_code = 0 AND api = 1
                            AND txn IN ('ABORT', 'FAILED')) AS aborted,
           count(*) FILTER (WHERE src = 0 AND error_code = 0 AND api = 1 AND txn IS NULL) AS undecided,
           count(*) FILTER (WHERE src = 1) AS fetched
    FROM (SELECT 0 AS src, group_id, topic, "partition", error_code, api, txn FROM c
          UNION ALL
          SELECT 1, group_id, topic, "partition", NULL, NULL, NULL FROM f)
    GROUP BY group_id, topic, "partition"
), held AS (
    -- accepted commits (a transaction's once it committed, from its EndTxn on)
    SELECT group_id, topic, "partition", committed_offset, coalesce(txn_at, ts) AS held_at,
           CASE api WHEN 0 THEN 'OffsetCommit' ELSE 'TxnOffsetCommit' END AS source, capture,
           0 AS k, ts, api AS s, p1, p2
    FROM c
    WHERE coalesce(error_code = 0, false) AND (api = 0 OR coalesce(txn = 'COMMIT', false))
    UNION ALL
    SELECT group_id, topic, "partition", committed_offset, ts, 'OffsetFetch', capture,
           1, ts, v, p1, p2
    FROM f
), known AS (
    SELECT group_id, topic, "partition", committed_offset,
           {'o': committed_offset, 'at': held_at, 's': source, 'c': capture} AS x,
           {'held': coalesce(held_at, '-infinity'::TIMESTAMPTZ), 'k': k,
            'ts': coalesce(ts, 'infinity'::TIMESTAMPTZ), 's': s,
            'p1': coalesce(p1, $max), 'p2': coalesce(p2, $max)} AS o
    FROM held
), lasts AS (
    SELECT group_id, topic, "partition", max(o) AS lo, arg_max(x, o) AS lx
    FROM known GROUP BY group_id, topic, "partition"
), differs AS (
    SELECT l.group_id, l.topic, l."partition", max(k.o) AS d
    FROM lasts l JOIN known k
        ON k.group_id = l.group_id AND k.topic = l.topic AND k."partition" = l."partition"
    WHERE k.o < l.lo AND (l.lx.o IS NULL OR k.committed_offset IS NULL OR k.committed_offset <> l.lx.o)
    GROUP BY l.group_id, l.topic, l."partition"
), last AS (
    SELECT k.group_id, k.topic, k."partition", arg_min(k.x, k.o) AS x
    FROM known k LEFT JOIN differs d
        ON k.group_id = d.group_id AND k.topic = d.topic AND k."partition" = d."partition"
    WHERE d.d IS NULL OR k.o > d.d
    GROUP BY k.group_id, k.topic, k."partition"
)
SELECT t.group_id, t.topic, t."partition", t.commits, t.accepted, t.aborted, t.undecided,
       t.fetched, l.x.o AS committed_offset, l.x.at AS committed_at, l.x.s AS source,
       l.x.c AS capture
FROM totals t LEFT JOIN last l
    ON t.group_id = l.group_id AND t.topic = l.topic AND t."partition" = l."partition"
ORDER BY t.group_id NULLS LAST, t.topic NULLS LAST, t."partition" NULLS LAST
""".replace("$max", f"{2**127 - 1}::HUGEINT")

_FETCH_OK = """
    coalesce(error_code = 0, false) AND committed_offset >= 0 AND coalesce(group_error = 0, true)
    AND group_id IS NOT NULL AND topic IS NOT NULL"""


def _committed(outdir: str | Path) -> pa.Table:
    """``committed_offsets`` with the capture file of the latest committed offset. Kept for the
    last two folders while their tables are unchanged (``committed_offsets`` and ``lag`` use it)."""
    return _committed_now(compute._state(outdir), str(outdir))


@functools.lru_cache(maxsize=2)
def _committed_now(key: tuple[tuple[str, int, int], ...], outdir: str) -> pa.Table:
    with Spill() as db:
        db.con.execute(_TABLES)
        for api, name in enumerate(COMMIT_APIS):
            rows = _commit_rows(outdir, name)
            if rows is None:
                continue
            if name == "TxnOffsetCommit":
                rows = f"SELECT * EXCLUDE (txn_id, pid) FROM ({_outcome_query(outdir, rows)})"
            else:
                rows = f"SELECT *, NULL::VARCHAR AS txn, NULL::TIMESTAMPTZ AS txn_at FROM ({rows})"
            db.con.execute(f"INSERT INTO c BY NAME SELECT {api} AS api, * FROM ({rows})")
        for rows in _fetch_queries(outdir):
            db.con.execute(
                f"INSERT INTO f BY NAME SELECT * EXCLUDE (error_code, group_error) FROM ({rows}) "
                f"WHERE {_FETCH_OK}"
            )
        return db.table(_RESULT).cast(_COMMITTED)


def committed_offsets(outdir: str | Path) -> pa.Table:
    """Per group, topic and partition: offset commits (OffsetCommit, and TxnOffsetCommit from a
    transactional producer), how many the broker accepted (error NONE), how many of those were in
    a transaction that aborted (or whose EndTxn failed) and how many in one whose end is not in
    the capture, how many OffsetFetch answers gave the partition's offset, and the committed
    offset the group held last: the latest of an accepted commit (a transaction's once it
    committed) and an OffsetFetch answer, when, and from which."""
    return _committed(outdir).drop_columns(["capture"])


def lag(outdir: str | Path) -> pa.Table:
    """Per group, topic and partition where the capture holds both an accepted committed offset
    and a high watermark (from a Fetch response without error, in the capture file of the last
    commit): both, when each was seen, and lag = high watermark - committed offset; null, and
    ``lag_unknown`` says why, where the last high watermark was seen before the commit."""
    # (the committed offsets first: DuckDB's memory is given back before the Fetch responses' batches
    # are read; the peak is the larger of the two, not their sum)
    committed = _committed(outdir).to_pylist()  # (a row per partition)
    hw = compute._high_watermarks(outdir)  # (a row per partition)
    rows = []
    for r in committed:
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
    return pa.Table.from_pylist(rows, _LAG)
