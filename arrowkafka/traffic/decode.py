"""Bodies to rows: each (message, version) group of paired frames decoded in one batch, in the
all-versions schema after the frame columns; bodies that do not decode go to ``rejects``
with their reason, path, offset and raw bytes."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.api import SpecSet
from arrowkafka.codec.decode import Ranges
from arrowkafka.errors import DecodeError
from arrowkafka.kernels.tiers import expect
from arrowkafka.traffic.columns import FRAME_COLUMNS, REJECT_SCHEMA, TABLE_COLUMNS
from arrowkafka.traffic.pairing import Pairing, Rows
from arrowkafka.traffic.summary import Summary

__all__ = ["decode_frames", "decode_rows"]


def decode_frames(
    frames: pa.Table, specs: SpecSet, *, summary: Summary | None = None
) -> tuple[dict[str, pa.Table], pa.Table]:
    """Decode the bodies of a ``frames_table``, one batch per (message, version), into one
    table per message type (the all-versions schema after the frame columns); bodies that do
    not decode become rows of ``rejects``."""
    summary = Summary() if summary is None else summary
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    rejects: list[pa.Table] = []
    expect(frames.column("_body").nbytes)  # many small batches of one big job
    if len(frames):
        # groups ordered as frames_table orders them (direction, message, version), rows in
        # frame order within each, so that its frames need no reordering; each group a slice
        names = frames.column("_message").combine_chunks().dictionary_encode()
        codes = np.asarray(names.indices)
        rank = np.argsort(np.argsort(np.asarray(names.dictionary.to_pylist(), object)))
        responses = pc.equal(frames.column("_direction"), "response").to_numpy(zero_copy_only=False)
        versions = frames.column("_version").to_numpy().astype(np.int64)
        key = (responses.astype(np.int64) * len(rank) + rank[codes]) * 65536 + versions
        if (np.diff(key) < 0).any():  # frames_table gives each capture's frames grouped
            order = np.argsort(key, kind="stable")
            frames, key, versions = frames.take(order), key[order], versions[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(key)], strict=True):
            group = frames.slice(lo, hi - lo)
            message, version = str(frames["_message"][lo]), int(versions[lo])
            # copies of the rows, not slices: a slice would keep the whole chunk's columns alive
            bodies, frame = (
                group.column("_body").combine_chunks(),
                group.select(["_capture", *FRAME_COLUMNS.names]),
            )
            _decode_group(specs, summary, message, version, bodies, frame, tables, rejects, copy=True)
    return (
        {message: pa.concat_tables(parts) for message, parts in tables.items()},
        pa.concat_tables(rejects) if rejects else REJECT_SCHEMA.empty_table(),
    )


def decode_rows(
    headers: Pairing, r: Rows, specs: SpecSet, summary: Summary
) -> tuple[dict[str, list[pa.Table]], list[pa.Table]]:
    """``decode_frames`` for a chunk's rows straight from their arrays: each group's bodies
    are decoded where they lie in the chunk's buffer, and no frames table is built."""
    a = r.a
    frame = pa.Table.from_arrays(headers.frame_columns(r, r.rows), schema=FRAME_COLUMNS)
    ends = a.off + a.size
    expect(int((ends[r.rows] - r.body[r.rows]).sum()))  # many small batches of one big job
    tables: dict[str, list[pa.Table]] = defaultdict(list)
    rejects: list[pa.Table] = []
    for lo, hi in zip(r.bounds[:-1], r.bounds[1:], strict=True):
        if lo == hi:
            continue
        rows = r.rows[lo:hi]
        first = int(rows[0])
        message = headers.names[0 if a.request[first] else 1][int(r.key[first])]
        bodies = Ranges(a.data, r.body[rows], ends[rows])
        _decode_group(specs, summary, message, int(r.ver[first]), bodies, frame.slice(lo, hi - lo), tables,
                      rejects, copy=False, capture=headers.capture)  # fmt: skip
    return tables, rejects


def _decode_group(
    specs: SpecSet,
    summary: Summary,
    message: str,
    version: int,
    bodies: pa.Array | Ranges,
    frame: pa.Table,
    tables: dict[str, list[pa.Table]],
    rejects: list[pa.Table],
    *,
    copy: bool,
    capture: str | None = None,
) -> None:
    """Decode one (message, version) group of bodies, with ``frame`` their FRAME_COLUMNS (and
    ``_capture`` unless ``capture`` names it): rows to ``tables[message]``, bodies that do not
    decode to ``rejects``. ``copy``: the rows kept are copies even when all decode."""
    n = len(bodies.starts) if isinstance(bodies, Ranges) else len(bodies)
    work = [(version, np.arange(n))]
    while work:
        v, pos = work.pop(0)
        sub = bodies if len(pos) == n else bodies.take(pos)
        batch, bad = specs.decode(sub, message, v, errors="null", all_versions=True)
        body = pa.Table.from_batches([batch])
        if bad.num_rows:
            index = bad.column("index").to_numpy()
            if message == "ApiVersionsResponse" and v > 0:
                # A broker answers an ApiVersions version it does not know with an error in the
                # v0 layout, and clients read it so (Kafka's ApiVersionsResponse.parse): so do we.
                retry = np.array([_v0_error(specs, b) for b in bad.column("body").to_pylist()], np.bool_)
                if retry.any():
                    work.append((0, pos[index[retry]]))
            else:
                retry = np.zeros(len(index), np.bool_)
            if not retry.all():
                rejects.append(_body_rejects(summary, message, v, bad.filter(pa.array(~retry)),
                                             frame.take(pos[index[~retry]]), capture))  # fmt: skip
            good = np.ones(len(pos), np.bool_)
            good[index] = False
            body, pos = body.filter(pa.array(good)), pos[good]
        kept = frame.take(pos) if copy or len(pos) != n else frame
        body = body.cast(specs.arrow_schema(message))  # rows of rejected bodies are gone: not nullable
        summary.rows += kept.num_rows
        schema = pa.schema([*TABLE_COLUMNS, *body.schema], metadata=body.schema.metadata)
        which = (
            pa.repeat(pa.scalar(capture, pa.string()), kept.num_rows)
            if capture is not None
            else kept.column("_capture")
        )
        tables[message].append(pa.Table.from_arrays([which,
                                                     *kept.select(FRAME_COLUMNS.names).columns,
                                                     *body.columns], schema=schema))  # fmt: skip


def _body_rejects(
    summary: Summary, message: str, version: int, bad: pa.Table, frame: pa.Table, capture: str | None
) -> pa.Table:
    """Rows of rejects for bodies that did not decode (``bad``: the decoder's rejects; ``frame``
    their frames' columns)."""
    n = bad.num_rows
    summary.rejects += n
    stat = summary.per_api.get((message.removesuffix("Request").removesuffix("Response"), version))
    if stat is not None:
        stat["rejects"] += n
    direction = "request" if message.endswith("Request") else "response"
    columns = [
        pa.repeat(pa.scalar(capture, pa.string()), n) if capture is not None else frame.column("_capture"),
        frame.column("_client"),
        frame.column("_broker"),
        pa.repeat(pa.scalar(direction, pa.string()), n),
        frame.column("_ts_first"),
        pa.repeat(pa.scalar(message, pa.string()), n),
        pa.repeat(pa.scalar(version, pa.int16()), n),
        *bad.select(["error", "reason", "path", "byte_offset", "body"]).columns,
    ]
    return pa.Table.from_arrays(columns, schema=REJECT_SCHEMA)


def _v0_error(specs: SpecSet, body: bytes) -> bool:
    """Does the body read as an ApiVersionsResponse v0 carrying an error?"""
    try:
        batch = specs.decode([body], "ApiVersionsResponse", 0)
    except DecodeError:
        return False
    assert isinstance(batch, pa.RecordBatch)
    return bool(batch.column("error_code")[0].as_py())
