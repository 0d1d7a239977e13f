"""The producer tables of the report (``producers``, ``sequences``, ``transactions``,
``markers``), computed on DuckDB.

The sequences need the batches of a producer and partition in order, the producers a lookup of
transactional ids: held in memory, every produced record batch with a producer id (and every
EndTxn and InitProducerId request) at once. Here DuckDB reads the Parquet tables itself, and its
sorts, windows, joins and aggregates run with memory capped (``spill.Spill``), spilling to disk
beyond the cap: only a row per producer, partition or marker comes back (or the EndTxn requests
asked for), so memory follows the cap, not the capture. ``sequences`` walks the batches DuckDB
sorted a record batch at a time, its running state per key carried over in Python: DuckDB's
windows hold a whole partition (here: a producer's partition, as busy as the capture) in memory.

Where an order or a choice would depend on ties (of time, of several answers), the capture order
decides: ``_at``, a row's place in its table (``spill.place``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.report import compute
from arrowkafka.report.spill import (
    LINK,
    Spill,
    files,
    limited,
    literal,
    pairs,
    parquet,
    place,
    placed,
    with_total,
)

__all__ = ["markers", "producers", "sequences", "transactions"]

_PRODUCERS = pa.schema(
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
_SEQUENCES = pa.schema(
    [
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("batches", pa.int64()),
        ("first_sequence", pa.int32()),
        ("last_sequence", pa.int32()),
        ("gaps", pa.int64()),
        ("missing_records", pa.int64()),
        ("duplicates", pa.int64()),
    ]
)
_TRANSACTIONS = pa.schema(
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
_MARKERS = pa.schema(
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


def _paired(
    outdir: str | Path, api: str, request_cols: Sequence[str], response_cols: Sequence[str]
) -> str | None:
    """``spill.pairs`` of ``api`` with each request's place in the capture (``_at``); None
    without a request table."""
    req = files(outdir, f"{api}Request")
    if not req:
        return None
    cols = [*LINK, "_ts_first", *request_cols, "file_index", "file_row_number"]
    linked = pairs(req, files(outdir, f"{api}Response"), cols, response_cols)
    return f"(SELECT * EXCLUDE (file_index, file_row_number), {place()} AS _at FROM {linked})"


def _produced(paths: Sequence[Path]) -> str:
    """Produced record batches (ProduceRequest) with a producer id (>= 0), with their place in the
    capture (``_at``)."""
    return f"""(SELECT _client_id AS client_id, _ts_first AS ts, _correlation_id AS correlation_id,
                       topic, "partition", producer_id, producer_epoch, base_sequence, record_count,
                       transactional, _at
                FROM {placed(paths)}
                WHERE _message = 'ProduceRequest' AND producer_id >= 0)"""


def producers(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Per producer id and epoch (from produced record batches with a producer id): client id,
    transactional or not, batches, records, partitions written, first and last batch; with the
    transactional id where an InitProducerId response in the capture gave that id (the last
    such answer in capture order). With ``limit``, the first ``limit`` rows and the whole
    table's row count (``total_rows``): a producer id per idempotent producer, and clients make
    one per run."""
    produced = files(outdir, "record_batches")
    if not produced:
        return with_total(_PRODUCERS.empty_table(), 0, limit)
    linked = _paired(outdir, "InitProducerId", ["transactional_id"], ["producer_id", "error_code"])
    if linked is None:
        ids = "(SELECT NULL::BIGINT AS producer_id, NULL::VARCHAR AS transactional_id WHERE false)"
    else:
        # an id given twice (a producer id reused): the last answer in capture order says whose it
        # is, even a null transactional id (arg_max_null keeps it)
        ids = f"""(SELECT r_producer_id AS producer_id,
                          arg_max_null(transactional_id, _at) AS transactional_id
                   FROM {linked} WHERE r_error_code = 0 AND r_producer_id IS NOT NULL GROUP BY ALL)"""
    # partitions: distinct (topic, partition) by a GROUP BY first (spills), not count(DISTINCT)
    # (held in memory per group); a null topic counts as the topic "", a null partition not at
    # all
    sql = f"""
        WITH b AS {_produced(produced)},
        tp AS (
            SELECT producer_id, producer_epoch, client_id, coalesce(topic, '') AS topic, "partition",
                   bool_or(transactional) AS transactional, count(record_count) AS batches,
                   sum(record_count) AS records, min(ts) AS first, max(ts) AS last,
                   min(_at) AS _at
            FROM b GROUP BY ALL),
        g AS (
            SELECT producer_id, producer_epoch, client_id, bool_or(transactional) AS transactional,
                   sum(batches)::BIGINT AS batches, sum(records)::BIGINT AS records,
                   count("partition") AS partitions, min(first) AS first, max(last) AS last,
                   min(_at) AS _at
            FROM tp GROUP BY ALL)
        SELECT g.producer_id, g.producer_epoch, i.transactional_id, g.client_id, g.transactional,
               g.batches, g.records, g.partitions, g.first, g.last, g._at
        FROM g LEFT JOIN {ids} i ON g.producer_id = i.producer_id"""
    # ties (another epoch or client id with the same first batch): the order the groups first
    # appear in the capture
    order = "first ASC NULLS LAST, producer_id ASC NULLS LAST, _at"
    columns = ", ".join(_PRODUCERS.names)
    with Spill() as db:
        db.con.execute(f"CREATE TABLE result AS {sql}")
        return limited(db, "result", order, limit, lambda t: t.cast(_PRODUCERS), columns=columns)


def sequences(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Per producer id, epoch, topic and partition, the produced batches in capture order: how
    many, first and last sequence, gaps (a batch whose base sequence is past the one expected:
    the furthest end of the batches before it, unwrapped after 2^31 - 1) and duplicates (a batch
    at or before the one expected: a retry, or one sent twice), and the records the gaps skip.
    With ``limit``, the first ``limit`` rows and the whole table's row count (``total_rows``)."""
    produced = files(outdir, "record_batches")
    if not produced:
        return with_total(_SEQUENCES.empty_table(), 0, limit)
    # DuckDB sorts (spilling) the batches: key, then time, correlation id, base sequence, nulls
    # last, ties in capture order. The walk along them is a running state per key, kept here one
    # record batch at a time: window functions over one key hold that key's batches in memory
    # (a single busy producer and partition, and DuckDB runs out)
    sql = f"""
        SELECT producer_id, producer_epoch, topic, "partition", base_sequence, record_count
        FROM {_produced(produced)}
        ORDER BY producer_id ASC NULLS LAST, producer_epoch ASC NULLS LAST, topic ASC NULLS LAST,
                 "partition" ASC NULLS LAST, ts ASC NULLS LAST, correlation_id ASC NULLS LAST,
                 base_sequence ASC NULLS LAST, _at"""
    walk = _Walk(limit)
    with Spill() as db:
        reader = db.con.sql(sql).to_arrow_reader(_ROWS)
        for batch in reader:
            if batch.num_rows:
                walk.add(batch)
    return with_total(walk.table(), walk.rows, limit)


_KEYS = ["producer_id", "producer_epoch", "topic", "partition"]
_WRAP = 2**31
_ROWS = compute.BATCH_ROWS  # the rows of a record batch walked at a time


class _Walk:
    """The sequence walk of ``sequences`` over batches in key order, a record batch at a time:
    a key's state (its last sequence, wraps, furthest end, counts) carries over to the
    next record batch while the key goes on."""

    def __init__(self, limit: int | None = None) -> None:
        # the keys finished, a row each, in the table's order: the first ``limit`` are kept
        self.done: list[pa.Table] = []
        self.limit, self.rows = limit, 0
        self.key: tuple[object, ...] | None = None  # the key going on, and its state
        self.head: pa.Table | None = None  # its key columns (a row)
        self.seq = self.wraps = self.reach = 0
        self.batches = self.first = self.gaps = self.missing = self.duplicates = 0

    def add(self, rb: pa.RecordBatch) -> None:
        n = rb.num_rows
        t = pa.Table.from_batches([rb])
        change = np.zeros(n, bool)  # where a key starts (a null key equals a null key)
        for k in _KEYS:
            col = t[k].combine_chunks()
            if n > 1:
                after, before = col.slice(1), col.slice(0, n - 1)
                differ = pc.fill_null(pc.not_equal(after, before), True)
                same_null = pc.and_(pc.is_null(after), pc.is_null(before))
                change[1:] |= pc.and_(differ, pc.invert(same_null)).to_numpy(zero_copy_only=False)
        first_key = tuple(t[k][0].as_py() for k in _KEYS)
        going_on = self.key is not None and first_key == self.key
        change[0] = not going_on
        if not going_on:
            self._finish()
        # base sequence and record count as int64: the walk's sums never overflow
        seq = t["base_sequence"].to_numpy().astype(np.int64)
        count = t["record_count"].to_numpy().astype(np.int64)
        prev = np.empty(n, np.int64)
        prev[0] = self.seq if going_on else seq[0]
        prev[1:] = seq[:-1]
        step = seq - prev
        step[change] = 0
        w = np.where(step < -(2**30), 1, np.where(step > 2**30, -1, 0))
        # segments: the key going on (if it does), then each key starting here
        starts = np.flatnonzero(change)
        segs = starts if change[0] else np.concatenate([[0], starts])
        ends = np.append(segs[1:], n)
        sid = np.repeat(np.arange(len(segs)), ends - segs)
        cw = np.cumsum(w)
        wraps = cw - np.repeat(cw[segs] - w[segs], ends - segs)
        if going_on:
            wraps[: ends[0]] += self.wraps
        u = seq + wraps * _WRAP
        end = u + count
        # the furthest end before each batch: one running maximum over segments lifted apart
        # (each key's values above the last's), the key going on seeded with its furthest end
        lift = sid * 2**36 + 2**32
        seed = self.reach + 2**32 if going_on else -(2**62)
        acc = np.maximum.accumulate(np.concatenate([[seed], end + lift]))
        reach = acc[1:] - lift
        expected = acc[:-1] - lift
        diff = u - expected
        diff[change] = 0
        gap, dup = diff > 0, diff < 0
        batches = ends - segs
        gaps = np.add.reduceat(gap.astype(np.int64), segs)
        missing = np.add.reduceat(np.where(gap, diff, 0), segs)
        dups = np.add.reduceat(dup.astype(np.int64), segs)
        first = seq[segs]
        last_reach = reach[ends - 1]
        heads = t.select(_KEYS).take(pa.array(segs))
        rows = {
            "batches": batches, "first": first, "reach": last_reach,
            "gaps": gaps, "missing": missing, "duplicates": dups,
        }  # fmt: skip
        if going_on:  # the key going on: its counts so far, its first sequence
            rows["batches"][0] += self.batches
            rows["gaps"][0] += self.gaps
            rows["missing"][0] += self.missing
            rows["duplicates"][0] += self.duplicates
            rows["first"][0] = self.first
        # every segment but the last is finished; the last goes on into the next record batch
        m = len(segs) - 1
        if m:
            self._keep(self._rows(heads.slice(0, m), {c: v[:m] for c, v in rows.items()}))
        self.head = heads.slice(m, 1)
        self.key = tuple(t[k][n - 1].as_py() for k in _KEYS)
        self.seq, self.wraps, self.reach = int(seq[-1]), int(wraps[-1]), int(last_reach[m])
        self.batches, self.first = int(rows["batches"][m]), int(rows["first"][m])
        self.gaps, self.missing = int(rows["gaps"][m]), int(rows["missing"][m])
        self.duplicates = int(rows["duplicates"][m])

    @staticmethod
    def _rows(heads: pa.Table, rows: dict[str, np.ndarray]) -> pa.Table:
        return pa.table(
            {
                **{k: heads[k] for k in _KEYS},
                "batches": pa.array(rows["batches"], pa.int64()),
                "first_sequence": pa.array(rows["first"].astype(np.int32), pa.int32()),
                "last_sequence": pa.array(((rows["reach"] - 1) % _WRAP).astype(np.int32), pa.int32()),
                "gaps": pa.array(rows["gaps"], pa.int64()),
                "missing_records": pa.array(rows["missing"], pa.int64()),
                "duplicates": pa.array(rows["duplicates"], pa.int64()),
            }
        )

    def _finish(self) -> None:
        """The key going on is done: its row."""
        if self.head is None:
            return
        last = {
            "batches": [self.batches], "first": [self.first], "reach": [self.reach],
            "gaps": [self.gaps], "missing": [self.missing], "duplicates": [self.duplicates],
        }  # fmt: skip
        self._keep(self._rows(self.head, {c: np.array(v, np.int64) for c, v in last.items()}))
        self.head = self.key = None

    def _keep(self, rows: pa.Table) -> None:
        room = rows.num_rows if self.limit is None else max(self.limit - self.rows, 0)
        if room:
            self.done.append(rows.slice(0, room))
        self.rows += rows.num_rows

    def table(self) -> pa.Table:
        self._finish()
        if not self.done:
            return _SEQUENCES.empty_table()
        return pa.concat_tables([p.cast(_SEQUENCES) for p in self.done])


def transactions(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Every EndTxn request with its response: time, transactional id, producer id and epoch,
    what the producer asked (COMMIT or ABORT) and the broker's answer (error name; null: no
    response in the capture), by time and correlation id (ties in capture order). With
    ``limit``, the first ``limit`` rows and the whole table's row count (``total_rows``)."""
    linked = _paired(
        outdir, "EndTxn", ["_client_id", "transactional_id", "producer_id", "producer_epoch", "committed"],
        ["error_code"],
    )  # fmt: skip
    if linked is None:
        return with_total(_TRANSACTIONS.empty_table(), 0, limit)

    def named(t: pa.Table) -> pa.Table:
        return t.append_column("error", compute._error_names(t["error_code"])).cast(_TRANSACTIONS)

    with Spill() as db:
        db.con.execute(f"""
            CREATE TABLE result AS
            SELECT _ts_first AS ts, transactional_id, producer_id, producer_epoch,
                   CASE WHEN committed THEN 'COMMIT' WHEN NOT committed THEN 'ABORT' END AS outcome,
                   _client_id AS client_id, _correlation_id AS correlation_id,
                   r_error_code::SMALLINT AS error_code, _at
            FROM {linked}""")
        # (a request answered twice: its rows in the order of their error codes)
        order = "ts ASC NULLS LAST, correlation_id ASC NULLS LAST, _at, error_code NULLS LAST"
        columns = ", ".join(f.name for f in _TRANSACTIONS if f.name != "error")
        return limited(db, "result", order, limit, named, columns=columns)


def markers(outdir: str | Path, limit: int | None = None) -> pa.Table:
    """Transaction markers (control records COMMIT and ABORT) seen in the records, per side
    (produce, fetch), topic, partition, producer id (its batch's) and type: how many distinct
    markers (by offset: one fetched twice counts once), and the first and last offset. With
    ``limit``, the first ``limit`` rows and the whole table's row count (``total_rows``)."""
    marks = files(outdir, "record_markers")
    if not marks:
        return with_total(_MARKERS.empty_table(), 0, limit)
    sides = " ".join(f"WHEN {literal(m)} THEN {literal(s)}" for m, s in compute.SIDES.items())
    messages = ", ".join(literal(m) for m in compute.SIDES)
    batches = files(outdir, "record_batches")
    if batches:
        pid = f"(SELECT batch_id, producer_id FROM {parquet(batches)})"
    else:
        pid = "(SELECT NULL::BIGINT AS batch_id, NULL::BIGINT AS producer_id WHERE false)"
    # each marker's batch's producer id: a control batch, as few as the markers (a batch id
    # found twice with two producer ids gives the marker under each)
    sql = f"""
        WITH m AS (
            SELECT DISTINCT CASE _message {sides} END AS side, topic, "partition", batch_id, type,
                   record_offset
            FROM {parquet(marks)}
            WHERE type IN ('COMMIT', 'ABORT') AND _message IN ({messages})),
        p AS (
            SELECT DISTINCT batch_id, producer_id FROM {pid}
            WHERE batch_id IN (SELECT batch_id FROM m)),
        d AS (
            SELECT DISTINCT m.side, m.topic, m."partition", p.producer_id, m.type, m.record_offset
            FROM m LEFT JOIN p ON m.batch_id = p.batch_id)
        SELECT side, topic, "partition", producer_id, type, count(record_offset) AS markers,
               min(record_offset) AS first_offset, max(record_offset) AS last_offset
        FROM d GROUP BY ALL"""
    order = """side DESC NULLS LAST, topic ASC NULLS LAST, "partition" ASC NULLS LAST,
               producer_id ASC NULLS LAST, type ASC NULLS LAST"""
    with Spill() as db:
        db.con.execute(f"CREATE TABLE result AS {sql}")
        return limited(db, "result", order, limit, lambda t: t.cast(_MARKERS))
