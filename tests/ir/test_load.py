"""Every real spec loads; the spec language's features land in the IR as they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import arrowkafka as ak
from arrowkafka.ir import (
    DIALECT_DRAFT,
    STRUCT_DEFAULTS,
    load_folder,
    load_spec_text,
    parse_versions,
)
from arrowkafka.ir.jsonc import strip_comments
from tests.conftest import ROOT, SPEC_FOLDERS

# (files, messages, (message, version) pairs) in each spec folder.
EXPECTED = {
    "vendored": (258, 258, 783),
    "old-3.0.0": (144, 144, 513),
    "newer": (108, 108, 490),
    "features": (3, 3, 12),
}


@pytest.mark.parametrize("folder", sorted(SPEC_FOLDERS))
def test_every_spec_loads(folder: str) -> None:
    path = SPEC_FOLDERS[folder]
    messages = load_folder(path)
    files = list(path.rglob("*.json"))
    pairs = sum(len(m.valid_versions) for m in messages.values())
    assert (len(files), len(messages), pairs) == EXPECTED[folder]


def test_vendored_specs_are_byte_identical(shared: Path) -> None:
    ours = sorted(p.relative_to(ROOT / "specs") for p in (ROOT / "specs").rglob("*.json"))
    theirs = sorted(p.relative_to(shared / "kafka-specs") for p in (shared / "kafka-specs").rglob("*.json"))
    assert ours == theirs
    for rel in ours:
        assert (ROOT / "specs" / rel).read_bytes() == (shared / "kafka-specs" / rel).read_bytes(), rel
    for name in ("LICENSE", "NOTICE", "SOURCE.md"):
        assert (ROOT / "specs" / name).is_file()


def test_load_specs_default_and_override() -> None:
    default = ak.load_specs()
    assert len(default) == 258 and sum(1 for _ in default.pairs()) == 783
    assert default is ak.load_specs()  # loaded once
    mixed = ak.load_specs(SPEC_FOLDERS["old-3.0.0"], SPEC_FOLDERS["newer"])
    # FetchRequest is in both: the later folder wins (the newer one goes to v17+).
    assert mixed["FetchRequest"].source.startswith(str(SPEC_FOLDERS["newer"]))
    assert str(mixed["FetchRequest"].valid_versions) == str(
        load_folder(SPEC_FOLDERS["newer"])["FetchRequest"].valid_versions
    )
    # A message only in the older folder is still there.
    only_old = set(load_folder(SPEC_FOLDERS["old-3.0.0"])) - set(load_folder(SPEC_FOLDERS["newer"]))
    assert only_old and only_old <= set(mixed)
    assert mixed.revision != default.revision


def test_unknown_message_name_suggests() -> None:
    with pytest.raises(KeyError, match="no message spec named 'FetchRequst'; did you mean FetchRequest"):
        ak.load_specs()["FetchRequst"]


def test_comments_are_stripped_but_not_inside_strings() -> None:
    text = '{"a": "http://x/*y*/", // line\n /* block\n */ "b": 1}'
    assert json.loads(strip_comments(text)) == {"a": "http://x/*y*/", "b": 1}
    assert strip_comments(text).count("\n") == text.count("\n")


def test_block_comments_in_upstream_spec() -> None:
    spec = ak.load_specs()["SubscriptionInfoData"]
    assert spec.type == "data"


def test_real_spec_features() -> None:
    specs = ak.load_specs()
    header = specs["RequestHeader"]
    client_id = next(f for f in header.fields if f.name == "ClientId")
    assert client_id.flexible_versions is not None and client_id.flexible_versions.empty
    assert client_id.nullable_in(1) and client_id.versions == parse_versions("1+")

    # KIP-893 nullable tagged struct. Its `"default": null` is JSON null, which Kafka's
    # generator (Jackson) reads as no default: an absent tag means a struct of defaults.
    meta = specs["ConsumerGroupMemberMetadataValue"]
    classic = next(f for f in meta.fields if f.name == "ClassicMemberMetadata")
    assert classic.kind == "struct" and classic.default is STRUCT_DEFAULTS and classic.tag == 0
    assert classic.default_text is None and classic.nullable_in(0)
    cursor = next(f for f in specs["DescribeTopicPartitionsRequest"].fields if f.name == "Cursor")
    assert cursor.default is None and cursor.default_text == "null"
    assert classic.struct is not None and [x.name for x in classic.struct.fields][:2] == [
        "SessionTimeoutMs",
        "SupportedProtocols",
    ]
    # A tag written as a JSON string.
    reg = specs["RegisterBrokerRecord"]
    assert next(f for f in reg.fields if f.name == "LogDirs").tag == 0
    # A commonStruct resolves to one Struct object wherever it is used.
    leader = specs["LeaderChangeMessage"]
    voters, granting = (f for f in leader.fields if f.name in ("Voters", "GrantingVoters"))
    assert voters.struct is granting.struct is leader.common_structs[0]
    # Hex default and implicit defaults.
    example = specs["SimpleExampleMessage"]
    by_name = {f.name: f for f in example.fields}
    assert by_name["myUint16"].default == 33000
    assert by_name["myFloat64"].default == 12.34
    assert isinstance(by_name["myStruct"].default, type(STRUCT_DEFAULTS))
    assert by_name["taggedUuid"].default == bytes.fromhex("1f728a3b835344f6825ad1269b7bd6ec")
    assert by_name["taggedLong"].default == 0x0CAFCACAFCACAFCA


@pytest.mark.parametrize(
    ("type_", "default", "value"),
    [
        ("int32", "0x7fffffff", 2**31 - 1),
        ("int32", "-16", -16),
        ("int32", "017", 15),
        ("int32", -1, -1),
        ("int64", "9223372036854775807", 2**63 - 1),
        ("int8", "-128", -128),
        ("uint32", "4294967295", 2**32 - 1),
        ("bool", "TRUE", True),
        ("bool", False, False),
        ("float64", "1e3", 1000.0),
        ("float64", 2, 2.0),
        ("string", "hello", "hello"),
        ("string", "", ""),
        ("uuid", "AAAAAAAAAAAAAAAAAAAAAA", bytes(16)),
        ("bytes", "", b""),
    ],
)
def test_defaults(type_: str, default: object, value: object) -> None:
    text = json.dumps(
        {
            "type": "data",
            "name": "D",
            "validVersions": "0",
            "flexibleVersions": "none",
            "fields": [{"name": "X", "type": type_, "versions": "0+", "default": default}],
        }
    )
    (field,) = load_spec_text(text).fields
    assert field.default == value and type(field.default) is type(value)


def test_implicit_defaults() -> None:
    text = json.dumps(
        {
            "type": "data",
            "name": "D",
            "validVersions": "0",
            "flexibleVersions": "none",
            "fields": [
                {"name": n, "type": t, "versions": "0+"}
                for n, t in [
                    ("A", "int16"),
                    ("B", "bool"),
                    ("C", "string"),
                    ("E", "records"),
                    ("F", "[]int32"),
                    ("G", "uuid"),
                    ("H", "float64"),
                    ("I", "bytes"),
                ]
            ],
        }
    )
    defaults = [f.default for f in load_spec_text(text).fields]
    assert defaults == [0, False, "", None, [], bytes(16), 0.0, b""]


def test_kip625_encodings() -> None:
    text = json.dumps(
        {
            "type": "data",
            "name": "D",
            "validVersions": "0-5",
            "flexibleVersions": "0+",
            "fields": [
                {
                    "name": "Id",
                    "type": "int64",
                    "versions": "0+",
                    "encoding": {"0-1": "fixed32", "2-3": "fixed64", "4+": "packed64"},
                },
                {"name": "Count", "type": "int32", "versions": "1+", "encoding": "upacked32"},
                {"name": "Plain", "type": "int16", "versions": "0+"},
            ],
        }
    )
    id_, count, plain = load_spec_text(text).fields
    assert [id_.encoding_in(v) for v in range(6)] == ["fixed32"] * 2 + ["fixed64"] * 2 + ["packed64"] * 2
    assert (id_.encodings[0].kind, id_.encodings[0].bits) == ("fixed", 32)
    assert count.encoding_in(3) == "upacked32" and plain.encoding_in(0) == "fixed16"


DRAFT = """
// The KIP-482 draft dialect: an optional-field buffer at the start of each struct.
{
  "apiKey": 9000, "type": "response", "name": "FooResponse",
  "validVersions": "0-9", "versionsWithOptional": "9+",
  "optionalFields": [
    { "name": "UserAgent", "type": "string", "nullable": true, "tag": "0x0001",
      "about": "The user-agent that sent this request." }
  ],
  "fields": [
    { "name": "Foos", "type": "[]Foo", "versions": "0+", "about": "Each foo.",
      "optionalFields": [
        { "name": "Bar", "type": "string", "nullable": false, "tag": "0x0001",
          "default": "hello world", "about": "The bar associated with this foo, if any." }
      ],
      "fields": [
        { "name": "Baz", "type": "int16", "versions": "0+", "about": "The baz of this foo." }
      ]}
  ]
}
"""


def test_draft_dialect() -> None:
    spec = load_spec_text(DRAFT, "FooResponse.json")
    assert spec.dialect == DIALECT_DRAFT
    assert spec.optional_versions == parse_versions("9")
    assert spec.has_optional_buffer(9) and not spec.has_optional_buffer(8)
    assert not spec.is_flexible(9)
    (agent,) = spec.root.optional_fields
    assert (agent.tag, agent.optional, agent.nullable_in(9), agent.present_in(8)) == (1, True, True, False)
    foos = spec.fields[0]
    assert foos.struct is not None
    (bar,) = foos.struct.optional_fields
    assert (bar.default, bar.nullable_in(9)) == ("hello world", False)


def test_a_folder_of_specs_skips_hidden_folders(tmp_path: Path) -> None:
    """A project folder given as the specs: its .venv and .git hold JSON that is no spec."""
    source = ROOT / "specs" / "clients" / "src" / "main" / "resources" / "common" / "message"
    (tmp_path / "message").mkdir()
    (tmp_path / "message" / "MetadataRequest.json").write_bytes(
        (source / "MetadataRequest.json").read_bytes()
    )
    for hidden in (".venv/lib/site-packages/x.dist-info", ".git"):
        (tmp_path / hidden).mkdir(parents=True)
        (tmp_path / hidden / "direct_url.json").write_text('{"dir_info": {}}')
    assert list(ak.load_specs(tmp_path)) == ["MetadataRequest"]
