"""Control records: transaction markers and the KRaft control records of control batches.

A control record's key is ``version int16, type int16`` (Kafka's ``ControlRecordType``). An
ABORT or COMMIT value is ``version int16, coordinator epoch int32`` (``EndTransactionMarker``).
The KRaft ones hold messages defined by JSON specs (``LeaderChangeMessage`` and the others),
written in the version their own first field, ``Version``, names: they decode through the
message decoder, on the vendored specs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.api import default_specs
from arrowkafka.assembly.arrays import bits, empty_table
from arrowkafka.errors import Corrupt

__all__ = [
    "CONTROL_TYPES",
    "MARKERS_SCHEMA",
    "SPECS",
    "control_schema",
    "decode_control",
    "kraft_value_errors",
]

CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
SPECS = {
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}

MARKERS_SCHEMA = pa.schema(
    [
        pa.field("record", pa.int64(), nullable=False),  # row in the records table
        pa.field("batch", pa.int64(), nullable=False),
        pa.field("record_offset", pa.int64(), nullable=False),
        pa.field("type", pa.string()),  # ABORT, COMMIT, LEADER_CHANGE, ...; null when unknown
        pa.field("type_code", pa.int16()),
        pa.field("key_version", pa.int16()),
        pa.field("marker_version", pa.int16()),  # ABORT and COMMIT
        pa.field("coordinator_epoch", pa.int32()),  # ABORT and COMMIT
        pa.field("error", pa.string()),  # why the record did not decode; null when it did
    ]
)


def _i(b: bytes, at: int, n: int) -> int:
    return int.from_bytes(b[at : at + n], "big", signed=True)


def _true(column: pa.ChunkedArray) -> np.ndarray:
    """Where a boolean column is true (not null), as numpy (from its bits: pyarrow's own
    conversions import pandas, most of a process's first decode where it is installed)."""
    true = pc.and_kleene(column, column.is_valid())  # (no nulls: a null is False)
    return np.concatenate([np.zeros(0, np.uint8), *(bits(arr) for arr in true.chunks)]).astype(bool)


def decode_control(
    records: pa.Table, batches: pa.Table, errors: str, sizes: np.ndarray
) -> tuple[pa.Table, dict[str, pa.Table]]:
    """(markers, {spec name: table}) for the records of control batches; ``sizes`` (each input
    element's bytes) only completes what an error says."""
    control = _true(batches.column("control"))
    if not control.any():
        return empty_table(MARKERS_SCHEMA), {}
    batch = records.column("batch").to_numpy()
    rows = np.flatnonzero(control[batch])
    # one by one: control records are few, and Arrow's take has no binary_view kernel yet
    keys = [records.column("key")[r].as_py() for r in rows.tolist()]
    values = [records.column("value")[r].as_py() for r in rows.tolist()]
    offsets = records.column("record_offset").take(rows).to_pylist()
    offset_of = dict(zip(rows.tolist(), offsets, strict=True))
    input_row, position = batches.column("row").to_numpy(), batches.column("position").to_numpy()

    def at(row: int, part: str) -> dict[str, Any]:
        """Where record ``row``'s ``part`` is, for an error: its input row and batch."""
        b = int(batch[row])
        where = f"the control record at offset {offset_of[row]} of the batch at byte {int(position[b])}"
        return {
            "path": f"{where}: its {part}",
            "message_index": int(input_row[b]),
            "offset": int(position[b]),
            "size": int(sizes[input_row[b]]),  # (the input element's)
        }

    out: dict[str, list] = {f.name: [] for f in MARKERS_SCHEMA}
    raft: dict[str, tuple[list[int], list[bytes], list[int]]] = {}
    for row, key, value, offset in zip(rows.tolist(), keys, values, offsets, strict=True):
        kind = version = mv = epoch = None
        error = None
        if key is None or len(key) < 4:
            error = f"a control record key of {0 if key is None else len(key)} bytes (needs 4)"
        else:
            version, kind = _i(key, 0, 2), _i(key, 2, 2)
            if version < 0:
                error = f"control record key version {version}"
            elif kind in (0, 1):
                if value is None or len(value) < 6:
                    error = (
                        f"a transaction marker value of {0 if value is None else len(value)} bytes (needs 6)"
                    )
                else:
                    mv, epoch = _i(value, 0, 2), _i(value, 2, 4)
            elif kind in SPECS:
                if value is None or len(value) < 2:
                    error = f"a {SPECS[kind]} value of {0 if value is None else len(value)} bytes"
                else:
                    rows_, values_, versions_ = raft.setdefault(SPECS[kind], ([], [], []))
                    rows_.append(row)
                    values_.append(value)
                    versions_.append(_i(value, 0, 2))
        if error is not None and errors == "raise":
            raise Corrupt(error, message="control record", **at(row, "key" if " key " in error else "value"))
        out["record"].append(row)
        out["batch"].append(int(batch[row]))
        out["record_offset"].append(offset)
        out["type"].append(CONTROL_TYPES.get(kind) if kind is not None else None)
        out["type_code"].append(kind)
        out["key_version"].append(version)
        out["marker_version"].append(mv)
        out["coordinator_epoch"].append(epoch)
        out["error"].append(error)
    markers = pa.Table.from_pydict(out, MARKERS_SCHEMA)
    tables: dict[str, pa.Table] = {}
    where = {r: i for i, r in enumerate(out["record"])}
    errs = out["error"]
    failed: dict[int, str] = {}
    for name, (rows_, values_, versions_) in raft.items():
        tables[name], failed_ = _decode_spec(name, rows_, values_, versions_, "null")
        failed.update(failed_)
    if failed and errors == "raise":  # the first record that failed
        row = min(failed)
        raise Corrupt(failed[row], message="control record", **at(row, "value"))
    for r, reason in failed.items():
        errs[where[r]] = reason
    if any(e is not None for e in errs):
        markers = markers.set_column(
            markers.schema.get_field_index("error"), "error", pa.array(errs, pa.string())
        )
    return markers, tables


def control_schema(name: str) -> pa.Schema:
    """The schema of ``decode_records``' table of KRaft control records of spec ``name``:
    ``record`` (its row in the records table), then the spec's all-versions columns."""
    return pa.schema([pa.field("record", pa.int64(), nullable=False), *default_specs().arrow_schema(name)])


def kraft_value_errors(name: str, rows: list[int], values: list[bytes]) -> dict[int, str]:
    """{row: why} for KRaft control record values of spec ``name`` that ``decode_records``
    would refuse (each value read in the version its first int16 names): the encoder's check."""
    versions = [int.from_bytes(v[:2], "big", signed=True) for v in values]
    return _decode_spec(name, rows, values, versions, "null")[1]


def _decode_spec(
    name: str, rows: list[int], values: list[bytes], versions: list[int], errors: str
) -> tuple[pa.Table, dict[int, str]]:
    """Values of one KRaft control record spec, each in the version it names, in the spec's
    all-versions schema; ``record`` first."""
    specs = default_specs()
    valid = specs[name].valid_versions
    failed: dict[int, str] = {}
    parts = []
    for v in sorted(set(versions)):
        take = [i for i, x in enumerate(versions) if x == v]
        if v not in valid:
            for i in take:
                failed[rows[i]] = f"{name} version {v} is not one of {valid}"
            continue
        batch, rejects = specs.decode([values[i] for i in take], name, v, errors="null", all_versions=True)
        table = pa.Table.from_batches([batch])
        table = table.add_column(0, "record", pa.array([rows[i] for i in take], pa.int64()))
        for index, reason in zip(
            rejects.column("index").to_pylist(), rejects.column("reason").to_pylist(), strict=True
        ):
            failed[rows[take[index]]] = f"{name} v{v}: {reason}"
        parts.append(
            table.filter(pc.invert(pc.is_in(table.column("record"), pa.array(list(failed), pa.int64()))))
        )
    if failed and errors == "raise":
        row, reason = next(iter(failed.items()))
        raise Corrupt(reason, path=f"records[{row}].value", message="control record")
    schema = control_schema(name)
    # (from_batches: empty_table has no way to build an empty array of an extension type)
    return (pa.concat_tables(parts).cast(schema) if parts else pa.Table.from_batches([], schema)), failed
