"""Sequence gaps and duplicates, on record batches written here (the real captures have none):
a gap skips sequences, a duplicate repeats them (a retry), the sequence wraps after 2^31 - 1,
and each producer epoch counts on its own."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import arrowkafka.report as rep

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _write(folder: Path, batches: list[tuple[int, int, int, int, int]]) -> None:
    """(producer id, epoch, partition, base sequence, records) per produced batch, in this order."""
    rows = [
        {"_message": "ProduceRequest", "_client_id": "p", "_ts_first": T0 + dt.timedelta(milliseconds=i),
         "_correlation_id": i, "topic": "t", "partition": part, "producer_id": pid, "producer_epoch": epoch,
         "base_sequence": seq, "record_count": n, "transactional": False, "control": False}
        for i, (pid, epoch, part, seq, n) in enumerate(batches)
    ]  # fmt: skip
    schema = pa.schema(
        [("_message", pa.string()), ("_client_id", pa.string()), ("_ts_first", pa.timestamp("us", "UTC")),
         ("_correlation_id", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
         ("producer_id", pa.int64()), ("producer_epoch", pa.int16()), ("base_sequence", pa.int32()),
         ("record_count", pa.int32()), ("transactional", pa.bool_()), ("control", pa.bool_())]
    )  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / "record_batches.parquet")


def test_gaps_duplicates_wrap_and_epochs(tmp_path: Path) -> None:
    wrap = 2**31 - 3
    _write(
        tmp_path,
        [
            (7, 0, 0, 0, 5), (7, 0, 0, 5, 5), (7, 0, 0, 15, 5),  # sequences 10-14 never sent: a gap of 5
            (7, 0, 0, 15, 5),  # sent again: a duplicate
            (7, 0, 0, 20, 5),  # on from 20: as expected after the duplicate
            (7, 0, 1, wrap, 3), (7, 0, 1, 0, 2),  # 2^31 - 3, - 2, - 1, then 0: no gap
            (7, 1, 0, 0, 1),  # a new epoch starts again at 0
            (7, 0, 0, 22, 1),  # inside a batch already sent: a duplicate
        ],
    )  # fmt: skip
    got = {(r["producer_epoch"], r["partition"]): r for r in rep.sequences(tmp_path).to_pylist()}
    assert got[(0, 0)] == {"producer_id": 7, "producer_epoch": 0, "topic": "t", "partition": 0, "batches": 6,
                           "first_sequence": 0, "last_sequence": 24, "gaps": 1, "missing_records": 5,
                           "duplicates": 2}  # fmt: skip
    assert (got[(0, 1)]["gaps"], got[(0, 1)]["duplicates"], got[(0, 1)]["last_sequence"]) == (0, 0, 1)
    assert (got[(1, 0)]["batches"], got[(1, 0)]["gaps"], got[(1, 0)]["duplicates"]) == (1, 0, 0)
    prods = rep.producers(tmp_path).to_pylist()
    assert [(p["producer_epoch"], p["batches"], p["records"], p["partitions"]) for p in prods] == [
        (0, 8, 31, 2),  # records as sent, duplicates too
        (1, 1, 1, 1),
    ]
