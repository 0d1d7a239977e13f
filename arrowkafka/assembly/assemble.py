"""Stage 5: the buffers pass 2 filled -> Arrow arrays, without copying the values.

Each plan node becomes one array through ``pa.Array.from_buffers`` over slices of the arenas
(validity and bool bytes are packed into bitmaps: an eighth of the size, the only copy).
Buffer names follow the node id, as in error messages and ``Plan.describe()``:
``n7-validity``, ``n7-offsets``, ``n7-data`` (var-length bytes) and ``n7-values`` (fixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrowkafka.assembly.blocks import block
from arrowkafka.kernels.isa import K_FIXED, K_LIST, K_MAP, K_STRUCT, K_VARBIN
from arrowkafka.plan import Node, Plan

__all__ = ["VIEW_LIMIT", "Buffers", "allocate", "assemble"]

_ALIGN = 64
VIEW_LIMIT = 1 << 31  # inputs this large or larger are copied: a view holds an int32 offset


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


@dataclass
class Buffers:
    """Where each node's buffers live: bases into four arenas, sized from pass 1's counts.
    A view node (``allocate(views=True)``) has a negative ``data_base``: its values are not
    copied, and ``a8`` holds their 16-byte Arrow views from byte ``-1 - data_base`` on."""

    fixed_base: np.ndarray
    off_base: np.ndarray
    data_base: np.ndarray
    valid_base: np.ndarray
    a8: np.ndarray
    offs: np.ndarray
    bytes_out: np.ndarray
    valid: np.ndarray

    def views(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.a8, self.a8.view(np.int16), self.a8.view(np.int32), self.a8.view(np.int64)

    def named(self, plan: Plan, counts: np.ndarray, dcounts: np.ndarray) -> dict[str, np.ndarray]:
        """Every buffer by its stable name (``n7-offsets`` ...), as numpy views."""
        out: dict[str, np.ndarray] = {}
        for node in plan.nodes:
            i, n = node.id, int(counts[node.id])
            if self.valid_base[i] >= 0:
                out[f"n{i}-validity"] = self.valid[self.valid_base[i] : self.valid_base[i] + n]
            if node.kind in (K_LIST, K_VARBIN, K_MAP):
                out[f"n{i}-offsets"] = self.offs[self.off_base[i] : self.off_base[i] + n + 1]
            if node.kind == K_VARBIN and self.data_base[i] >= 0:
                out[f"n{i}-data"] = self.bytes_out[self.data_base[i] : self.data_base[i] + dcounts[i]]
            if node.kind == K_VARBIN and self.data_base[i] < 0:
                at = -1 - int(self.data_base[i])
                out[f"n{i}-views"] = self.a8[at : at + 16 * n]
            if node.kind == K_FIXED:
                out[f"n{i}-values"] = self.a8[self.fixed_base[i] : self.fixed_base[i] + n * node.width]
        return out


class BatchTooLarge(ValueError):
    pass


def allocate(plan: Plan, counts: np.ndarray, dcounts: np.ndarray, views: bool = False) -> Buffers:
    """Allocate every buffer exactly once, from pass 1's slot and byte counts; with ``views``,
    a view node gets 16 zeroed bytes a value in ``a8`` (its Arrow views) instead of its bytes."""
    viewed = plan.view_nodes() if views else ()
    n = len(plan.nodes)
    fixed_base = np.zeros(n, np.int64)
    off_base = np.zeros(n, np.int64)
    data_base = np.zeros(n, np.int64)
    valid_base = np.full(n, -1, np.int64)
    fixed = offsets = data = valid = 0
    for node in plan.nodes:
        i, c = node.id, int(counts[node.id])
        if node.kind == K_FIXED:
            fixed_base[i] = fixed
            fixed += _aligned(c * node.width)
        if node.kind in (K_LIST, K_VARBIN, K_MAP):
            # (a view node's bytes stay in the input: only its count is bounded here)
            if c >= 2**31 - 1 or (node.kind == K_VARBIN and i not in viewed and dcounts[i] >= 2**31):
                raise BatchTooLarge(f"{node.path}: more than 2 GiB or 2^31 items in one batch")
            off_base[i] = offsets
            offsets += _aligned(c + 1)
        if node.kind == K_VARBIN and i in viewed:
            data_base[i] = -1 - fixed  # (fixed stays a multiple of 64)
            fixed += _aligned(c * 16)
        elif node.kind == K_VARBIN:
            data_base[i] = data
            data += _aligned(int(dcounts[i]))
        if node.nullable:
            valid_base[i] = valid
            valid += _aligned(c)
    offs = _arena(max(offsets, 1) * 4).view(np.int32)
    offs[off_base[[nd.id for nd in plan.nodes if nd.kind in (K_LIST, K_VARBIN, K_MAP)]]] = 0
    a8 = _arena(max(fixed, 8))
    for i in viewed:  # a null's view is all zeros, and a short value's unused bytes too
        a8[-1 - data_base[i] : -1 - data_base[i] + 16 * int(counts[i])] = 0
    return Buffers(
        fixed_base,
        off_base,
        data_base,
        valid_base,
        a8,
        offs,
        _arena(max(data, 1)),
        _arena(max(valid, 1)),
    )


def _arena(nbytes: int) -> np.ndarray:
    """A writable byte array, reused from batch to batch once nothing refers to it (see
    ``blocks``: fresh pages each cost a page fault on first write)."""
    return block(nbytes)


def _bitmap(bytes_: np.ndarray) -> tuple[pa.Buffer | None, int]:
    nulls = int(bytes_.size - np.count_nonzero(bytes_))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(bytes_.astype(bool), bitorder="little")), nulls


def assemble(
    plan: Plan,
    bufs: Buffers,
    counts: np.ndarray,
    dcounts: np.ndarray,
    rows: int,
    bad: np.ndarray | None = None,
    data: np.ndarray | None = None,
) -> pa.RecordBatch:
    """Build the record batch; with ``bad`` (a byte per row), those rows' columns are null.
    ``data``: the input, which view nodes point into."""
    row_valid = None if bad is None or not bad.any() else (bad == 0).astype(np.uint8)
    schema = plan.schema
    if bad is not None:  # errors="null": the schema says every column may be null, always
        schema = pa.schema([f.with_nullable(True) for f in schema], metadata=schema.metadata)
    sources = None  # what view nodes point into: buffer 0 the input, 1 the plan's constants
    if (bufs.data_base < 0).any():
        assert data is not None
        sources = [pa.py_buffer(data), pa.py_buffer(plan.const_bytes)]
    columns = [_array(c, bufs, counts, dcounts, row_valid, sources) for c in plan.root.children]
    if not columns:
        empty = pa.Array.from_buffers(pa.struct([]), rows, [None])
        return pa.RecordBatch.from_struct_array(empty).replace_schema_metadata(schema.metadata)
    if sources is not None:
        schema = pa.schema(
            [f.with_type(c.type) for f, c in zip(schema, columns, strict=True)], metadata=schema.metadata
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _array(
    node: Node,
    bufs: Buffers,
    counts: np.ndarray,
    dcounts: np.ndarray,
    row_valid: np.ndarray | None = None,
    sources: list[pa.Buffer] | None = None,
) -> pa.Array:
    """One node's array over its slices of the arenas. (A function of its own, not a closure
    calling itself: such a closure is a reference cycle, and would keep the arenas from being
    reused until the garbage collector runs.)"""
    i = node.id
    length = int(counts[i])
    vb = bufs.valid_base[i]
    validity_bytes = bufs.valid[vb : vb + length] if vb >= 0 else None
    if row_valid is not None:
        validity_bytes = row_valid if validity_bytes is None else validity_bytes & row_valid
    validity, nulls = _bitmap(validity_bytes) if validity_bytes is not None else (None, 0)
    t = node.type
    if node.kind == K_FIXED:
        storage = t.storage_type if isinstance(t, pa.ExtensionType) else t
        raw = bufs.a8[bufs.fixed_base[i] : bufs.fixed_base[i] + length * node.width]
        if pa.types.is_boolean(storage):
            values = pa.py_buffer(np.packbits(raw.astype(bool), bitorder="little"))
        else:
            values = pa.py_buffer(raw)
        arr = pa.Array.from_buffers(storage, length, [validity, values], null_count=nulls)
        return pa.ExtensionArray.from_storage(t, arr) if storage is not t else arr
    if node.kind == K_VARBIN and bufs.data_base[i] < 0:
        assert sources is not None
        at = -1 - int(bufs.data_base[i])
        views = pa.py_buffer(bufs.a8[at : at + 16 * length])
        return pa.Array.from_buffers(pa.binary_view(), length, [validity, views, *sources], null_count=nulls)
    if node.kind == K_VARBIN:
        offsets = pa.py_buffer(bufs.offs[bufs.off_base[i] : bufs.off_base[i] + length + 1])
        data = pa.py_buffer(bufs.bytes_out[bufs.data_base[i] : bufs.data_base[i] + dcounts[i]])
        return pa.Array.from_buffers(t, length, [validity, offsets, data], null_count=nulls)
    children = [_array(c, bufs, counts, dcounts, None, sources) for c in node.children]
    if sources is not None:  # a child may be a view: the type follows the children's
        t = _with_children(t, children)
    if node.kind == K_STRUCT:
        return pa.Array.from_buffers(t, length, [validity], null_count=nulls, children=children)
    offsets = pa.py_buffer(bufs.offs[bufs.off_base[i] : bufs.off_base[i] + length + 1])
    if node.kind == K_MAP:
        entries_type = pa.struct([t.key_field, t.item_field])
        entries = pa.Array.from_buffers(entries_type, len(children[0]), [None], children=children)
        children = [entries]
    return pa.Array.from_buffers(t, length, [validity, offsets], null_count=nulls, children=children)


def _with_children(t: pa.DataType, children: list[pa.Array]) -> pa.DataType:
    """``t`` (a struct or list) with its children's types, where a view stands for binary."""
    if isinstance(t, pa.StructType):
        return pa.struct([t.field(k).with_type(c.type) for k, c in enumerate(children)])
    if isinstance(t, pa.ListType):
        return pa.list_(t.value_field.with_type(children[0].type))
    return t  # a map: its keys and values are never views
