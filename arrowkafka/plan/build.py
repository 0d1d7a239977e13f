"""Stage 3: a ``MessageSpec`` and a version -> its ``Plan`` (``plan.model``), cached.

The node tree mirrors ``schema.message_schema`` (one node per output Arrow array); the
program resolves every version condition of the spec (``Field.present_in``, ``tagged_in``,
``encoding_in`` ...) into instructions of ``kernels.isa``: compact or classic lengths, tag
sections, KIP-893 markers, KIP-625 varints, the draft's optional-field buffer, defaults for
fields absent in the version.
"""

from __future__ import annotations

import struct as _struct
import threading
from collections.abc import Callable
from typing import cast

import numpy as np
import pyarrow as pa

from arrowkafka.ir import Field, MessageSpec, Struct
from arrowkafka.kernels.isa import (
    EL_BOOL,
    EL_F64,
    EL_INT,
    EL_UINT,
    EL_UUID,
    ENC_UVARINT,
    ENC_ZIGZAG,
    FIXED_RUN,
    K_FIXED,
    K_LIST,
    K_MAP,
    K_STRUCT,
    K_VARBIN,
    LEN_INT16,
    LEN_INT32,
    LEN_UVARINT,
    OP,
)
from arrowkafka.plan.model import WIDTH, Node, Plan
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, VERSION_COLUMN, column_name, message_schema

__all__ = ["compile_plan"]

_ELEMENT_KIND = {"bool": EL_BOOL, "float64": EL_F64, "uuid": EL_UUID, "uint16": EL_UINT, "uint32": EL_UINT}


# ---- node tree (mirrors schema.message_schema) ----------------------------------------------


class _NodeBuilder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def new(self, kind: int, type_: pa.DataType, nullable: bool, path: str, **kw: object) -> Node:
        node = Node(len(self.nodes), kind, type_, nullable, path, **kw)  # type: ignore[arg-type]
        self.nodes.append(node)
        return node

    def for_type(self, f: Field | None, pa_field: pa.Field, path: str, struct: Struct | None) -> Node:
        t = pa_field.type
        if pa_field.name == TAGS_PRESENT:
            node = self.new(K_LIST, t, False, path)
            node.children = [self.new(K_FIXED, pa.uint32(), False, path + "[]", width=4)]
            return node
        if pa.types.is_struct(t):
            node = self.new(K_STRUCT, t, pa_field.nullable, path, field=f, struct=struct)
            assert struct is not None
            node.children = self.struct_children(struct, t, path)
            return node
        if pa.types.is_map(t):
            node = self.new(K_MAP, t, False, path)
            node.children = [
                self.new(K_FIXED, pa.uint32(), False, path + ".key", width=4),
                self.new(K_VARBIN, pa.binary(), False, path + ".value"),
            ]
            return node
        if pa.types.is_list(t):
            node = self.new(K_LIST, t, pa_field.nullable, path, field=f)
            item = t.value_field
            elem_struct = f.struct if f is not None else None
            node.children = [self.for_type(f, item, path + "[]", elem_struct)]
            return node
        if pa.types.is_string(t) or pa.types.is_binary(t):
            return self.new(K_VARBIN, t, pa_field.nullable, path, field=f)
        assert f is not None
        return self.new(K_FIXED, t, pa_field.nullable, path, width=WIDTH[f.element], field=f)

    def struct_children(self, s: Struct, t: pa.StructType, path: str) -> list[Node]:
        by_col = {column_name(f.name): f for f in (*s.optional_fields, *s.fields)}
        out = []
        for i in range(t.num_fields):
            pf = t.field(i)
            f = by_col.get(pf.name)
            sub = f.struct if f is not None else None
            out.append(self.for_type(f, pf, f"{path}.{pf.name}", sub))
        return out


# ---- program emission --------------------------------------------------------------------------


class _Emitter:
    def __init__(self, spec: MessageSpec, version: int) -> None:
        self.spec = spec
        self.v = version
        self.code: list[list[int]] = []
        self.paths: list[str] = []
        self.consts: list[int] = []
        self.const_bytes = bytearray()
        self.tag_table: list[int] = []
        self.pending: list[tuple[int, int, Callable[[], None]]] = []  # (pc, arg, segment)
        self.runs: list[list[int]] = []
        self.run_paths: list[str] = []
        self.target = -1  # a jump lands here: the next instruction may not join a run

    def here(self) -> int:
        """The pc of the next instruction, as a jump target."""
        self.target = len(self.code)
        return self.target

    def fixed(self, node: int, kind: int, wire_bytes: int, width: int, path: str) -> None:
        """A fixed-width field: joins the run the previous instruction opened, if it can."""
        last = self.code[-1] if self.code else None
        if last is not None and last[0] == FIXED_RUN and self.target != len(self.code):
            last[3] += 1
            last[4] += wire_bytes
        else:
            self.emit("FIXED_RUN", -1, len(self.runs), 1, wire_bytes, path=path)
        self.runs.append([node, kind, wire_bytes, width])
        self.run_paths.append(path)

    def emit(self, op: str, node: int = -1, *args: int, path: str = "") -> int:
        row = [OP[op], node, *args]
        row += [0] * (8 - len(row))
        self.code.append(row)
        self.paths.append(path)
        return len(self.code) - 1

    def later(self, pc: int, arg: int, segment: Callable[[], None]) -> None:
        """Emit ``segment`` out of line (ending in RET) and patch its start into code[pc][arg]."""
        self.pending.append((pc, arg, segment))

    def flush_pending(self) -> None:
        while self.pending:
            pc, arg, segment = self.pending.pop(0)
            self.code[pc][arg] = self.here()
            segment()
            self.emit("RET", path=self.paths[pc])

    def flexible(self, f: Field) -> bool:
        if f.flexible_versions is not None:
            return self.v in f.flexible_versions
        return self.spec.is_flexible(self.v)

    # -- defaults: write a node subtree's default values without reading -------------------

    def defaults(self, node: Node, value: object) -> None:
        """Write ``value`` (a spec default) into ``node``; structs recurse into children."""
        if node.kind == K_STRUCT:
            is_null = value is None
            self.emit("DEF_STRUCT", node.id, int(is_null), path=node.path)
            for child in node.children:
                self.defaults(child, self.default_of(child))
        elif node.kind == K_MAP:
            self.emit("DEF_MAP", node.id, path=node.path)
        elif node.kind == K_LIST:
            self.emit("DEF_LIST", node.id, int(value is None), path=node.path)
        elif node.kind == K_VARBIN:
            if value is None:
                self.emit("DEF_VARBIN", node.id, 0, 0, 1, path=node.path)
            else:
                raw = value.encode() if isinstance(value, str) else bytes(cast(bytes, value))
                start = len(self.const_bytes)
                self.const_bytes += raw
                self.emit("DEF_VARBIN", node.id, start, len(raw), 0, path=node.path)
        else:
            element = node.field.element if node.field is not None else "int16"  # _version
            if element == "uuid":
                start = len(self.const_bytes)
                self.const_bytes += cast(bytes, value)
                self.emit("DEF_UUID", node.id, start, path=node.path)
                return
            if element == "float64":
                bits = _struct.unpack("<q", _struct.pack("<d", float(value)))[0]  # type: ignore[arg-type]
            else:
                bits = int(value)  # type: ignore[call-overload]
            self.consts.append(bits)
            self.emit("DEF_FIXED", node.id, len(self.consts) - 1, node.width, path=node.path)

    @staticmethod
    def default_of(node: Node) -> object:
        """The spec default of a field's node (the unknown-tags map and _tags_present: empty)."""
        if node.field is None:
            return [] if node.kind == K_LIST else None
        return node.field.default

    # -- reading -------------------------------------------------------------------------------

    def struct_body(self, s: Struct, node: Node) -> None:
        """Fields of one struct instance (its slot already counted)."""
        v, spec = self.v, self.spec
        children = {c.path.rsplit(".", 1)[-1]: c for c in node.children}
        unknown = children.get(UNKNOWN_TAGS)
        # one section per struct records the known tags it saw (the optional buffer, if both)
        present = children.get(TAGS_PRESENT)
        if spec.has_optional_buffer(v):
            assert unknown is not None
            self.section("OPTBUF", s.optional_fields, children, unknown, present, node.path)
            present = None
        else:
            for f in s.optional_fields:
                child = children.get(column_name(f.name))
                if child is not None:
                    self.defaults(child, self.default_of(child))
        tagged: list[Field] = []
        for f in s.fields:
            child = children.get(column_name(f.name))
            if child is None:
                continue  # not in any version this plan covers
            if v not in f.versions:
                self.defaults(child, self.default_of(child))
            elif f.tagged_in(v):
                tagged.append(f)
            else:
                self.value(f, child, tagged=False)
        if spec.is_flexible(v):
            assert unknown is not None
            self.section("TAGS", tuple(tagged), children, unknown, present, node.path)
        else:
            if unknown is not None and not spec.has_optional_buffer(v):
                self.emit("DEF_MAP", unknown.id, path=unknown.path)
            if present is not None:
                self.emit("DEF_LIST", present.id, 0, path=present.path)

    def section(
        self,
        op: str,
        fields: tuple[Field, ...],
        children: dict[str, Node],
        unknown: Node,
        present: Node | None,
        path: str,
    ) -> None:
        ordered = sorted(fields, key=lambda f: f.tag)  # type: ignore[arg-type,return-value]
        start = len(self.tag_table)
        self.tag_table += [f.tag for f in ordered]  # type: ignore[misc]
        key, val = unknown.children
        if not ordered:  # nothing to look up later: scan it, keep unknown tags, move on
            self.emit(op, unknown.id, key.id, val.id, start, 0, 1, -1, path=path)
            if present is not None:  # (no known tag in this version: none present)
                self.emit("DEF_LIST", present.id, 0, path=present.path)
            return
        pid = present.id if present is not None else -1
        self.emit(op, unknown.id, key.id, val.id, start, len(ordered), 0, pid, path=path)
        for f in ordered:
            child = children[column_name(f.name)]
            pc = self.emit("TAGGED", child.id, f.tag or 0, 0, 0, path=child.path)

            def value(f: Field = f, child: Node = child) -> None:
                self.value(f, child, tagged=(op == "TAGS"))

            def default(child: Node = child) -> None:
                self.defaults(child, self.default_of(child))

            self.later(pc, 3, value)
            self.later(pc, 4, default)
        self.emit("SECTION_END", path=path)

    def value(self, f: Field, node: Node, tagged: bool) -> None:
        v = self.v
        wire_nullable = int(f.nullable_in(v))
        if f.kind == "array":
            len_kind = LEN_UVARINT if self.flexible(f) else LEN_INT32
            (child,) = node.children
            if f.struct is None and f.element in WIDTH:
                # Arrays of fixed-width values (no KIP-625 encoding is allowed on arrays) are
                # one instruction: the kernel converts the whole run in a tight loop.
                ekind = _ELEMENT_KIND.get(f.element, EL_INT)
                args = (child.id, len_kind, wire_nullable, ekind, WIDTH[f.element])
                self.emit("LIST_FIXED", node.id, *args, path=node.path)
                return
            # (operand 4 is unused: like Kafka's readers, the kernel bounds a count by one byte
            # per element, so the first fault in byte order is the one reported)
            pc = self.emit("LIST", node.id, len_kind, wire_nullable, 0, 0, path=node.path)
            if f.struct is not None:
                self.emit("STRUCT", child.id, path=child.path)
                self.struct_body(f.struct, child)
            else:
                self.primitive(f, child, element=True)
            self.emit("LIST_NEXT", node.id, path=node.path)
            self.code[pc][5] = self.here()
            return
        if f.kind == "struct":
            assert f.struct is not None
            if f.nullable_in(v):
                pc = self.emit("NSTRUCT", node.id, 1 if tagged else 0, 0, 0, path=node.path)

                def children_defaults(node: Node = node) -> None:
                    for child in node.children:
                        self.defaults(child, self.default_of(child))

                self.later(pc, 4, children_defaults)
                self.struct_body(f.struct, node)
                self.code[pc][3] = self.here()
            else:
                self.emit("STRUCT", node.id, path=node.path)
                self.struct_body(f.struct, node)
            return
        self.primitive(f, node)

    def primitive(self, f: Field, node: Node, element: bool = False) -> None:
        """A primitive field's value, or (``element``) one element of a primitive array."""
        e = f.element
        if e in ("string", "bytes", "records"):
            len_kind = LEN_UVARINT if self.flexible(f) else (LEN_INT16 if e == "string" else LEN_INT32)
            # nullableVersions is the array's: Kafka's arrays never hold a null element
            nullable = int(f.nullable_in(self.v) and not element)
            self.emit("VARBIN", node.id, len_kind, nullable, int(e == "string"), path=node.path)
        elif e == "bool":
            self.fixed(node.id, EL_BOOL, 1, 1, node.path)
        elif e == "float64":
            self.fixed(node.id, EL_F64, 8, 8, node.path)
        elif e == "uuid":
            self.fixed(node.id, EL_UUID, 16, 16, node.path)
        elif e in ("uint16", "uint32"):
            self.fixed(node.id, EL_UINT, WIDTH[e], node.width, node.path)
        else:
            enc = f.encoding_in(self.v) if e != "int8" else "fixed8"
            bits = int(enc[-2:]) if e != "int8" else 8
            if enc.startswith("fixed"):
                self.fixed(node.id, EL_INT, bits // 8, node.width, node.path)
            else:
                kind = ENC_ZIGZAG if enc.startswith("packed") else ENC_UVARINT
                self.emit("INT", node.id, kind, bits, node.width, path=node.path)


def _build(spec: MessageSpec, version: int, all_versions: bool) -> Plan:
    schema = message_schema(spec, None if all_versions else version)
    nb = _NodeBuilder()
    root = nb.new(K_STRUCT, pa.struct(list(schema)), False, "$", struct=spec.root)
    children = {column_name(f.name): f for f in (*spec.root.optional_fields, *spec.root.fields)}
    for pf in schema:
        f = children.get(pf.name)
        if pf.name == VERSION_COLUMN:
            root.children.append(nb.new(K_FIXED, pa.int16(), False, "$._version", width=2))
        else:
            root.children.append(nb.for_type(f, pf, f"$.{pf.name}", f.struct if f is not None else None))
    em = _Emitter(spec, version)
    if all_versions:
        em.consts.append(version)
        em.emit("DEF_FIXED", root.children[0].id, 0, 2, path="$._version")
    body = [c for c in root.children if c.path != "$._version"]
    body_root = Node(root.id, K_STRUCT, root.type, False, "$", children=body)
    em.struct_body(spec.root, body_root)
    em.emit("END", path="$")
    root_default_pc = em.here()
    for child in root.children:
        em.defaults(child, em.default_of(child) if child.path != "$._version" else version)
    em.emit("END", path="$")
    em.flush_pending()
    code = np.asarray(em.code, dtype=np.int32).reshape(-1, 8)
    return Plan(
        name=spec.name,
        version=version,
        all_versions=all_versions,
        schema=schema,
        nodes=nb.nodes,
        root=root,
        code=code,
        consts=np.asarray(em.consts or [0], dtype=np.int64),
        const_bytes=np.frombuffer(bytes(em.const_bytes) or b"\0", dtype=np.uint8).copy(),
        tag_table=np.asarray(em.tag_table or [0], dtype=np.int32),
        runs=np.asarray(em.runs or [[0, 0, 0, 0]], dtype=np.int32).reshape(-1, 4),
        paths=em.paths,
        run_paths=em.run_paths,
        root_default_pc=root_default_pc,
        # Each level of nesting can hold a list frame, a tag-section frame and a call frame.
        max_depth=3 * _depth(root) + 8,
    )


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children), default=0)


_CACHE: dict[tuple[str, str, int, bool], Plan] = {}
_LOCK = threading.Lock()


def compile_plan(spec: MessageSpec, version: int, all_versions: bool = False) -> Plan:
    """The decode plan of one message version, cached by (spec text, name, version, mode)."""
    spec.check_version(version)
    key = (spec.sha256, spec.name, version, all_versions)
    plan = _CACHE.get(key)
    if plan is None:
        plan = _build(spec, version, all_versions)
        with _LOCK:
            _CACHE[key] = plan
    return plan
