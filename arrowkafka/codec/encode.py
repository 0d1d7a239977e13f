"""Batch encode: a ``pa.RecordBatch``/``pa.Table`` -> one ``pa.BinaryArray`` of message bodies.

The decoder's plan, walked the other way (``kernels/encode.py``):

flatten (Python, once per column: every plan node's array into arenas; fields the target
version lacks checked against their defaults; tagged-field presence; unknown tags sorted and
checked) -> pass 1 (check and size every message) -> allocate the output once, offsets the
running sum -> pass 2 (write) -> ``pa.Array.from_buffers``.

The passes run the interpreter, or (``kernel="auto"`` once a plan has encoded enough and its
kernel is compiled, see ``codegen.promote``; or ``kernel="specialised"``) the kernel generated for
the plan (``codegen.encode``), which checks nothing: where some value could fail a check,
pass 1 is the interpreter's.

Input: the schema of ``arrow_schema(name, version)``, of ``arrow_schema(name)`` (all
versions), or of another version of the message. Columns the target version lacks must hold
their spec default unless the field is ``ignorable`` (then they are dropped); columns it has
that the input lacks are written as their default. Nullability in the input's schema does not
matter: a null the target version cannot carry is an ``EncodeError`` naming row and path.
Column types need not match exactly: ``input_rule`` (one table) says which conversions are
made, all lossless (integer widths, range-checked per value; string, binary and list
variants; dictionaries; an all-null column); any other type is an ``EncodeError`` naming the
path and both types, before anything is written (``_Flattener.conform``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.assembly.arrays import bits
from arrowkafka.assembly.blocks import array, block
from arrowkafka.codec.decode import each_range
from arrowkafka.codegen import promote
from arrowkafka.errors import EncodeError
from arrowkafka.ir import STRUCT_DEFAULTS, Field, MessageSpec
from arrowkafka.kernels import isa
from arrowkafka.kernels.isa import K_FIXED, K_LIST, K_MAP, K_STRUCT, K_VARBIN, OP
from arrowkafka.kernels.tiers import kernel_run
from arrowkafka.plan import Node, Plan, compile_plan, with_indices
from arrowkafka.schema import (
    TAGS_PRESENT,
    UNKNOWN_TAGS,
    VERSION_COLUMN,
    column_name,
    default_value,
    message_schema,
    storage_type,
)

__all__ = ["BAD_OFFSETS", "bad_offsets", "encode_batch", "input_rule"]

_ALIGN = 64

_REASONS = {
    isa.E_RANGE: "{d1} is out of range for {enc}",
    isa.E_LONG_STRING: "string of {d1} bytes is longer than 32767",
}


# ---- input -> per-node arrays ------------------------------------------------------------------


def _as_struct(data: Any) -> pa.StructArray:
    if isinstance(data, pa.Table):
        data = data.combine_chunks()
        arrays = [c.combine_chunks() if c.num_chunks else pa.nulls(0, c.type) for c in data.columns]
        if not arrays:
            return _empty(data.num_rows)
        return pa.StructArray.from_arrays(arrays, fields=list(data.schema))
    if isinstance(data, pa.RecordBatch):
        if data.num_columns == 0:
            return _empty(data.num_rows)
        return pa.StructArray.from_arrays(data.columns, fields=list(data.schema))
    if isinstance(data, pa.StructArray):
        return data
    raise TypeError(f"encode takes a pa.RecordBatch, pa.Table or pa.StructArray, not {type(data).__name__}")


def _empty(rows: int) -> pa.StructArray:
    return pa.Array.from_buffers(pa.struct([]), rows, [None])


def _valid(arr: pa.Array) -> np.ndarray | None:
    """A byte per slot (1 valid), or None when the array has no nulls."""
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.uint8)


def _offsets(arr: pa.Array) -> np.ndarray:
    """The array's own offsets (length + 1; int32, or int64 for large types), for its slice:
    a view, no copy."""
    large = pa.types.is_large_list(arr.type) or pa.types.is_large_binary(arr.type)
    otype = np.int64 if large or pa.types.is_large_string(arr.type) else np.int32
    start = arr.offset * np.dtype(otype).itemsize
    return np.frombuffer(arr.buffers()[1], otype, count=len(arr) + 1, offset=start)


def _check_span(offs: np.ndarray, path: str) -> None:
    """The kernel's offsets arena is int32, counted from each array's first offset."""
    if offs.dtype != np.int32 and offs[-1] - offs[0] >= 2**31:
        raise ValueError(f"{path}: over 2^31 values or bytes in one batch; encode smaller batches")


def bad_offsets(offs: np.ndarray, limit: int) -> int | None:
    """The first element whose offsets Arrow would refuse (backwards, or outside the ``limit``
    values or bytes the array holds), if any: the kernels copy by offsets unchecked, and pyarrow
    checks an array built from buffers only when asked (``validate(full=True)``)."""
    if offs.size == 0 or (offs[0] >= 0 and offs[-1] <= limit and not (offs[1:] < offs[:-1]).any()):
        return None  # (never backwards, so every offset lies between the first and the last)
    bad = (offs[1:] < offs[:-1]) | (offs[1:] > limit) | (offs[:-1] < 0)
    return int(np.argmax(bad)) if bad.any() else None


BAD_OFFSETS = "offsets backwards or past the values: not a valid Arrow array"


@dataclass
class _Pieces:
    """One node's input: validity bytes, fixed-width values (raw little-endian bytes), offsets
    (the array's own, not rebased to 0: the arena copy does that), var-length bytes,
    tagged-field presence bytes."""

    valid: np.ndarray | None = None
    values: np.ndarray | None = None
    offsets: np.ndarray | None = None
    data: np.ndarray | None = None
    present: np.ndarray | None = None


@dataclass
class _Place:
    """Where a slot of a node's array sits in the batch: the offsets of each list above it
    (outermost first, each as its array holds them), so an error can name the row and the list
    indices."""

    lists: list[np.ndarray] = field(default_factory=list)

    def locate(self, slot: int) -> tuple[int, list[int]]:
        indices = []
        for offs in reversed(self.lists):
            offs = offs - offs[0]
            parent = int(np.searchsorted(offs, slot, side="right")) - 1
            indices.append(slot - int(offs[parent]))
            slot = parent
        return slot, indices[::-1]

    def inner(self, offsets: np.ndarray) -> _Place:
        return _Place([*self.lists, offsets])


class _Flattener:
    """Walks the plan's node tree beside the input arrays, collecting each node's pieces."""

    def __init__(self, plan: Plan, spec: MessageSpec, version: int) -> None:
        self.plan, self.spec, self.version = plan, spec, version
        self.pieces: dict[int, _Pieces] = {}
        code = plan.code
        self.tagged = {int(r[1]) for r in code if r[0] == OP["TAGGED"]}
        # map node -> (draft optional buffer?, known tags of its section)
        self.sections = {
            int(r[1]): (r[0] == OP["OPTBUF"], set(plan.tag_table[r[4] : r[4] + r[5]].tolist()))
            for r in code
            if r[0] in (OP["TAGS"], OP["OPTBUF"])
        }

    def fail(self, reason: str, node_path: str, place: _Place, slot: int) -> EncodeError:
        row, indices = place.locate(slot)
        return EncodeError(
            reason,
            path=with_indices(node_path, indices),
            row=row,
            message=self.spec.name,
            version=self.version,
        )

    def visit(self, node: Node, arr: pa.Array, live: np.ndarray | None, place: _Place) -> None:
        """``arr`` is already in the field's type (``conform``): collect its pieces."""
        p = self.pieces.setdefault(node.id, _Pieces())
        if isinstance(arr.type, pa.BaseExtensionType):  # uuid: its storage, fixed_size_binary(16)
            arr = arr.storage
        p.valid = _valid(arr)
        if node.id in self.tagged:
            assert node.field is not None
            p.present = _nondefault(self.spec, arr, node.field).astype(np.uint8)
        if node.kind == K_FIXED:
            p.values = _fixed_bytes(arr, node.width)
        elif node.kind == K_VARBIN:
            offs = _offsets(arr)
            _check_span(offs, node.path)
            data = arr.buffers()[2]
            if (broken := bad_offsets(offs, data.size if data else 0)) is not None:
                raise self.fail(BAD_OFFSETS, node.path, place, broken)
            p.offsets = offs
            p.data = np.frombuffer(arr.buffers()[2] or b"\0", np.uint8)[offs[0] : offs[-1]]
        elif node.kind in (K_LIST, K_MAP):
            self.nested(node, arr, live, place, p)
        else:
            self.struct(node, arr, live, place, p)

    def nested(self, node: Node, arr: pa.Array, live: np.ndarray | None, place: _Place, p: _Pieces) -> None:
        if p.valid is not None and node.kind == K_MAP:  # _unknown_tags: not nullable, no default
            bad = np.flatnonzero(p.valid == 0 if live is None else (p.valid == 0) & live)
            if bad.size:
                raise self.fail(f"null in non-nullable {UNKNOWN_TAGS} map", node.path, place, int(bad[0]))
        offs = _offsets(arr)
        _check_span(offs, node.path)
        if (broken := bad_offsets(offs, len(arr.values))) is not None:
            raise self.fail(BAD_OFFSETS, node.path, place, broken)
        p.offsets = offs
        values = arr.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        child_live = None  # every slot of ``values`` is reached by some row
        if live is not None or p.valid is not None:
            keep = np.ones(len(arr), bool) if live is None else live.copy()
            if p.valid is not None:
                keep &= p.valid.astype(bool)
            child_live = np.repeat(keep, np.diff(offs))
        inner = place.inner(p.offsets)
        if node.kind == K_LIST:
            self.visit(node.children[0], values, child_live, inner)
            return
        key_node, val_node = node.children
        keys = values.field(0)
        vals = values.field(1)
        keys, vals = self.unknown_tags(node, keys, vals, p.offsets, child_live, inner)
        self.visit(key_node, keys, child_live, inner)
        self.visit(val_node, vals, child_live, inner)

    def unknown_tags(
        self,
        node: Node,
        keys: pa.Array,
        vals: pa.Array,
        offs: np.ndarray,
        live: np.ndarray | None,
        place: _Place,
    ) -> tuple[pa.Array, pa.Array]:
        """Kept unknown tags are written in ascending order among the known ones: sort each
        map, and refuse duplicates, known tag numbers and (draft) what the buffer cannot hold."""
        if len(keys) == 0:
            return keys, vals
        if live is None:
            live = np.ones(len(keys), bool)
        k = np.asarray(keys.to_numpy(zero_copy_only=False), np.int64)
        owner = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        if np.any((np.diff(k) <= 0) & (np.diff(owner) == 0)):
            order = np.lexsort((k, owner))
            k, keys, vals = k[order], keys.take(order), vals.take(order)
            dup = np.flatnonzero((np.diff(k) == 0) & (np.diff(owner) == 0) & live[1:])
            if dup.size:
                raise self.fail(f"unknown tag {k[dup[0]]} appears twice", node.path, place, int(dup[0]) + 1)
        if vals.null_count:
            i = int(np.argmax(~np.asarray(vals.is_valid().to_numpy(zero_copy_only=False), bool)))
            raise self.fail("null value of an unknown tag", node.path, place, i)
        optbuf, known = self.sections.get(node.id, (False, set()))
        bad = np.flatnonzero(np.isin(k, list(known)) & live) if known else np.zeros(0, np.int64)
        if bad.size:
            reason = f"unknown tag {k[bad[0]]} is a known tagged field's tag"
            raise self.fail(reason, node.path, place, int(bad[0]))
        if optbuf:
            sizes = np.asarray(pc.binary_length(vals).to_numpy(zero_copy_only=False))
            bad = np.flatnonzero(((k > 0x7FFF) | (sizes == 0)) & live)
            if bad.size:
                i = int(bad[0])
                reason = (
                    f"unknown optional field tag {k[i]} does not fit int16"
                    if k[i] > 0x7FFF
                    else f"unknown optional field {k[i]} is empty (a zero length ends the buffer)"
                )
                raise self.fail(reason, node.path, place, i)
        return keys, vals

    def struct(self, node: Node, arr: pa.Array, live: np.ndarray | None, place: _Place, p: _Pieces) -> None:
        keep = live
        if p.valid is not None:
            keep = p.valid.astype(bool) if keep is None else keep & p.valid.astype(bool)
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        targets = {node.type.field(i).name: c for i, c in enumerate(node.children)}
        if node.id == self.plan.root.id:
            targets.pop(VERSION_COLUMN, None)  # a single-version plan has none
        for name, child in targets.items():
            if name in names:
                self.visit(child, arr.field(name), keep, place)
            else:  # a column the input does not have: its spec default
                value = [] if child.field is None else default_value(self.spec, child.field, self.version)
                # (built in storage types: pyarrow cannot build uuid extension values from Python)
                one = pa.array([uuids_as_bytes(value)], storage_type(child.type))
                self.visit(child, one.take(np.zeros(len(arr), np.int64)), keep, place)
        if TAGS_PRESENT in names and TAGS_PRESENT in targets:
            self.listed(node, arr.field(TAGS_PRESENT), keep, place)
        root = node is self.plan.root
        extra = [n for n in names if n not in targets and not (root and n == VERSION_COLUMN)]
        if extra:
            self.absent(node, arr, extra, keep, place)

    def listed(self, node: Node, lists: pa.Array, live: np.ndarray | None, place: _Place) -> None:
        """Known tagged fields ``_tags_present`` lists are written even at their default. The
        column is not nullable and its lists hold no null (a null would say nothing of which
        tags were on the wire)."""
        path = f"{node.path}.{TAGS_PRESENT}"
        if lists.null_count:
            bad = np.flatnonzero(
                ~_mask(lists.is_valid()) if live is None else ~_mask(lists.is_valid()) & live
            )
            if bad.size:
                raise self.fail(f"null in non-nullable {TAGS_PRESENT} list", path, place, int(bad[0]))
        offs = _offsets(lists)
        if (broken := bad_offsets(offs, len(lists.values))) is not None:
            raise self.fail(BAD_OFFSETS, path, place, broken)
        tags = lists.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
        if tags.null_count:
            reached = _mask(lists.is_valid()) if live is None else _mask(lists.is_valid()) & live
            bad = np.flatnonzero(~_mask(tags.is_valid()) & np.repeat(reached, np.diff(offs)))
            if bad.size:
                inner = place.inner(offs)
                raise self.fail(f"null in non-nullable {TAGS_PRESENT} list", path + "[]", inner, int(bad[0]))
        tags = np.asarray(tags.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        slot_of = np.repeat(np.arange(len(lists)), np.diff(offs))
        for child in node.children:
            p = self.pieces.get(child.id)
            if p is not None and p.present is not None and child.field is not None:
                p.present[slot_of[tags == child.field.tag]] = 1

    def absent(
        self, node: Node, arr: pa.Array, names: list[str], live: np.ndarray | None, place: _Place
    ) -> None:
        """Input columns the target version does not have: they must hold their default,
        unless the field is ignorable (then they are dropped)."""
        assert node.struct is not None
        fields = {column_name(f.name): f for f in (*node.struct.optional_fields, *node.struct.fields)}
        for name in names:
            path = f"{node.path}.{name}"
            f = fields.get(name)
            if name == TAGS_PRESENT:
                continue  # which tags were on the wire: nothing to keep where there are none
            if f is None and name != UNKNOWN_TAGS:
                reason = f"{self.spec.name} has no field {name!r}"
                raise EncodeError(reason, path=path, message=self.spec.name, version=self.version)
            if f is not None and f.ignorable:
                continue
            mask = _nondefault(self.spec, arr.field(name), f)
            if live is not None:
                mask &= live
            bad = np.flatnonzero(mask)
            if bad.size:
                what = "unknown tagged fields" if f is None else "a non-default value"
                reason = f"{name} is not in version {self.version} and holds {what}"
                if f is not None:
                    reason += " (the field is not ignorable)"
                raise self.fail(reason, path, place, int(bad[0]))

    def conform(
        self, arr: pa.Array, t: pa.DataType, path: str, live: np.ndarray | None, place: _Place
    ) -> pa.Array:
        """``arr`` as a column of ``t`` (the field's type in ``arrow_schema(name)``), by
        ``input_rule``, or an EncodeError naming the path and both types. ``path`` is the
        plan's (``$.topics[].name``), ``live`` the slots some row reaches. An array that needs
        nothing converted comes back as it is."""
        if _plain(arr.type, t):
            return arr
        how = input_rule(arr.type, t)
        if how is None:
            raise self.wrong_type(arr, t, path, live, place)
        if how == "null":
            return pa.nulls(len(arr), t)
        if how == "dictionary":
            return self.conform(arr.dictionary_decode(), t, path, live, place)
        if how == "int":
            return self.integers(arr, t, path, live, place)
        if how == "uuid":
            return self.uuids(arr, path, live, place)
        if how == "cast":
            return arr.cast(t)
        if how == "struct":
            return self.struct_input(arr, t, path, live, place)
        return self.list_input(arr, t, path, live, place)  # a list or the unknown-tags map

    def wrong_type(
        self, arr: pa.Array, t: pa.DataType, path: str, live: np.ndarray | None, place: _Place
    ) -> EncodeError:
        """A column of a type ``input_rule`` refuses, named at its first value some row reaches
        (else its first slot a row reaches; else the column, row 0)."""
        reason = f"expected {_describe(t)}, got {_describe(arr.type)}"
        reached = _reached(arr, live)
        if reached is None:
            reached = np.ones(len(arr), bool)
        first = np.flatnonzero(reached)
        if not first.size and live is not None:
            first = np.flatnonzero(live)
        if first.size:
            return self.fail(reason, path, place, int(first[0]))
        return EncodeError(reason, path=path, message=self.spec.name, version=self.version)

    def integers(
        self, arr: pa.Array, t: pa.DataType, path: str, live: np.ndarray | None, place: _Place
    ) -> pa.Array:
        """Another integer type: each value the field cannot hold is an EncodeError naming its
        row and value (in a slot no row reaches, it is let through as null)."""
        info = np.iinfo(np.dtype(t.to_pandas_dtype()))
        values = np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False))
        wrong = values > info.max
        if values.dtype.kind == "i":
            wrong |= values < info.min
        bad = np.flatnonzero(wrong if live is None else wrong & live)
        if bad.size:
            i = int(bad[0])
            raise self.fail(f"{values[i]} is out of range for {t}", path, place, i)
        if wrong.any():
            arr = pc.if_else(pa.array(wrong), pa.scalar(None, arr.type), arr)
        return arr.cast(t)

    def uuids(self, arr: pa.Array, path: str, live: np.ndarray | None, place: _Place) -> pa.Array:
        """Binary values as uuids: each one some row reaches must be 16 bytes."""
        if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            arr = arr.cast(pa.binary())  # binary_view
        sizes = np.asarray(pc.binary_length(arr).fill_null(16).to_numpy(zero_copy_only=False))
        wrong = sizes != 16
        bad = np.flatnonzero(wrong if live is None else wrong & live)
        if bad.size:
            i = int(bad[0])
            raise self.fail(f"uuid must be 16 bytes, got {int(sizes[i])}", path, place, i)
        if wrong.any():  # only in slots no row reaches (under a null list or struct)
            arr = pc.if_else(pa.array(wrong), pa.scalar(None, arr.type), arr)
        return arr.cast(pa.binary(16))

    def struct_input(
        self, arr: pa.Array, t: pa.DataType, path: str, live: np.ndarray | None, place: _Place
    ) -> pa.Array:
        """Each column the struct type knows, by name (the others are left for ``absent``)."""
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            where = path if path == "$" else f"{path}.{twice[0]}"
            raise EncodeError(f"column {twice[0]!r} appears twice", path=where, message=self.spec.name,
                              version=self.version)  # fmt: skip
        keep = _reached(arr, live)
        children = []
        changed = False
        for i, name in enumerate(names):
            child = arr.field(i)
            j = t.get_field_index(name)
            if j >= 0:
                got = self.conform(child, t.field(j).type, f"{path}.{name}", keep, place)
                changed = changed or got is not child
                child = got
            children.append(child)
        if not changed:
            return arr
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, names=names, mask=mask)

    def list_input(
        self, arr: pa.Array, t: pa.DataType, path: str, live: np.ndarray | None, place: _Place
    ) -> pa.Array:
        """A list's (or map's) elements by the same rule; a large list becomes a list."""
        offs = _offsets(arr)
        _check_span(offs, path)
        if (broken := bad_offsets(offs, len(arr.values))) is not None:
            raise self.fail(BAD_OFFSETS, path, place, broken)
        start, count = int(offs[0]), int(offs[-1] - offs[0])
        keep = _reached(arr, live)
        child_live = None if keep is None else np.repeat(keep, np.diff(offs))
        inner = place.inner(offs)
        mask = arr.is_null() if arr.null_count else None
        rebased = pa.array(offs - offs[0], pa.int32())
        if pa.types.is_map(t):
            keys, items = arr.keys.slice(start, count), arr.items.slice(start, count)
            k = self.conform(keys, t.key_type, f"{path}[].key", child_live, inner)
            v = self.conform(items, t.item_type, f"{path}[].value", child_live, inner)
            if k is keys and v is items:
                return arr
            return pa.MapArray.from_arrays(rebased, k, v, mask=mask)
        if input_rule(arr.type.value_type, t.value_type) is None:  # named as the list types
            raise self.wrong_type(arr, t, path, live, place)
        values = arr.values.slice(start, count)
        got = self.conform(values, t.value_type, f"{path}[]", child_live, inner)
        if got is values and pa.types.is_list(arr.type):
            return arr
        return pa.ListArray.from_arrays(rebased, got, mask=mask)


# ---- input types: the one rule ---------------------------------------------------------------


def input_rule(actual: pa.DataType, expected: pa.DataType) -> str | None:
    """How a column of type ``actual`` is read as a field of type ``expected`` (the field's
    Arrow type in ``arrow_schema(name)``), or None: refused, an ``EncodeError`` naming the
    path and both types. Only conversions that lose nothing are made; a value is never parsed,
    formatted or guessed.

    ====================  ===========================================  ==========================
    field                 column types accepted                        how (the answer)
    ====================  ===========================================  ==========================
    any                   its own type                                 as it is ("same")
    any                   null (every value null)                      nulls: the field's
                                                                       nullability decides ("null")
    any                   dictionary of an accepted type               decoded, then this rule
                                                                       ("dictionary")
    int8 ... int64,       any integer type, signed or not              each value range-checked:
    uint16, uint32                                                     one the field cannot hold
                                                                       is an error naming its row
                                                                       and value ("int")
    float64               float16, float32                             widened, exact ("cast")
    bool                  bool only                                    -
    string                large_string, string_view                    ("cast")
    bytes, records        large_binary, binary_view,                   ("cast")
                          fixed_size_binary(n)
    uuid                  the uuid extension, fixed_size_binary(16)    as it is ("same")
    uuid                  binary, large_binary, binary_view            each value 16 bytes, or an
                                                                       error naming its row ("uuid")
    array                 list, large_list                             elements by this rule ("list")
    struct                struct                                       columns by name, by this
                                                                       rule ("struct")
    _unknown_tags (map)   map                                          keys as uint32 (0 to 2^32 - 1),
                                                                       values as binary ("map")
    ====================  ===========================================  ==========================

    Refused, among others: numbers in strings (``"12"`` for an int16), anything else as a
    string (a date, a bool, a number), strings as bytes and bytes as strings, bools as numbers
    and numbers as bools, floats as integers, integers as floats, timestamps, dates, decimals,
    list views (pyarrow 26 casts them wrongly), a list where a struct belongs and the reverse.
    """
    if pa.types.is_null(actual):
        return "null"
    if pa.types.is_dictionary(actual):
        return "dictionary" if input_rule(actual.value_type, expected) not in (None, "null") else None
    if isinstance(expected, pa.BaseExtensionType):  # uuid
        if actual == expected or actual == pa.binary(16):
            return "same"
        binary = pa.types.is_binary(actual) or pa.types.is_large_binary(actual)
        return "uuid" if binary or pa.types.is_binary_view(actual) else None
    if pa.types.is_struct(expected):
        return "struct" if pa.types.is_struct(actual) else None
    if pa.types.is_map(expected):
        return "map" if pa.types.is_map(actual) else None
    if pa.types.is_list(expected):
        return "list" if pa.types.is_list(actual) or pa.types.is_large_list(actual) else None
    if actual == expected:
        return "same"
    if pa.types.is_integer(expected):
        return "int" if pa.types.is_integer(actual) else None
    if pa.types.is_float64(expected):
        return "cast" if pa.types.is_float16(actual) or pa.types.is_float32(actual) else None
    if pa.types.is_string(expected):
        return "cast" if pa.types.is_large_string(actual) or pa.types.is_string_view(actual) else None
    if pa.types.is_binary(expected):
        views = pa.types.is_binary_view(actual) or pa.types.is_fixed_size_binary(actual)
        return "cast" if views or pa.types.is_large_binary(actual) else None
    return None


@functools.lru_cache(maxsize=4096)
def _plain(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Is a column of ``actual`` read as ``expected`` without converting anything, at any
    depth? (Decided from the types alone, once per pair: the common case costs no data pass.)"""
    if actual == expected:
        return True
    how = input_rule(actual, expected)
    if how == "same":
        return True
    if how == "struct":
        names = [actual.field(i).name for i in range(actual.num_fields)]
        if len(set(names)) < len(names):
            return False
        for i, name in enumerate(names):
            j = expected.get_field_index(name)
            if j >= 0 and not _plain(actual.field(i).type, expected.field(j).type):
                return False
        return True
    if how == "list":
        return pa.types.is_list(actual) and _plain(actual.value_type, expected.value_type)
    if how == "map":
        return _plain(actual.key_type, expected.key_type) and _plain(actual.item_type, expected.item_type)
    return False


@functools.lru_cache(maxsize=256)
def _input_type(spec: MessageSpec) -> pa.DataType:
    """The row type ``input_rule`` reads input against: every version's columns, so columns
    the target version lacks are read by the rule too (their leaf types are the same in every
    version)."""
    return pa.struct(list(message_schema(spec)))


def _describe(t: pa.DataType) -> str:
    """A type in a few words (a struct's fields left out)."""
    if isinstance(t, pa.BaseExtensionType):
        return t.extension_name.removeprefix("arrow.")
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_map(t):
        return f"map<{_describe(t.key_type)}, {_describe(t.item_type)}>"
    if pa.types.is_dictionary(t):
        return f"dictionary<{_describe(t.value_type)}>"
    if hasattr(t, "value_type"):  # the list types
        return f"{str(t).split('<')[0]}<{_describe(t.value_type)}>"
    return str(t)


def _mask(a: pa.Array) -> np.ndarray:
    return np.asarray(a.to_numpy(zero_copy_only=False), bool)


def _reached(arr: pa.Array, live: np.ndarray | None) -> np.ndarray | None:
    """Per slot: does some row reach a value here (live and not null)? None: every slot."""
    if arr.null_count == 0:
        return live
    valid = _mask(arr.is_valid())
    return valid if live is None else valid & live


def uuids_as_bytes(value: Any) -> Any:
    """A Python value (row, list, scalar) with its UUIDs as bytes: what pyarrow can build
    into the uuid storage type."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, dict):
        return {k: uuids_as_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [uuids_as_bytes(v) for v in value]
    return value


def _fixed_bytes(arr: pa.Array, width: int) -> np.ndarray:
    """A fixed-width array's values as raw bytes (bool unpacked to a byte per value)."""
    n = len(arr)
    if pa.types.is_boolean(arr.type):
        return bits(arr)
    return np.frombuffer(arr.buffers()[1], np.uint8)[arr.offset * width : (arr.offset + n) * width]


def _nondefault(spec: MessageSpec, arr: pa.Array, f: Field | None) -> np.ndarray:
    """Per slot: does the value differ from the field's spec default (Kafka's rule for leaving
    a tagged field out)? ``f`` None is the unknown-tags map, whose default is empty."""

    def out(mask: pa.Array) -> np.ndarray:
        return np.asarray(mask.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)

    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if f is None:
        return np.diff(_offsets(arr)) > 0
    d = f.default
    if d is None:  # a nullable array, struct, string or bytes defaulting to null
        return valid
    if f.kind == "array":
        assert d == [], d  # the spec loader allows only empty or null array defaults
        return ~valid | (np.diff(_offsets(arr)) > 0)
    if f.kind == "struct":
        assert d is STRUCT_DEFAULTS and f.struct is not None
        fields = {column_name(g.name): g for g in (*f.struct.optional_fields, *f.struct.fields)}
        mask = ~valid
        for i in range(arr.type.num_fields):
            name = arr.type.field(i).name
            mask |= _nondefault(spec, arr.field(i), fields.get(name)) & valid
        return mask
    if f.element == "uuid":
        storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
        if not pa.types.is_fixed_size_binary(storage.type):
            storage = storage.cast(pa.binary(16))
        raw = _fixed_bytes(storage, 16).reshape(-1, 16) if len(arr) else np.zeros((0, 16), np.uint8)
        default = np.frombuffer(bytes(d), np.uint8)  # type: ignore[call-overload]
        return ~valid | np.any(raw != default, axis=1)
    return out(pc.not_equal(arr, pa.scalar(d, arr.type)))


# ---- arenas and kernel calls -------------------------------------------------------------------


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _Inputs:
    """Every node's pieces in five arenas, with a base per node (-1: none)."""

    def __init__(self, plan: Plan, pieces: dict[int, _Pieces]) -> None:
        nn = len(plan.nodes)
        self.fixed_base = np.zeros(nn, np.int64)
        self.off_base = np.zeros(nn, np.int64)
        self.data_base = np.zeros(nn, np.int64)
        self.valid_base = np.full(nn, -1, np.int64)
        self.present_base = np.full(nn, -1, np.int64)
        sizes = {"fixed": 0, "offs": 0, "data": 0, "valid": 0, "present": 0}
        for i, p in pieces.items():
            for name, arr, base in (
                ("fixed", p.values, self.fixed_base),
                ("offs", p.offsets, self.off_base),
                ("data", p.data, self.data_base),
                ("valid", p.valid, self.valid_base),
                ("present", p.present, self.present_base),
            ):
                if arr is not None:
                    base[i] = sizes[name]
                    sizes[name] += _aligned(arr.size)
        # (every byte the kernel reads is copied in below: the padding need not be zeroed)
        self.a8 = array(max(sizes["fixed"], 8), np.uint8)
        self.offs = array(max(sizes["offs"], 1), np.int32)
        self.data = array(max(sizes["data"], 1), np.uint8)
        self.valid = array(max(sizes["valid"], 1), np.uint8)
        self.present = array(max(sizes["present"], 1), np.uint8)
        for i, p in pieces.items():
            for arr, base, arena in (
                (p.values, self.fixed_base, self.a8),
                (p.offsets, self.off_base, self.offs),
                (p.data, self.data_base, self.data),
                (p.valid, self.valid_base, self.valid),
                (p.present, self.present_base, self.present),
            ):
                if arr is None:
                    continue
                if arena is self.offs:  # rebased to 0 on the way in
                    np.subtract(arr, arr[0], out=arena[base[i] : base[i] + arr.size], casting="unsafe")
                else:
                    arena[base[i] : base[i] + arr.size] = arr
        self.nbytes = sum(sizes.values())

    def args(self) -> tuple[Any, ...]:
        a8 = self.a8
        return (
            self.fixed_base, self.off_base, self.data_base, self.valid_base, self.present_base,
            a8, a8.view(np.int16), a8.view(np.int32), a8.view(np.int64),
            self.offs, self.data, self.valid, self.present,
        )  # fmt: skip


def _run_checks(plan: Plan, inputs: _Inputs) -> np.ndarray:
    """Per instruction, 1 where a FIXED_RUN has something for pass 1 to check (a column with
    nulls, a KIP-625 value narrower on the wire than in Arrow); the others it just sizes."""
    checks = np.zeros(len(plan.code), np.uint8)
    for at, row in enumerate(plan.code):
        if row[0] == OP["FIXED_RUN"]:
            for nd, kind, wb, w in plan.runs[row[2] : row[2] + row[3]]:
                if inputs.valid_base[nd] >= 0 or (wb < w and kind == isa.EL_INT):
                    checks[at] = 1
    return checks


def _may_fail(plan: Plan, inputs: _Inputs, checks: np.ndarray, pieces: dict[int, _Pieces]) -> bool:
    """Could some value fail one of pass 1's checks (a null the wire cannot carry, a value too
    wide for its encoding, a string over 32767 bytes)? Conservative: a null or a long
    string in a slot no row reaches counts too."""
    vb = inputs.valid_base
    for at, (op, node, a, b, c, *_) in enumerate(plan.code.tolist()):
        if op == OP["FIXED_RUN"]:
            fails = checks[at] != 0
        elif op == OP["INT"]:  # node, enc, bits, width
            fails = vb[node] >= 0 or (b < 64 and b < 8 * c)
        elif op == OP["VARBIN"]:  # node, length kind, nullable, utf8
            offs = pieces[node].offsets
            long = False
            if c != 0 and offs is not None and len(offs) > 1:  # a string, in any version
                long = int(np.diff(offs).max()) > isa.MAX_STRING
            fails = (b == 0 and vb[node] >= 0) or long
        elif op == OP["LIST"]:  # node, length kind, nullable
            fails = b == 0 and vb[node] >= 0
        elif op == OP["LIST_FIXED"]:  # node, child, length kind, nullable
            fails = (c == 0 and vb[node] >= 0) or vb[a] >= 0
        else:
            fails = op == OP["STRUCT"] and vb[node] >= 0
        if fails:
            return True
    return False


def _what(node: Node) -> str:
    if node.kind == K_STRUCT:
        return "struct"
    if node.kind == K_LIST:
        return "array"
    return node.field.element if node.field is not None else "value"


def _kernel_error(plan: Plan, out: np.ndarray) -> EncodeError:
    err, row, pc_ = int(out[isa.S_CODE]), int(out[isa.S_MESSAGE]), int(out[isa.S_PC])
    d1, run_row = int(out[isa.S_D1]), int(out[isa.S_RUN_ROW])
    if err == isa.E_SIZE:
        raise AssertionError(f"pass 2 wrote {d1} bytes for row {row}, pass 1 counted otherwise")
    idx = [int(x) for x in out[isa.S_INDICES : isa.S_INDICES + int(out[isa.S_DEPTH])]]
    path = plan.indexed_path(pc_, run_row, idx)
    op = int(plan.code[pc_][0])
    node = plan.nodes[int(plan.runs[run_row][0]) if run_row >= 0 else int(plan.code[pc_][1])]
    if err == isa.E_NULL:
        if op == OP["LIST_FIXED"] and d1 > 0:  # element d1 - 1 of the list is null
            path += f"[{d1 - 1}]"
            node = node.children[0]
        reason = f"null in non-nullable {_what(node)} field"
    else:
        f = node.field
        enc = f.encoding_in(plan.version) if f is not None else "?"
        reason = _REASONS[err].format(d1=d1, enc=enc)
    return EncodeError(reason, path=path, row=row, message=plan.name, version=plan.version)


KERNELS = ("auto", "interpreter", "specialised")


def _kernels(
    plan: Plan, kernel: str, nbytes: int, may_fail: Callable[[], bool], example: Callable[[], tuple[Any, ...]]
) -> tuple[Any, Any]:
    """The kernels for pass 1 and pass 2. ``kernel="auto"``: the interpreter until the plan's
    generated kernel is ready (see ``codegen.promote``). A generated kernel checks nothing, so where
    a value could fail a check, pass 1 is the interpreter's (which names the first failure)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, not {kernel!r}")
    fast = None
    if kernel == "specialised":
        # (imported when first asked for: a process that never compiles a kernel does not load
        # the code generators)
        from arrowkafka.codegen import encode as encode_codegen

        fast = encode_codegen.generated_encoder(plan)
    elif kernel == "auto":
        fast = promote.auto("encode", plan, nbytes, example)
    if fast is None:
        fn = kernel_run(nbytes, "encode")
        return fn, fn
    return (kernel_run(nbytes, "encode") if may_fail() else fast), fast


def encode_batch(
    spec: MessageSpec,
    data: Any,
    version: int,
    *,
    threads: int = 1,
    sizes_only: bool = False,
    kernel: str = "auto",
) -> pa.Array:
    """See ``arrowkafka.encode`` and ``arrowkafka.encoded_size``. ``kernel``: "interpreter",
    "specialised" (generated for this plan, compiled on first use) or "auto" (the interpreter,
    then the specialised kernel once the plan has encoded enough: see ``codegen.promote``)."""
    name = spec.name
    plan = compile_plan(spec, version)
    struct = _as_struct(data)
    rows = len(struct)
    if struct.null_count:
        i = int(np.argmax(~np.asarray(struct.is_valid().to_numpy(zero_copy_only=False), bool)))
        raise EncodeError("a null row", row=i, message=name, version=version)
    flat = _Flattener(plan, spec, version)
    struct = flat.conform(struct, _input_type(spec), "$", None, _Place())
    flat.visit(plan.root, struct, None, _Place())
    inputs = _Inputs(plan, flat.pieces)
    owner = plan.owners()

    threads = max(1, min(threads, rows // 64 or 1))
    cuts = np.linspace(0, rows, threads + 1).astype(np.int64)
    sizes = np.zeros(rows, np.int64)
    # one size per tagged value written, at most one per present byte
    npresent = sum(int(p.present.sum()) for p in flat.pieces.values() if p.present is not None)
    caches = [np.zeros(npresent + 1, np.int64) for _ in range(threads)]
    stub = np.zeros(1, np.uint8)

    checks = _run_checks(plan, inputs)
    may_fail = functools.partial(_may_fail, plan, inputs, checks, flat.pieces)

    def args(
        first: int, last: int, fill: bool, out: np.ndarray, starts: np.ndarray, k: int
    ) -> tuple[Any, ...]:
        return (
            plan.code, plan.runs, checks, plan.tag_table, owner, plan.max_depth, first, last, fill,
            *inputs.args(), out, starts, sizes, caches[k], np.zeros(1, np.int64),
            np.zeros(isa.STATUS_SIZE, np.int64),
        )  # fmt: skip

    def call(k: int, fill: bool, out: np.ndarray, starts: np.ndarray) -> None:
        a = args(int(cuts[k]), int(cuts[k + 1]), fill, out, starts, k)
        if (writer if fill else sizer)(*a):
            raise _kernel_error(plan, a[-1])

    zeros = np.zeros(rows + 1, np.int64)
    sizer, writer = _kernels(plan, kernel, inputs.nbytes, may_fail, lambda: args(0, 0, True, stub, zeros, 0))
    each_range(lambda k: call(k, False, stub, zeros), threads)
    if sizes_only:
        return pa.array(sizes, pa.int64())
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError(f"{name} v{version}: over 2 GiB of bodies in one batch; encode smaller batches")
    out = block(max(int(offsets[-1]), 1))
    each_range(lambda k: call(k, True, out, offsets), threads)
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(out[: offsets[-1]])]
    return pa.Array.from_buffers(pa.binary(), rows, buffers)
