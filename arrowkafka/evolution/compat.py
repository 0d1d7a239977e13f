"""``compat``: every change between two spec sets, each judged compatible or not.

Works on the loaded IR (``arrowkafka.ir``), never on raw JSON: both sides went through the
strict loader, so each side on its own already keeps every rule of the spec language (a tag
used once per struct, taggedVersions open-ended and inside flexibleVersions, KIP-625
encodings covering a field's versions ...). What is left to check is how the two sides
relate, and that is this module.

Messages pair by name, and a request or response left over pairs with the one of the same
type and api key on the other side (AlterIsr became AlterPartition). Fields pair by name
inside each struct; an untagged field left over pairs with one at the same position among the
untagged fields in every version both sides have, a tagged one with one of the same tag and
wire type: a rename, which the wire does not see (``renamed_fields`` gives the pairing to
``what-if``).

The versions a change is judged in: those *released* on the old side (its valid versions,
less the latest one of a request marked ``latestVersionUnstable``, and of its response) that
the new side still has. A released version is done (the README): its bytes never change. A
change anywhere else (versions added, versions an old side had only as unstable) is compatible,
whatever the rule: every rule splits its versions with ``_split`` (through
``_Collector.judge``). Only the message-wide rules concern no version: the api key, the type,
and the lowest version falling (Kafka's checker; the versions below were never on the old side).

Each rule names where it comes from: the message-definitions README, KIP-482, KIP-625,
KIP-893, or Kafka's own evolution checker (``generator/.../message/checker/``, read and
re-stated here, not ported).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from arrowkafka.ir import Field, MessageSpec, Struct
from arrowkafka.ir.model import INT_BITS

__all__ = ["RULES", "Change", "Report", "compare", "renamed_fields", "version_text"]

Value = str | int | float | bool | None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass(frozen=True)
class Rule:
    source: str
    text: str

    def __str__(self) -> str:
        return f"{self.source}: {self.text}"


RULES: dict[str, Rule] = {
    "api-key": Rule("Kafka checker", "a message keeps its api key"),
    "message-type": Rule("Kafka checker", "a message keeps its type"),
    "message-removed": Rule(
        "README", "released versions are done: a message peers may send is never removed"
    ),
    "highest-version": Rule("Kafka checker", "the highest valid version never drops"),
    "lowest-version-rose": Rule(
        "README (KIP-97)", "old versions are not dropped without a KIP: the lowest valid version never rises"
    ),
    "lowest-version-fell": Rule("Kafka checker", "the lowest valid version never falls"),
    "flexible-versions": Rule(
        "Kafka checker, KIP-482",
        "flexible versions only grow, and a released version never turns flexible or back",
    ),
    "released-version": Rule(
        "README", "a released version never changes: no untagged field is added to it or removed from it"
    ),
    "field-order": Rule("README", "existing fields are never re-ordered"),
    "field-type": Rule("README, Kafka checker", "a field keeps its type"),
    "nullability": Rule("Kafka checker, KIP-482", "a field keeps its nullability in its released versions"),
    "nullable-struct": Rule("KIP-893", "a released struct never turns nullable"),
    "default": Rule("README, Kafka checker", "a field's default never changes"),
    "tag-reused": Rule("README, KIP-482", "a tag is never reused for another field"),
    "tag-changed": Rule("KIP-482", "a field's tag never changes"),
    "tagged": Rule("KIP-482", "a field never moves between tagged and untagged in a released version"),
    "field-flexibility": Rule("Kafka checker", "a field's own flexible versions keep each released version"),
    "encoding": Rule("KIP-625", "a field's encoding in a released version never changes"),
}


@dataclass(frozen=True)
class Change:
    """One change between the two sides."""

    kind: str  # what changed, e.g. "field-added", "default-changed"
    message: str  # the message on the new side (the old one's when it is gone)
    path: str  # Message, or Message.Field.SubField
    versions: str  # the versions it concerns, e.g. "0-3, 5"; "" for the message as a whole
    compatible: bool
    rule: str  # a key of RULES when incompatible, else ""
    old: Value  # the value on each side: a JSON value (None where a side has none)
    new: Value
    note: str = ""
    version_list: tuple[int, ...] = ()  # ``versions`` as numbers

    def to_dict(self) -> dict[str, object]:
        """Every key on every change: None (JSON null) where it does not apply."""
        rule = RULES.get(self.rule)
        return {
            "kind": self.kind,
            "message": self.message,
            "versions": self.versions,
            "version_list": list(self.version_list),
            "path": self.path,
            "compatible": self.compatible,
            "old": self.old,
            "new": self.new,
            "rule": self.rule or None,
            "rule_source": rule.source if rule else None,
            "rule_text": rule.text if rule else None,
            "note": self.note or None,
        }

    def _show(self, value: Value) -> str:
        if value is None:
            return "untagged" if self.kind == "tagged-changed" else "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def line(self) -> str:
        mark = "compatible  " if self.compatible else "INCOMPATIBLE"
        where = f"{self.message} v{self.versions}" if self.versions else self.message
        shown = self.old not in (None, "") or self.new not in (None, "")
        what = f"{self.kind} ({self._show(self.old)} -> {self._show(self.new)})" if shown else self.kind
        text = f"{mark}  {where}  {self.path}: {what}"
        if self.note:
            text += f"; {self.note}"
        if self.rule:
            text += f"  [{self.rule}: {RULES[self.rule]}]"
        return text


@dataclass
class Report:
    old: str
    new: str
    old_messages: int
    new_messages: int
    changes: list[Change] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)  # --partial: messages only in old

    @property
    def incompatible(self) -> list[Change]:
        return [c for c in self.changes if not c.compatible]

    @property
    def compatible(self) -> bool:
        return not self.incompatible

    def to_json(self, only_incompatible: bool = False) -> str:
        shown = self.incompatible if only_incompatible else self.changes
        return json.dumps(
            {
                "old": self.old,
                "new": self.new,
                "compatible": self.compatible,
                "summary": {
                    "old_messages": self.old_messages,
                    "new_messages": self.new_messages,
                    "changes": len(self.changes),
                    "incompatible": len(self.incompatible),
                    "not_compared": self.not_compared,
                },
                "changes": [c.to_dict() for c in shown],
            },
            indent=1,
        )

    def render(self, only_incompatible: bool = False) -> str:
        lines = [c.line() for c in self.changes if not (only_incompatible and c.compatible)]
        bad = len(self.incompatible)
        where = _count(len({c.message for c in self.incompatible}), "message")
        tail = (
            f"{len(self.changes)} changes from {self.old} ({self.old_messages} messages) to {self.new} "
            f"({self.new_messages} messages): "
            + (f"{bad} incompatible, in {where}" if bad else "all compatible")
        )
        if self.not_compared:
            tail += f"; {len(self.not_compared)} messages only in OLD not compared (--partial)"
        return "\n".join([*lines, "", tail] if lines else [tail])


def version_text(versions: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out: list[str] = []
    run: list[int] = []
    for v in sorted(set(versions)):
        if run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [v]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)


def _split(versions: Iterable[int], released: Collection[int]) -> tuple[list[int], list[int]]:
    """A version set split into its released part (released on the old side and still on the
    new: a rule is judged there) and the rest (compatible whatever changed: README). Every
    rule goes through here."""
    vs = sorted(set(versions))
    return [v for v in vs if v in released], [v for v in vs if v not in released]


def _unstable(spec: MessageSpec, side: Mapping[str, MessageSpec]) -> int | None:
    """The latest version if it is unreleased: a request marked ``latestVersionUnstable``, and
    the response of such a request (which carries no mark of its own)."""
    request = spec
    if spec.type == "response":
        request = next(
            (s for s in side.values() if s.type == "request" and s.api_key == spec.api_key),
            spec,
        )
    if request.type == "request" and request.latest_version_unstable:
        return spec.valid_versions.hi
    return None


class _Collector:
    """Findings per version, merged into one ``Change`` per (message, path, what) at the end."""

    def __init__(self) -> None:
        self._found: dict[
            tuple[tuple[str, str, str, bool, str, Value, Value, str], type, type], set[int]
        ] = {}

    def add(
        self,
        kind: str,
        message: str,
        path: str,
        versions: Iterable[int],
        *,
        compatible: bool,
        rule: str = "",
        old: object = None,
        new: object = None,
        note: str = "",
    ) -> None:
        assert compatible or rule in RULES, rule
        o, n = _value(old), _value(new)
        key = (kind, message, path, compatible, rule if not compatible else "", o, n, note)
        # values of other types that compare equal (1, True) are other changes
        self._found.setdefault((key, type(o), type(n)), set()).update(versions)

    def judge(
        self,
        kind: str,
        message: str,
        path: str,
        versions: Iterable[int],
        released: Collection[int],
        *,
        rule: str,
        old: object = None,
        new: object = None,
        note: str = "",
        rest_note: str = "",
    ) -> None:
        """A change in ``versions``, judged by ``rule`` in its released part only (``_split``):
        incompatible there, compatible in the rest (with ``rest_note``); one compatible change
        with no versions when it concerns none."""
        bad, rest = _split(versions, released)
        if bad:
            self.add(kind, message, path, bad, compatible=False, rule=rule, old=old, new=new, note=note)
        if rest or not bad:
            self.add(kind, message, path, rest, compatible=True, old=old, new=new, note=rest_note or note)

    def changes(self) -> list[Change]:
        return [
            Change(kind, message, path, version_text(vs), ok, rule, old, new, note, tuple(sorted(vs)))
            for ((kind, message, path, ok, rule, old, new, note), _, _), vs in self._found.items()
        ]


def _value(x: object) -> Value:
    """A side's value as JSON has it: numbers, booleans, text and null as they are, version
    ranges and the like as their text."""
    return x if x is None or isinstance(x, bool | int | float | str) else str(x)


@dataclass(frozen=True)
class _Scope:
    """What a struct comparison needs to know of its two messages."""

    message: str
    old: MessageSpec
    new: MessageSpec
    released: frozenset[int]  # released on the old side and present on the new


def compare(
    old: Mapping[str, MessageSpec],
    new: Mapping[str, MessageSpec],
    *,
    old_label: str = "OLD",
    new_label: str = "NEW",
    partial: bool = False,
) -> Report:
    """Every change from ``old`` to ``new`` (message name -> spec), each judged.

    ``partial``: ``new`` holds only some of the messages (a client's subset), so a message
    missing from it is not compared rather than reported as removed.
    """
    found = _Collector()
    report = Report(old_label, new_label, len(old), len(new))
    pairs: list[tuple[MessageSpec, MessageSpec]] = [(old[n], new[n]) for n in old if n in new]
    gone = [old[n] for n in old if n not in new]
    arrived = {n: s for n, s in new.items() if n not in old}
    for spec in list(gone):
        if spec.type not in ("request", "response"):
            continue  # the api key is a request's and response's identity on the wire
        same = [s for s in arrived.values() if s.type == spec.type and s.api_key == spec.api_key]
        if len(same) == 1:
            pairs.append((spec, same[0]))
            gone.remove(spec)
            del arrived[same[0].name]
            found.add(
                "message-renamed",
                same[0].name,
                same[0].name,
                (),
                compatible=True,
                old=spec.name,
                new=same[0].name,
                note="names are not on the wire",
            )
    for spec in gone:
        if partial:
            report.not_compared.append(spec.name)
            continue
        found.judge(
            "message-removed",
            spec.name,
            spec.name,
            spec.valid_versions,
            _released(spec, old),
            rule="message-removed",
            old=str(spec.valid_versions),
            new="none",
            rest_note="never released",
        )
    for spec in arrived.values():
        found.add(
            "message-added",
            spec.name,
            spec.name,
            (),
            compatible=True,
            old="none",
            new=f"{spec.type} {spec.valid_versions}",
        )
    for o, n in sorted(pairs, key=lambda p: p[1].name):
        _message(o, n, old, found)
    order = {"message-renamed": 0, "message-added": 1, "message-removed": 1}
    report.changes = sorted(found.changes(), key=lambda c: (c.message, order.get(c.kind, 2), c.path, c.kind))
    return report


def _released(spec: MessageSpec, side: Mapping[str, MessageSpec]) -> list[int]:
    unstable = _unstable(spec, side)
    return [v for v in spec.valid_versions if v != unstable]


def _message(o: MessageSpec, n: MessageSpec, old_side: Mapping[str, MessageSpec], found: _Collector) -> None:
    name = n.name
    if o.api_key != n.api_key:
        found.add(
            "api-key-changed", name, name, (), compatible=False, rule="api-key", old=o.api_key, new=n.api_key
        )
    if o.type != n.type:
        found.add(
            "type-changed", name, name, (), compatible=False, rule="message-type", old=o.type, new=n.type
        )

    ov, nv = o.valid_versions, n.valid_versions
    released_old = frozenset(_released(o, old_side))  # released on the old side
    released = frozenset(v for v in released_old if v in nv)  # ... and still on the new
    if nv.hi > ov.hi:
        found.add("versions-added", name, name, range(ov.hi + 1, nv.hi + 1), compatible=True, old=ov, new=nv)
    if nv.hi < ov.hi:
        found.judge(
            "highest-version-dropped",
            name,
            name,
            range(max(nv.hi + 1, ov.lo), ov.hi + 1),
            released_old,
            rule="highest-version",
            old=ov,
            new=nv,
            rest_note="only the unreleased latestVersionUnstable version",
        )
    if nv.lo > ov.lo:
        found.judge(
            "lowest-version-rose",
            name,
            name,
            range(ov.lo, min(nv.lo, ov.hi + 1)),
            released_old,
            rule="lowest-version-rose",
            old=ov,
            new=nv,
            rest_note="only the unreleased latestVersionUnstable version",
        )
    # message-wide, as Kafka's checker has it: the versions below were never on the old side
    if nv.lo < ov.lo:
        found.add(
            "lowest-version-fell",
            name,
            name,
            range(nv.lo, min(ov.lo, nv.hi + 1)),
            compatible=False,
            rule="lowest-version-fell",
            old=ov,
            new=nv,
        )
    if o.deprecated_versions != n.deprecated_versions:
        found.add(
            "deprecated-versions-changed",
            name,
            name,
            (),
            compatible=True,
            old=o.deprecated_versions,
            new=n.deprecated_versions,
        )
    if o.latest_version_unstable != n.latest_version_unstable:
        found.add(
            "latest-version-unstable-changed",
            name,
            name,
            (),
            compatible=True,
            old=o.latest_version_unstable,
            new=n.latest_version_unstable,
        )
    if o.listeners != n.listeners:
        found.add("listeners-changed", name, name, (), compatible=True, old=", ".join(o.listeners),
                  new=", ".join(n.listeners), note="who serves it, not its bytes")  # fmt: skip

    if o.flexible_versions != n.flexible_versions:
        # judged where a shared version turns flexible or back: in a released one, a break
        # (flexible versions shrinking always turns one back, unless it is unreleased or gone)
        turned = [v for v in ov if v in nv and o.is_flexible(v) != n.is_flexible(v)]
        found.judge(
            "flexible-versions-changed",
            name,
            name,
            turned,
            released,
            rule="flexible-versions",
            old=o.flexible_versions,
            new=n.flexible_versions,
            rest_note="no released version turns" if turned else "no shared version turns",
        )

    scope = _Scope(name, o, n, released)
    shared = frozenset(v for v in ov if v in nv)
    _struct(o.root, n.root, name, shared, scope, found)


# ---- fields -------------------------------------------------------------------------------


def _all_fields(struct: Struct) -> tuple[Field, ...]:
    return struct.fields + struct.optional_fields


def _tagged(f: Field, v: int) -> bool:
    return f.optional or f.tagged_in(v)


def _untagged(f: Field, v: int) -> bool:
    return f.present_in(v) and not _tagged(f, v)


def _untagged_in(struct: Struct, v: int) -> list[Field]:
    return [f for f in struct.fields if f.present_in(v) and not f.tagged_in(v)]


def _pair(os: Struct, ns: Struct, shared: frozenset[int]) -> dict[int, Field]:
    """Old field (by id) -> its new field: the same name, else the same position among the
    untagged fields in every shared version the old one is in, else (a tagged field) the same
    tag and wire type: a rename, which the wire does not see (Kafka's checker pairs fields by
    position, tagged ones too). A tag given to a field of another wire type is being reused
    (README, KIP-482)."""
    olds, news = _all_fields(os), _all_fields(ns)
    by_name = {f.name: f for f in news}
    pairs: dict[int, Field] = {}
    for f in olds:
        if f.name in by_name:
            pairs[id(f)] = by_name[f.name]
    taken = {id(f) for f in pairs.values()}
    left_old = [f for f in olds if id(f) not in pairs]
    left_new = [f for f in news if id(f) not in taken]
    for f in list(left_old):
        candidate: Field | None = None
        consistent = True
        for v in sorted(shared):
            if not f.present_in(v) or f.tagged_in(v) or f.optional:
                continue
            seq_old, seq_new = _untagged_in(os, v), _untagged_in(ns, v)
            i = next(i for i, g in enumerate(seq_old) if g is f)
            g = seq_new[i] if i < len(seq_new) and len(seq_old) == len(seq_new) else None
            if g is None or g not in left_new or (candidate is not None and g is not candidate):
                consistent = False
                break
            candidate = g
        if consistent and candidate is not None and candidate.kind == f.kind:
            pairs[id(f)] = candidate
            left_old.remove(f)
            left_new.remove(candidate)
    for f in left_old:
        if f.tag is None:
            continue
        same = [g for g in left_new if g.tag == f.tag and _same_wire(f, g, shared)]
        if same:
            pairs[id(f)] = same[0]
            left_new.remove(same[0])
    return pairs


def renamed_fields(old: MessageSpec, new: MessageSpec) -> dict[tuple[str, ...], str]:
    """The fields ``compare`` pairs with a field of another name: the old field's path (its
    name and its structs' field names, from the message down) -> its new name."""
    out: dict[tuple[str, ...], str] = {}

    def walk(os: Struct, ns: Struct, above: tuple[str, ...], shared: frozenset[int]) -> None:
        pairs = _pair(os, ns, shared)
        for a in _all_fields(os):
            b = pairs.get(id(a))
            if b is None:
                continue
            if a.name != b.name:
                out[(*above, a.name)] = b.name
            both = frozenset(v for v in shared if a.present_in(v) and b.present_in(v))
            if a.struct is not None and b.struct is not None and both:
                walk(a.struct, b.struct, (*above, a.name), both)

    walk(old.root, new.root, (), frozenset(v for v in old.valid_versions if v in new.valid_versions))
    return out


def _same_wire(a: Field, b: Field, shared: frozenset[int]) -> bool:
    """The same wire type in every shared version both are in (with none, the same type)."""
    both = [v for v in sorted(shared) if a.present_in(v) and b.present_in(v)]
    if a.kind != b.kind or (a.struct is None) != (b.struct is None):
        return False
    return all(_wire(a, v) == _wire(b, v) for v in both) if both else a.type == b.type


def _struct(
    os: Struct, ns: Struct, path: str, shared: frozenset[int], scope: _Scope, found: _Collector
) -> None:
    """Compare two structs present together in the versions ``shared``."""
    msg = scope.message
    pairs = _pair(os, ns, shared)
    paired_new = {id(f) for f in pairs.values()}
    for a in _all_fields(os):
        b = pairs.get(id(a))
        if b is None:
            _removed(a, f"{path}.{a.name}", shared, scope, found)
        else:
            _field(a, b, f"{path}.{b.name}", shared, scope, found)
    for b in _all_fields(ns):
        if id(b) not in paired_new:
            _added(b, f"{path}.{b.name}", shared, scope, found)

    # order of the untagged fields both sides have, in each released version (README)
    back = {id(b): a for a in _all_fields(os) if (b := pairs.get(id(a))) is not None}
    for v in _split(shared, scope.released)[0]:
        # the fields untagged on both sides in v, in old order and in new order
        seq_old = [a for a in _untagged_in(os, v) if id(a) in pairs and _untagged(pairs[id(a)], v)]
        seq_new = [back[id(b)] for b in _untagged_in(ns, v) if id(b) in back and _untagged(back[id(b)], v)]
        if [a.name for a in seq_old] != [a.name for a in seq_new]:
            found.add(
                "fields-reordered",
                msg,
                path,
                [v],
                compatible=False,
                rule="field-order",
                old=", ".join(a.name for a in seq_old),
                new=", ".join(pairs[id(a)].name for a in seq_new),
            )

    # tags: never reused for another field (README, KIP-482)
    old_tags = {f.tag: f for f in _all_fields(os) if f.tag is not None}
    for b in _all_fields(ns):
        if b.tag is None or b.tag not in old_tags:
            continue
        a = old_tags[b.tag]
        if pairs.get(id(a)) is not b:
            where = [v for v in scope.new.valid_versions if b.present_in(v) and _tagged(b, v)]
            found.judge(
                "tag-reused",
                msg,
                f"{path}.{b.name}",
                where,
                scope.released,
                rule="tag-reused",
                old=f"tag {b.tag} = {a.name}",
                new=f"tag {b.tag} = {b.name}",
                rest_note="only in versions not released",
            )


def _presence(
    kind: str, f: Field, released: list[int], path: str, scope: _Scope, found: _Collector, old: str, new: str,
    tagged_note: str,
) -> bool:  # fmt: skip
    """A field that left (or joined) released versions: a break where it is untagged there
    (peers read those bytes by position), compatible where it is tagged. Anything found?"""
    bad = [v for v in released if not _tagged(f, v)]
    tagged = [v for v in released if _tagged(f, v)]
    if bad:
        found.add(kind, scope.message, path, bad, compatible=False, rule="released-version", old=old, new=new)
    if tagged:
        found.add(kind, scope.message, path, tagged, compatible=True, old=old, new=new, note=tagged_note)
    return bool(bad or tagged)


def _removed(a: Field, path: str, shared: frozenset[int], scope: _Scope, found: _Collector) -> None:
    lost = [v for v in sorted(shared) if a.present_in(v)]
    released, other = _split(lost, scope.released)
    note = "a tagged field may leave a version (its tag stays used)"
    _presence("field-removed", a, released, path, scope, found, a.type, "absent", note)
    if other or not lost:
        found.add(
            "field-removed",
            scope.message,
            path,
            other,
            compatible=True,
            old=a.type,
            new="absent",
            note="from versions the new side does not have" if not other else "from unreleased versions",
        )


def _added(b: Field, path: str, shared: frozenset[int], scope: _Scope, found: _Collector) -> None:
    released, _ = _split((v for v in shared if b.present_in(v)), scope.released)
    note = "a tagged field may join a released flexible version"
    any_found = _presence("field-added", b, released, path, scope, found, "absent", b.type, note)
    later = _split((v for v in scope.new.valid_versions if b.present_in(v)), scope.released)[1]
    if later or not any_found:
        found.add("field-added", scope.message, path, later, compatible=True, old="absent", new=b.type)


def _wire(f: Field, v: int) -> str:
    """The field's wire type in version v: integers by their KIP-625 encoding, structs by kind."""
    if f.kind == "primitive" and f.element in ("int16", "int32", "int64"):
        return f.encoding_in(v)
    if f.kind == "primitive":
        return f.element
    if f.struct is not None:
        return "[]struct" if f.kind == "array" else "struct"
    return f"[]{f.element}"


def _boxed(a: Field, b: Field, v: int, flexible: bool) -> bool:
    """README: an array of primitives may become an array of structs holding the same data
    (one field of the same type). Only in an inflexible version: in a flexible one each struct
    carries its own tagged-field section, a byte more per element."""
    if flexible or a.kind != "array" or a.struct is not None or b.kind != "array" or b.struct is None:
        return False
    inner = _untagged_in(b.struct, v)
    element = f"fixed{INT_BITS[a.element]}" if a.element in ("int16", "int32", "int64") else a.element
    return len(inner) == 1 and inner[0].kind == "primitive" and _wire(inner[0], v) == element


def _field(a: Field, b: Field, path: str, shared: frozenset[int], scope: _Scope, found: _Collector) -> None:
    msg = scope.message
    both = frozenset(v for v in shared if a.present_in(v) and b.present_in(v))
    if a.name != b.name:
        found.add(
            "field-renamed",
            msg,
            path,
            (),
            compatible=True,
            old=a.name,
            new=b.name,
            note="names are not on the wire",
        )

    # presence in the versions both structs share
    gone = [v for v in sorted(shared) if a.present_in(v) and not b.present_in(v)]
    came = [v for v in sorted(shared) if b.present_in(v) and not a.present_in(v)]
    # a break where the version is released and the field untagged on the side that has it
    for kind, versions, side in (("field-removed", gone, a), ("field-added", came, b)):
        bad = [v for v in _split(versions, scope.released)[0] if not _tagged(side, v)]
        if bad:
            found.add(
                kind,
                msg,
                path,
                bad,
                compatible=False,
                rule="released-version",
                old=a.versions,
                new=b.versions,
            )
        if fine := [v for v in versions if v not in bad]:
            found.add(
                kind, msg, path, fine, compatible=True, old=a.versions, new=b.versions,
                note="tagged, or not released",
            )  # fmt: skip
    if a.versions != b.versions and not gone and not came:
        found.add(
            "field-versions-changed",
            msg,
            path,
            (),
            compatible=True,
            old=a.versions,
            new=b.versions,
            note="only in versions the two sides do not share",
        )

    # type, in every version both have
    if a.type != b.type:
        changed = [v for v in sorted(both) if _wire(a, v) != _wire(b, v)]
        boxed = [v for v in changed if _boxed(a, b, v, scope.new.is_flexible(v))]
        if boxed:
            found.add(
                "type-changed",
                msg,
                path,
                boxed,
                compatible=True,
                old=a.type,
                new=b.type,
                note="README: an array of primitives boxed in a struct of one field",
            )
        if other := [v for v in changed if v not in boxed]:
            found.judge(
                "type-changed", msg, path, other, scope.released, rule="field-type", old=a.type, new=b.type
            )
        if not changed:
            note = "the same bytes in every shared version"
            if a.kind == b.kind and a.struct is not None and b.struct is not None:
                note = "struct renamed: " + note
            elif a.kind == "primitive" and a.encodings + b.encodings:
                note = "KIP-625: " + note
            found.add(
                "type-changed", msg, path, sorted(both), compatible=True, old=a.type, new=b.type, note=note
            )

    # per version: nullability, tagging, encoding, the field's own flexibility
    for kind, get, rule in (
        ("nullability-changed", lambda f, v: f.nullable_in(v), "nullability"),
        ("tagged-changed", lambda f, v: f.tag if _tagged(f, v) else None, "tagged"),
        ("encoding-changed", lambda f, v: f.encoding_in(v) if f.encodings else None, "encoding"),
    ):
        differs: dict[tuple[str, object, object], list[int]] = {}  # (rule, old, new) -> versions
        for v in sorted(both):
            x, y = get(a, v), get(b, v)
            if kind == "encoding-changed" and x != y:
                x, y = a.encoding_in(v), b.encoding_in(v)
            if x == y:
                continue
            if kind == "tagged-changed" and x is not None and y is not None:
                continue  # a changed tag number: "tag-changed" below, once
            r = rule
            if kind == "nullability-changed" and a.struct is not None and a.kind == "struct" and y:
                r = "nullable-struct"
            differs.setdefault((r, x, y), []).append(v)
        for (r, x, y), vs in differs.items():
            found.judge(kind, msg, path, vs, scope.released, rule=r, old=x, new=y)
    if a.flexible_versions is not None or b.flexible_versions is not None:
        turned = [
            v
            for v in sorted(both)
            if _field_flexible(a, v, scope.old) != _field_flexible(b, v, scope.new)
            and scope.old.is_flexible(v) == scope.new.is_flexible(v)
        ]
        if turned:
            found.judge(
                "field-flexibility-changed",
                msg,
                path,
                turned,
                scope.released,
                rule="field-flexibility",
                old=a.flexible_versions,
                new=b.flexible_versions,
            )
    if a.nullable_versions != b.nullable_versions and not any(
        a.nullable_in(v) != b.nullable_in(v) for v in both
    ):
        found.add(
            "nullable-versions-changed",
            msg,
            path,
            (),
            compatible=True,
            old=a.nullable_versions,
            new=b.nullable_versions,
            note="only in versions the two sides do not share",
        )
    if a.encodings != b.encodings and not any(a.encoding_in(v) != b.encoding_in(v) for v in both):
        found.add(
            "encoding-changed",
            msg,
            path,
            (),
            compatible=True,
            old=_enc_text(a),
            new=_enc_text(b),
            note="only in versions the two sides do not share",
        )

    # tags
    if a.tag is not None and b.tag is not None and a.tag != b.tag:
        where = [v for v in sorted(both) if _tagged(a, v) or _tagged(b, v)]
        found.judge("tag-changed", msg, path, where, scope.released, rule="tag-changed", old=a.tag, new=b.tag,
                    rest_note="only in versions not released")  # fmt: skip
    elif (a.tag is None) != (b.tag is None) and not any(_tagged(a, v) != _tagged(b, v) for v in both):
        found.add(
            "tagged-versions-changed",
            msg,
            path,
            (),
            compatible=True,
            old=f"tag {a.tag} {a.tagged_versions}" if a.tag is not None else "untagged",
            new=f"tag {b.tag} {b.tagged_versions}" if b.tag is not None else "untagged",
        )
    elif a.tag is not None and a.tagged_versions != b.tagged_versions:
        found.add(
            "tagged-versions-changed",
            msg,
            path,
            (),
            compatible=True,
            old=a.tagged_versions,
            new=b.tagged_versions,
        )

    # default (README, Kafka checker: never changes); spelled differently with the same value
    if a.default != b.default or type(a.default) is not type(b.default):
        found.judge(
            "default-changed",
            msg,
            path,
            both,
            scope.released,
            rule="default",
            old=_default_text(a),
            new=_default_text(b),
            note=_default_note(a, b, both),
            rest_note="only in versions not released" if both else _default_note(a, b, both),
        )
    elif (a.default_text or "") != (b.default_text or ""):
        found.add(
            "default-spelling-changed",
            msg,
            path,
            (),
            compatible=True,
            old=_default_text(a),
            new=_default_text(b),
            note="the same value",
        )

    for what, x, y in (
        ("ignorable", a.ignorable, b.ignorable),
        ("mapKey", a.map_key, b.map_key),
        ("entityType", a.entity_type, b.entity_type),
        ("zeroCopy", a.zero_copy, b.zero_copy),
    ):
        if x != y:
            found.add(f"{what}-changed", msg, path, (), compatible=True, old=x, new=y, note="not on the wire")

    if a.struct is not None and b.struct is not None and both:
        _struct(a.struct, b.struct, path, both, scope, found)


def _default_note(a: Field, b: Field, both: frozenset[int]) -> str:
    if not both:
        return "the two sides share no version of it"
    if not any(_tagged(a, v) or _tagged(b, v) for v in both):
        return "untagged in every shared version (their bytes keep it); where absent, peers assume another"
    return ""


def _field_flexible(f: Field, v: int, spec: MessageSpec) -> bool:
    """Is the field written in its flexible form in v: by its own ``flexibleVersions``
    (RequestHeader.ClientId), else by its message's."""
    return v in (spec.flexible_versions if f.flexible_versions is None else f.flexible_versions)


def _enc_text(f: Field) -> str:
    return ", ".join(f"{e.versions}: {e.name}" for e in f.encodings) or "fixed"


def _default_text(f: Field) -> str:
    if f.default_text is not None:
        return json.dumps(f.default_text)
    return f"implicit {f.default!r}" if f.default is not None else "implicit null"
