"""Each compatibility rule broken on purpose in a copy of upstream specs: reported once, with
its message, versions, field path and rule; and the changes each rule allows, reported as
compatible. The specs are edited as JSON, so both sides pass the strict loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from arrowkafka.cli import main
from tests.conftest import SPEC_FOLDERS
from tests.evolution.conftest import MakePair, RunCompat, Specs, change_of, field, incompatible, spec_json

FEATURES = SPEC_FOLDERS["features"]  # our own specs of the features no upstream spec uses

# ---- messages and versions ------------------------------------------------------------------


def test_unchanged_specs_report_nothing(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["MetadataRequest", "MetadataResponse", "ApiVersionsResponse"])
    status, report = run_compat(old, new)
    assert status == 0
    assert report["compatible"] is True
    assert report["changes"] == []


def test_json_values_and_fixed_keys(make_pair: MakePair, run_compat: RunCompat) -> None:
    # JSON values, not their Python text ("None", "True"); every key on every change
    def edit(s: Specs) -> None:
        field(s["MetadataRequest"], "Topics").update(nullableVersions="2+")  # True -> False in v1
        s["MetadataRequest"]["latestVersionUnstable"] = True

    old, new = make_pair(["MetadataRequest"], edit)
    status, report = run_compat(old, new)
    assert status == 1
    keys = {"kind", "message", "versions", "version_list", "path", "compatible", "old", "new", "rule",
            "rule_source", "rule_text", "note"}  # fmt: skip
    assert all(set(c) == keys for c in report["changes"])
    nullability = change_of(report, "nullability-changed")
    assert (nullability["old"], nullability["new"], nullability["version_list"]) == (True, False, [1])
    flag = change_of(report, "latest-version-unstable-changed")
    assert (flag["old"], flag["new"], flag["rule"], flag["note"], flag["version_list"]) == (
        False, True, None, None, []
    )  # fmt: skip


def test_text_says_no_python_values(make_pair: MakePair, capsys: pytest.CaptureFixture[str]) -> None:
    def tag(s: Specs) -> None:
        field(s["ApiVersionsResponse"], "ThrottleTimeMs").update(tag=4, taggedVersions="4+")

    old, new = make_pair(["ApiVersionsResponse"], tag)
    assert main(["compat", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "tagged-changed (untagged -> 4)" in out
    assert "None" not in out and "True" not in out and "False" not in out


def test_api_key_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["MetadataRequest"], lambda s: s["MetadataRequest"].update(apiKey=99))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [("api-key-changed", "MetadataRequest", "", "MetadataRequest", "api-key")]
    change = change_of(report, "api-key-changed")
    assert (change["old"], change["new"], change["rule_source"]) == (3, 99, "Kafka checker")


def test_message_type_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["LeaderChangeMessage"], lambda s: s["LeaderChangeMessage"].update(type="metadata"))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("type-changed", "LeaderChangeMessage", "", "LeaderChangeMessage", "message-type")
    ]


def test_message_removed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["MetadataRequest", "ApiVersionsRequest"])
    (new / "ApiVersionsRequest.json").unlink()
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("message-removed", "ApiVersionsRequest", "0-4", "ApiVersionsRequest", "message-removed")
    ]
    # a partial NEW (a client's subset of the specs): not compared, not a removal
    status, report = run_compat(old, new, "--partial")
    assert status == 0
    assert report["summary"]["not_compared"] == ["ApiVersionsRequest"]


def test_message_added_and_renamed_are_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    def rename_and_add(s: Specs) -> None:
        s["MetadataRequest"]["name"] = "TopicMetadataRequest"  # same api key 3: a rename
        s["ApiVersionsRequest"] = spec_json("ApiVersionsRequest")

    old, new = make_pair(["MetadataRequest"], rename_and_add)
    status, report = run_compat(old, new)
    assert status == 0
    kinds = {(c["kind"], c["message"], c["old"], c["new"]) for c in report["changes"]}
    assert kinds == {
        ("message-renamed", "TopicMetadataRequest", "MetadataRequest", "TopicMetadataRequest"),
        ("message-added", "ApiVersionsRequest", "none", "request 0-4"),
    }


def test_highest_version_dropped(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["MetadataRequest"], lambda s: s["MetadataRequest"].update(validVersions="0-11"))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("highest-version-dropped", "MetadataRequest", "12", "MetadataRequest", "highest-version")
    ]


def test_lowest_version_rose(make_pair: MakePair, run_compat: RunCompat) -> None:
    def drop_old(s: Specs) -> None:
        s["MetadataRequest"].update(validVersions="2-12", deprecatedVersions="2-3")

    old, new = make_pair(["MetadataRequest"], drop_old)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("lowest-version-rose", "MetadataRequest", "0-1", "MetadataRequest", "lowest-version-rose")
    ]
    assert change_of(report, "lowest-version-rose")["rule_source"] == "README (KIP-97)"


def test_lowest_version_fell(make_pair: MakePair, run_compat: RunCompat) -> None:
    def old_from_2(s: Specs) -> None:
        s["MetadataRequest"].update(validVersions="2-12", deprecatedVersions="2-3")

    old, new = make_pair(["MetadataRequest"], edit_old=old_from_2)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("lowest-version-fell", "MetadataRequest", "0-1", "MetadataRequest", "lowest-version-fell")
    ]


def test_versions_added_and_latest_unstable(make_pair: MakePair, run_compat: RunCompat) -> None:
    def new_version(s: Specs) -> None:
        s["MetadataRequest"]["validVersions"] = "0-13"
        s["MetadataRequest"]["fields"].append({"name": "Extra", "type": "int32", "versions": "12+"})

    def unstable(s: Specs) -> None:
        s["MetadataRequest"]["latestVersionUnstable"] = True

    # an untagged field added to v12: incompatible while v12 is released ...
    old, new = make_pair(["MetadataRequest"], new_version)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("field-added", "MetadataRequest", "12", "MetadataRequest.Extra", "released-version")
    ]
    # ... and compatible when v12 was the unreleased latestVersionUnstable version
    old, new = make_pair(["MetadataRequest"], lambda s: (new_version(s), unstable(s)), edit_old=unstable)
    status, report = run_compat(old, new)
    assert status == 0
    kinds = {(c["kind"], c["versions"], c["path"]) for c in report["changes"]}
    assert kinds == {
        ("versions-added", "13", "MetadataRequest"),
        ("field-added", "12-13", "MetadataRequest.Extra"),
    }


def test_flexible_versions_shrink(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(["MetadataRequest"], lambda s: s["MetadataRequest"].update(flexibleVersions="10+"))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("flexible-versions-changed", "MetadataRequest", "9", "MetadataRequest", "flexible-versions")
    ]


def test_released_version_turned_flexible(make_pair: MakePair, run_compat: RunCompat) -> None:
    # Kafka's checker only asks that flexible versions grow ("8+" contains "9+"); v8 was
    # released inflexible, so its bytes change (KIP-482: never retroactively flexible)
    old, new = make_pair(["MetadataRequest"], lambda s: s["MetadataRequest"].update(flexibleVersions="8+"))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("flexible-versions-changed", "MetadataRequest", "8", "MetadataRequest", "flexible-versions")
    ]


# ---- fields -----------------------------------------------------------------------------------


def test_untagged_field_added_to_released_versions(make_pair: MakePair, run_compat: RunCompat) -> None:
    def add(s: Specs) -> None:
        field(s["MetadataResponse"], "Topics.Partitions")["fields"].append(
            {"name": "Extra", "type": "int32", "versions": "5+"}
        )

    old, new = make_pair(["MetadataResponse"], add)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        (
            "field-added",
            "MetadataResponse",
            "5-12",
            "MetadataResponse.Topics.Partitions.Extra",
            "released-version",
        )
    ]


def test_untagged_field_removed_from_released_versions(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: field(s["MetadataRequest"], "AllowAutoTopicCreation").update(versions="4-5"),
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        (
            "field-removed",
            "MetadataRequest",
            "6-12",
            "MetadataRequest.AllowAutoTopicCreation",
            "released-version",
        )
    ]


def test_tagged_field_added_and_removed_are_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    def add(s: Specs) -> None:
        s["MetadataRequest"]["fields"].append(
            {"name": "Hint", "type": "int32", "versions": "9+", "taggedVersions": "9+", "tag": 0}
        )

    old, new = make_pair(["MetadataRequest"], add)
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["versions"], c["path"]) for c in report["changes"]] == [
        ("field-added", "9-12", "MetadataRequest.Hint")
    ]
    old, new = make_pair(["MetadataRequest"], edit_old=add)  # and the other way
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["versions"], c["path"]) for c in report["changes"]] == [
        ("field-removed", "9-12", "MetadataRequest.Hint")
    ]


def test_fields_reordered(make_pair: MakePair, run_compat: RunCompat) -> None:
    def swap(s: Specs) -> None:
        fields = s["MetadataRequest"]["fields"]
        fields[2], fields[3] = fields[3], fields[2]

    old, new = make_pair(["MetadataRequest"], swap)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("fields-reordered", "MetadataRequest", "8-10", "MetadataRequest", "field-order")
    ]
    change = change_of(report, "fields-reordered")
    assert change["old"] == "Topics, AllowAutoTopicCreation, IncludeClusterAuthorizedOperations, " + (
        "IncludeTopicAuthorizedOperations"
    )


def test_field_renamed_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataResponse"], lambda s: field(s["MetadataResponse"], "Brokers.Port").update(name="PortNumber")
    )
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["path"], c["old"], c["new"]) for c in report["changes"]] == [
        ("field-renamed", "MetadataResponse.Brokers.PortNumber", "Port", "PortNumber")
    ]


def test_field_type_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataResponse"], lambda s: field(s["MetadataResponse"], "Brokers.Port").update(type="int64")
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("type-changed", "MetadataResponse", "0-12", "MetadataResponse.Brokers.Port", "field-type")
    ]


def test_array_of_primitives_boxed_in_a_struct(make_pair: MakePair, run_compat: RunCompat) -> None:
    # README: "an array of primitives may be changed to an array of structures containing the
    # same data"; in a flexible version each struct adds its tagged-field section, so only the
    # inflexible versions (MetadataResponse 0-8) keep their bytes
    def box(s: Specs) -> None:
        f = field(s["MetadataResponse"], "Topics.Partitions.ReplicaNodes")
        f["type"] = "[]ReplicaNode"
        f["fields"] = [{"name": "BrokerId", "type": "int32", "versions": "0+"}]
        del f["entityType"]

    old, new = make_pair(["MetadataResponse"], box)
    status, report = run_compat(old, new)
    assert status == 1
    path = "MetadataResponse.Topics.Partitions.ReplicaNodes"
    assert incompatible(report) == [("type-changed", "MetadataResponse", "9-12", path, "field-type")]
    fine = [(c["kind"], c["versions"]) for c in report["changes"] if c["compatible"] and c["path"] == path]
    assert ("type-changed", "0-8") in fine


def test_nullability_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataRequest"], lambda s: field(s["MetadataRequest"], "Topics").update(nullableVersions="2+")
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("nullability-changed", "MetadataRequest", "1", "MetadataRequest.Topics", "nullability")
    ]


def test_released_struct_turned_nullable(make_pair: MakePair, run_compat: RunCompat) -> None:
    # KIP-893: a nullable struct carries a marker byte, so a released one never turns nullable
    old, new = make_pair(
        ["FetchRequest"], lambda s: field(s["FetchRequest"], "ReplicaState").update(nullableVersions="15+")
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("nullability-changed", "FetchRequest", "15-17", "FetchRequest.ReplicaState", "nullable-struct")
    ]
    assert change_of(report, "nullability-changed")["rule_source"] == "KIP-893"


def test_default_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: field(s["MetadataRequest"], "AllowAutoTopicCreation").update(default="false"),
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("default-changed", "MetadataRequest", "4-12", "MetadataRequest.AllowAutoTopicCreation", "default")
    ]
    change = change_of(report, "default-changed")
    assert (change["old"], change["new"]) == ('"true"', '"false"')


def test_default_spelled_otherwise_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataResponse"], lambda s: field(s["MetadataResponse"], "Brokers.Port").update(default="0x0")
    )
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["path"], c["old"], c["new"]) for c in report["changes"]] == [
        ("default-spelling-changed", "MetadataResponse.Brokers.Port", "implicit 0", '"0x0"')
    ]


def test_tag_reused(make_pair: MakePair, run_compat: RunCompat) -> None:
    # tag 3 given to another field of another wire type (a rename keeps it: see below)
    def reuse(s: Specs) -> None:
        fields = s["ApiVersionsResponse"]["fields"]
        zk = next(f for f in fields if f["name"] == "ZkMigrationReady")
        zk.update(name="ShinyNewFlag", type="int32", default="0")

    old, new = make_pair(["ApiVersionsResponse"], reuse)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("tag-reused", "ApiVersionsResponse", "3-4", "ApiVersionsResponse.ShinyNewFlag", "tag-reused")
    ]
    change = next(c for c in report["changes"] if c["kind"] == "tag-reused")
    assert (change["old"], change["new"]) == ("tag 3 = ZkMigrationReady", "tag 3 = ShinyNewFlag")


def test_tag_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    def retag(s: Specs) -> None:
        field(s["ApiVersionsResponse"], "ZkMigrationReady")["tag"] = 4
        s["ApiVersionsResponse"]["fields"].append(
            {"name": "Filler", "type": "int8", "versions": "3+", "taggedVersions": "3+", "tag": 3}
        )

    old, new = make_pair(["ApiVersionsResponse"], retag)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("tag-reused", "ApiVersionsResponse", "3-4", "ApiVersionsResponse.Filler", "tag-reused"),
        ("tag-changed", "ApiVersionsResponse", "3-4", "ApiVersionsResponse.ZkMigrationReady", "tag-changed"),
    ]


def test_field_turned_tagged_in_released_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    def tag(s: Specs) -> None:
        field(s["ApiVersionsResponse"], "ThrottleTimeMs").update(tag=4, taggedVersions="4+")

    old, new = make_pair(["ApiVersionsResponse"], tag)
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("tagged-changed", "ApiVersionsResponse", "4", "ApiVersionsResponse.ThrottleTimeMs", "tagged")
    ]


def test_field_flexibility_changed(make_pair: MakePair, run_compat: RunCompat) -> None:
    # RequestHeader.ClientId stays a classic string in flexible versions (its own
    # "flexibleVersions": "none"); making it compact changes header v2
    old, new = make_pair(
        ["RequestHeader"], lambda s: field(s["RequestHeader"], "ClientId").update(flexibleVersions="2+")
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("field-flexibility-changed", "RequestHeader", "2", "RequestHeader.ClientId", "field-flexibility")
    ]


def test_encoding_changed_in_released_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    old, new = make_pair(
        ["MetadataResponse"],
        lambda s: field(s["MetadataResponse"], "Topics.Partitions.LeaderId").update(encoding="upacked32"),
    )
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        (
            "encoding-changed",
            "MetadataResponse",
            "0-12",
            "MetadataResponse.Topics.Partitions.LeaderId",
            "encoding",
        )
    ]
    assert change_of(report, "encoding-changed")["rule_source"] == "KIP-625"


def test_kip625_encoding_in_a_new_version_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    # KIP-625's own example: int32 widened to int64, fixed32 kept in the released versions
    def widen(s: Specs) -> None:
        s["MetadataResponse"]["validVersions"] = "0-13"
        f = field(s["MetadataResponse"], "Topics.Partitions.LeaderEpoch")
        f.update(type="int64", encoding={"7-12": "fixed32", "13+": "packed64"})

    old, new = make_pair(["MetadataResponse"], widen)
    status, report = run_compat(old, new)
    assert status == 0
    got = {(c["kind"], c["versions"], c["path"]) for c in report["changes"]}
    path = "MetadataResponse.Topics.Partitions.LeaderEpoch"
    assert got == {
        ("versions-added", "13", "MetadataResponse"),
        ("type-changed", "7-12", path),
        ("encoding-changed", "", path),
    }


def test_struct_type_renamed_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    # the struct's name is not on the wire (Kafka's checker compares type names as text)
    old, new = make_pair(
        ["MetadataResponse"], lambda s: field(s["MetadataResponse"], "Brokers").update(type="[]Broker")
    )
    status, report = run_compat(old, new)
    assert status == 0
    change = change_of(report, "type-changed")
    assert (change["versions"], change["path"], change["old"], change["new"]) == (
        "0-12",
        "MetadataResponse.Brokers",
        "[]MetadataResponseBroker",
        "[]Broker",
    )
    assert change["note"].startswith("struct renamed")


def test_unstable_latest_version_dropped_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    def unstable(s: Specs) -> None:
        s["MetadataRequest"]["latestVersionUnstable"] = True

    old, new = make_pair(
        ["MetadataRequest", "MetadataResponse"],
        lambda s: [s[n].update(validVersions="0-11") for n in s],
        edit_old=unstable,
    )
    status, report = run_compat(old, new)
    assert status == 0  # v12 of both was never released: the request says so for its response
    dropped = [
        (c["message"], c["versions"]) for c in report["changes"] if c["kind"] == "highest-version-dropped"
    ]
    assert dropped == [("MetadataRequest", "12"), ("MetadataResponse", "12")]


def test_draft_dialect_optional_fields(tmp_path: Path, run_compat: RunCompat) -> None:
    # the KIP-482 draft's optional fields are judged as tagged fields: one may leave, its tag
    # stays taken
    text = (FEATURES / "OptionalFieldsResponse.json").read_text()
    old = tmp_path / "old"
    new = tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "OptionalFieldsResponse.json").write_text(text)
    # another field, of another wire type, on TraceId's tag
    trace = '"name": "TraceId", "type": "int64"'
    (new / "OptionalFieldsResponse.json").write_text(text.replace(trace, '"name": "SpanId", "type": "int32"'))
    status, report = run_compat(old, new)
    assert status == 1
    assert incompatible(report) == [
        ("tag-reused", "OptionalFieldsResponse", "1-2", "OptionalFieldsResponse.SpanId", "tag-reused")
    ]
    removed = change_of(report, "field-removed")
    assert (removed["path"], removed["versions"], removed["compatible"]) == (
        "OptionalFieldsResponse.TraceId",
        "1-2",
        True,
    )
    # the same tag and wire type under another name: a rename
    (new / "OptionalFieldsResponse.json").write_text(text.replace('"name": "TraceId"', '"name": "SpanId"'))
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["old"], c["new"]) for c in report["changes"]] == [
        ("field-renamed", "TraceId", "SpanId")
    ]


# ---- changes confined to unreleased versions: compatible, whatever the rule ----------------------


def unstable_v13(s: Specs, *extra: dict[str, object]) -> None:
    """MetadataRequest with an unreleased v13 (latestVersionUnstable) and fields only in it."""
    s["MetadataRequest"].update(validVersions="0-13", latestVersionUnstable=True)
    s["MetadataRequest"]["fields"].extend(extra)


def only_compatible(run_compat: RunCompat, old: Path, new: Path, kind: str) -> dict[str, object]:
    status, report = run_compat(old, new)
    assert status == 0, incompatible(report)
    change = change_of(report, kind)
    assert (change["versions"], change["compatible"]) == ("13", True)
    return change


def test_default_changed_in_unreleased_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    extra = {"name": "Extra", "type": "int32", "versions": "13+", "default": 5}
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: unstable_v13(s, {**extra, "default": 7}),
        edit_old=lambda s: unstable_v13(s, extra),
    )
    change = only_compatible(run_compat, old, new, "default-changed")
    assert (change["old"], change["new"]) == ('"5"', '"7"')


def test_tag_reused_in_unreleased_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    hint = {"name": "Hint", "type": "int32", "versions": "13+", "taggedVersions": "13+", "tag": 0}
    other = {**hint, "name": "Other", "type": "string"}  # another wire type: not a rename
    old, new = make_pair(
        ["MetadataRequest"], lambda s: unstable_v13(s, other), edit_old=lambda s: unstable_v13(s, hint)
    )
    change = only_compatible(run_compat, old, new, "tag-reused")
    assert (change["old"], change["new"]) == ("tag 0 = Hint", "tag 0 = Other")


def test_tag_changed_in_unreleased_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    hint = {"name": "Hint", "type": "int32", "versions": "13+", "taggedVersions": "13+", "tag": 0}
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: unstable_v13(s, {**hint, "tag": 1}, {**hint, "name": "Filler", "type": "string"}),
        edit_old=lambda s: unstable_v13(s, hint),
    )
    change = only_compatible(run_compat, old, new, "tag-changed")
    assert (change["old"], change["new"]) == (0, 1)


def test_flexible_versions_shrink_in_unreleased_version(make_pair: MakePair, run_compat: RunCompat) -> None:
    # only the unreleased v13 was flexible; now none is
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: (unstable_v13(s), s["MetadataRequest"].update(flexibleVersions="none")),
        edit_old=lambda s: (unstable_v13(s), s["MetadataRequest"].update(flexibleVersions="13+")),
    )
    change = only_compatible(run_compat, old, new, "flexible-versions-changed")
    assert (change["old"], change["new"]) == ("13+", "none")


def test_the_reviewed_example_in_text(make_pair: MakePair, capsys: pytest.CaptureFixture[str]) -> None:
    extra = {"name": "Extra", "type": "int32", "versions": "13+", "default": 5}
    old, new = make_pair(
        ["MetadataRequest"],
        lambda s: unstable_v13(s, {**extra, "default": 7}),
        edit_old=lambda s: unstable_v13(s, extra),
    )
    assert main(["compat", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        'compatible    MetadataRequest v13  MetadataRequest.Extra: default-changed ("5" -> "7")'
    )
    assert "INCOMPATIBLE" not in out


# ---- tagged fields: a rename keeps its tag and wire type ------------------------------------------


def test_tagged_field_renamed_is_compatible(make_pair: MakePair, run_compat: RunCompat) -> None:
    # Kafka's checker pairs fields by position and accepts it: the tag and its bytes stay
    def rename(s: Specs) -> None:
        field(s["ApiVersionsResponse"], "ZkMigrationReady").update(name="MigrationReady")

    old, new = make_pair(["ApiVersionsResponse"], rename)
    status, report = run_compat(old, new)
    assert status == 0
    assert [(c["kind"], c["path"], c["old"], c["new"]) for c in report["changes"]] == [
        ("field-renamed", "ApiVersionsResponse.MigrationReady", "ZkMigrationReady", "MigrationReady")
    ]
