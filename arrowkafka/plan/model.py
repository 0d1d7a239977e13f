"""Stage 3, what a plan is: the ``Plan`` and ``Node`` data that ``plan.build`` makes and the
kernels, the code generators and the assembler read.

A plan has two parts:

- **nodes**: one per Arrow array of the output (struct, list, fixed-width values, var-length
  binary, the unknown-tags map), in the pre-order of ``arrow_schema``; the kernels count slots
  and bytes per node in pass 1 and fill the node's buffers in pass 2. Buffer names follow the
  node id: ``n7-validity``, ``n7-offsets``, ``n7-data``.
- **code**: an int32 array of instructions ``[op, node, a, b, c, d, e, f]`` that the kernel
  interprets once per message. Every version condition is resolved here, so the code for
  FetchRequest v12 has no "if version >= 3" left in it: fields absent in the version become
  default-writing instructions, tagged fields become a tag section, and so on.

Out-of-line segments (a tagged field's value, a default subtree) follow the main program and
end in ``RET``; the main program ends in ``END``. ``describe()`` prints the program. The
instruction set itself is ``arrowkafka.kernels.isa``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from arrowkafka.ir import Field, Struct
from arrowkafka.kernels.isa import FIXED_RUN, K_LIST, K_MAP, K_VARBIN, KIND_NAMES, OPS

__all__ = ["Node", "Plan", "with_indices", "WIDTH"]

WIDTH = {  # bytes of each fixed-width type, on the wire and in Arrow
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "float64": 8,
    "uuid": 16,
}


@dataclass(eq=False)
class Node:
    """One Arrow array of the output."""

    id: int
    kind: int
    type: pa.DataType  # Arrow type of this array (the uuid extension for uuid)
    nullable: bool  # has a validity buffer
    path: str  # e.g. $.topics[].partitions[].error_code
    width: int = 0  # FIXED: bytes per slot
    children: list[Node] = field(default_factory=list)
    field: Field | None = None  # the spec field, for defaults
    struct: Struct | None = None  # STRUCT nodes: the spec struct


@dataclass(eq=False)
class Plan:
    name: str
    version: int
    all_versions: bool
    schema: pa.Schema
    nodes: list[Node]
    root: Node
    code: np.ndarray  # int32 [n, 8]
    consts: np.ndarray  # int64: fixed-width defaults (float64 as its bits)
    const_bytes: np.ndarray  # uint8: string/bytes/uuid defaults
    tag_table: np.ndarray  # int32: known tags of each tag section, ascending
    runs: np.ndarray  # int32 [n, 4]: FIXED_RUN rows (node, kind, wire bytes, out width)
    paths: list[str]  # per instruction: the field path it reads
    run_paths: list[str]  # per FIXED_RUN row
    root_default_pc: int  # writes a row of defaults (for rows rejected with errors="null")
    max_depth: int  # stack frames the kernel needs
    _owners: np.ndarray | None = field(default=None, repr=False)
    _views: tuple[int, ...] | None = field(default=None, repr=False)

    def owners(self) -> np.ndarray:
        """Per node, the node whose cursor is its slot: the root for top-level fields, a list's
        (or map's) element node for the element's subtree (struct children share their
        parent's slot). The encoder and its generated kernels index values by it."""
        if self._owners is None:
            owner = np.zeros(len(self.nodes), np.int64)

            def walk(node: Node, own: int) -> None:
                owner[node.id] = own
                for c in node.children:
                    walk(c, c.id if node.kind in (K_LIST, K_MAP) else own)

            walk(self.root, self.root.id)
            self._owners = owner
        return self._owners

    def view_nodes(self) -> tuple[int, ...]:
        """The nodes ``views=True`` does not copy, ascending: the spec's ``bytes`` and
        ``records`` fields (not strings, and not the values of unknown tags, which the kernels
        always copy). Worked out once per plan: every decode call asks."""
        if self._views is None:
            in_maps = {c.id for node in self.nodes if node.kind == K_MAP for c in node.children}
            self._views = tuple(
                node.id
                for node in self.nodes
                if node.kind == K_VARBIN and pa.types.is_binary(node.type) and node.id not in in_maps
            )
        return self._views

    def indexed_path(self, pc: int, run_row: int, indices: list[int]) -> str:
        """The path instruction ``pc`` (or FIXED_RUN row ``run_row``) reads, with the list
        indices filled in: ``$.topics[2].partitions[0].error_code``."""
        return with_indices(self.run_paths[run_row] if run_row >= 0 else self.paths[pc], indices)

    def describe(self) -> str:
        """The program, one instruction per line, with the path each one reads."""
        lines = [f"plan {self.name} v{self.version}{' (all versions)' if self.all_versions else ''}"]
        for n in self.nodes:
            lines.append(f"  n{n.id:<3} {KIND_NAMES[n.kind]:<6} {n.type}  {n.path}")
        for pc, row in enumerate(self.code):
            args = " ".join(str(int(x)) for x in row[1:])
            lines.append(f"{pc:5d} {OPS[row[0]]:<12} {args:<28} {self.paths[pc]}")
            if row[0] == FIXED_RUN:
                for r in range(row[2], row[2] + row[3]):
                    fields = " ".join(str(int(x)) for x in self.runs[r])
                    lines.append(f"{'':18}{fields:<28} {self.run_paths[r]}")
        return "\n".join(lines)


def with_indices(path: str, indices: list[int]) -> str:
    """``$.topics[].partitions[].x`` with list indices filled in, outermost first."""
    parts = path.split("[]")
    out = parts[0]
    for k, rest in enumerate(parts[1:]):
        out += (f"[{indices[k]}]" if k < len(indices) else "[]") + rest
    return out
