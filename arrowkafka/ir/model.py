"""The frozen IR a spec file loads into: ``MessageSpec`` > ``Struct`` > ``Field``.

Everything a later stage needs is resolved here once: version ranges are ``Versions``,
defaults are Python values, struct references point at their ``Struct``, and each field can
answer "in version v, is this field present / nullable / tagged / flexible, and how is it
encoded". Later stages never look at the JSON again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from arrowkafka.ir.versions import NONE, Versions

__all__ = [
    "PRIMITIVES",
    "INT_BITS",
    "STRUCT_DEFAULTS",
    "Encoding",
    "Field",
    "Struct",
    "MessageSpec",
    "DIALECT_TAGGED",
    "DIALECT_DRAFT",
]

PRIMITIVES = (
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "uuid",
    "bytes",
    "records",
)
INT_BITS = {"int8": 8, "int16": 16, "uint16": 16, "int32": 32, "uint32": 32, "int64": 64}

# The spec language as Kafka ships it (KIP-482 tagged fields), and the earlier KIP-482 draft
# (an optional-field buffer at the start of every struct).
DIALECT_TAGGED = "tagged"
DIALECT_DRAFT = "kip482-draft"

ENCODING_NAME = re.compile(r"^(fixed|packed|upacked)(16|32|64)$")


class _StructDefaults:
    """Default of a non-nullable struct: a struct whose fields all hold their defaults."""

    def __repr__(self) -> str:
        return "STRUCT_DEFAULTS"

    def __reduce__(self) -> str:
        return "STRUCT_DEFAULTS"  # unpickled as the one instance (tested by identity)


STRUCT_DEFAULTS = _StructDefaults()


@dataclass(frozen=True)
class Encoding:
    """KIP-625: how an integer field is written in a range of versions."""

    versions: Versions
    name: str  # fixed16 .. upacked64

    @property
    def kind(self) -> str:
        """``fixed`` (big-endian), ``packed`` (zigzag varint) or ``upacked`` (unsigned varint)."""
        m = ENCODING_NAME.fullmatch(self.name)
        assert m is not None
        return m.group(1)

    @property
    def bits(self) -> int:
        return int(self.name[-2:])


@dataclass(frozen=True, eq=False)
class Field:
    name: str
    type: str  # as written: "int32", "[]int32", "[]Topic", "Topic"
    kind: str  # "primitive" | "array" | "struct"
    element: str  # primitive type name, or the struct's name
    struct: Struct | None  # the struct of a struct or []struct field
    versions: Versions
    nullable_versions: Versions
    tag: int | None
    tagged_versions: Versions
    default: object  # Python value; None is null; STRUCT_DEFAULTS for structs
    default_text: str | None  # the explicit default as written, else None
    about: str = ""
    ignorable: bool = False
    map_key: bool = False
    entity_type: str | None = None
    zero_copy: bool = False
    flexible_versions: Versions | None = None  # field-level override (RequestHeader.ClientId)
    encodings: tuple[Encoding, ...] = ()
    optional: bool = False  # KIP-482 draft optional field

    @property
    def element_is_struct(self) -> bool:
        return self.struct is not None

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged_in(self, version: int) -> bool:
        return version in self.tagged_versions

    def encoding_in(self, version: int) -> str:
        """KIP-625 encoding name in this version (``fixedNN`` when the spec names none)."""
        for enc in self.encodings:
            if version in enc.versions:
                return enc.name
        return f"fixed{INT_BITS.get(self.element, 0)}"


@dataclass(frozen=True, eq=False)
class Struct:
    name: str
    versions: Versions
    fields: tuple[Field, ...]
    optional_fields: tuple[Field, ...] = ()  # KIP-482 draft dialect only

    def fields_in(self, version: int) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if version in f.versions)


@dataclass(frozen=True, eq=False)
class MessageSpec:
    name: str
    type: str  # request | response | header | data | metadata
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    root: Struct
    source: str  # the file it came from
    sha256: str  # of the file's bytes: part of every cache key built on this spec
    deprecated_versions: Versions = NONE
    latest_version_unstable: bool = False
    listeners: tuple[str, ...] = ()
    common_structs: tuple[Struct, ...] = ()
    dialect: str = DIALECT_TAGGED
    optional_versions: Versions = NONE  # draft dialect: versionsWithOptional

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.root.fields

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions

    def has_optional_buffer(self, version: int) -> bool:
        return version in self.optional_versions

    def check_version(self, version: int) -> None:
        if version not in self.valid_versions:
            raise KeyError(f"{self.name} has no version {version} (valid versions: {self.valid_versions})")
