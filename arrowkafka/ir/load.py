"""Stage 1: spec JSON -> ``MessageSpec``, checked strictly.

Every key is known or the file is refused; every rule of the spec language (the Kafka
message-definitions README, KIP-482, its earlier optional-field draft, KIP-625 field
encodings, KIP-893 nullable structs) is checked here, at load time, so later stages can trust
the IR. A broken rule raises one ``SpecError`` naming the file, the field path and the rule.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arrowkafka.errors import SpecError
from arrowkafka.ir.jsonc import parse_jsonc
from arrowkafka.ir.model import (
    DIALECT_DRAFT,
    DIALECT_TAGGED,
    ENCODING_NAME,
    INT_BITS,
    PRIMITIVES,
    STRUCT_DEFAULTS,
    Encoding,
    Field,
    MessageSpec,
    Struct,
)
from arrowkafka.ir.versions import MAX_VERSION, NONE, Versions, parse_versions

__all__ = ["add_spec", "load_spec_file", "load_spec_text", "load_folder", "load_folders", "spec_files"]

MESSAGE_TYPES = ("request", "response", "header", "data", "metadata")
LISTENERS = ("zkBroker", "broker", "controller")
# entityType -> the element types it may annotate (upstream EntityType.verifyTypeMatches).
ENTITY_TYPES = {
    "unknown": None,
    "brokerId": "int32",
    "groupId": "string",
    "producerId": "int64",
    "topicName": "string",
    "transactionalId": "string",
}
MESSAGE_KEYS = {
    "apiKey",
    "type",
    "name",
    "validVersions",
    "flexibleVersions",
    "deprecatedVersions",
    "latestVersionUnstable",
    "listeners",
    "commonStructs",
    "fields",
    # KIP-482 draft dialect
    "versionsWithOptional",
    "optionalFields",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "tag",
    "taggedVersions",
    "default",
    "ignorable",
    "mapKey",
    "entityType",
    "zeroCopy",
    "about",
    "fields",
    "flexibleVersions",
    "encoding",
    "optionalFields",  # draft dialect, on struct fields
}
COMMON_STRUCT_KEYS = {"name", "versions", "fields"}
OPTIONAL_FIELD_KEYS = {
    "name",
    "type",
    "nullable",
    "tag",
    "default",
    "about",
    "fields",
    "optionalFields",
    "entityType",
}
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
STRUCT_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# The seed README lists uuid among nullable types, but the wire has no null uuid and the
# upstream generator refuses it ("Type uuid cannot be nullable"); so do we.
NULLABLE_PRIMITIVES = {"string", "bytes", "records"}
# The optional-field draft carries tags as int16 (0x0000-0x7fff), written as hex strings.
DRAFT_TAG = re.compile(r"^0x[0-9A-Fa-f]{1,4}$")


class _Loader:
    """Loads one spec file; holds what a field check needs to see of its message."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.msg = "<message>"
        self.flexible = NONE
        self.optional_versions = NONE
        self.dialect = DIALECT_TAGGED
        self.common_raw: dict[str, dict[str, Any]] = {}
        self.common: dict[str, Struct] = {}
        self.resolving: set[str] = set()
        self.defined: dict[str, str] = {}  # struct name -> path that defined it inline

    def fail(self, path: str, rule: str) -> SpecError:
        return SpecError(self.file, path, rule)

    # ---- small typed readers ------------------------------------------------------------

    def versions(self, obj: dict[str, Any], key: str, path: str, default: Versions | None) -> Versions:
        if key not in obj:
            if default is None:
                raise self.fail(path, f"missing required key '{key}'")
            return default
        try:
            return parse_versions(obj[key])
        except ValueError as e:
            raise self.fail(path, f"{key}: {e}") from None

    def flag(self, obj: dict[str, Any], key: str, path: str) -> bool:
        value = obj.get(key, False)
        # Jackson reads the strings "true"/"false" as booleans; upstream
        # SubscriptionInfoData.json relies on it.
        if value in ("true", "false"):
            return value == "true"
        if not isinstance(value, bool):
            raise self.fail(path, f"{key} must be true or false, got {value!r}")
        return value

    def text(self, obj: dict[str, Any], key: str, path: str, required: bool = False) -> str:
        if key not in obj:
            if required:
                raise self.fail(path, f"missing required key '{key}'")
            return ""
        value = obj[key]
        if not isinstance(value, str):
            raise self.fail(path, f"{key} must be a string, got {value!r}")
        return value

    def known_keys(self, obj: Any, allowed: set[str], path: str, what: str) -> None:
        if not isinstance(obj, dict):
            raise self.fail(path, f"{what} must be a JSON object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise self.fail(path, f"unknown key '{unknown[0]}' in {what}")

    # ---- message ------------------------------------------------------------------------

    def message(self, raw: Any, sha256: str) -> MessageSpec:
        self.known_keys(raw, MESSAGE_KEYS, "$", "message")
        name = raw.get("name")
        if not isinstance(name, str) or not STRUCT_NAME.fullmatch(name):
            raise self.fail("$", f"name must be a capitalised identifier, got {name!r}")
        self.msg = name
        mtype = raw.get("type")
        if mtype not in MESSAGE_TYPES:
            raise self.fail(name, f"type must be one of {', '.join(MESSAGE_TYPES)}, got {mtype!r}")
        api_key = raw.get("apiKey")
        if api_key is not None and (
            isinstance(api_key, bool) or not isinstance(api_key, int) or not 0 <= api_key <= MAX_VERSION
        ):
            raise self.fail(name, f"apiKey must be an integer 0-{MAX_VERSION}, got {api_key!r}")
        if api_key is None and mtype in ("request", "response"):
            raise self.fail(name, f"a {mtype} needs an apiKey")
        valid = self.versions(raw, "validVersions", name, None)
        if valid.empty:
            raise self.fail(name, "validVersions is empty")
        if valid.open_ended:
            raise self.fail(name, f"validVersions must name the highest version, got {valid}")

        if "versionsWithOptional" in raw or "optionalFields" in raw:
            self.dialect = DIALECT_DRAFT
            if "versionsWithOptional" not in raw:
                raise self.fail(name, "optionalFields needs versionsWithOptional")
            optional = self.versions(raw, "versionsWithOptional", name, None)
            if optional.empty or optional.lo not in valid:
                raise self.fail(name, f"versionsWithOptional {optional} reach outside validVersions {valid}")
            # "9+" in a spec whose validVersions are "0-9" means versions 9..9 here.
            self.optional_versions = optional.intersect(valid)
            flexible = self.versions(raw, "flexibleVersions", name, NONE)
            if not flexible.empty:
                raise self.fail(name, "the optional-field draft dialect cannot have flexibleVersions")
        else:
            flexible = self.versions(raw, "flexibleVersions", name, None)
        if not (flexible.empty or flexible.open_ended):
            raise self.fail(name, f"flexibleVersions must be none or N+, got {flexible}")
        self.flexible = flexible
        deprecated = self.versions(raw, "deprecatedVersions", name, NONE)
        if not valid.contains_range(deprecated):
            raise self.fail(name, f"deprecatedVersions {deprecated} reach outside validVersions {valid}")
        if mtype in ("request", "response") and not name.endswith(mtype.capitalize()):
            raise self.fail(name, f"a {mtype} name must end in {mtype.capitalize()}")
        for key in ("listeners", "latestVersionUnstable"):
            if key in raw and mtype != "request":
                raise self.fail(name, f"{key} is only allowed on requests")
        unstable = self.flag(raw, "latestVersionUnstable", name)
        listeners = raw.get("listeners", [])
        if not isinstance(listeners, list) or any(x not in LISTENERS for x in listeners):
            raise self.fail(name, f"listeners must be a list of {', '.join(LISTENERS)}, got {listeners!r}")

        commons = raw.get("commonStructs", [])
        if not isinstance(commons, list):
            raise self.fail(name, "commonStructs must be a list")
        for i, cs in enumerate(commons):
            cpath = f"{name}.commonStructs[{i}]"
            self.known_keys(cs, COMMON_STRUCT_KEYS, cpath, "common struct")
            cname = cs.get("name")
            if not isinstance(cname, str) or not STRUCT_NAME.fullmatch(cname):
                raise self.fail(cpath, f"common struct name must be a capitalised identifier, got {cname!r}")
            if cname in self.common_raw:
                raise self.fail(cpath, f"struct '{cname}' is defined twice")
            self.common_raw[cname] = cs
        for cname in self.common_raw:
            self.common_struct(cname, f"{name}.commonStructs.{cname}")

        fields = self.field_list(raw.get("fields"), name, valid)
        for f in fields:
            if f.map_key:
                raise self.fail(f"{name}.{f.name}", "mapKey is not allowed on top-level fields")
        root = Struct(
            name=name,
            versions=valid,
            fields=fields,
            optional_fields=self.optional_list(raw.get("optionalFields", []), name, fields),
        )
        return MessageSpec(
            name=name,
            type=mtype,
            api_key=api_key,
            valid_versions=valid,
            flexible_versions=flexible,
            root=root,
            source=self.file,
            sha256=sha256,
            deprecated_versions=deprecated,
            latest_version_unstable=unstable,
            listeners=tuple(listeners),
            common_structs=tuple(self.common[c] for c in self.common_raw),
            dialect=self.dialect,
            optional_versions=self.optional_versions,
        )

    def common_struct(self, cname: str, path: str) -> Struct:
        if cname in self.common:
            return self.common[cname]
        if cname in self.resolving:
            raise self.fail(path, f"common struct '{cname}' contains itself")
        self.resolving.add(cname)
        raw = self.common_raw[cname]
        versions = self.versions(raw, "versions", path, None)
        struct = Struct(cname, versions, self.field_list(raw.get("fields"), path, versions))
        self.resolving.discard(cname)
        self.common[cname] = struct
        return struct

    # ---- fields ------------------------------------------------------------------------

    def field_list(self, raw: Any, path: str, parent: Versions) -> tuple[Field, ...]:
        if not isinstance(raw, list):
            raise self.fail(path, "fields must be a list")
        fields = tuple(self.field(f, path, i, parent) for i, f in enumerate(raw))
        self.unique_fields(fields, path)
        tags = sorted(f.tag for f in fields if f.tag is not None)
        if tags != list(range(len(tags))):
            raise self.fail(path, f"tags must run 0, 1, 2, ... without gaps, got {tags}")
        return fields

    def unique_fields(self, fields: Iterable[Field], path: str) -> None:
        """No two fields of one struct (its draft optional fields included) share a name, nor
        two of them a tag."""
        names: set[str] = set()
        tags: dict[int, str] = {}
        for f in fields:
            if f.name in names:
                raise self.fail(f"{path}.{f.name}", f"field name '{f.name}' is used twice in one struct")
            names.add(f.name)
            if f.tag is not None:
                if f.tag in tags:
                    raise self.fail(
                        f"{path}.{f.name}", f"tag {f.tag} is used twice in one struct (also by {tags[f.tag]})"
                    )
                tags[f.tag] = f.name

    def field_name(self, raw: dict[str, Any], where: str) -> str:
        name = raw.get("name")
        if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
            raise self.fail(where, f"field name must match [A-Za-z][A-Za-z0-9]*, got {name!r}")
        return name

    def check_nullable(self, kind: str, element: str, ftype: str, path: str, key: str) -> None:
        """Of the primitive types only strings, bytes and records may be null (arrays and
        structs may too: KIP-893 for structs)."""
        if kind == "primitive" and element not in NULLABLE_PRIMITIVES:
            raise self.fail(path, f"{key}: type {ftype} cannot be nullable")

    def field(self, raw: Any, parent_path: str, index: int, parent: Versions) -> Field:
        where = f"{parent_path}.fields[{index}]"
        self.known_keys(raw, FIELD_KEYS, where, "field")
        name = self.field_name(raw, where)
        path = f"{parent_path}.{name}"
        ftype = self.text(raw, "type", path, required=True)
        tagged = self.versions(raw, "taggedVersions", path, NONE)
        versions = self.versions(raw, "versions", path, tagged if not tagged.empty else None)
        nullable = self.versions(raw, "nullableVersions", path, NONE)
        kind, element = self.parse_type(ftype, path)
        struct = self.struct_of(raw, kind, element, path, versions)
        if "fields" in raw and struct is None:
            raise self.fail(path, f"a field of type {ftype} cannot have fields")
        if "optionalFields" in raw and (struct is None or self.dialect != DIALECT_DRAFT):
            raise self.fail(path, "optionalFields belong to structs of the optional-field draft dialect")

        if not nullable.empty:
            self.check_nullable(kind, element, ftype, path, "nullableVersions")

        flexible_override = None
        if "flexibleVersions" in raw:
            flexible_override = self.versions(raw, "flexibleVersions", path, None)
            if not (kind == "primitive" and element in ("string", "bytes")):
                raise self.fail(
                    path, "a flexibleVersions override is only allowed on string and bytes fields"
                )
            if not (flexible_override.empty or flexible_override.open_ended):
                raise self.fail(path, f"flexibleVersions must be none or N+, got {flexible_override}")
        tag = self.tag(raw, path, tagged, versions, nullable, flexible_override)
        map_key = self.flag(raw, "mapKey", path)
        if map_key and tag is not None:
            raise self.fail(path, "a tagged field cannot be a mapKey")
        zero_copy = self.flag(raw, "zeroCopy", path)
        if zero_copy and not (kind == "primitive" and element == "bytes"):
            raise self.fail(path, "zeroCopy is only allowed on bytes fields")
        entity = raw.get("entityType")
        self.check_entity(entity, element, path)
        encodings = self.encodings(raw, kind, element, versions, path)
        default, default_text = self.default(raw, kind, element, versions, nullable, path)
        return Field(
            name=name,
            type=ftype,
            kind=kind,
            element=element,
            struct=struct,
            versions=versions,
            nullable_versions=nullable,
            tag=tag,
            tagged_versions=tagged,
            default=default,
            default_text=default_text,
            about=self.text(raw, "about", path),
            ignorable=self.flag(raw, "ignorable", path),
            map_key=map_key,
            entity_type=entity,
            zero_copy=zero_copy,
            flexible_versions=flexible_override,
            encodings=encodings,
        )

    def parse_type(self, ftype: str, path: str) -> tuple[str, str]:
        if ftype.startswith("[]"):
            element = ftype[2:]
            if element.startswith("[]"):
                raise self.fail(path, f"nested arrays are not allowed ({ftype})")
            if element in PRIMITIVES:
                if element == "records":
                    raise self.fail(path, "records cannot be an array element")
                return "array", element
            if STRUCT_NAME.fullmatch(element):
                return "array", element
            raise self.fail(path, f"unknown type {ftype!r}")
        if ftype in PRIMITIVES:
            return "primitive", ftype
        if STRUCT_NAME.fullmatch(ftype):
            return "struct", ftype
        raise self.fail(path, f"unknown type {ftype!r}")

    def struct_of(
        self, raw: dict[str, Any], kind: str, element: str, path: str, versions: Versions
    ) -> Struct | None:
        if kind == "primitive" or element in PRIMITIVES:
            return None
        if "fields" not in raw:
            if element in self.common_raw:
                return self.common_struct(element, f"{self.msg}.commonStructs.{element}")
            raise self.fail(path, f"struct type '{element}' has no fields and no commonStruct of that name")
        if element in self.common_raw or element in self.defined:
            raise self.fail(path, f"struct '{element}' is defined twice")
        self.defined[element] = path
        fields = self.field_list(raw["fields"], path, versions)
        return Struct(
            name=element,
            versions=versions,
            fields=fields,
            optional_fields=self.optional_list(raw.get("optionalFields", []), path, fields),
        )

    def tag(
        self,
        raw: dict[str, Any],
        path: str,
        tagged: Versions,
        versions: Versions,
        nullable: Versions,
        flexible_override: Versions | None,
    ) -> int | None:
        if "tag" not in raw:
            if not tagged.empty:
                raise self.fail(path, "taggedVersions without a tag")
            return None
        value = raw["tag"]
        if isinstance(value, str) and re.fullmatch(r"\d+", value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 0x7FFFFFFF:
            raise self.fail(path, f"tag must be an integer 0-2147483647, got {raw['tag']!r}")
        if self.flexible.empty:
            raise self.fail(path, "a tagged field needs flexible versions, and the message has none")
        if tagged.empty:
            raise self.fail(path, "a tag needs taggedVersions")
        if not tagged.open_ended:
            raise self.fail(path, f"taggedVersions must be open-ended (N+), got {tagged}")
        if not versions.contains_range(tagged):
            raise self.fail(path, f"taggedVersions {tagged} reach outside versions {versions}")
        flexible = self.flexible if flexible_override is None else flexible_override
        if not flexible.contains_range(tagged):
            raise self.fail(path, f"taggedVersions {tagged} reach outside flexibleVersions {flexible}")
        overlap = nullable.intersect(tagged)
        if not (overlap.empty or overlap == tagged):
            raise self.fail(
                path,
                f"nullableVersions {nullable} must cover all of taggedVersions {tagged} or none of them",
            )
        return value

    def check_entity(self, entity: Any, element: str, path: str) -> None:
        if entity is None:
            return
        if entity not in ENTITY_TYPES:
            raise self.fail(path, f"unknown entityType {entity!r}")
        wanted = ENTITY_TYPES[entity]
        if wanted is not None and element != wanted:
            raise self.fail(path, f"entityType {entity} needs type {wanted} or []{wanted}, not {element}")

    def encodings(
        self, raw: dict[str, Any], kind: str, element: str, versions: Versions, path: str
    ) -> tuple[Encoding, ...]:
        if "encoding" not in raw:
            return ()
        spec = raw["encoding"]
        if not (kind == "primitive" and element in ("int16", "int32", "int64")):
            raise self.fail(
                path, f"encoding is only allowed on int16, int32 and int64 fields, not {raw['type']}"
            )
        if isinstance(spec, str):
            items = [(versions, spec)]
        elif isinstance(spec, dict) and spec:
            items = []
            for key, value in spec.items():
                try:
                    items.append((parse_versions(key), value))
                except ValueError as e:
                    raise self.fail(path, f"encoding: {e}") from None
        else:
            raise self.fail(
                path, f"encoding must be a name or an object of version range to name, got {spec!r}"
            )
        out = []
        for rng, name in items:
            if not isinstance(name, str) or not ENCODING_NAME.fullmatch(name):
                raise self.fail(
                    path, f"unknown encoding {name!r} (expected (fixed|packed|upacked)(16|32|64))"
                )
            enc = Encoding(rng, name)
            if enc.bits > INT_BITS[element]:
                raise self.fail(path, f"encoding {name} is wider than the field's type {element}")
            out.append(enc)
        out.sort(key=lambda e: e.versions.lo)
        for a, b in itertools.pairwise(out):
            if not a.versions.intersect(b.versions).empty:
                raise self.fail(path, f"encoding version ranges {a.versions} and {b.versions} overlap")
        covered: Versions | None = NONE
        for enc in out:
            covered = covered.union(enc.versions) if covered is not None else None
        if covered != versions:
            ranges = ", ".join(str(e.versions) for e in out)
            raise self.fail(
                path, f"encoding version ranges ({ranges}) must together be exactly versions {versions}"
            )
        return tuple(out)

    def default(
        self,
        raw: dict[str, Any],
        kind: str,
        element: str,
        versions: Versions,
        nullable: Versions,
        path: str,
    ) -> tuple[object, str | None]:
        """The field's default as a Python value, and its text as written (None if implicit)."""
        value = raw.get("default")
        # Jackson reads a JSON null default as no default at all, and "" is the upstream
        # generator's own spelling of "no default"; the wire bytes depend on it (a tagged
        # field is left out when it equals its default), so we follow it.
        if value is None or (value == "" and (kind != "primitive" or element == "records")):
            return implicit_default(kind, element), None
        if value == "null":
            if not nullable.contains_range(versions):
                raise self.fail(
                    path, f'a "null" default needs the field nullable in all its versions ({versions})'
                )
            return None, "null"
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float):
            text = repr(value)
        elif isinstance(value, str):
            text = value
        else:
            raise self.fail(path, f"default must be a string, number, boolean or null, got {value!r}")
        if kind == "struct" or kind == "array" or (element in PRIMITIVES and kind != "primitive"):
            raise self.fail(path, f"default {value!r} does not fit type {raw['type']} (only null is allowed)")
        parsed = parse_default(element, text)
        if parsed is _BAD:
            raise self.fail(path, f"default {value!r} does not fit type {element}")
        return parsed, text

    # ---- KIP-482 draft: optional fields -------------------------------------------------

    def optional_list(self, raw: Any, path: str, fields: tuple[Field, ...]) -> tuple[Field, ...]:
        """A draft struct's optional fields (``fields``: its others, whose names they must not take)."""
        if raw == []:
            return ()
        if self.dialect != DIALECT_DRAFT:
            raise self.fail(path, "optionalFields need versionsWithOptional")
        if not isinstance(raw, list):
            raise self.fail(path, "optionalFields must be a list")
        out: list[Field] = []
        for i, item in enumerate(raw):
            where = f"{path}.optionalFields[{i}]"
            self.known_keys(item, OPTIONAL_FIELD_KEYS, where, "optional field")
            name = self.field_name(item, where)
            fpath = f"{path}.{name}"
            tag_text = item.get("tag")
            if (
                not isinstance(tag_text, str)
                or not DRAFT_TAG.fullmatch(tag_text)
                or int(tag_text, 16) > 0x7FFF
            ):
                raise self.fail(
                    fpath, f"optional field tag must be a hex string 0x0000-0x7fff, got {tag_text!r}"
                )
            tag = int(tag_text, 16)
            is_nullable = item.get("nullable", False)
            if not isinstance(is_nullable, bool):
                raise self.fail(fpath, f"nullable must be true or false, got {is_nullable!r}")
            ftype = self.text(item, "type", fpath, required=True)
            kind, element = self.parse_type(ftype, fpath)
            versions = self.optional_versions
            nullable = versions if is_nullable else NONE
            if is_nullable:
                self.check_nullable(kind, element, ftype, fpath, "nullable")
            struct = self.struct_of(item, kind, element, fpath, versions)
            self.check_entity(item.get("entityType"), element, fpath)
            default, default_text = self.default(item, kind, element, versions, nullable, fpath)
            out.append(
                Field(
                    name=name,
                    type=ftype,
                    kind=kind,
                    element=element,
                    struct=struct,
                    versions=versions,
                    nullable_versions=nullable,
                    tag=tag,
                    tagged_versions=versions,
                    default=default,
                    default_text=default_text,
                    about=self.text(item, "about", fpath),
                    entity_type=item.get("entityType"),
                    optional=True,
                )
            )
            self.unique_fields((*fields, *out), path)  # (as each comes: the first clash is named)
        return tuple(out)


_BAD = object()
_INT_RANGE = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_INT_TEXT = re.compile(r"(-?)(0x[0-9A-Fa-f]+|[0-9]+)")
_FLOAT_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


def parse_int_literal(text: str) -> int | None:
    """Decimal (optionally negative), ``0x`` hex or leading-zero octal (README: 'You may
    specify hex or octal values, as long as they are prefixed with 0x or 0')."""
    m = _INT_TEXT.fullmatch(text)
    if m is None:
        return None
    sign, digits = m.groups()
    if digits.startswith("0x"):
        if sign:
            return None  # upstream reads "-0x10" as a bad decimal
        value = int(digits[2:], 16)
    elif len(digits) > 1 and digits[0] == "0":
        if not set(digits) <= set("01234567"):
            return None  # "09": a leading zero promises octal
        value = int(digits, 8)
    else:
        value = int(digits)
    return -value if sign else value


def parse_default(element: str, text: str) -> object:
    """Parse an explicit default for a primitive type; ``_BAD`` when it does not fit."""
    if element == "bool":
        low = text.lower()
        return True if low == "true" else False if low == "false" else _BAD
    if element in _INT_RANGE:
        value = parse_int_literal(text)
        lo, hi = _INT_RANGE[element]
        return value if value is not None and lo <= value <= hi else _BAD
    if element == "float64":
        # Java's decimal grammar: no "nan", "inf" or "1_0" as Python's float() would take.
        return float(text) if _FLOAT_TEXT.fullmatch(text) else _BAD
    if element == "string":
        return text
    if element == "uuid":
        if text == "":
            return bytes(16)
        if not _UUID_TEXT.fullmatch(text):  # URL-safe base64 of 16 bytes, as Java's decoder
            return _BAD
        return base64.urlsafe_b64decode(text[:22] + "==")
    if element == "bytes":
        return b"" if text == "" else _BAD
    return _BAD  # records: only null


def implicit_default(kind: str, element: str) -> object:
    """Defaults the README gives when a spec names none."""
    if kind == "array":
        return []
    if kind == "struct":
        return STRUCT_DEFAULTS
    return {
        "bool": False,
        "float64": 0.0,
        "string": "",
        "uuid": bytes(16),
        "bytes": b"",
        "records": None,
    }.get(element, 0)


# ---- entry points ---------------------------------------------------------------------------


def load_spec_text(text: str, file: str = "<string>") -> MessageSpec:
    """Load one spec from its JSON text."""
    loader = _Loader(file)
    try:
        raw = parse_jsonc(text)
    except ValueError as e:
        raise SpecError(file, "$", str(e)) from None
    sha = hashlib.sha256(text.encode()).hexdigest()
    return loader.message(raw, sha)


def load_spec_file(path: str | Path) -> MessageSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(str(path), "", f"cannot read: {e}") from None
    return load_spec_text(text, str(path))


def spec_files(folder: str | Path) -> list[Path]:
    """Every ``*.json`` under a folder, in a stable order, but in hidden folders (``.git``, a
    ``.venv``: never specs, and their JSON would be refused as such)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecError(str(folder), "", "not a folder" if folder.exists() else "no such folder")
    return sorted(p for p in folder.rglob("*.json") if not in_hidden_folder(p.relative_to(folder).parts))


def in_hidden_folder(parts: tuple[str, ...] | list[str]) -> bool:
    """Does a file's relative path (its parts) lie in a hidden folder (``.git``, ``.venv``)?"""
    return any(part.startswith(".") for part in parts[:-1])


def add_spec(specs: dict[str, MessageSpec], spec: MessageSpec, file: str) -> None:
    """Add a spec loaded from ``file`` to one folder's specs: two files with one message name
    is an error (a folder, or a folder at a git revision: ``arrowkafka.evolution.sources``)."""
    if spec.name in specs:
        raise SpecError(
            file, spec.name, f"message name {spec.name} is also defined in {specs[spec.name].source}"
        )
    specs[spec.name] = spec


def load_folder(folder: str | Path) -> dict[str, MessageSpec]:
    """Load every spec under a folder; two files with one message name is an error."""
    out: dict[str, MessageSpec] = {}
    for path in spec_files(folder):
        add_spec(out, load_spec_file(path), str(path))
    return out


def load_folders(folders: Iterable[str | Path]) -> dict[str, MessageSpec]:
    """Load several folders; a later folder overrides an earlier one by message name."""
    out: dict[str, MessageSpec] = {}
    for folder in folders:
        out.update(load_folder(folder))
    return out
