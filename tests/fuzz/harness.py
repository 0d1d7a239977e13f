"""The fuzz campaign's targets: seeds, mutators and invariant checks.

A case is named by ``(target, seed, round)``: its random generator is seeded from that triple
alone, so the same triple makes the same input and runs the same checks on any machine (given
the same reference material). ``run_case`` builds the input, saves it where the runner asked
(so a crash or a hang in the kernels still leaves it behind), runs the target's checks and
returns the broken invariants, each a dict ``{"invariant", "error", "message"}``.

Targets:

- ``body``: message bodies. Seeds: the vectors, the bodies of every message in the real
  captures (re-encoded from their decoded rows, per message and version) and a body encoded
  from defaults for any (message, version) of the specs.
- ``records``: record-batch values: the records fields of the captures' Produce requests and
  Fetch responses, and the vector batch.
- ``capture``: the pcap files of the real captures, through the ``decode`` command.
- ``segment``: log segment files made of the captures' record batches, through ``segments``.
- ``encode``: decoded tables (from the body seeds) with a value somewhere swapped for a hostile
  one (null, out of range, too long, of another type), through ``ak.encode``.

The ``plant-*`` targets exist to show that the runner sees a fault: a wrong result fed to the
body checks, a crash (abort) and a hang.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import resource
import struct
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import arrowkafka as ak
from tests.records.batchtools import records_values

TARGETS = ("body", "records", "capture", "segment", "encode")
PLANTS = ("plant-wrong", "plant-crash", "plant-hang")

_SHARED_CANDIDATES = [
    os.environ.get("ARROWKAFKA_SHARED", ""),
    str(Path(__file__).resolve().parents[3] / "shared"),
    "/work/shared",
]
SHARED = next((Path(p) for p in _SHARED_CANDIDATES if p and Path(p).is_dir()), Path("/work/shared"))
CAPTURES = ("kafka091_legacy", "noida_kafka_python", "tansu_confluent")
FRAME_COLUMNS = {
    "_capture",
    "_client",
    "_broker",
    "_ts_first",
    "_ts_last",
    "_size",
    "_correlation_id",
    "_client_id",
    "_header_tags",
    "_request_ts",
    "_latency_ns",
    "_api_version",
}
GROWTH_LIMIT = 512 << 20  # a case may raise the child's peak RSS by at most this much
OUTPUT_PER_BYTE = 256  # decoded Arrow buffers per input byte, at most (plus a fixed allowance)


class Finding(Exception):
    """An invariant broken by a case."""

    def __init__(self, invariant: str, message: str, error: str = "") -> None:
        super().__init__(message)
        self.invariant, self.message, self.error = invariant, message, error


def _typed(
    e: BaseException, allowed: tuple[type[BaseException], ...], invariant: str = "typed errors"
) -> None:
    if not isinstance(e, allowed):
        raise Finding(invariant, f"{type(e).__name__}: {str(e)[:500]}", type(e).__name__) from e


# ---------------------------------------------------------------------------------- seeds


@cache
def _capture_tables() -> dict[str, dict[str, Path]]:
    """Each capture decoded once per process: capture -> table name -> parquet file."""
    from arrowkafka.traffic.parquet import decode_capture

    root = Path(tempfile.mkdtemp(prefix="fuzz-seeds-"))
    out = {}
    for capture in CAPTURES:
        folder = root / capture
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            decode_capture([SHARED / "captures" / f"{capture}.pcap"], folder, ak.load_specs())
        out[capture] = {p.stem: p for p in sorted(folder.glob("*.parquet"))}
    return out


@cache
def record_seeds() -> list[bytes]:
    values: list[bytes] = [(SHARED / "vectors" / "record_batch_v2_10rec.bin").read_bytes()]
    for tables in _capture_tables().values():
        for message in ("ProduceRequest", "FetchResponse"):
            if message in tables:
                values += records_values(pq.read_table(tables[message]).to_pylist(), skip_empty=True)
    return values


@cache
def body_seeds() -> list[tuple[str, int, bytes]]:
    """(message, version, body): the vectors, then up to three bodies per (message, version)
    of each capture, re-encoded from their decoded rows."""
    out = []
    specs = ak.load_specs()
    by_key = {(specs[n].api_key, str(specs[n].type)): n for n in specs if specs[n].api_key is not None}
    for meta in sorted((SHARED / "vectors").glob("*.json")):
        info = json.loads(meta.read_text())
        name = by_key.get((info.get("api_key"), info.get("kind")))
        if name is not None and (body := meta.with_suffix(".bin")).exists():
            out.append((name, int(info["api_version"]), body.read_bytes()))
    for tables in _capture_tables().values():
        for message, path in tables.items():
            if message not in specs:
                continue
            table = pq.read_table(path)
            if "_version" not in table.column_names:
                continue
            table = table.drop_columns([c for c in table.column_names if c in FRAME_COLUMNS])
            for version in sorted(set(table.column("_version").to_pylist())):
                rows = table.filter(pa.compute.equal(table.column("_version"), version)).slice(0, 3)
                try:
                    bodies = ak.encode(rows, message, version).to_pylist()
                except ak.ArrowKafkaError:
                    continue
                out.extend((message, int(version), b) for b in bodies)
    return out


@cache
def spec_pairs() -> list[tuple[str, int]]:
    specs = ak.load_specs()
    return [(name, v) for name in sorted(specs) for v in specs[name].valid_versions]


@cache
def default_body(name: str, version: int) -> bytes | None:
    try:
        return ak.encode(pa.table({"_version": pa.array([version], pa.int16())}), name, version)[0].as_py()
    except ak.ArrowKafkaError:
        return None


def pick_body(rng: random.Random) -> tuple[str, int, bytes]:
    seeds = body_seeds()
    if rng.random() < 0.7:
        return rng.choice(seeds)
    for _ in range(20):
        name, version = rng.choice(spec_pairs())
        if (body := default_body(name, version)) is not None:
            return name, version, body
    return rng.choice(seeds)


# ------------------------------------------------------------------------------- mutators

FORGED32 = [0x7FFFFFFF, -1, -2, 0, 1, 0xFFFF, 0x7FFF, 0x8000, 1 << 24, 1 << 30]
FORGED_VARINTS = [
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x80\x80",
    b"\xfe\xff\xff\xff\x07",
    b"\x00",
    b"\x01",
    b"\xff\xff\x03",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
]


def mutate(rng: random.Random, data: bytes, others: list[bytes] | None = None, lo: int = 0) -> bytes:
    """1-4 mutations of ``data``, none before byte ``lo``: bit flips, byte runs, forged int16
    and int32 lengths or counts, forged varints, truncations, extensions and splices."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if len(b) <= lo:
            b += bytes(rng.randrange(1, 9))
            continue
        at = rng.randrange(lo, len(b))
        kind = rng.randrange(9)
        if kind == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[at] = rng.randrange(256)
        elif kind == 2:  # a run of one byte
            b[at : at + rng.randint(1, 16)] = bytes([rng.choice([0, 0xFF, 0x7F, 0x80])]) * rng.randint(1, 16)
        elif kind == 3:
            b[at : at + 4] = struct.pack(">i", rng.choice([*FORGED32, len(b), len(b) - at]))
        elif kind == 4:
            b[at : at + 2] = struct.pack(">h", rng.choice([-1, -2, 0x7FFF, 0, 1, (len(b) - at) & 0x7FFF]))
        elif kind == 5:
            b[at : at + rng.randint(0, 2)] = rng.choice(FORGED_VARINTS)
        elif kind == 6:
            del b[max(lo, at) :]
        elif kind == 7:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif others:
            other = rng.choice(others)
            b[at:] = other[rng.randrange(len(other) or 1) :]
    return bytes(b)


# -------------------------------------------------------------------------------- checks


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _bounded(result_bytes: int, input_bytes: int, what: str) -> None:
    if result_bytes > OUTPUT_PER_BYTE * input_bytes + (8 << 20):
        raise Finding(
            "bounded allocation", f"{what}: {result_bytes} bytes of output from {input_bytes} bytes"
        )


def check_bodies(name: str, version: int, bodies: list[bytes], clean_index: int, plant: bool = False) -> None:
    try:
        raised: BaseException | None = None
        strict = ak.decode(bodies, name, version)
        strict.validate(full=True)
    except BaseException as e:
        _typed(e, (ak.DecodeError,))
        raised, strict = e, None
    try:
        batch, rejects = ak.decode(bodies, name, version, errors="null")
        batch.validate(full=True)
    except BaseException as e:
        _typed(e, (), "null mode raises nothing")
        raise
    if plant:  # the deliberate wrong result: a row lost
        batch = batch.slice(0, batch.num_rows - 1)
    _bounded(batch.get_total_buffer_size(), sum(map(len, bodies)), f"{name} v{version}")
    if batch.num_rows != len(bodies):
        raise Finding("rows + rejects = inputs", f"{batch.num_rows} rows for {len(bodies)} bodies")
    index = rejects.column("index").to_pylist()
    if index != sorted(set(index)) or any(not 0 <= i < len(bodies) for i in index):
        raise Finding("rows + rejects = inputs", f"reject indexes {index}")
    if rejects.column("body").to_pylist() != [bodies[i] for i in index]:
        raise Finding("rejects keep their bytes", "a reject's body is not its input")
    if set(rejects.column("error").to_pylist()) - {"Truncated", "Corrupt"}:
        raise Finding("typed errors", f"reject kinds {set(rejects.column('error').to_pylist())}")
    if clean_index in index:
        raise Finding("clean body decodes", f"the unmutated body {clean_index} was rejected")
    # raise and null agree: the same first failure, and where raise decodes, the same rows
    if raised is None:
        if index:
            raise Finding("raise and null agree", f"raise decoded all, null rejected {index}")
        # values, not schemas: null mode declares its top-level fields nullable (a reject is a null row)
        if strict is not None and not all(
            _same(strict.column(i), batch.column(i)) for i in range(batch.num_columns)
        ):
            raise Finding("raise and null agree", "raise and null decode different rows")
    else:
        assert isinstance(raised, ak.DecodeError)
        first = rejects.slice(0, 1).to_pylist()
        if (
            not first
            or first[0]["index"] != raised.message_index
            or first[0]["error"] != type(raised).__name__
        ):
            raise Finding(
                "raise and null agree",
                f"raise: {type(raised).__name__} at message {raised.message_index}; null: {first[:1]}",
            )
        row = {k: v for k, v in first[0].items() if k != "body"}
        at = row["byte_offset"]
        if (row["path"], at) != (raised.path, raised.offset):
            raise Finding("raise and null agree", f"raise at {raised.path} byte {raised.offset}; null: {row}")
    # threads agree
    try:
        threaded, rejects2 = ak.decode(bodies, name, version, errors="null", threads=2)
    except BaseException as e:
        _typed(e, (), "threads agree")
        raise
    if not _same(threaded, batch) or not rejects2.equals(rejects):
        raise Finding("threads agree", "threads=2 decodes otherwise than threads=1")
    # decode -> encode -> decode is a fixpoint, on the rows that decoded
    keep = [i for i in range(len(bodies)) if i not in set(index)]
    if not keep:
        return
    rows = batch.take(pa.array(keep))
    try:
        again = ak.encode(rows, name, version)
    except BaseException as e:
        _typed(e, (ak.EncodeError,))
        raise Finding(
            "decode -> encode succeeds", f"{type(e).__name__}: {str(e)[:500]}", type(e).__name__
        ) from e
    try:
        back = ak.decode(again, name, version)
    except BaseException as e:
        raise Finding(
            "decode -> encode -> decode is a fixpoint",
            f"re-encoded rows do not decode: {type(e).__name__}: {str(e)[:500]}",
            type(e).__name__,
        ) from e
    if back.schema.names != rows.schema.names or not all(
        _same(back.column(c), rows.column(c)) for c in rows.schema.names
    ):
        diff = next((c for c in rows.schema.names if not _same(back.column(c), rows.column(c))), "?")
        raise Finding("decode -> encode -> decode is a fixpoint", f"column {diff} differs after a round trip")
    if ak.encode(back, name, version).to_pylist() != again.to_pylist():
        raise Finding("decode -> encode -> decode is a fixpoint", "second encoding differs from the first")


def _same(a: Any, b: Any) -> bool:
    """Arrow data equal, a NaN equal to a NaN (a float field of a mutated body is often one;
    Arrow's ``equals`` holds NaN unequal to itself)."""
    if a.equals(b):
        return True
    shape = (a.type, b.type) if hasattr(a, "type") else (a.schema, b.schema)
    if shape[0] != shape[1]:
        return False
    return bool(_nan_free(a.to_pylist()) == _nan_free(b.to_pylist()))


def _nan_free(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_nan_free(v) for v in value]
    return value


def check_records(values: list[bytes]) -> None:
    raised: BaseException | None = None
    try:
        ak.decode_records(values)
    except BaseException as e:
        _typed(e, (ak.Corrupt,))
        raised = e
    try:
        got = ak.decode_records(values, errors="null")
    except BaseException as e:
        _typed(e, (), "null mode raises nothing")
        raise
    errors = got.batches.column("error").to_pylist()
    total = got.batches.get_total_buffer_size() + got.records.get_total_buffer_size()
    _bounded(total, sum(map(len, values)), "records")
    if got.rejects.num_rows != sum(e is not None for e in errors):
        raise Finding(
            "rows + rejects = inputs",
            f"{got.rejects.num_rows} rejects for {sum(e is not None for e in errors)} failed batches",
        )
    sizes: dict[int, int] = {}
    for row, size in zip(
        got.batches.column("row").to_pylist(), got.batches.column("size").to_pylist(), strict=True
    ):
        sizes[row] = sizes.get(row, 0) + size
    if any(sizes.get(i, 0) != len(v) for i, v in enumerate(values)):
        raise Finding(
            "rows + rejects = inputs",
            f"batch sizes {sizes} do not cover values of {list(map(len, values))} bytes",
        )
    good = [
        n
        for n, e in zip(got.batches.column("record_count").to_pylist(), errors, strict=True)
        if e is None and n is not None
    ]
    if got.records.num_rows != sum(good):
        raise Finding("rows + rejects = inputs", f"{got.records.num_rows} records for counts {sum(good)}")
    if (raised is None) != all(e is None for e in errors):
        raise Finding(
            "raise and null agree", f"raise: {raised!r}; null errors: {[e for e in errors if e][:3]}"
        )
    if raised is not None or any(got.batches.column("partial").to_pylist()):
        return
    try:
        again = ak.encode_records(got.batches, got.records, num_values=len(values))
        back = ak.decode_records(again)
    except BaseException as e:
        raise Finding(
            "decode -> encode -> decode is a fixpoint",
            f"{type(e).__name__}: {str(e)[:500]}",
            type(e).__name__,
        ) from e
    cols = [
        c for c in ("record_offset", "timestamp", "key", "value", "headers") if c in got.records.column_names
    ]
    if back.records.select(cols).to_pylist() != got.records.select(cols).to_pylist():
        raise Finding("decode -> encode -> decode is a fixpoint", "records differ after encode_records")


def _run_cli(argv: list[str]) -> tuple[int, str]:
    from arrowkafka import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except BaseException as e:
            raise Finding("CLI: no traceback", f"{type(e).__name__}: {str(e)[:500]}", type(e).__name__) from e
    if status not in (0, 1, 2):
        raise Finding("CLI: exit 0/1/2", f"exit {status}: {err.getvalue()[-500:]}")
    if "Traceback" in err.getvalue():
        raise Finding("CLI: no traceback", err.getvalue()[-500:])
    return status, out.getvalue()


def check_capture(path: Path, workdir: Path) -> None:
    status, out = _run_cli(["decode", str(path), "-o", str(workdir / "out"), "--overwrite"])
    if status != 2 and "all accounted for" not in out:
        line = next((x for x in out.splitlines() if x.startswith("frames in")), "no frames line")
        raise Finding("frames in = rows + rejects", line)


def check_segment(folder: Path, workdir: Path) -> None:
    _run_cli(["segments", str(folder), "-o", str(workdir / "out"), "--overwrite"])


def check_encode(table: pa.Table, name: str, version: int) -> None:
    try:
        out = ak.encode(table, name, version)
    except BaseException as e:
        _typed(e, (ak.EncodeError,))
        return
    if len(out) != table.num_rows:
        raise Finding("rows in = bodies out", f"{len(out)} bodies for {table.num_rows} rows")
    try:
        back = ak.decode(out, name, version)
    except BaseException as e:
        raise Finding("encoded bodies decode", f"{type(e).__name__}: {str(e)[:500]}", type(e).__name__) from e
    if ak.encode(back, name, version).to_pylist() != out.to_pylist():
        raise Finding("decode -> encode -> decode is a fixpoint", "encode(decode(encode(t))) != encode(t)")


# ------------------------------------------------------------------------ encoder inputs

HOSTILE: list[Any] = [
    None,
    -1,
    0,
    2**15,
    2**31,
    2**63 - 1,
    -(2**63),
    2**64,
    1.5,
    "",
    "x" * 40000,
    "é",
    b"\xff\xfe",
    [],
    [None],
    {},
    True,
    "not a number",
]


# whole values for an ``_unknown_tags`` map: tags out of range, repeated, out of order, on a
# known tag's number, a value too long for a size varint's comfort, a null value, a null map.
# (Never a null entry: pyarrow aborts on one, so no caller can hand the encoder such a map.)
HOSTILE_TAGS: list[Any] = [
    [],
    None,
    [(0, b"")],
    [(2**31, b"x")],
    [(2**40, b"x")],
    [(-1, b"x")],
    [(5, b"a"), (5, b"b")],
    [(3, b"a"), (1, b"b")],
    [(1, b"x" * 70000)],
    [(1, None)],
]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(value, dict):
        for k, v in value.items():  # a map as a whole: HOSTILE_TAGS
            out += [(*at, k)] if k == "_unknown_tags" else _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            out += _paths(v, (*at, i))
    return out


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def encoder_input(rng: random.Random) -> tuple[pa.Table, str, int]:
    name, version, body = pick_body(rng)
    batch = ak.decode([body], name, version)
    rows = batch.to_pylist()
    schema = batch.schema
    for _ in range(rng.randint(1, 3)):
        paths = _paths(rows[0])
        if not paths:
            break
        path = rng.choice(paths)
        pool = HOSTILE_TAGS if path[-1] == "_unknown_tags" else HOSTILE
        _set(rows[0], path, copy.deepcopy(rng.choice(pool)))
    try:
        return pa.Table.from_pylist(rows, schema=schema), name, version
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        try:  # the value does not fit the column's type: give the types Arrow infers instead
            return pa.Table.from_pylist(rows), name, version
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return pa.table(batch), name, version


# --------------------------------------------------------------------------------- cases


def _pcap_body_start(data: bytes) -> int:
    return 24 if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4") else 0


def run_case(
    target: str, seed: int, round_: int, workdir: Path, save: Callable[[str, bytes], None]
) -> list[dict]:
    """Run one case; ``save(ext, data)`` keeps its input before anything is decoded."""
    rng = random.Random(f"{target}:{seed}:{round_}")
    before = _rss()
    try:
        _one(target, rng, workdir, save)
    except Finding as f:
        return [{"invariant": f.invariant, "error": f.error, "message": f.message}]
    if _rss() - before > GROWTH_LIMIT:
        return [
            {
                "invariant": "bounded allocation",
                "error": "",
                "message": f"peak RSS grew by {(_rss() - before) >> 20} MiB in one case",
            }
        ]
    return []


def _one(target: str, rng: random.Random, workdir: Path, save: Callable[[str, bytes], None]) -> None:
    if target in ("body", "plant-wrong"):
        name, version, body = pick_body(rng)
        others = [b for n, v, b in body_seeds() if (n, v) == (name, version)] or [body]
        bodies = [mutate(rng, body, others) for _ in range(rng.randint(1, 4))]
        clean = rng.randrange(len(bodies) + 1)
        bodies.insert(clean, body)
        save(
            "json",
            json.dumps(
                {"message": name, "version": version, "clean": clean, "bodies": [b.hex() for b in bodies]}
            ).encode(),
        )
        check_bodies(name, version, bodies, clean, plant=target == "plant-wrong")
    elif target == "records":
        seeds = record_seeds()
        values = [mutate(rng, rng.choice(seeds), seeds) for _ in range(rng.randint(1, 3))]
        save("json", json.dumps({"values": [v.hex() for v in values]}).encode())
        check_records(values)
    elif target == "capture":
        data = (SHARED / "captures" / f"{rng.choice(CAPTURES)}.pcap").read_bytes()
        data = mutate(rng, data, None, _pcap_body_start(data))
        save("pcap", data)
        path = workdir / "case.pcap"
        path.write_bytes(data)
        check_capture(path, workdir)
    elif target == "segment":
        seeds = [v for v in record_seeds() if len(v) > 61]
        segment = b"".join(rng.choice(seeds) for _ in range(rng.randint(1, 4)))
        segment = mutate(rng, segment, seeds)
        save("log", segment)
        folder = workdir / "logs" / "fuzzed-0"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "00000000000000000000.log").write_bytes(segment)
        check_segment(workdir / "logs", workdir)
    elif target == "encode":
        table, name, version = encoder_input(rng)
        sink = pa.BufferOutputStream()
        table = table.replace_schema_metadata(
            {
                **(table.schema.metadata or {}),
                b"fuzz.message": name.encode(),
                b"fuzz.version": str(version).encode(),
            }
        )
        with pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        save("arrow", sink.getvalue().to_pybytes())
        check_encode(table, name, version)
    elif target == "plant-crash":
        save("txt", b"plant-crash")
        if rng.random() < 0.5:
            os.abort()
    elif target == "plant-hang":
        save("txt", b"plant-hang")
        if rng.random() < 0.5:
            time.sleep(3600)
    else:
        raise ValueError(f"no target {target!r}")


def warm(target: str) -> None:
    """Build a target's seeds and compile its kernels before the clock starts."""
    if target in ("body", "encode", "plant-wrong"):
        for name, version, body in body_seeds()[:8]:
            check_bodies(name, version, [body, body[:-1]], 0)
    elif target in ("records", "segment"):
        check_records(record_seeds()[:4])
    if target in ("capture", "segment"):
        workdir = Path(tempfile.mkdtemp(prefix="fuzz-warm-"))
        check_capture(SHARED / "captures" / f"{CAPTURES[0]}.pcap", workdir)
        (workdir / "logs" / "warm-0").mkdir(parents=True)
        (workdir / "logs" / "warm-0" / "00000000000000000000.log").write_bytes(record_seeds()[0])
        check_segment(workdir / "logs", workdir)
