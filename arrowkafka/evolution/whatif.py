"""``what-if``: what a proposed spec change does to real traffic, measured.

Every message body of a capture is decoded with the specs it was sent with (``before``), then
encoded again under the proposed specs (``after``), in the same version or, with ``latest``, in
the proposed spec's highest version; the new bodies are decoded under the proposed specs too,
so both sides' decode and encode times are measured on the same rows. Bodies only: the
request and response headers, and the 4-byte size before each frame, are left out (a version
change can change the header; that is not measured here).

A row the proposed specs cannot carry (its message or version gone, a value out of a narrower
type's range ...) is counted and named, never dropped silently; so is the capture's own damage
(a body the sending specs cannot decode, a frame that is no message body), kept apart. A field
the proposal renames (``compat`` pairs it by position or tag) is carried under its new name.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.api import SpecSet
from arrowkafka.errors import ArrowKafkaError, EncodeError
from arrowkafka.evolution.compat import renamed_fields
from arrowkafka.schema import column_name
from arrowkafka.traffic.decode import _v0_error
from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS

__all__ = ["Group", "OutdirError", "WhatIf", "what_if", "what_if_capture", "what_if_outdir"]

# the columns of a message table that are the message's own (the rest describe its frame)
_OWN = ("_unknown_tags", "_tags_present")


class OutdirError(ArrowKafkaError, ValueError):
    """A folder that is not one ``arrowkafka decode`` wrote with the sending specs."""


@dataclass
class Group:
    """One (direction, message, version) of the traffic, before and after."""

    direction: str  # request | response
    message: str
    version: int
    target_version: int | None  # the version written under the proposed specs (None: none)
    messages: int  # bodies in the traffic
    bytes_in: int  # their bytes
    not_decoded: int = 0  # bodies the sending specs refuse (the capture's own rejects)
    not_decoded_reason: str = ""
    cannot_carry: int = 0  # decoded rows the proposed specs cannot write
    cannot_carry_reason: str = ""  # the reasons below in words
    cannot_carry_reasons: dict[str, int] = field(default_factory=dict)  # each reason once: rows
    carried: int = 0  # rows written under the proposed specs
    identical: int = 0  # ... whose new body is byte for byte the old one
    resent_differently: int = 0  # rows the sending specs themselves do not write back as sent
    bytes_before: int = 0  # the carried rows' bodies as sent
    bytes_after: int = 0  # ... and as the proposed specs write them
    delta: dict[str, float] = field(default_factory=dict)  # per message: min, p50, p90, max, mean
    seconds: dict[str, float] = field(default_factory=dict)  # decode/encode under before/after

    @property
    def api(self) -> str:
        return self.message.removesuffix("Request").removesuffix("Response")


@dataclass
class WhatIf:
    source: str
    groups: list[Group]
    # frames of the traffic that are no message body: not framed whole, a response whose
    # request the capture lacks, an api key or version the sending specs do not know
    unframed: int = 0
    unframed_reasons: dict[str, int] = field(default_factory=dict)
    repeat: int = 1  # times are the best of this many runs ...
    kernel: str = "interpreter"  # ... on this kernel, both sides

    @property
    def bytes_in(self) -> int:
        return sum(g.bytes_in for g in self.groups)

    @property
    def bytes_out(self) -> int:
        """The whole traffic after: carried rows at their new size, the rest as they were."""
        return sum(g.bytes_in - g.bytes_before + g.bytes_after for g in self.groups)

    @property
    def cannot_carry(self) -> int:
        """Rows the proposal cannot carry (what ``what-if`` exits 1 for)."""
        return sum(g.cannot_carry for g in self.groups)

    @property
    def not_decoded(self) -> int:
        return sum(g.not_decoded for g in self.groups)

    @property
    def capture_damage(self) -> int:
        """The capture's own: bodies the sending specs refuse, frames that are no body."""
        return self.not_decoded + self.unframed

    @property
    def not_carried(self) -> int:
        return self.cannot_carry + self.capture_damage

    def to_json(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "messages": sum(g.messages for g in self.groups),
                "bytes_before": self.bytes_in,
                "bytes_after": self.bytes_out,
                "not_carried": self.not_carried,
                "cannot_carry": self.cannot_carry,
                "not_decoded": self.not_decoded,
                "repeat": self.repeat,
                "kernel": self.kernel,
                "unframed": self.unframed,
                "unframed_reasons": self.unframed_reasons,
                "groups": [asdict(g) for g in self.groups],
            },
            indent=1,
        )

    def render(self) -> str:
        total_in, total_out = self.bytes_in or 1, self.bytes_out or 1
        head = (
            f"{'message':<34} {'ver':>7} {'msgs':>5} {'bytes before':>12} {'after':>10} {'change':>7} "
            f"{'share before':>12} {'after':>6} {'per message min/p50/max':>23} "
            f"{'decode us before/after':>22} {'encode us before/after':>22}"
        )
        lines = [head]
        for g in self.groups:
            ver = (
                f"{g.version}"
                if g.target_version in (None, g.version)
                else f"{g.version}->{g.target_version}"
            )
            change = (g.bytes_after - g.bytes_before) / g.bytes_before * 100 if g.bytes_before else 0.0
            d = g.delta
            dist = f"{d['min']:+.0f}/{d['p50']:+.0f}/{d['max']:+.0f}" if d else "-"
            s = g.seconds
            dec = f"{s['decode_before'] * 1e6:.0f}/{s['decode_after'] * 1e6:.0f}" if s else "-"
            enc = f"{s['encode_before'] * 1e6:.0f}/{s['encode_after'] * 1e6:.0f}" if s else "-"
            after_in_total = g.bytes_in - g.bytes_before + g.bytes_after
            share_before, share_after = g.bytes_in / total_in * 100, after_in_total / total_out * 100
            lines.append(
                f"{g.message:<34} {ver:>7} {g.messages:>5} {g.bytes_before:>12,} {g.bytes_after:>10,} "
                f"{change:>+6.1f}% {share_before:>11.1f}% {share_after:>5.1f}% {dist:>23} {dec:>22} {enc:>22}"
            )
        for g in self.groups:
            if g.resent_differently:
                lines.append(
                    f"note: {g.resent_differently} x {g.message} v{g.version} do not come back as sent "
                    "even under the sending specs (a peer that writes what Kafka would not)"
                )
            if g.not_decoded:
                lines.append(
                    f"not decoded: {g.not_decoded} x {g.message} v{g.version} (the sending specs refuse "
                    f"them: {g.not_decoded_reason})"
                )
            if g.cannot_carry:
                lines.append(
                    f"cannot carry: {g.cannot_carry} x {g.message} v{g.version} under the proposed specs "
                    f"({g.cannot_carry_reason})"
                )
        for reason, n in sorted(self.unframed_reasons.items()):
            lines.append(f"not a message body: {n} frames ({reason})")
        change = (self.bytes_out - self.bytes_in) / total_in * 100
        identical = sum(g.identical for g in self.groups)
        carried = sum(g.carried for g in self.groups)
        messages = sum(g.messages for g in self.groups)
        lines.append(
            f"\n{messages} message bodies in {self.source}: {self.bytes_in:,} bytes before, "
            f"{self.bytes_out:,} after ({change:+.2f}%); {carried} re-encoded, {identical} of them "
            f"byte for byte as sent; {self.cannot_carry} the proposal cannot carry; the capture's own "
            f"damage (named above): {self.not_decoded} bodies the sending specs refuse, {self.unframed} "
            f"frames that are no message body; times in us for each group's bodies together, best of "
            f"{self.repeat} on the {self.kernel}"
        )
        return "\n".join(lines)


def _best(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """``fn()``'s result and its best time of ``repeat`` runs (after one untimed warm-up)."""
    out = fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def _reason(e: EncodeError) -> str:
    return f"{e.reason} at {e.path}"


def _carriable(
    specs: SpecSet, batch: pa.RecordBatch, name: str, version: int
) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows the specs can write (a bool mask), and why the others cannot: each reason
    once, with the rows it stopped (told apart by what it says less its numbers).

    An error that is not about a row (a field the proposal lacks, a column of a type it does
    not take) stops the rows of a batch of none too: the whole group, in one step. Else the
    rows are bisected: a batch that fails loses the row named and is tried again in halves,
    so k bad rows among n cost some k log(n/k) encodes, not one per row."""
    keep = np.ones(batch.num_rows, bool)
    reasons: dict[str, int] = {}
    texts: dict[str, str] = {}  # reason less its numbers -> the first one's text
    try:
        specs.encoded_size(batch.slice(0, 0), name, version)
    except EncodeError as e:
        keep[:] = False
        return keep, {_reason(e): batch.num_rows} if batch.num_rows else {}
    pending = [np.arange(batch.num_rows)]
    while pending:
        rows = pending.pop()
        if not rows.size:
            continue
        try:
            specs.encoded_size(batch if rows.size == batch.num_rows else batch.take(rows), name, version)
            continue
        except EncodeError as e:
            keep[rows[e.row]] = False
            text = texts.setdefault(re.sub(r"\d+", "#", _reason(e)), _reason(e))
            reasons[text] = reasons.get(text, 0) + 1
            rest = np.delete(rows, e.row)
            pending += [rest[: rest.size // 2], rest[rest.size // 2 :]]
    return keep, reasons


def _reasons_text(reasons: Mapping[str, int]) -> str:
    said = sorted(reasons.items(), key=lambda kv: -kv[1])
    text = "; ".join(f"{r} ({n} rows)" if n > 1 else r for r, n in said[:3])
    return text + (f"; {len(said) - 3} more reasons" if len(said) > 3 else "")


_Tree = dict[str, tuple[str, "_Tree"]]  # column -> (its new name, the same for its fields)


def _rename_tree(before: SpecSet, after: SpecSet, name: str) -> _Tree:
    """The columns to rename for the proposal: the fields ``compat`` pairs by position or tag
    with a field of another name (a rename the wire does not see)."""
    tree: _Tree = {}
    if before[name] is after[name]:
        return tree
    for path, new in renamed_fields(before[name], after[name]).items():
        node = tree
        for part in path[:-1]:
            col = column_name(part)
            node = node.setdefault(col, (col, {}))[1]
        col = column_name(path[-1])
        node[col] = (column_name(new), node.get(col, (col, {}))[1])
    return tree


def _renamed_type(t: pa.DataType, tree: _Tree) -> pa.DataType:
    if pa.types.is_struct(t):
        fields = []
        for i in range(t.num_fields):
            f = t.field(i)
            new, sub = tree.get(f.name, (f.name, {}))
            fields.append(
                pa.field(new, _renamed_type(f.type, sub) if sub else f.type, f.nullable, f.metadata)
            )
        return pa.struct(fields)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        f = t.value_field
        inner = pa.field(f.name, _renamed_type(f.type, tree), f.nullable, f.metadata)
        return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
    return t


def _renamed(batch: pa.RecordBatch, tree: _Tree) -> pa.RecordBatch:
    """The batch with the proposal's names: the same buffers, seen under renamed types."""
    if not tree:
        return batch
    schema = batch.schema
    fields, columns = [], []
    for i, f in enumerate(schema):
        new, sub = tree.get(f.name, (f.name, {}))
        t = _renamed_type(f.type, sub) if sub else f.type
        fields.append(pa.field(new, t, f.nullable, f.metadata))
        columns.append(batch.column(i) if t == f.type else batch.column(i).view(t))
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))


def _group(
    direction: str,
    name: str,
    version: int,
    raw: pa.Array,
    before: SpecSet,
    after: SpecSet,
    latest: bool,
    repeat: int,
    kernel: str,
) -> Group:
    sizes = pc.binary_length(raw)
    g = Group(direction, name, version, None, len(raw), int(pc.sum(sizes).as_py() or 0))
    batch, rejects = before.decode(raw, name, version, errors="null", kernel=kernel)
    ok = np.ones(len(raw), bool)
    if rejects.num_rows:
        ok[rejects["index"].to_numpy()] = False
        g.not_decoded = int(rejects.num_rows)
        g.not_decoded_reason = str(rejects["error"][0]) + ": " + str(rejects["reason"][0])
        idx = pa.array(np.flatnonzero(ok))
        batch, raw = batch.take(idx), raw.take(idx)

    target = after[name].valid_versions.hi if latest and name in after else version
    if name not in after or target not in after[name].valid_versions:
        g.cannot_carry = batch.num_rows
        g.cannot_carry_reason = (
            f"the proposed specs have no {name}"
            if name not in after
            else f"{name} has no version {target} there"
        )
        g.cannot_carry_reasons = {g.cannot_carry_reason: g.cannot_carry}
        return g
    g.target_version = target
    carried = _renamed(batch, _rename_tree(before, after, name))
    keep, reasons = _carriable(after, carried, name, target)
    if not keep.all():
        g.cannot_carry = int((~keep).sum())
        g.cannot_carry_reasons = reasons
        g.cannot_carry_reason = _reasons_text(reasons)
        idx = pa.array(np.flatnonzero(keep))
        batch, carried, raw = batch.take(idx), carried.take(idx), raw.take(idx)
    g.carried = batch.num_rows
    if not g.carried:
        return g
    # both sides timed on the same rows: those carried
    _, t_dec_before = _best(lambda: before.decode(raw, name, version, kernel=kernel), repeat)
    old, t_enc_before = _best(lambda: before.encode(batch, name, version, kernel=kernel), repeat)
    new, t_enc_after = _best(lambda: after.encode(carried, name, target, kernel=kernel), repeat)
    _, t_dec_after = _best(lambda: after.decode(new, name, target, kernel=kernel), repeat)
    if new.type != raw.type:
        new, old = new.cast(raw.type), old.cast(raw.type)
    sizes_before = pc.binary_length(raw).to_numpy().astype(np.int64)
    sizes_after = pc.binary_length(new).to_numpy().astype(np.int64)
    g.bytes_before, g.bytes_after = int(sizes_before.sum()), int(sizes_after.sum())
    g.identical = int(pc.sum(pc.equal(new, raw)).as_py() or 0)
    g.resent_differently = g.carried - int(pc.sum(pc.equal(old, raw)).as_py() or 0)
    diff = sizes_after - sizes_before
    g.delta = {
        "min": float(diff.min()),
        "p50": float(np.percentile(diff, 50)),
        "p90": float(np.percentile(diff, 90)),
        "max": float(diff.max()),
        "mean": float(diff.mean()),
    }
    g.seconds = {
        "decode_before": t_dec_before,
        "encode_before": t_enc_before,
        "decode_after": t_dec_after,
        "encode_after": t_enc_after,
    }
    return g


Bodies: TypeAlias = "Sequence[bytes] | pa.Array | pa.ChunkedArray | Sequence[pa.Array]"
# a body array's offsets are 32-bit up to this many bytes of bodies; past it, 64-bit
_BINARY_LIMIT = 2**31 - 1


def _as_array(items: Bodies) -> pa.Array:
    """Bodies as one binary array (``large_binary`` when together they pass 2 GB)."""
    if isinstance(items, pa.ChunkedArray):
        parts = list(items.chunks)
    elif isinstance(items, pa.Array):
        parts = [items]
    elif items and all(isinstance(x, pa.Array) for x in items):
        parts = list(items)
    else:
        data = [bytes(x) for x in items]
        big = sum(map(len, data)) > _BINARY_LIMIT
        return pa.array(data, pa.large_binary() if big else pa.binary())
    total = sum(int(pc.sum(pc.binary_length(p)).as_py() or 0) for p in parts)
    t = pa.large_binary() if total > _BINARY_LIMIT else pa.binary()
    parts = [p if p.type == t else p.cast(t) for p in parts]
    return pa.concat_arrays(parts) if parts else pa.array([], t)


def _v0_fallback(groups: dict[tuple[str, str, int], pa.Array], before: SpecSet) -> None:
    """ApiVersionsResponse bodies of a version > 0 that read as a v0 error go to v0, as
    ``arrowkafka decode`` takes them (a broker answers a version it does not know so)."""
    name = "ApiVersionsResponse"
    for key in [k for k in groups if k[1] == name and k[2] > 0]:
        if name not in before or key[2] not in before[name].valid_versions:
            continue
        raw = groups[key]
        _, rejects = before.decode(raw, name, key[2], errors="null")
        if not rejects.num_rows:
            continue
        index = rejects["index"].to_numpy()
        v0 = np.array([_v0_error(before, b) for b in rejects["body"].to_pylist()], bool)
        if not v0.any():
            continue
        moved = np.zeros(len(raw), bool)
        moved[index[v0]] = True
        to = ("response", name, 0)
        taken = raw.filter(pa.array(moved))
        groups[to] = _as_array([groups[to], taken]) if to in groups else taken
        groups[key] = raw.filter(pa.array(~moved))
        if not len(groups[key]):
            del groups[key]


def what_if(
    bodies: Mapping[tuple[str, str, int], Bodies],
    before: SpecSet,
    after: SpecSet,
    *,
    source: str = "<bodies>",
    latest: bool = False,
    repeat: int = 3,
    kernel: str = "interpreter",
) -> WhatIf:
    """Bodies grouped by (direction, message, version) (each group a list of bytes, or Arrow
    binary arrays), sent under ``before``, re-encoded under ``after``. Times are the best of
    ``repeat`` runs after a warm-up, on the same ``kernel`` for both sides (default the
    interpreter: one compile serves every spec, where "specialised" compiles a kernel per
    plan, the proposed ones included)."""
    groups = {key: _as_array(items) for key, items in bodies.items()}
    _v0_fallback(groups, before)
    report = [
        _group(direction, name, version, raw, before, after, latest, repeat, kernel)
        for (direction, name, version), raw in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2]))
    ]
    return WhatIf(source, report, repeat=repeat, kernel=kernel)


def _by_key(
    out: dict[tuple[str, str, int], list[pa.Array]],
    direction: Sequence[str],
    message: Sequence[str],
    version: Sequence[int],
    body: pa.Array,
) -> None:
    """Each (direction, message, version)'s bodies of one chunk, taken as Arrow arrays."""
    rows: dict[tuple[str, str, int], list[int]] = {}
    for i, key in enumerate(zip(direction, message, version, strict=True)):
        rows.setdefault(key, []).append(i)
    for key, index in rows.items():
        out.setdefault(key, []).append(body if len(index) == len(body) else body.take(pa.array(index)))


def what_if_capture(
    captures: Iterable[str | Path],
    before: SpecSet,
    after: SpecSet,
    *,
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    latest: bool = False,
    repeat: int = 3,
    kernel: str = "interpreter",
) -> WhatIf:
    """``what_if`` on the message bodies of captures, framed, headers read and responses paired
    by the kernels ``arrowkafka decode`` runs (``traffic.frame_chunks``); what cannot be framed
    or paired is no message body, and is counted in ``unframed``."""
    from arrowkafka.traffic import frame_chunks

    names = [str(c) for c in captures]
    bodies: dict[tuple[str, str, int], list[pa.Array]] = {}
    rejects: list[dict[str, Any]] = []
    for frames, chunk_rejects in frame_chunks(names, before, broker_ports=broker_ports):
        rejects.extend(chunk_rejects.select(["error", "reason"]).to_pylist())
        _by_key(bodies, frames["_direction"].to_pylist(), frames["_message"].to_pylist(),
                frames["_version"].to_pylist(), frames["_body"].combine_chunks())  # fmt: skip
    report = what_if(
        bodies, before, after, source=", ".join(names), latest=latest, repeat=repeat, kernel=kernel
    )
    _unframed(report, rejects)
    return report


def _unframed(report: WhatIf, rejects: Iterable[Mapping[str, Any]]) -> None:
    """Count the rejects that are frames, not bodies, by their error and reason."""
    for row in rejects:
        reason = f"{row.get('error')}: {row.get('reason')}"
        report.unframed += 1
        report.unframed_reasons[reason] = report.unframed_reasons.get(reason, 0) + 1


def _body_rejects(rejects: pa.Table, before: SpecSet) -> np.ndarray:
    """Which rows of a ``rejects`` table are message bodies that did not decode: those the body
    decoder wrote, with its field path (``$``, ``$.topics[2]...``). A header that did not parse
    names its message and version too, but no path (or a ``$header`` one), and its ``raw`` is
    the whole frame: a frame, not a body; so are frames cut short and unpaired responses."""
    known = [n for n in before if before[n].type in ("request", "response")]
    path = rejects["path"]
    return np.asarray(
        pc.and_(
            pc.and_(
                pc.is_valid(rejects["version"]), pc.is_in(rejects["message"], pa.array(known, pa.string()))
            ),
            pc.and_(pc.starts_with(path, "$"), pc.invert(pc.starts_with(path, "$header"))),
        )
        .fill_null(False)
        .to_numpy(zero_copy_only=False),
        bool,
    )


def what_if_outdir(
    outdir: str | Path,
    before: SpecSet,
    after: SpecSet,
    *,
    latest: bool = False,
    repeat: int = 3,
    kernel: str = "interpreter",
) -> WhatIf:
    """``what_if`` on a folder ``arrowkafka decode`` wrote: each message table's rows are
    written back into bodies under the sending specs (which gives the bytes as sent: the
    decoder keeps what a byte-exact re-encode needs), and the bodies its ``rejects`` table kept
    are added to their message and version, where they fail to decode again as they did."""
    import pyarrow.parquet as pq

    folder = Path(outdir)
    bodies: dict[tuple[str, str, int], list[pa.Array]] = {}
    tables = [
        p
        for p in sorted(folder.glob("*.parquet"))
        if p.stem in before and before[p.stem].type in ("request", "response")
    ]
    if not tables:
        raise OutdirError(f"{folder}: holds no message tables (<Message>.parquet) of `arrowkafka decode`")
    for path in tables:
        name = path.stem
        table = pq.read_table(path)
        if "_version" not in table.column_names:
            raise OutdirError(f"{path}: no _version column: not a table of `arrowkafka decode`")
        own = [c for c in table.column_names if not c.startswith("_") or c in _OWN]
        for version in pc.unique(table["_version"]).to_pylist():
            rows = table.filter(pc.equal(table["_version"], version)).select(own)
            try:
                written = before.encode(rows, name, version)
            except (EncodeError, KeyError) as e:
                raise OutdirError(
                    f"{path}: its v{version} rows do not fit the sending specs ({e}); were they decoded "
                    "with other specs (--sent-with)?"
                ) from None
            bodies.setdefault((before[name].type, name, version), []).append(written)
    frames: list[dict[str, Any]] = []
    if (folder / "rejects.parquet").is_file():
        rejects = pq.read_table(folder / "rejects.parquet")
        body = _body_rejects(rejects, before)
        kept = rejects.filter(pa.array(body))
        messages = kept["message"].to_pylist()
        directions = [before[m].type for m in messages]
        _by_key(bodies, directions, messages, kept["version"].to_pylist(), kept["raw"].combine_chunks())
        frames = rejects.filter(pa.array(~body)).select(["error", "reason"]).to_pylist()
    report = what_if(bodies, before, after, source=str(folder), latest=latest, repeat=repeat, kernel=kernel)
    _unframed(report, frames)
    return report
