"""A table of malformed specs, each refused with one exact SpecError message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from arrowkafka.errors import SpecError
from arrowkafka.ir import load_spec_text


def spec(fields: list[dict[str, Any]] | None = None, **top: Any) -> str:
    doc: dict[str, Any] = {
        "apiKey": 900,
        "type": "request",
        "name": "FooRequest",
        "validVersions": "0-3",
        "flexibleVersions": "2+",
        "fields": fields if fields is not None else [],
    }
    doc.update(top)
    return json.dumps({k: v for k, v in doc.items() if v is not None})


def f(name: str = "Bar", type: str = "int32", versions: str = "0+", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type, "versions": versions, **extra}


BAD = [
    # --- the message ------------------------------------------------------------------
    ("unknown top-level key", spec(extra="x"), "$: unknown key 'extra' in message"),
    ("not an object", "[1, 2]", "$: message must be a JSON object, got list"),
    ("bad JSON", '{"name": "FooRequest",}', "$: bad JSON: Expecting property name enclosed in double quotes (line 1, column 23)"),
    ("conflicting duplicate key", '{"name": "A", "name": "B"}', "$: key 'name' is given twice with different values"),
    ("unterminated comment", "{} /* open", "$: unterminated /* comment at char 3"),
    ("bad type", spec(type="event"), "FooRequest: type must be one of request, response, header, data, metadata, got 'event'"),
    ("no apiKey on a request", spec(apiKey=None), "FooRequest: a request needs an apiKey"),
    ("apiKey out of range", spec(apiKey=70000), "FooRequest: apiKey must be an integer 0-32767, got 70000"),
    ("bad validVersions", spec(validVersions="0-"), "FooRequest: validVersions: bad version range '0-' (expected none, N, N-M or N+)"),
    ("open validVersions", spec(validVersions="0+"), "FooRequest: validVersions must name the highest version, got 0+"),
    ("request name suffix", spec(name="FooRequests"), "FooRequests: a request name must end in Request"),
    ("listeners on a response", spec(type="response", name="FooResponse", listeners=["broker"]), "FooResponse: listeners is only allowed on requests"),
    ("mapKey on a top-level field", spec([f(mapKey=True)]), "FooRequest.Bar: mapKey is not allowed on top-level fields"),
    ("empty validVersions", spec(validVersions="none"), "FooRequest: validVersions is empty"),
    ("missing flexibleVersions", spec(flexibleVersions=None), "FooRequest: missing required key 'flexibleVersions'"),
    ("closed flexibleVersions", spec(flexibleVersions="1-2"), "FooRequest: flexibleVersions must be none or N+, got 1-2"),
    ("deprecated outside valid", spec(deprecatedVersions="2-5"), "FooRequest: deprecatedVersions 2-5 reach outside validVersions 0-3"),
    ("bad listener", spec(listeners=["zookeeper"]), "FooRequest: listeners must be a list of zkBroker, broker, controller, got ['zookeeper']"),
    ("bad unstable flag", spec(latestVersionUnstable=1), "FooRequest: latestVersionUnstable must be true or false, got 1"),
    # --- fields -------------------------------------------------------------------------
    ("unknown field key", spec([f(color="red")]), "FooRequest.fields[0]: unknown key 'color' in field"),
    ("bad field name", spec([f(name="1st")]), "FooRequest.fields[0]: field name must match [A-Za-z][A-Za-z0-9]*, got '1st'"),
    ("missing versions", spec([{"name": "Bar", "type": "int32"}]), "FooRequest.Bar: missing required key 'versions'"),
    ("bad field versions", spec([f(versions="x+")]), "FooRequest.Bar: versions: bad version range 'x+' (expected none, N, N-M or N+)"),
    ("unknown type", spec([f(type="int128")]), "FooRequest.Bar: unknown type 'int128'"),
    ("nested arrays", spec([f(type="[][]int32")]), "FooRequest.Bar: nested arrays are not allowed ([][]int32)"),
    ("fields on a primitive", spec([f(fields=[])]), "FooRequest.Bar: a field of type int32 cannot have fields"),
    ("unknown struct", spec([f(type="[]Missing")]), "FooRequest.Bar: struct type 'Missing' has no fields and no commonStruct of that name"),
    ("struct defined twice", spec([f("A", "[]Foo", fields=[]), f("B", "[]Foo", fields=[])]), "FooRequest.B: struct 'Foo' is defined twice"),
    ("inline struct shadows common", spec([f("A", "Foo", fields=[])], commonStructs=[{"name": "Foo", "versions": "0+", "fields": []}]), "FooRequest.A: struct 'Foo' is defined twice"),
    ("common struct cycle", spec([f("A", "Foo")], commonStructs=[{"name": "Foo", "versions": "0+", "fields": [f("Self", "[]Foo")]}]), "FooRequest.commonStructs.Foo: common struct 'Foo' contains itself"),
    ("duplicate field name", spec([f(), f()]), "FooRequest.Bar: field name 'Bar' is used twice in one struct"),
    ("nullable uuid", spec([f(type="uuid", nullableVersions="0+")]), "FooRequest.Bar: nullableVersions: type uuid cannot be nullable"),
    ("nullable int", spec([f(nullableVersions="0+")]), "FooRequest.Bar: nullableVersions: type int32 cannot be nullable"),
    ("bad ignorable", spec([f(ignorable="yes")]), "FooRequest.Bar: ignorable must be true or false, got 'yes'"),
    ("bad about", spec([f(about=3)]), "FooRequest.Bar: about must be a string, got 3"),
    ("unknown entityType", spec([f(entityType="clusterId")]), "FooRequest.Bar: unknown entityType 'clusterId'"),
    ("entityType mismatch", spec([f(entityType="topicName")]), "FooRequest.Bar: entityType topicName needs type string or []string, not int32"),
    ("zeroCopy on string", spec([f(type="string", zeroCopy=True)]), "FooRequest.Bar: zeroCopy is only allowed on bytes fields"),
    ("flexible override on int", spec([f(flexibleVersions="none")]), "FooRequest.Bar: a flexibleVersions override is only allowed on string and bytes fields"),
    # --- tags ---------------------------------------------------------------------------
    ("tag without taggedVersions", spec([f(tag=0)]), "FooRequest.Bar: a tag needs taggedVersions"),
    ("taggedVersions without tag", spec([f(taggedVersions="2+")]), "FooRequest.Bar: taggedVersions without a tag"),
    ("negative tag", spec([f(tag=-1, taggedVersions="2+")]), "FooRequest.Bar: tag must be an integer 0-2147483647, got -1"),
    ("non-numeric tag", spec([f(tag="x", taggedVersions="2+")]), "FooRequest.Bar: tag must be an integer 0-2147483647, got 'x'"),
    ("closed taggedVersions", spec([f(tag=0, taggedVersions="2-3")]), "FooRequest.Bar: taggedVersions must be open-ended (N+), got 2-3"),
    ("taggedVersions outside versions", spec([f(versions="3+", tag=0, taggedVersions="2+")]), "FooRequest.Bar: taggedVersions 2+ reach outside versions 3+"),
    ("taggedVersions outside flexible", spec([f(tag=0, taggedVersions="1+")]), "FooRequest.Bar: taggedVersions 1+ reach outside flexibleVersions 2+"),
    ("tag used twice", spec([f("A", tag=0, taggedVersions="2+"), f("B", tag=0, taggedVersions="2+")]), "FooRequest.B: tag 0 is used twice in one struct (also by A)"),
    ("tags with a gap", spec([f("A", tag=0, taggedVersions="2+"), f("B", tag=2, taggedVersions="2+")]), "FooRequest: tags must run 0, 1, 2, ... without gaps, got [0, 2]"),
    ("tagged but not flexible by override", spec([f(type="string", tag=0, taggedVersions="2+", flexibleVersions="none")]), "FooRequest.Bar: taggedVersions 2+ reach outside flexibleVersions none"),
    ("tag in non-flexible spec", spec([f(tag=0, taggedVersions="2+")], flexibleVersions="none"), "FooRequest.Bar: a tagged field needs flexible versions, and the message has none"),
    ("tagged mapKey", spec([f(tag=0, taggedVersions="2+", mapKey=True)]), "FooRequest.Bar: a tagged field cannot be a mapKey"),
    ("partly nullable tagged", spec([f(type="string", tag=0, taggedVersions="2+", nullableVersions="3+")]), "FooRequest.Bar: nullableVersions 3+ must cover all of taggedVersions 2+ or none of them"),
    # --- defaults -----------------------------------------------------------------------
    ("int16 default too big", spec([f(type="int16", default="40000")]), "FooRequest.Bar: default '40000' does not fit type int16"),
    ("int8 hex too big", spec([f(type="int8", default="0x80")]), "FooRequest.Bar: default '0x80' does not fit type int8"),
    ("signed hex", spec([f(default="-0x10")]), "FooRequest.Bar: default '-0x10' does not fit type int32"),
    ("upper-case hex prefix", spec([f(default="0X10")]), "FooRequest.Bar: default '0X10' does not fit type int32"),
    ("padded int", spec([f(default=" 5")]), "FooRequest.Bar: default ' 5' does not fit type int32"),
    ("float nan", spec([f(type="float64", default="nan")]), "FooRequest.Bar: default 'nan' does not fit type float64"),
    ("uuid not url-safe", spec([f(type="uuid", default="H3KKO4NTRPaCWtEmm3vW7+")]), "FooRequest.Bar: default 'H3KKO4NTRPaCWtEmm3vW7+' does not fit type uuid"),
    ("bad octal", spec([f(default="09")]), "FooRequest.Bar: default '09' does not fit type int32"),
    ("uint16 negative", spec([f(type="uint16", default=-1)]), "FooRequest.Bar: default -1 does not fit type uint16"),
    ("int from float", spec([f(default=1.5)]), "FooRequest.Bar: default 1.5 does not fit type int32"),
    ("bool default", spec([f(type="bool", default="yes")]), "FooRequest.Bar: default 'yes' does not fit type bool"),
    ("float default", spec([f(type="float64", default="fast")]), "FooRequest.Bar: default 'fast' does not fit type float64"),
    ("uuid default", spec([f(type="uuid", default="AAAA")]), "FooRequest.Bar: default 'AAAA' does not fit type uuid"),
    ("bytes default", spec([f(type="bytes", default="abc")]), "FooRequest.Bar: default 'abc' does not fit type bytes"),
    ("array default", spec([f(type="[]int32", default="1")]), "FooRequest.Bar: default '1' does not fit type []int32 (only null is allowed)"),
    ("default object", spec([f(default=[1])]), "FooRequest.Bar: default must be a string, number, boolean or null, got [1]"),
    ("null default, not nullable", spec([f(type="string", default="null")]), 'FooRequest.Bar: a "null" default needs the field nullable in all its versions (0+)'),
    ("null default, partly nullable", spec([f(type="string", nullableVersions="1+", default="null")]), 'FooRequest.Bar: a "null" default needs the field nullable in all its versions (0+)'),
    # --- KIP-893 nullable structs -------------------------------------------------------------
    ("struct default not null", spec([f(type="Foo", nullableVersions="0+", default="x", fields=[])]), "FooRequest.Bar: default 'x' does not fit type Foo (only null is allowed)"),
    ("struct null default, not nullable", spec([f(type="Foo", default="null", fields=[])]), 'FooRequest.Bar: a "null" default needs the field nullable in all its versions (0+)'),
    # --- KIP-625 encodings --------------------------------------------------------------------
    ("encoding on string", spec([f(type="string", encoding="packed32")]), "FooRequest.Bar: encoding is only allowed on int16, int32 and int64 fields, not string"),
    ("encoding on uint16", spec([f(type="uint16", encoding="fixed16")]), "FooRequest.Bar: encoding is only allowed on int16, int32 and int64 fields, not uint16"),
    ("unknown encoding name", spec([f(encoding="unsigned32")]), "FooRequest.Bar: unknown encoding 'unsigned32' (expected (fixed|packed|upacked)(16|32|64))"),
    ("encoding too wide", spec([f(encoding="packed64")]), "FooRequest.Bar: encoding packed64 is wider than the field's type int32"),
    ("encoding gap", spec([f(encoding={"0-1": "fixed32", "3+": "upacked32"})]), "FooRequest.Bar: encoding version ranges (0-1, 3+) must together be exactly versions 0+"),
    ("encoding short", spec([f(encoding={"0-1": "fixed32"})]), "FooRequest.Bar: encoding version ranges (0-1) must together be exactly versions 0+"),
    ("encoding beyond versions", spec([f(versions="1+", encoding={"0+": "fixed32"})]), "FooRequest.Bar: encoding version ranges (0+) must together be exactly versions 1+"),
    ("encoding overlap", spec([f(encoding={"0-2": "fixed32", "2+": "packed32"})]), "FooRequest.Bar: encoding version ranges 0-2 and 2+ overlap"),
    ("encoding bad range", spec([f(encoding={"0-": "fixed32"})]), "FooRequest.Bar: encoding: bad version range '0-' (expected none, N, N-M or N+)"),
    ("encoding bad value", spec([f(encoding=32)]), "FooRequest.Bar: encoding must be a name or an object of version range to name, got 32"),
    # --- KIP-482 draft dialect ----------------------------------------------------------------
    ("optionalFields without versions", spec(optionalFields=[]), "FooRequest: optionalFields needs versionsWithOptional"),
    ("draft with flexibleVersions", spec(versionsWithOptional="3+"), "FooRequest: the optional-field draft dialect cannot have flexibleVersions"),
    ("draft tag not hex", spec(versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "string", "tag": 1}]), "FooRequest.A: optional field tag must be a hex string 0x0000-0x7fff, got 1"),
    ("draft tag twice", spec(versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "string", "tag": "0x01"}, {"name": "B", "type": "int8", "tag": "0x1"}]), "FooRequest.B: tag 1 is used twice in one struct (also by A)"),
    ("draft name twice", spec(versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "string", "tag": "0x01"}, {"name": "A", "type": "int8", "tag": "0x2"}]), "FooRequest.A: field name 'A' is used twice in one struct"),
    ("draft name of a field", spec([f("A")], versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "string", "tag": "0x01"}]), "FooRequest.A: field name 'A' is used twice in one struct"),
    ("draft nullable int", spec(versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "int8", "tag": "0x01", "nullable": True}]), "FooRequest.A: nullable: type int8 cannot be nullable"),
    ("draft unknown key", spec(versionsWithOptional="3+", flexibleVersions=None, optionalFields=[{"name": "A", "type": "int8", "tag": "0x01", "versions": "0+"}]), "FooRequest.optionalFields[0]: unknown key 'versions' in optional field"),
    ("draft outside valid", spec(versionsWithOptional="5+", flexibleVersions=None), "FooRequest: versionsWithOptional 5+ reach outside validVersions 0-3"),
    ("struct optionalFields in tagged dialect", spec([f(type="[]Foo", fields=[], optionalFields=[])]), "FooRequest.Bar: optionalFields belong to structs of the optional-field draft dialect"),
]


@pytest.mark.parametrize(("text", "message"), [(t, m) for _, t, m in BAD], ids=[i for i, _, _ in BAD])
def test_bad_spec(text: str, message: str) -> None:
    with pytest.raises(SpecError) as e:
        load_spec_text(text, "Foo.json")
    assert str(e.value) == f"Foo.json: {message}"
    assert e.value.file == "Foo.json"


def test_spec_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        load_spec_text("{", "x.json")
