"""Hypothesis strategies derived from the spec IR: values of one message version, shaped like
``arrow_schema(name, version)`` rows (what the reference codec reads and writes)."""

from __future__ import annotations

import math
import uuid
from typing import Any

from hypothesis import strategies as st

from arrowkafka.ir import Field, MessageSpec, Struct
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, column_name, default_value, has_tags_present

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _int(bits: int) -> st.SearchStrategy[int]:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    # Mostly small values (varints of every width), sometimes the extremes.
    return st.one_of(
        st.integers(max(lo, -300), min(hi, 300)), st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1])
    )


def _primitive(spec: MessageSpec, f: Field, version: int) -> st.SearchStrategy[Any]:
    e = f.element
    if e == "bool":
        return st.booleans()
    if e in _INT_BITS:
        bits = _INT_BITS[e]
        if e != "int8" and f.kind == "primitive":
            bits = min(bits, int(f.encoding_in(version)[-2:]))  # KIP-625: int64 as fixed32
        return _int(bits)
    if e == "uint16":
        return st.integers(0, 2**16 - 1)
    if e == "uint32":
        return st.integers(0, 2**32 - 1)
    if e == "float64":
        return st.floats(allow_nan=False).filter(lambda x: not math.isnan(x))
    if e == "uuid":
        return st.binary(min_size=16, max_size=16).map(lambda b: uuid.UUID(bytes=b))
    if e == "string":
        return st.text(max_size=12)
    return st.binary(max_size=12)  # bytes, records


def _nullable(f: Field, version: int, inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), inner) if f.nullable_in(version) else inner


def field_value(
    spec: MessageSpec, f: Field, version: int, depth: int, unknown: bool = True
) -> st.SearchStrategy[Any]:
    if f.kind == "array":
        if f.struct is not None:
            elem = struct_value(spec, f.struct, version, depth + 1, unknown)
        else:
            elem = _primitive(spec, f, version)
        return _nullable(f, version, st.lists(elem, max_size=3 if depth < 2 else 1))
    if f.kind == "struct":
        assert f.struct is not None
        return _nullable(f, version, struct_value(spec, f.struct, version, depth + 1, unknown))
    inner = _primitive(spec, f, version)
    if f.element in ("string", "bytes", "records"):
        return _nullable(f, version, inner)
    return inner


def _unknown_tags(known: set[int], draft: bool) -> st.SearchStrategy[list[tuple[int, bytes]]]:
    top = 0x7FFF if draft else 2**31 - 1
    tags = st.one_of(st.integers(0, 40), st.integers(0, top)).filter(lambda t: t not in known)
    entry = st.tuples(tags, st.binary(min_size=1 if draft else 0, max_size=6))
    return st.lists(entry, max_size=2, unique_by=lambda e: e[0]).map(sorted)


def struct_value(
    spec: MessageSpec, s: Struct, version: int, depth: int = 0, unknown: bool = True
) -> st.SearchStrategy[dict[str, Any]]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    if spec.has_optional_buffer(version):
        for f in s.optional_fields:
            parts[column_name(f.name)] = field_value(spec, f, version, depth, unknown)
    for f in s.fields_in(version):
        parts[column_name(f.name)] = field_value(spec, f, version, depth, unknown)
    if spec.is_flexible(version) or spec.has_optional_buffer(version):
        known = {f.tag for f in s.fields_in(version) if f.tagged_in(version)}
        known |= {f.tag for f in s.optional_fields}
        tags = _unknown_tags({t for t in known if t is not None}, spec.has_optional_buffer(version))
        parts[UNKNOWN_TAGS] = tags if unknown else st.just([])
    if not has_tags_present(spec, s, [version]):
        return st.fixed_dictionaries(parts)
    # Known tags written although at their default (as some peers do), then every tag the
    # value writes: what decoding lists in _tags_present.
    if spec.has_optional_buffer(version):
        listable = list(s.optional_fields)
    else:
        listable = [f for f in s.fields_in(version) if f.tagged_in(version)]
    tags = sorted(f.tag for f in listable if f.tag is not None)
    parts[TAGS_PRESENT] = st.lists(st.sampled_from(tags), unique=True) if unknown and tags else st.just([])

    def written(value: dict[str, Any]) -> dict[str, Any]:
        on_wire = set(value[TAGS_PRESENT])
        for f in listable:
            if value[column_name(f.name)] != default_value(spec, f, version):
                on_wire.add(f.tag)
        return {**value, TAGS_PRESENT: sorted(on_wire)}

    return st.fixed_dictionaries(parts).map(written)


def message_value(
    spec: MessageSpec, version: int, unknown_tags: bool = True
) -> st.SearchStrategy[dict[str, Any]]:
    """Values of one message version; ``unknown_tags=False`` leaves unknown tags out (for
    peers that cannot keep them)."""
    return struct_value(spec, spec.root, version, 0, unknown_tags)
