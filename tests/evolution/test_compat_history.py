"""``compat`` on Kafka's own history: the 3.0.0 specs (2021), trunk of 2024-10-25 (the vendored
set) and a Kafka 4.x client subset (kafka-python's), every pair in order. Nothing is reported
incompatible where Kafka made no incompatible change; where Kafka broke a rule on purpose,
every finding is listed here with the reason, and the report must hold exactly those."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from arrowkafka.cli import main
from arrowkafka.evolution.compat import Report, compare
from arrowkafka.evolution.sources import load_folder_side
from arrowkafka.ir import MessageSpec
from tests.conftest import SHARED

OLD = SHARED / "kafka-specs-old" / "3.0.0"
TRUNK = SHARED / "kafka-specs"
NEWER = SHARED / "kafka-specs-newer"

Sides = dict[str, Mapping[str, MessageSpec]]

# KIP-903: FetchRequest v15 moved the replica's id into the new ReplicaState
# struct, so ReplicaId ends at v14, and its default became -1 (a consumer's id) so that a
# request of a version without the field reads as a consumer's. The README and Kafka's checker
# forbid changing a default; Kafka chose to. In the versions both sides share, the field is
# untagged and always written, so their bytes do not change.
KIP_903 = ("default-changed", "FetchRequest", "FetchRequest.ReplicaId", "default")

# KIP-896 (Kafka 4.0) removed the protocol versions older than those Kafka 2.1 supports: the
# lowest valid version rose for these APIs, requests and responses alike, and for the request
# header (v0, which only ControlledShutdown v0 used).
# The README (after KIP-97) forbids raising the lowest version without a KIP; KIP-896 is that
# KIP. Kafka's own checker does not flag these: it refuses only a lowest version that falls.
KIP_896 = {
    "AlterReplicaLogDirs": "0",
    "CreateAcls": "0",
    "CreateTopics": "0-1",
    "DeleteAcls": "0",
    "DeleteTopics": "0",
    "DescribeAcls": "0",
    "DescribeConfigs": "0",
    "DescribeLogDirs": "0",
    "Fetch": "0-3",
    "ListOffsets": "0",
    "OffsetCommit": "0-1",
    "OffsetFetch": "0",
    "OffsetForLeaderEpoch": "0-1",
    "Produce": "0-2",
    "WriteTxnMarkers": "0",
}


def kip_896() -> set[tuple[str, str, str, str, str]]:
    out = {("lowest-version-rose", "RequestHeader", "0", "RequestHeader", "lowest-version-rose")}
    for api, versions in KIP_896.items():
        for side in ("Request", "Response"):
            name = api + side
            out.add(("lowest-version-rose", name, versions, name, "lowest-version-rose"))
    return out


def found(report: Report) -> set[tuple[str, str, str, str, str]]:
    return {(c.kind, c.message, c.versions, c.path, c.rule) for c in report.incompatible}


@pytest.fixture(scope="module")
def sides() -> Sides:
    return {"3.0.0": load_folder_side(OLD), "trunk": load_folder_side(TRUNK), "4.x": load_folder_side(NEWER)}


def test_3_0_0_to_trunk(sides: Sides) -> None:
    report = compare(sides["3.0.0"], sides["trunk"])
    kind, message, path, rule = KIP_903
    assert found(report) == {(kind, message, "0-12", path, rule)}
    kinds = {(c.kind, c.message, c.old, c.new) for c in report.changes}
    # AlterIsr became AlterPartition: the same api key 56, so a rename, compared field
    # by field (its renamed fields sit where the old ones did)
    assert ("message-renamed", "AlterPartitionRequest", "AlterIsrRequest", "AlterPartitionRequest") in kinds
    assert ("field-renamed", "AlterPartitionRequest", "CurrentIsrVersion", "PartitionEpoch") in kinds
    # KIP-890 renamed AddPartitionsToTxn's v0-3 fields and added v4+ ones: compatible
    assert ("field-renamed", "AddPartitionsToTxnRequest", "Topics", "V3AndBelowTopics") in kinds
    # a tagged field added to a released flexible version (ApiVersionsResponse v3, KIP-866)
    assert any(
        c.kind == "field-added" and c.path == "ApiVersionsResponse.ZkMigrationReady" and c.versions == "3"
        for c in report.changes
    )
    # a struct type's typo fixed: the same bytes (Kafka's checker, comparing type names, would refuse)
    assert (
        "type-changed",
        "CreateTopicsRequest",
        "[]CreateableTopicConfig",
        "[]CreatableTopicConfig",
    ) in kinds
    assert len([c for c in report.changes if c.kind == "message-added"]) == 114
    assert not report.not_compared


def test_trunk_to_4x(sides: Sides) -> None:
    # the 4.x set is a client's subset (52 APIs): --partial, so a message it lacks is not a removal
    report = compare(sides["trunk"], sides["4.x"], partial=True)
    assert found(report) == kip_896()
    assert len(report.not_compared) == 150
    # without --partial, each of those is reported removed: incompatibly, but for the 18 share
    # group messages (KIP-932), whose only version was unreleased (latestVersionUnstable)
    whole = compare(sides["trunk"], sides["4.x"])
    removed = {c.message for c in whole.changes if c.kind == "message-removed"}
    assert removed == set(report.not_compared)
    # (a message with released versions and an unstable latest one: incompatible in the former)
    unreleased = removed - {
        c.message for c in whole.changes if c.kind == "message-removed" and not c.compatible
    }
    assert len(unreleased) == 18
    assert all(m.startswith("Share") or "ShareGroupState" in m for m in unreleased)
    # ListClientMetricsResources became ListConfigResources: the same api key 74
    kinds = {(c.kind, c.old, c.new) for c in report.changes}
    assert ("message-renamed", "ListClientMetricsResourcesRequest", "ListConfigResourcesRequest") in kinds


def test_3_0_0_to_4x(sides: Sides) -> None:
    report = compare(sides["3.0.0"], sides["4.x"], partial=True)
    kind, message, path, rule = KIP_903
    # FetchRequest 0-3 are gone (KIP-896), so the default change concerns 4-12
    assert found(report) == kip_896() | {(kind, message, "4-12", path, rule)}


def test_cli_on_history(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", str(OLD), str(TRUNK), "--incompatible-only"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("INCOMPATIBLE  FetchRequest v0-12  FetchRequest.ReplicaId: default-changed")
    assert "[default: README, Kafka checker: a field's default never changes]" in out[0]
    assert out[-1] == (
        f"350 changes from {OLD} (144 messages) to {TRUNK} (258 messages): 1 incompatible, in 1 message"
    )
    assert main(["compat", str(TRUNK), str(TRUNK), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []


def test_json_lists_incompatible_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compat", str(OLD), str(TRUNK), "--json", "--incompatible-only"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["compatible"] is False
    assert report["summary"]["changes"] == 350 and report["summary"]["incompatible"] == 1
    assert [c["path"] for c in report["changes"]] == ["FetchRequest.ReplicaId"]
    (change,) = report["changes"]
    assert change == {
        "kind": "default-changed",
        "message": "FetchRequest",
        "versions": "0-12",
        "version_list": list(range(13)),
        "path": "FetchRequest.ReplicaId",
        "compatible": False,
        "old": "implicit 0",
        "new": '"-1"',
        "rule": "default",
        "rule_source": "README, Kafka checker",
        "rule_text": "a field's default never changes",
        "note": "untagged in every shared version (their bytes keep it); where absent, peers assume another",
    }
