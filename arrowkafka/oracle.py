"""A plain, slow, pure-Python encoder and decoder written straight from the spec: the oracle.

It walks the ``MessageSpec`` IR one field at a time and shares no code with the plans or the
kernels, so when the two disagree one of them is wrong and a test says which message and
field. Values are what ``pa.RecordBatch.to_pylist()`` gives for ``arrow_schema(name, version)``:
dicts keyed by column name, lists, ``str``, ``bytes``, ``uuid.UUID``, and for the unknown tagged
fields of a struct a list of ``(tag, raw bytes)`` pairs.

Wire rules, from the Kafka protocol guide, KIP-482, its optional-field draft, KIP-625 and
KIP-893:

- fixed ints big-endian; bool is one byte, any non-zero byte is true; uuid 16 bytes;
- classic STRING int16 length (-1 null), BYTES/records int32 length (-1 null), ARRAY int32
  count (-1 null); in flexible versions the compact forms: unsigned varint N+1, 0 = null;
- in flexible versions every struct ends with a tag section: unsigned varint count, then per
  field unsigned varint tag, unsigned varint size, value; tags ascending; a known tagged
  field equal to its default is left out unless ``_tags_present`` lists it (decoding lists
  every known tag it saw);
- KIP-893 nullable struct: int8 -1 (null) / 1 before the struct; unsigned varint 0/1 when the
  struct is a tagged field;
- KIP-625: ``fixedN`` big-endian N bits, ``packedN`` zigzag varint, ``upackedN`` unsigned
  varint, each holding an N-bit two's-complement value widened to the field's type;
- draft dialect: in ``versionsWithOptional`` every struct opens with an optional-field buffer:
  entries of (zigzag varint value length, int16 tag, value) in ascending tag order, ended by a
  zero length. (The draft leaves open whether the length counts the tag; we read it as the
  length of the value alone, which a value can never make zero.)
"""

from __future__ import annotations

import struct as _struct
import uuid as _uuid
from typing import Any

from arrowkafka.errors import Corrupt, DecodeError, EncodeError, Truncated
from arrowkafka.ir import Field, MessageSpec, Struct
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, column_name, default_value, has_tags_present

__all__ = ["decode", "encode"]

_FIXED = {8: ">b", 16: ">h", 32: ">i", 64: ">q"}
_RANGE = {
    "int8": (-(2**7), 2**7),
    "int16": (-(2**15), 2**15),
    "int32": (-(2**31), 2**31),
    "int64": (-(2**63), 2**63),
    "uint16": (0, 2**16),
    "uint32": (0, 2**32),
}


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# ---- decoding -------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, spec: MessageSpec, version: int, index: int) -> None:
        self.data = data
        self.pos = 0
        self.spec = spec
        self.version = version
        self.index = index

    def fail(self, cls: type[DecodeError], reason: str, path: str, offset: int | None = None) -> DecodeError:
        return cls(
            reason,
            path=path,
            message_index=self.index,
            offset=self.pos if offset is None else offset,
            size=len(self.data),
            message=self.spec.name,
            version=self.version,
        )

    def take(self, n: int, what: str, path: str) -> bytes:
        left = len(self.data) - self.pos
        if n > left:
            raise self.fail(Truncated, f"reading {what}: needs {n} bytes, {left} left", path)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt: str, what: str, path: str) -> Any:
        return _struct.unpack(fmt, self.take(_struct.calcsize(fmt), what, path))[0]

    def uvarint(self, bits: int, what: str, path: str) -> int:
        """Unsigned LEB128 of at most ceil(bits/7) bytes whose value fits ``bits`` bits."""
        start = self.pos
        value = shift = 0
        for _ in range((bits + 6) // 7):
            b = self.take(1, what, path)[0]
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if value >> bits:
                    raise self.fail(Corrupt, f"reading {what}: varint exceeds {bits} bits", path, start)
                return value
        raise self.fail(Corrupt, f"reading {what}: varint longer than {(bits + 6) // 7} bytes", path, start)

    def zigzag(self, bits: int, what: str, path: str) -> int:
        raw = self.uvarint(bits, what, path)
        return (raw >> 1) ^ -(raw & 1)


def _flexible(spec: MessageSpec, f: Field, version: int) -> bool:
    if f.flexible_versions is not None:
        return version in f.flexible_versions
    return spec.is_flexible(version)


def _length(r: _Reader, compact: bool, classic_fmt: str, what: str, path: str) -> int | None:
    """A length or count: None for null. Classic -1 and compact 0 are null."""
    start = r.pos
    if compact:
        n = r.uvarint(32, what, path) - 1
    else:
        n = r.fixed(classic_fmt, what, path)
    if n < -1:
        raise r.fail(Corrupt, f"reading {what}: negative length {n}", path, start)
    return None if n == -1 else n


def _nullable_length(
    r: _Reader, f: Field, compact: bool, classic_fmt: str, noun: str, path: str
) -> tuple[int | None, int]:
    """A length or count and where it started; a null is refused unless the field is
    nullable in this version."""
    start = r.pos
    n = _length(r, compact, classic_fmt, f"{noun} length", path)
    if n is None and not f.nullable_in(r.version):
        raise r.fail(Corrupt, f"null {noun} in a non-nullable field", path, start)
    return n, start


def _element_length(
    r: _Reader, f: Field, compact: bool, classic_fmt: str, noun: str, path: str, in_array: bool
) -> tuple[int | None, int]:
    if not in_array:
        return _nullable_length(r, f, compact, classic_fmt, noun, path)
    start = r.pos
    n = _length(r, compact, classic_fmt, f"{noun} length", path)
    if n is None:
        raise r.fail(Corrupt, f"reading {noun}: null element in an array", path, start)
    return n, start


def _read_primitive(
    r: _Reader, f: Field, element: str, path: str, flexible: bool, in_array: bool = False
) -> Any:
    """One value; ``in_array``: an element of ``f``, an array, whose nullability is the
    array's own (Kafka's arrays never hold a null element)."""
    v = r.version
    if element == "bool":
        return r.take(1, "bool", path)[0] != 0
    if element == "int8":
        return r.fixed(">b", "int8", path)
    if element in ("int16", "int32", "int64"):
        enc = f.encoding_in(v)
        bits = int(enc[-2:])
        if enc.startswith("fixed"):
            return r.fixed(_FIXED[bits], enc, path)
        if enc.startswith("packed"):
            return r.zigzag(bits, enc, path)
        return _signed(r.uvarint(bits, enc, path), bits)
    if element == "uint16":
        return r.fixed(">H", "uint16", path)
    if element == "uint32":
        return r.fixed(">I", "uint32", path)
    if element == "float64":
        return r.fixed(">d", "float64", path)
    if element == "uuid":
        return _uuid.UUID(bytes=r.take(16, "uuid", path))
    if element == "string":
        n, start = _element_length(r, f, flexible, ">h", "string", path, in_array)
        if n is None:
            return None
        if n > 0x7FFF:  # Kafka's readers refuse it in every version
            raise r.fail(Corrupt, f"reading string: length {n} is over 32767 bytes", path, start)
        raw = r.take(n, "string", path)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise r.fail(Corrupt, f"invalid UTF-8 in string ({e.reason})", path, start) from None
    if element in ("bytes", "records"):
        n, _ = _element_length(r, f, flexible, ">i", element, path, in_array)
        if n is None:
            return None
        return r.take(n, element, path)
    raise AssertionError(element)


def _read_value(r: _Reader, f: Field, path: str, tagged: bool) -> Any:
    v = r.version
    flexible = _flexible(r.spec, f, v)
    if f.kind == "array":
        n, start = _nullable_length(r, f, flexible, ">i", "array", path)
        if n is None:
            return None
        if n > len(r.data) - r.pos:  # every element takes at least a byte
            raise r.fail(
                Truncated, f"reading array: {n} elements, {len(r.data) - r.pos} bytes left", path, start
            )
        if f.struct is not None:
            return [_read_struct(r, f.struct, f"{path}[{i}]") for i in range(n)]
        return [_read_primitive(r, f, f.element, f"{path}[{i}]", flexible, True) for i in range(n)]
    if f.kind == "struct":
        assert f.struct is not None
        if f.nullable_in(v):
            start = r.pos
            if tagged:
                marker = r.uvarint(32, "struct marker", path)
                present = {0: False, 1: True}.get(marker)
            else:
                marker = r.fixed(">b", "struct marker", path)
                present = {-1: False, 1: True}.get(marker)
            if present is None:
                raise r.fail(Corrupt, f"bad nullable struct marker {marker}", path, start)
            if not present:
                return None
        return _read_struct(r, f.struct, path)
    return _read_primitive(r, f, f.element, path, flexible)


def _size_lie(r: _Reader, e: DecodeError, base: int) -> DecodeError:
    """An error inside a tagged field's bytes, placed in the whole body. Running out of those
    bytes is not truncation (the size said how many there are): it is corrupt."""
    if isinstance(e, Truncated):
        return r.fail(Corrupt, "a tagged field's value does not fill its size", e.path, base + e.offset)
    return r.fail(type(e), e.reason, e.path, base + e.offset)


def _read_struct(r: _Reader, s: Struct, path: str) -> dict[str, Any]:
    v, spec = r.version, r.spec
    out: dict[str, Any] = {}
    unknown: list[tuple[int, bytes]] = []
    seen_tags: list[int] = []  # known tags on the wire, for _tags_present
    optional_values: dict[str, Any] = {}
    if spec.has_optional_buffer(v):
        known = {f.tag: f for f in s.optional_fields}
        last = -1
        while True:
            start = r.pos
            n = r.zigzag(32, "optional field length", path)
            if n == 0:
                break
            if n < 0:
                raise r.fail(Corrupt, f"reading optional field length: negative length {n}", path, start)
            tag = r.fixed(">h", "optional field tag", path)
            if tag <= last:
                raise r.fail(Corrupt, f"optional field tag {tag} after tag {last}", path, start)
            last = tag
            body = r.take(n, "optional field", path)
            f = known.get(tag)
            if f is None:
                unknown.append((tag, body))
                continue
            seen_tags.append(tag)
            sub = _Reader(body, spec, v, r.index)
            fpath = f"{path}.{column_name(f.name)}"
            try:
                optional_values[f.name] = _read_value(sub, f, fpath, tagged=False)
            except DecodeError as e:
                raise _size_lie(r, e, r.pos - n) from None
            if sub.pos != n:
                raise r.fail(Corrupt, f"optional field {tag} has {n - sub.pos} bytes left over", fpath, start)
        for f in s.optional_fields:
            value = optional_values.get(f.name, default_value(spec, f, v))
            out[column_name(f.name)] = value
    tagged_fields = {}
    for f in s.fields_in(v):
        if f.tagged_in(v):
            tagged_fields[f.tag] = f
            out[column_name(f.name)] = None  # keep column order; filled below
            continue
        out[column_name(f.name)] = _read_value(r, f, f"{path}.{column_name(f.name)}", tagged=False)
    if spec.is_flexible(v):
        seen: set[str] = set()
        count = r.uvarint(32, "tagged field count", path)
        last = -1
        for _ in range(count):
            start = r.pos
            tag = r.uvarint(32, "tag", path)
            if tag <= last:
                raise r.fail(Corrupt, f"tag {tag} after tag {last}", path, start)
            last = tag
            size = r.uvarint(32, "tagged field size", path)
            body = r.take(size, "tagged field", path)
            f = tagged_fields.get(tag)
            if f is None:
                unknown.append((tag, body))
                continue
            fpath = f"{path}.{column_name(f.name)}"
            if not spec.has_optional_buffer(v):  # (the optional buffer's, if both, are kept)
                seen_tags.append(tag)
            sub = _Reader(body, spec, v, r.index)
            try:
                out[column_name(f.name)] = _read_value(sub, f, fpath, tagged=True)
            except DecodeError as e:
                raise _size_lie(r, e, r.pos - size) from None
            if sub.pos != size:
                raise r.fail(
                    Corrupt, f"tagged field {tag} has {size - sub.pos} bytes left over", fpath, start
                )
            seen.add(f.name)
        for f in tagged_fields.values():
            if f.name not in seen:
                out[column_name(f.name)] = default_value(spec, f, v)
    if has_tags_present(spec, s, [v]):
        out[TAGS_PRESENT] = seen_tags
    if spec.is_flexible(v) or spec.has_optional_buffer(v):
        out[UNKNOWN_TAGS] = unknown
    return out


def decode(spec: MessageSpec, version: int, body: bytes, index: int = 0) -> dict[str, Any]:
    """Decode one message body into a dict shaped like ``arrow_schema(name, version)`` rows."""
    spec.check_version(version)
    r = _Reader(bytes(body), spec, version, index)
    value = _read_struct(r, spec.root, "$")
    if r.pos != len(r.data):
        raise r.fail(Corrupt, f"{len(r.data) - r.pos} bytes left over after the last field", "$")
    return value


# ---- encoding -------------------------------------------------------------------------------


def uvarint_bytes(value: int) -> bytes:
    """An unsigned varint (LEB128): the value's 7-bit groups, low first, each but the last
    with its high bit set. (Written from the definition, unlike ``arrowkafka.wire``'s loop,
    which tests hold to this.)"""
    groups = [(value >> shift) & 0x7F for shift in range(0, max(value.bit_length(), 1), 7)]
    return bytes([0x80 | g for g in groups[:-1]] + [groups[-1]])


def _zigzag(value: int, bits: int) -> bytes:
    return uvarint_bytes(((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1))


class _Writer:
    def __init__(self, spec: MessageSpec, version: int, row: int) -> None:
        self.spec = spec
        self.version = version
        self.row = row

    def fail(self, reason: str, path: str) -> EncodeError:
        return EncodeError(reason, path=path, row=self.row, message=self.spec.name, version=self.version)


def _write_length(w: _Writer, n: int | None, compact: bool, classic_fmt: str) -> bytes:
    if compact:
        return uvarint_bytes(0 if n is None else n + 1)
    return _struct.pack(classic_fmt, -1 if n is None else n)


def _write_primitive(
    w: _Writer, f: Field, element: str, value: Any, path: str, flexible: bool, in_array: bool = False
) -> bytes:
    v = w.version
    if value is None and element not in ("string", "bytes", "records"):
        raise w.fail(f"null in non-nullable {element} field", path)
    if element == "bool":
        return b"\x01" if value else b"\x00"
    if element in _RANGE:
        lo, hi = _RANGE[element]
        if not lo <= value < hi:
            raise w.fail(f"{value} is out of range for {element}", path)
    if element == "int8":
        return _struct.pack(">b", value)
    if element in ("int16", "int32", "int64"):
        enc = f.encoding_in(v)
        bits = int(enc[-2:])
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise w.fail(f"{value} is out of range for {enc}", path)
        if enc.startswith("fixed"):
            return _struct.pack(_FIXED[bits], value)
        if enc.startswith("packed"):
            return _zigzag(value, bits)
        return uvarint_bytes(value & ((1 << bits) - 1))
    if element == "uint16":
        return _struct.pack(">H", value)
    if element == "uint32":
        return _struct.pack(">I", value)
    if element == "float64":
        return _struct.pack(">d", value)
    if element == "uuid":
        raw = value.bytes if isinstance(value, _uuid.UUID) else bytes(value)
        if len(raw) != 16:
            raise w.fail(f"uuid must be 16 bytes, got {len(raw)}", path)
        return raw
    if element in ("string", "bytes", "records"):
        if value is None:
            if in_array:
                raise w.fail("null element in an array (Kafka's arrays never hold one)", path)
            if not f.nullable_in(v):
                raise w.fail(f"null in non-nullable {element} field", path)
            return _write_length(w, None, flexible, ">h" if element == "string" else ">i")
        raw = value.encode("utf-8") if element == "string" else bytes(value)
        if element == "string" and len(raw) > 0x7FFF:  # in every version, as Kafka's writers
            raise w.fail(f"string of {len(raw)} bytes is longer than 32767", path)
        return _write_length(w, len(raw), flexible, ">h" if element == "string" else ">i") + raw
    raise AssertionError(element)


def _write_value(w: _Writer, f: Field, value: Any, path: str, tagged: bool) -> bytes:
    v = w.version
    flexible = _flexible(w.spec, f, v)
    if f.kind == "array":
        if value is None:
            if not f.nullable_in(v):
                raise w.fail("null in non-nullable array field", path)
            return _write_length(w, None, flexible, ">i")
        items = list(value)
        out = [_write_length(w, len(items), flexible, ">i")]
        for i, item in enumerate(items):
            if f.struct is not None:
                out.append(_write_struct(w, f.struct, item, f"{path}[{i}]"))
            else:
                out.append(_write_primitive(w, f, f.element, item, f"{path}[{i}]", flexible, True))
        return b"".join(out)
    if f.kind == "struct":
        assert f.struct is not None
        prefix = b""
        if f.nullable_in(v):
            if value is None:
                return uvarint_bytes(0) if tagged else b"\xff"
            prefix = uvarint_bytes(1) if tagged else b"\x01"
        elif value is None:
            raise w.fail("null in non-nullable struct field", path)
        return prefix + _write_struct(w, f.struct, value, path)
    return _write_primitive(w, f, f.element, value, path, flexible)


def _write_struct(w: _Writer, s: Struct, value: dict[str, Any], path: str) -> bytes:
    v, spec = w.version, w.spec
    out: list[bytes] = []
    unknown = dict(value.get(UNKNOWN_TAGS) or [])
    listed = set(value.get(TAGS_PRESENT) or [])  # written even at their default
    if spec.has_optional_buffer(v):
        entries: dict[int, bytes] = {tag: bytes(raw) for tag, raw in unknown.items()}
        for f in s.optional_fields:
            col = column_name(f.name)
            item = value.get(col, default_value(spec, f, v))
            if item == default_value(spec, f, v) and f.tag not in listed:
                continue
            entries[f.tag] = _write_value(w, f, item, f"{path}.{col}", tagged=False)  # type: ignore[index]
        for tag in sorted(entries):
            out.append(_zigzag(len(entries[tag]), 32) + _struct.pack(">h", tag) + entries[tag])
        out.append(_zigzag(0, 32))
    tagged: dict[int, bytes] = {}
    for f in s.fields_in(v):
        col = column_name(f.name)
        fpath = f"{path}.{col}"
        item = value.get(col, default_value(spec, f, v)) if f.tagged_in(v) else value.get(col)
        if f.tagged_in(v):
            if item == default_value(spec, f, v) and (f.tag not in listed or spec.has_optional_buffer(v)):
                continue  # as Kafka does: a tagged field equal to its default is left out
            tagged[f.tag] = _write_value(w, f, item, fpath, tagged=True)  # type: ignore[index]
        else:
            if col not in value:
                raise w.fail("missing field", fpath)
            out.append(_write_value(w, f, item, fpath, tagged=False))
    if spec.is_flexible(v):
        for tag, raw in unknown.items():
            if tag in tagged:
                raise w.fail(f"unknown tag {tag} is also a known tagged field", path)
            tagged[tag] = bytes(raw)
        out.append(uvarint_bytes(len(tagged)))
        for tag in sorted(tagged):
            out.append(uvarint_bytes(tag) + uvarint_bytes(len(tagged[tag])) + tagged[tag])
    return b"".join(out)


def encode(spec: MessageSpec, version: int, value: dict[str, Any], row: int = 0) -> bytes:
    """Encode one message (a dict shaped like ``decode`` returns) into its body bytes."""
    spec.check_version(version)
    return _write_struct(_Writer(spec, version, row), spec.root, value, "$")
