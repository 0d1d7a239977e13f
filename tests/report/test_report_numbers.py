# ruff: noqa: E501  (SQL reads best on long lines)
"""Every table of ``arrowkafka.report`` on the real captures equals the same numbers computed here
independently, in DuckDB SQL over the Parquet tables; and the report's HTML carries them, cell for
cell (exact values in ``data-value``)."""

from __future__ import annotations

import datetime as dt
import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import arrowkafka.report as rep
from arrowkafka.cli import main
from arrowkafka.report.present import MAX_ROWS
from tests.report.conftest import CAPTURES
from tests.report.reporthtml import read_report

Rows = list[tuple[Any, ...]]


# ---------------------------------------------------------------------------------------------
# helpers


def _arrow_rows(t: pa.Table, cols: Sequence[str] | None = None) -> Rows:
    """Rows of an Arrow table; timestamps as epoch microseconds, dictionaries as their values."""
    cols = list(cols or t.column_names)
    out = []
    for c in cols:
        col = t[c]
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", "UTC")).cast(pa.int64())
        elif pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        out.append(col.to_pylist())
    return list(zip(*out, strict=True)) if out else []


def _key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, round(v, 6) if isinstance(v, float) else v if v is not None else 0) for v in row)


def _same(got: Rows, want: Rows, what: str) -> None:
    """The same rows in any order; floats to 1e-9 relative."""
    assert len(got) == len(want), f"{what}: {len(got)} rows, DuckDB {len(want)}\n{got}\n{want}"
    for g, w in zip(sorted(got, key=_key), sorted(want, key=_key), strict=True):
        assert len(g) == len(w), what
        for a, b in zip(g, w, strict=True):
            if isinstance(a, float) or isinstance(b, float):
                assert a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (
                    f"{what}: {g} != {w}"
                )
            else:
                assert a == b, f"{what}: {g} != {w}"


def _q(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _messages(folder: Path, kind: str = "") -> dict[str, Path]:
    return {
        p.stem: p
        for p in sorted(folder.glob("*.parquet"))
        if p.stem.endswith(("Request", "Response")) and p.stem.endswith(kind)
    }


def _sql(query: str) -> Rows:
    return duckdb.sql(query).fetchall()


def _union(folder: Path, select: Callable[[str, Path], str], kind: str = "") -> str:
    return " UNION ALL ".join(select(name, path) for name, path in _messages(folder, kind).items())


def _start_us(folder: Path) -> int:
    q = _union(folder, lambda n, p: f"SELECT min(epoch_us(_ts_first)) AS a FROM {_q(p)}")
    return int(_sql(f"SELECT min(a) FROM ({q})")[0][0])


def _width_us(t: pa.Table) -> int:
    return round(float(t.schema.metadata[b"bucket_seconds"]) * 1e6)


@pytest.fixture(scope="module", params=CAPTURES)
def folder(request: pytest.FixtureRequest, decoded: dict[str, Path]) -> Path:
    return decoded[request.param]


# ---------------------------------------------------------------------------------------------
# the capture at a glance


def test_overview(folder: Path) -> None:
    frames = _union(folder, lambda n, p: f"SELECT '{n}' AS m, _capture, _client, _broker, _client_id, "
                    f"_ts_first, _ts_last, _size FROM {_q(p)}")  # fmt: skip
    want = _sql(
        f"""WITH f AS ({frames}),
        b AS (SELECT count(*) n, coalesce(sum(record_count) FILTER (WHERE control IS NOT TRUE), 0) r,
                     coalesce(sum(size), 0) s, count(*) FILTER (WHERE control) c, count(*) FILTER (WHERE partial) p
              FROM {_q(folder / "record_batches.parquet")})
        SELECT epoch_us(min(_ts_first)), epoch_us(max(_ts_last)),
               (epoch_us(max(_ts_last)) - epoch_us(min(_ts_first))) / 1e6,
               count(DISTINCT _capture), count(DISTINCT (_client, _broker)), count(DISTINCT _client),
               count(DISTINCT _client_id), count(DISTINCT _broker),
               count(*) FILTER (WHERE m LIKE '%Request'), count(*) FILTER (WHERE m LIKE '%Response'),
               sum(_size), count(DISTINCT regexp_replace(m, '(Request|Response)$', '')),
               (SELECT count(*) FROM (SELECT DISTINCT regexp_replace(m, '(Request|Response)$', '') FROM f)),
               (SELECT count(*) FROM {_q(folder / "rejects.parquet")}), b.n, b.r, b.s, b.c, b.p
        FROM f, b GROUP BY b.n, b.r, b.s, b.c, b.p"""
    )
    got = _arrow_rows(rep.overview(folder))
    # api_versions: distinct (api, version) pairs
    versions = _union(
        folder,
        lambda n, p: (
            f"SELECT DISTINCT '{n[: -len('Request') if n.endswith('Request') else -len('Response')]}' AS a, _version FROM {_q(p)}"
        ),
    )
    n_versions = _sql(f"SELECT count(*) FROM (SELECT DISTINCT * FROM ({versions}))")[0][0]
    want_row = list(want[0])
    want_row[12] = n_versions
    _same(got, [tuple(want_row)], "overview")


def test_connections(folder: Path) -> None:
    frames = _union(folder, lambda n, p: f"SELECT {int(n.endswith('Request'))} AS req, _client, _broker, "
                    f"_client_id, _ts_first, _ts_last FROM {_q(p)}")  # fmt: skip
    want = _sql(
        f"""SELECT _client, _broker, min(_client_id) FILTER (WHERE req = 1), sum(req), sum(1 - req),
        epoch_us(min(_ts_first)), epoch_us(max(_ts_last)) FROM ({frames}) GROUP BY ALL"""
    )
    _same(_arrow_rows(rep.connections(folder)), want, "connections")


def test_apis(folder: Path) -> None:
    frames = _union(folder, lambda n, p: f"SELECT '{n}' AS m, _version, _size FROM {_q(p)}")
    want = _sql(
        f"""SELECT regexp_replace(m, '(Request|Response)$', '') AS api, _version,
        count(*) FILTER (WHERE m LIKE '%Request'), count(*) FILTER (WHERE m LIKE '%Response'),
        coalesce(sum(_size) FILTER (WHERE m LIKE '%Request'), 0),
        coalesce(sum(_size) FILTER (WHERE m LIKE '%Response'), 0)
        FROM ({frames}) GROUP BY ALL"""
    )
    _same(_arrow_rows(rep.apis(folder)), want, "apis")


def test_rejects(folder: Path) -> None:
    want = _sql(f"SELECT error, reason, message, count(*) FROM {_q(folder / 'rejects.parquet')} GROUP BY ALL")
    _same(_arrow_rows(rep.rejects(folder)), want, "rejects")


# ---------------------------------------------------------------------------------------------
# latency


def _latency_sql(folder: Path, by_bucket: bool, start: int = 0, width: int = 1) -> Rows:
    bucket = f", (epoch_us(_request_ts) - {start}) // {width} AS bucket" if by_bucket else ""
    parts = _union(
        folder,
        lambda n, p: (
            f"SELECT '{n[: -len('Response')]}' AS api, _version, _latency_ns / 1e6 AS ms{bucket} "
            f"FROM {_q(p)} WHERE _latency_ns IS NOT NULL"
        ),
        "Response",
    )
    keys = "api, _version" + (", bucket, bucket * " + str(width) + " / 1e6" if by_bucket else "")
    return _sql(
        f"""SELECT {keys}, count(*), quantile_cont(ms, 0.5), quantile_cont(ms, 0.99), max(ms)
        FROM ({parts}) GROUP BY ALL"""
    )


def test_latency(folder: Path) -> None:
    _same(_arrow_rows(rep.latency(folder)), _latency_sql(folder, False), "latency")


def test_latency_over_time(folder: Path) -> None:
    got = rep.latency_over_time(folder)
    start, width = _start_us(folder), _width_us(got)
    assert int(got.schema.metadata[b"start_us"]) == start
    _same(_arrow_rows(got), _latency_sql(folder, True, start, width), "latency_over_time")


def test_the_time_buckets_are_round_and_at_most_sixty(folder: Path) -> None:
    tl = rep.timeline(folder)
    ends = _union(
        folder, lambda n, p: f"SELECT min(epoch_us(_ts_first)) a, max(epoch_us(_ts_last)) b FROM {_q(p)}"
    )
    start, end = _sql(f"SELECT min(a), max(b) FROM ({ends})")[0]
    assert (tl.start_us, tl.end_us) == (start, end)
    ms, s = 1_000, 1_000_000
    steps = [1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms, 50 * ms, 100 * ms, 200 * ms, 500 * ms,
             1 * s, 2 * s, 5 * s, 10 * s, 15 * s, 20 * s, 30 * s, 50 * s, 60 * s, 100 * s, 120 * s,
             200 * s, 300 * s, 500 * s, 600 * s, 900 * s, 1800 * s, 3600 * s]  # fmt: skip
    assert rep.compute._STEPS_US == steps  # every width there is, in order
    assert tl.width_us in steps
    assert (end - start) // tl.width_us + 1 <= 60
    smaller = [s for s in steps if s < tl.width_us]
    assert not smaller or (end - start) // max(smaller) + 1 > 60


def test_slowest(folder: Path) -> None:
    parts = _union(
        folder,
        lambda n, p: (
            f"SELECT '{n[: -len('Response')]}' AS api, _version, _client, _broker, "
            f"_correlation_id, epoch_us(_request_ts) AS ts, _latency_ns / 1e6 AS ms FROM {_q(p)} WHERE _latency_ns IS NOT NULL"
        ),
        "Response",
    )
    ids = _union(folder, lambda n, p: f"SELECT _client, _broker, _client_id FROM {_q(p)}", "Request")
    want = _sql(
        f"""WITH i AS (SELECT _client, _broker, min(_client_id) AS id FROM ({ids}) GROUP BY ALL)
        SELECT api, _version, r._client, r._broker, i.id, _correlation_id, ts, ms FROM ({parts}) r
        LEFT JOIN i ON r._client = i._client AND r._broker = i._broker ORDER BY ms DESC LIMIT {rep.compute.SLOWEST}"""
    )
    got = _arrow_rows(rep.slowest(folder))
    assert [r[-1] for r in got] == pytest.approx([r[-1] for r in want])  # the same latencies, slowest first
    cut = want[-1][-1]  # rows above the cut are the same rows (ties at the cut may pick others)
    _same([r for r in got if r[-1] > cut], [r for r in want if r[-1] > cut], "slowest")


# ---------------------------------------------------------------------------------------------
# throughput


def _sides(folder: Path) -> str:
    """The record batches that carry records written by a producer, whole: no control batch
    (a transaction marker) and no partial one (a Fetch response cut inside it)."""
    return (
        f"SELECT *, CASE WHEN _message = 'ProduceRequest' THEN 'produce' ELSE 'fetch' END AS side "
        f"FROM {_q(folder / 'record_batches.parquet')} "
        "WHERE _message IN ('ProduceRequest', 'FetchResponse', 'ShareFetchResponse') "
        "AND control IS NOT TRUE AND NOT partial"
    )


def _side_by_side_sql(folder: Path, keys: str, source: str = "") -> Rows:
    seconds = rep.timeline(folder).seconds
    cols = []
    for side in ("produce", "fetch"):
        f = f"FILTER (WHERE side = '{side}')"
        cols += [f"count(*) {f}", f"coalesce(sum(record_count) {f}, 0)", f"coalesce(sum(size) {f}, 0)"]
        cols += [f"coalesce(sum(record_count) {f}, 0) / {seconds}", f"coalesce(sum(size) {f}, 0) / {seconds}"]
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    return [
        tuple(r[: len(keys.split(","))]) + tuple(r[len(keys.split(",")) + i] for i in order)
        for r in _sql(f"SELECT {keys}, {', '.join(cols)} FROM ({source or _sides(folder)}) GROUP BY ALL")
    ]


def test_throughput_by_partition(folder: Path) -> None:
    got = rep.throughput_by_partition(folder)
    _same(_arrow_rows(got), _side_by_side_sql(folder, "topic, partition"), "throughput_by_partition")
    assert got.num_rows > 0  # every one of these captures produced and fetched records


def test_throughput_by_topic(folder: Path) -> None:
    _same(
        _arrow_rows(rep.throughput_by_topic(folder)),
        _side_by_side_sql(folder, "topic"),
        "throughput_by_topic",
    )


def test_throughput_by_client(folder: Path) -> None:
    """The client id of each batch is its connection's: the smallest its requests gave (a Fetch
    response's batches carry none of their own)."""
    ids = _union(folder, lambda n, p: f"SELECT _client, _broker, _client_id FROM {_q(p)}", "Request")
    source = f"""WITH i AS (SELECT _client, _broker, min(_client_id) AS id FROM ({ids}) GROUP BY ALL)
        SELECT b.*, i.id FROM ({_sides(folder)}) b LEFT JOIN i ON b._client = i._client AND b._broker = i._broker"""
    got = rep.throughput_by_client(folder)
    _same(_arrow_rows(got), _side_by_side_sql(folder, "id, _client", source), "throughput_by_client")
    fetching = got.filter(pc.greater(got["fetch_batches"], 0))
    assert fetching.num_rows > 0 and fetching["client_id"].null_count == 0  # every consumer named


def test_throughput_over_time(folder: Path) -> None:
    got = rep.throughput_over_time(folder)
    start, width = _start_us(folder), _width_us(got)
    want = _sql(
        f"""SELECT (epoch_us(_ts_first) - {start}) // {width} AS b, b * {width} / 1e6, side, topic,
        sum(record_count), sum(size), sum(record_count) / ({width} / 1e6), sum(size) / ({width} / 1e6)
        FROM ({_sides(folder)}) GROUP BY ALL"""
    )
    _same(_arrow_rows(got), want, "throughput_over_time")


def test_compression(folder: Path) -> None:
    """Bytes and ratio over the batches whose records were read (uncompressed_size known); the
    others counted as undecoded."""
    want = _sql(
        f"""WITH b AS (SELECT * FROM ({_sides(folder)})),
        g AS (SELECT side, topic, codec, count(*) n, count(*) FILTER (WHERE uncompressed_size IS NULL) bad,
                     sum(record_count) r FROM b GROUP BY ALL),
        ok AS (SELECT side, topic, codec, sum(records_size) sent, sum(uncompressed_size) plain
               FROM b WHERE uncompressed_size IS NOT NULL GROUP BY ALL)
        SELECT g.side, g.topic, g.codec, n, bad, r, sent, plain, CASE WHEN sent > 0 THEN plain / sent END
        FROM g LEFT JOIN ok ON g.side = ok.side AND g.topic = ok.topic AND g.codec IS NOT DISTINCT FROM ok.codec"""
    )
    _same(_arrow_rows(rep.compression(folder)), want, "compression")


def test_the_real_captures_compress_and_catch_up(decoded: dict[str, Path]) -> None:
    for folder in decoded.values():
        # every capture carries compressed batches: a ratio above 1 for each codec but none
        ratios = {r["codec"]: r["ratio"] for r in rep.compression(folder).to_pylist() if r["codec"] != "none"}
        assert ratios and all(x > 1 for x in ratios.values())
        # each consumer read to the end before it committed: lag 0, or unknown where its last
        # Fetch response came before its last commit (the watermark then equal to the commit)
        lag = rep.lag(folder).to_pylist()
        assert lag and all(
            (r["lag"] == 0 and r["lag_unknown"] is None)
            or (
                r["lag"] is None
                and r["lag_unknown"] == rep.offsets.LAG_UNKNOWN
                and r["high_watermark_at"] < r["committed_at"]
                and r["high_watermark"] == r["committed_offset"]
            )
            for r in lag
        )


# ---------------------------------------------------------------------------------------------
# errors


def _error_paths(schema: pa.Schema) -> list[list[str]]:
    """Paths to every error field, as steps: a name, or ``[]`` for a list's elements."""
    out: list[list[str]] = []

    def walk(t: pa.DataType, path: list[str]) -> None:
        if pa.types.is_struct(t):
            for f in t:
                if (f.name == "error_code" or f.name.endswith("_error_code")) and pa.types.is_integer(f.type):
                    out.append([*path, f.name])
                else:
                    walk(f.type, [*path, f.name])
        elif pa.types.is_list(t):
            walk(t.value_type, [*path, "[]"])

    walk(pa.struct(list(schema)), [])
    return out


def _error_sql(path: Path, steps: list[str], extra: str) -> str:
    """One row per value of the error field at ``steps``: _version, the extra columns, code."""
    q = f"SELECT _version, {extra}, {steps[0]} AS v FROM {_q(path)}"
    for step in steps[1:]:
        q = f"SELECT _version, {extra}, {'unnest(v)' if step == '[]' else f'v.{step}'} AS v FROM ({q})"
    return q


def _errors_sql(folder: Path, by_bucket: bool) -> Rows:
    start = _start_us(folder)
    width = _width_us(rep.errors_over_time(folder))
    parts = []
    for name, path in _messages(folder, "Response").items():
        for steps in _error_paths(pq.read_schema(path)):
            field = ".".join(steps).replace(".[]", "[]")
            extra = f"'{name[: -len('Response')]}' AS api, '{field}' AS field, _ts_first"
            parts.append(_error_sql(path, steps, extra))
    if not parts:
        return []
    everything = " UNION ALL ".join(parts)
    if by_bucket:
        return _sql(
            f"""SELECT (epoch_us(_ts_first) - {start}) // {width} AS b, b * {width} / 1e6, api, v, count(*)
            FROM ({everything}) WHERE v <> 0 GROUP BY ALL"""
        )
    return _sql(f"SELECT api, _version, field, v, count(*) FROM ({everything}) WHERE v <> 0 GROUP BY ALL")


def test_errors(folder: Path) -> None:
    got = rep.errors(folder)
    _same(
        _arrow_rows(got, ["api", "version", "field", "error_code", "count"]),
        _errors_sql(folder, False),
        "errors",
    )
    names = dict(zip(got["error_code"].to_pylist(), got["error"].to_pylist(), strict=True))
    assert all(names[c] == rep.ERROR_NAMES[c] for c in names)


def test_errors_over_time(folder: Path) -> None:
    got = rep.errors_over_time(folder)
    _same(
        _arrow_rows(got, ["bucket", "t", "api", "error_code", "count"]),
        _errors_sql(folder, True),
        "errors over time",
    )


def test_the_error_fields_found_include_nested_ones(decoded: dict[str, Path]) -> None:
    schema = pq.read_schema(decoded["tansu_confluent"] / "FetchResponse.parquet")
    fields = rep.error_fields(schema)
    assert "error_code" in fields and "responses[].partitions[].error_code" in fields
    assert fields == [".".join(s).replace(".[]", "[]") for s in _error_paths(schema)]
    # what the captures hold: librdkafka's first JoinGroup gets MEMBER_ID_REQUIRED (KIP-394)
    errs = rep.errors(decoded["tansu_confluent"]).to_pylist()
    assert {"api": "JoinGroup", "version": 5, "field": "error_code", "error_code": 79,
            "error": "MEMBER_ID_REQUIRED", "count": 1} in errs  # fmt: skip


# ---------------------------------------------------------------------------------------------
# consumer groups


def _link(a: str, b: str) -> str:
    """Request ``a`` and response ``b``: the connection, the correlation id and the request time."""
    same = " AND ".join(f"{a}.{c} = {b}.{c}" for c in ("_capture", "_client", "_broker", "_correlation_id"))
    return f"{same} AND {a}._ts_first = {b}._request_ts"


def _group_events_sql(folder: Path) -> Rows:
    parts = []
    epochs = ("ConsumerGroupHeartbeat", "ShareGroupHeartbeat")
    for api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", *epochs):
        req, resp = folder / f"{api}Request.parquet", folder / f"{api}Response.parquet"
        if not req.exists():
            continue
        given = (
            "CASE WHEN r.member_id IS NOT NULL AND r.member_id <> '' THEN r.member_id ELSE q.member_id END"
        )
        member = {
            "JoinGroup": given,
            **dict.fromkeys(epochs, given),
            "LeaveGroup": "CASE WHEN len(q.members) > 0 THEN array_to_string(list_transform(q.members, lambda x: x.member_id), ', ') ELSE q.member_id END",
        }.get(api, "q.member_id")
        generation = {
            "JoinGroup": "r.generation_id",
            "LeaveGroup": "NULL",
            **dict.fromkeys(epochs, "CASE WHEN r.error_code = 0 THEN r.member_epoch ELSE q.member_epoch END"),
        }.get(api, "q.generation_id")
        parts.append(
            f"""SELECT epoch_us(q._ts_first), '{api}', q.group_id, {member}, {generation}::INTEGER, q._client,
            q._client_id, q._correlation_id, r.error_code FROM {_q(req)} q LEFT JOIN {_q(resp)} r ON {_link("q", "r")}"""
        )
    return _sql(" UNION ALL ".join(parts)) if parts else []


def test_group_events(folder: Path) -> None:
    got = rep.group_events(folder)
    _same(_arrow_rows(got, got.column_names[:-1]), _group_events_sql(folder), "group_events")
    assert got.num_rows > 0  # every capture has a consumer group
    assert [rep.error_name(c) if c is not None else None for c in got["error_code"].to_pylist()] == got[
        "error"
    ].to_pylist()


def test_group_summary(folder: Path) -> None:
    rows = _group_events_sql(folder)
    con = duckdb.connect()
    con.execute("CREATE TABLE e (g VARCHAR, api VARCHAR, code SMALLINT, member VARCHAR)")
    con.executemany("INSERT INTO e VALUES (?, ?, ?, ?)", [(r[2], r[1], r[8], r[3]) for r in rows])
    want = con.execute("SELECT g, api, code, count(*), count(DISTINCT member) FROM e GROUP BY ALL").fetchall()
    want = [(g, api, "NO_RESPONSE" if c is None else rep.error_name(c), n, m) for g, api, c, n, m in want]
    _same(_arrow_rows(rep.group_summary(folder)), want, "group_summary")


def _commits_sql(folder: Path) -> str:
    """Every partition of every OffsetCommit and TxnOffsetCommit request, with its response's
    error, its API and (TxnOffsetCommit) how its transaction ended: the first EndTxn of the same
    capture, transactional id and producer id at or after it."""
    parts = []
    ends = ""
    if (folder / "EndTxnRequest.parquet").exists():
        resp = folder / "EndTxnResponse.parquet"
        answer = f"LEFT JOIN {_q(resp)} r ON {_link('q', 'r')}" if resp.exists() else ""
        code = "r.error_code" if resp.exists() else "NULL"
        ends = f"""SELECT q._capture, q.transactional_id, q.producer_id, q._ts_first AS ts,
            CASE WHEN {code} = 0 THEN (CASE WHEN q.committed THEN 'COMMIT' ELSE 'ABORT' END)
                 WHEN {code} IS NOT NULL THEN 'FAILED' END AS outcome
            FROM {_q(folder / "EndTxnRequest.parquet")} q {answer}"""
    for api in ("OffsetCommit", "TxnOffsetCommit"):
        req, resp = folder / f"{api}Request.parquet", folder / f"{api}Response.parquet"
        if not req.exists():
            continue
        r = (
            f"SELECT _capture, _client, _broker, _correlation_id, _request_ts, t.name AS topic, "
            f"unnest(t.partitions) AS p FROM (SELECT *, unnest(topics) AS t FROM {_q(resp)})"
            if resp.exists()
            else "SELECT NULL::VARCHAR _capture, NULL::VARCHAR _client, NULL::VARCHAR _broker, NULL::INTEGER _correlation_id, "
            "NULL::TIMESTAMPTZ _request_ts, NULL::VARCHAR topic, "
            "{'partition_index': NULL::INTEGER, 'error_code': NULL::SMALLINT} AS p WHERE false"
        )
        txn, txn_at = "NULL::VARCHAR", "NULL::BIGINT"
        if api == "TxnOffsetCommit" and ends:
            after = f"""FROM ({ends}) e WHERE e._capture = q._capture AND e.transactional_id = q.transactional_id
                       AND e.producer_id = q.producer_id AND e.ts >= q._ts_first"""
            txn, txn_at = (
                f"(SELECT arg_min(e.outcome, e.ts) {after})",
                f"(SELECT epoch_us(min(e.ts)) {after})",
            )
        parts.append(f"""
        SELECT q._capture, q.group_id, q.topic, q.p.partition_index AS partition, q.p.committed_offset AS committed_offset,
               epoch_us(q._ts_first) AS ts, r.p.error_code AS error_code, '{api}' AS source, {txn} AS txn,
               {txn_at} AS txn_at
        FROM (SELECT *, t.name AS topic, unnest(t.partitions) AS p
              FROM (SELECT *, unnest(topics) AS t FROM {_q(req)})) q
        LEFT JOIN ({r}) r ON {_link("q", "r")} AND q.topic = r.topic AND q.p.partition_index = r.p.partition_index""")
    return " UNION ALL ".join(parts)


def _fetched_sql(folder: Path) -> str:
    """Every partition an OffsetFetch response gave an offset for (no error, offset >= 0): v8+ by
    the response's groups, earlier versions by the request's group id."""
    resp, req = folder / "OffsetFetchResponse.parquet", folder / "OffsetFetchRequest.parquet"
    none = "SELECT NULL::VARCHAR _capture, NULL::VARCHAR group_id, NULL::VARCHAR topic, NULL::INTEGER partition, NULL::BIGINT committed_offset, NULL::BIGINT ts WHERE false"
    if not resp.exists():
        return none
    names = duckdb.sql(f"SELECT * FROM {_q(resp)} LIMIT 0").columns
    parts = [none]
    if "groups" in names:
        parts.append(f"""SELECT _capture, g.group_id, t.name, p.partition_index, p.committed_offset, epoch_us(_ts_first)
            FROM (SELECT _capture, _ts_first, g, t, unnest(t.partitions) AS p FROM
                  (SELECT _capture, _ts_first, g, unnest(g.topics) AS t FROM
                   (SELECT _capture, _ts_first, unnest(groups) AS g FROM {_q(resp)})))
            WHERE p.error_code = 0 AND p.committed_offset >= 0 AND g.error_code = 0""")
    if "topics" in names:
        parts.append(f"""SELECT r._capture, q.group_id, r.t.name, r.p.partition_index, r.p.committed_offset, epoch_us(r._ts_first)
            FROM (SELECT *, unnest(t.partitions) AS p FROM (SELECT *, unnest(topics) AS t FROM {_q(resp)})) r
            JOIN {_q(req)} q ON {_link("q", "r")}
            WHERE r.p.error_code = 0 AND r.p.committed_offset >= 0""")
    return " UNION ALL ".join(parts)


def _held_sql(folder: Path) -> str:
    """Per group, topic and partition: the offset held last (accepted commits, a transaction's
    once committed, and OffsetFetch answers), since the first row of its last run of equal
    offsets, that row's source and capture file."""
    commits = _commits_sql(folder) or (
        "SELECT NULL::VARCHAR _capture, NULL::VARCHAR group_id, NULL::VARCHAR topic, NULL::INTEGER partition, "
        "NULL::BIGINT committed_offset, NULL::BIGINT ts, NULL::SMALLINT error_code, NULL::VARCHAR source, "
        "NULL::VARCHAR txn, NULL::BIGINT txn_at WHERE false"
    )
    return f"""
        WITH k AS (SELECT _capture, group_id, topic, partition, committed_offset, coalesce(txn_at, ts) AS ts,
                          source, 0 AS seq
                   FROM ({commits}) WHERE error_code = 0 AND (source = 'OffsetCommit' OR txn = 'COMMIT')
                   UNION ALL
                   SELECT _capture, group_id, topic, partition, committed_offset, ts, 'OffsetFetch', 1
                   FROM ({_fetched_sql(folder)})),
        r AS (SELECT *, CASE WHEN lag(committed_offset) OVER w IS DISTINCT FROM committed_offset THEN 1 ELSE 0 END AS brk
              FROM k WINDOW w AS (PARTITION BY group_id, topic, partition ORDER BY ts, seq)),
        n AS (SELECT *, sum(brk) OVER (PARTITION BY group_id, topic, partition ORDER BY ts, seq
                                       ROWS UNBOUNDED PRECEDING) AS run FROM r),
        l AS (SELECT * FROM n QUALIFY run = max(run) OVER (PARTITION BY group_id, topic, partition))
        SELECT group_id, topic, partition, arg_min(committed_offset, (ts, seq)) AS committed, min(ts) AS at,
               arg_min(source, (ts, seq)) AS source, arg_min(_capture, (ts, seq)) AS capture
        FROM l GROUP BY ALL"""


def test_committed_offsets(folder: Path) -> None:
    commits = _commits_sql(folder)
    want = _sql(
        f"""WITH c AS ({commits}), f AS ({_fetched_sql(folder)}), h AS ({_held_sql(folder)}),
        keys AS (SELECT group_id, topic, partition FROM c UNION SELECT group_id, topic, partition FROM f)
        SELECT keys.*,
               (SELECT count(*) FROM c WHERE (c.group_id, c.topic, c.partition) = (keys.group_id, keys.topic, keys.partition)),
               (SELECT count(*) FROM c WHERE (c.group_id, c.topic, c.partition) = (keys.group_id, keys.topic, keys.partition)
                                       AND error_code = 0),
               (SELECT count(*) FROM c WHERE (c.group_id, c.topic, c.partition) = (keys.group_id, keys.topic, keys.partition)
                                       AND error_code = 0 AND source = 'TxnOffsetCommit' AND txn IN ('ABORT', 'FAILED')),
               (SELECT count(*) FROM c WHERE (c.group_id, c.topic, c.partition) = (keys.group_id, keys.topic, keys.partition)
                                       AND error_code = 0 AND source = 'TxnOffsetCommit' AND txn IS NULL),
               (SELECT count(*) FROM f WHERE (f.group_id, f.topic, f.partition) = (keys.group_id, keys.topic, keys.partition)),
               h.committed, h.at, h.source
        FROM keys LEFT JOIN h USING (group_id, topic, partition)"""
        if commits
        else f"""WITH f AS ({_fetched_sql(folder)}), h AS ({_held_sql(folder)})
        SELECT group_id, topic, partition, 0, 0, 0, 0, count(*), any_value(h.committed), any_value(h.at),
               any_value(h.source) FROM f JOIN h USING (group_id, topic, partition) GROUP BY ALL"""
    )
    got = rep.committed_offsets(folder)
    _same(_arrow_rows(got), want, "committed_offsets")
    assert got.num_rows > 0


def test_lag(folder: Path) -> None:
    """The high watermark of the capture file of the offset held last; no lag where it was seen
    before the group held that offset (records may have come since)."""
    fetch = folder / "FetchResponse.parquet"
    want = _sql(
        f"""WITH c AS ({_held_sql(folder)}),
        f AS (SELECT _capture, t.topic AS topic, unnest(t.partitions) AS p, _ts_first
              FROM (SELECT _capture, _ts_first, unnest(responses) AS t FROM {_q(fetch)})),
        h AS (SELECT _capture, topic, p.partition_index AS partition, arg_max(p.high_watermark, _ts_first) AS hw,
                     epoch_us(max(_ts_first)) AS at
              FROM f WHERE p.error_code = 0 AND p.high_watermark >= 0 AND topic IS NOT NULL GROUP BY ALL)
        SELECT c.group_id, c.topic, c.partition, c.committed, c.at, h.hw, h.at,
               CASE WHEN h.at >= c.at THEN h.hw - c.committed END,
               CASE WHEN h.at < c.at THEN 'high watermark older than the commit' END
        FROM c JOIN h ON c.capture = h._capture AND c.topic = h.topic AND c.partition = h.partition"""
    )
    _same(_arrow_rows(rep.lag(folder)), want, "lag")


# ---------------------------------------------------------------------------------------------
# producers


def test_producers(folder: Path) -> None:
    batches = folder / "record_batches.parquet"
    init = ""
    if (folder / "InitProducerIdRequest.parquet").exists():
        init = f"""SELECT r.producer_id AS pid, any_value(q.transactional_id) AS txn
            FROM {_q(folder / "InitProducerIdRequest.parquet")} q JOIN {_q(folder / "InitProducerIdResponse.parquet")} r
            ON {_link("q", "r")} WHERE r.error_code = 0 GROUP BY ALL"""
    else:
        init = "SELECT NULL::BIGINT AS pid, NULL::VARCHAR AS txn WHERE false"
    want = _sql(
        f"""WITH i AS ({init})
        SELECT b.producer_id, b.producer_epoch, any_value(i.txn), b._client_id, bool_or(b.transactional), count(*),
               sum(b.record_count), count(DISTINCT (b.topic, b.partition)), epoch_us(min(b._ts_first)),
               epoch_us(max(b._ts_first))
        FROM {_q(batches)} b LEFT JOIN i ON i.pid = b.producer_id
        WHERE b._message = 'ProduceRequest' AND b.producer_id >= 0 GROUP BY b.producer_id, b.producer_epoch, b._client_id"""
    )
    _same(_arrow_rows(rep.producers(folder)), want, "producers")


def test_sequences(folder: Path) -> None:
    batches = folder / "record_batches.parquet"
    want = _sql(
        f"""WITH b AS (
            SELECT producer_id, producer_epoch, topic, partition, base_sequence AS s, record_count AS n,
                   lag(base_sequence + record_count) OVER w AS expected,
                   row_number() OVER w AS i, count(*) OVER (PARTITION BY producer_id, producer_epoch, topic, partition) AS total
            FROM {_q(batches)} WHERE _message = 'ProduceRequest' AND producer_id >= 0
            WINDOW w AS (PARTITION BY producer_id, producer_epoch, topic, partition
                         ORDER BY _ts_first, _correlation_id, base_sequence))
        SELECT producer_id, producer_epoch, topic, partition, count(*), min(s) FILTER (WHERE i = 1),
               max(s + n - 1) FILTER (WHERE i = total), count(*) FILTER (WHERE s > expected),
               coalesce(sum(s - expected) FILTER (WHERE s > expected), 0), count(*) FILTER (WHERE s < expected)
        FROM b GROUP BY ALL"""
    )
    _same(_arrow_rows(rep.sequences(folder)), want, "sequences")


def test_transactions(folder: Path) -> None:
    req = folder / "EndTxnRequest.parquet"
    got = rep.transactions(folder)
    if not req.exists():
        assert got.num_rows == 0
        return
    want = _sql(
        f"""SELECT epoch_us(q._ts_first), q.transactional_id, q.producer_id, q.producer_epoch,
        CASE WHEN q.committed THEN 'COMMIT' ELSE 'ABORT' END, q._client_id, q._correlation_id, r.error_code
        FROM {_q(req)} q LEFT JOIN {_q(folder / "EndTxnResponse.parquet")} r ON {_link("q", "r")}"""
    )
    _same(_arrow_rows(got, got.column_names[:-1]), want, "transactions")


def test_markers(folder: Path) -> None:
    """Each marker once (by topic, partition and offset), however many times it was fetched;
    the producer id from its batch."""
    want = _sql(
        f"""SELECT CASE WHEN m._message = 'ProduceRequest' THEN 'produce' ELSE 'fetch' END, m.topic, m.partition,
        b.producer_id, m.type, count(DISTINCT m.record_offset), min(m.record_offset), max(m.record_offset)
        FROM {_q(folder / "record_markers.parquet")} m JOIN {_q(folder / "record_batches.parquet")} b ON m.batch_id = b.batch_id
        WHERE m.type IN ('COMMIT', 'ABORT') AND m._message IN ('ProduceRequest', 'FetchResponse', 'ShareFetchResponse')
        GROUP BY ALL"""
    )
    _same(_arrow_rows(rep.markers(folder)), want, "markers")


def test_what_the_tansu_capture_shows_of_its_producers(decoded: dict[str, Path]) -> None:
    """The confluent workload: an idempotent producer and a transactional one (ck-txn-1) whose
    one transaction commits; the consumer reads the COMMIT marker."""
    folder = decoded["tansu_confluent"]
    prods = rep.producers(folder).to_pylist()
    assert [(p["transactional_id"], p["transactional"]) for p in prods] == [(None, False), ("ck-txn-1", True)]
    assert [
        (t["transactional_id"], t["outcome"], t["error"]) for t in rep.transactions(folder).to_pylist()
    ] == [("ck-txn-1", "COMMIT", "NONE")]
    assert [(m["side"], m["type"], m["markers"]) for m in rep.markers(folder).to_pylist()] == [
        ("fetch", "COMMIT", 1)
    ]
    seqs = rep.sequences(folder)
    assert (
        seqs.num_rows > 0
        and set(seqs["gaps"].to_pylist()) == {0}
        and set(seqs["duplicates"].to_pylist()) == {0}
    )


# ---------------------------------------------------------------------------------------------
# the HTML carries the same numbers


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dt.datetime):
        return str((v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1))
    if isinstance(v, int | float):
        return repr(v)
    return str(v)


def test_the_report_shows_every_table(folder: Path) -> None:
    report = read_report(folder / "report.html")
    assert list(report.sections) == ["overview", "latency", "throughput", "errors", "groups", "producers"]
    assert not report.external and len(report.scripts) == 1  # nothing fetched; the one error hook
    shown = 0
    for section, functions in rep.SECTIONS.items():
        for f in functions:
            table = f(folder)
            name = f.__name__
            if table.num_rows == 0:
                in_section = report.empty.get(name) or report.section_empty.get(section)
                assert in_section, f"{name}: empty, and the report does not say so"
                continue
            assert name in report.tables, f"{name} is not in the report"
            assert report.rows[name] == table.num_rows
            want = [[_cell(v) for v in row.values()] for row in table.slice(0, MAX_ROWS).to_pylist()]
            assert report.tables[name] == want, name
            shown += 1
    assert shown >= 15
    assert (
        report.figures["latency"] == 1 and report.figures["throughput"] == 1 and report.figures["groups"] == 1
    )


def test_sections_with_nothing_say_so(decoded: dict[str, Path], tmp_path: Path) -> None:
    report = read_report(decoded["kafka091_legacy"] / "report.html")  # Kafka 0.9: no producer ids
    assert report.section_empty["producers"].startswith("No producer ids in this capture")
    assert report.figures["producers"] == 0 and "producers" not in report.tables
    report = read_report(decoded["noida_kafka_python"] / "report.html")
    assert report.empty["transactions"] == "No EndTxn requests in this capture."
    # a folder with only Metadata and ApiVersions traffic (no record tables at all): every section
    # but the first two says there is nothing, and why
    for name in (
        "MetadataRequest",
        "MetadataResponse",
        "ApiVersionsRequest",
        "ApiVersionsResponse",
        "rejects",
    ):
        shutil.copy(decoded["tansu_confluent"] / f"{name}.parquet", tmp_path)
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "small.html")]) == 0
    report = read_report(tmp_path / "small.html")
    assert set(report.section_empty) == {"throughput", "errors", "groups", "producers"}
    assert report.section_empty["throughput"].startswith("No record batches in this capture")
    assert report.section_empty["groups"].startswith("No consumer-group traffic in this capture")
    assert set(report.tables) == {
        "overview",
        "connections",
        "apis",
        "rejects",
        "latency",
        "slowest",
        "latency_over_time",
    }
