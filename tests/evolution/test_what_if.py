"""``what-if`` on the real captures: the unchanged specs give every body back byte for byte;
a KIP-625 proposal (varint encodings on MetadataResponse's integer fields, as KIP-625's own
example) gives sizes equal to two independent counts: the oracle's encoder (which shares no
code with the codec) and a count by hand of each varint's length; what a proposal cannot carry
is counted and named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowkafka as ak
from arrowkafka import oracle
from arrowkafka.api import SpecSet, vendored_specs_dir
from arrowkafka.cli import main
from arrowkafka.evolution.compat import compare
from arrowkafka.evolution.whatif import WhatIf, what_if, what_if_capture, what_if_outdir
from arrowkafka.ir.jsonc import parse_jsonc
from arrowkafka.traffic import group_frames
from tests.conftest import SHARED
from tests.evolution.conftest import field, spec_json, write
from tests.traffic.capwriters import load, tcp_of, write_pcap

CAPTURES = sorted((SHARED / "captures").glob("*.pcap"))
# the bodies the sending specs refuse in each capture (the same rejects `arrowkafka decode`
# reports): Tansu's MetadataRequest with 3 bytes after its last field (noida's ApiVersions v4
# responses read as v0 errors, as `decode` reads them and Kafka's clients do)
NOT_DECODED = {
    "kafka091_legacy.pcap": {},
    "noida_kafka_python.pcap": {},
    "tansu_confluent.pcap": {"MetadataRequest": 1},
}
# frames that are no message body: the legacy capture ends inside a frame
UNFRAMED = {"kafka091_legacy.pcap": {"Partial: capture end": 1}}

# KIP-625's example: MetadataResponse's partition data (and broker ids) as varints
ENCODINGS = {
    "ThrottleTimeMs": "upacked32",
    "Brokers.NodeId": "packed32",
    "Brokers.Port": "upacked32",
    "ControllerId": "packed32",
    "Topics.ErrorCode": "packed16",
    "Topics.Partitions.ErrorCode": "packed16",
    "Topics.Partitions.PartitionIndex": "upacked32",
    "Topics.Partitions.LeaderId": "packed32",
    "Topics.Partitions.LeaderEpoch": "packed32",
}


@pytest.fixture(scope="module")
def sent() -> SpecSet:
    return ak.load_specs()


def proposal(folder: Path, *, new_version: bool) -> SpecSet:
    """The vendored specs with MetadataResponse's encodings changed: in its released versions
    (``new_version=False``), or only in a new v13 (the compatible form)."""
    spec = spec_json("MetadataResponse")
    if new_version:
        spec["validVersions"] = "0-13"
    for path, name in ENCODINGS.items():
        f = field(spec, path)
        if new_version:
            lo = f["versions"].rstrip("+")
            width = "fixed16" if f["type"] == "int16" else "fixed32"
            f["encoding"] = {f"{lo}-12": width, "13+": name}
        else:
            f["encoding"] = name
    write(folder, {"MetadataResponse": spec})
    return ak.load_specs(vendored_specs_dir(), folder)


def uvarint_len(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def varint_size(value: int, encoding: str) -> int:
    bits = int(encoding[-2:])
    if encoding.startswith("packed"):  # zigzag
        value = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    return uvarint_len(value & ((1 << bits) - 1))


def hand_count(row: dict[str, Any], size: int) -> int:
    """A body's size once each integer of ENCODINGS is a varint instead of 2 or 4 bytes."""

    def values(node: Any, parts: list[str]) -> list[int]:
        if node is None:
            return []
        if isinstance(node, list):
            return [v for item in node for v in values(item, parts)]
        if not parts:
            return [node]
        key = "".join("_" + c.lower() if c.isupper() else c for c in parts[0]).lstrip("_")
        return values(node[key], parts[1:]) if key in node else []

    for path, encoding in ENCODINGS.items():
        for value in values(row, path.split(".")):
            size += varint_size(value, encoding) - int(encoding[-2:]) // 8
    return size


def metadata_bodies(capture: Path, sent: SpecSet) -> dict[int, list[bytes]]:
    frames = group_frames([str(capture)], sent)
    return {v: [f.body for f in items] for (d, m, v), items in frames.items() if m == "MetadataResponse"}


def group(report: WhatIf, message: str, version: int) -> Any:
    return next(g for g in report.groups if (g.message, g.version) == (message, version))


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_unchanged_specs_change_nothing(capture: Path, sent: SpecSet) -> None:
    # "after": the vendored specs loaded again, apart (as the command loads the proposal), so
    # nothing rests on the two sides being the same objects
    again = ak.load_specs(vendored_specs_dir())
    assert again["MetadataResponse"] is not sent["MetadataResponse"]
    report = what_if_capture([capture], sent, again, repeat=1)
    assert report.groups
    not_decoded = {g.message: g.not_decoded for g in report.groups if g.not_decoded}
    assert not_decoded == NOT_DECODED[capture.name]
    assert report.unframed_reasons == UNFRAMED.get(capture.name, {})
    assert report.cannot_carry == 0
    assert report.not_carried == sum(not_decoded.values()) + report.unframed
    for g in report.groups:
        assert g.cannot_carry == 0
        assert g.carried + g.not_decoded == g.messages
        assert g.identical == g.carried  # byte for byte
        assert g.resent_differently == 0
        assert g.bytes_after == g.bytes_before
        assert g.target_version == g.version
        if g.carried:
            assert g.delta["min"] == g.delta["max"] == 0
            assert all(t > 0 for t in g.seconds.values())
    assert report.bytes_out == report.bytes_in == capture_body_bytes(capture, sent)
    # and independently of what-if: each group's bodies as the frames hold them, decoded under
    # the sent specs and encoded under the copy, are the bodies as sent
    for (_, name, version), frames in group_frames([str(capture)], sent).items():
        bodies = [f.body for f in frames]
        batch, rejects = sent.decode(bodies, name, version, errors="null")
        bad = set(rejects["index"].to_pylist())
        keep = [i not in bad for i in range(len(bodies))]
        good = [b for b, k in zip(bodies, keep, strict=True) if k]
        assert again.encode(batch.filter(pa.array(keep)), name, version).to_pylist() == good
        # (noida's ApiVersions v4 bodies that decode only as v0 errors are in v0's group)
        assert sum(g.identical for g in report.groups if (g.message, g.version) == (name, version)) == len(
            good
        )


def test_unchanged_specs_by_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    capture = SHARED / "captures" / "noida_kafka_python.pcap"
    assert (
        main(["what-if", str(capture), "--specs", str(vendored_specs_dir()), "--json", "--repeat", "1"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["bytes_before"] == report["bytes_after"] == README_TABLE[capture.name][4]
    assert report["not_carried"] == report["cannot_carry"] == 0
    assert all(g["identical"] == g["carried"] == g["messages"] for g in report["groups"])


def capture_body_bytes(capture: Path, sent: SpecSet) -> int:
    return sum(len(f.body) for items in group_frames([str(capture)], sent).values() for f in items)


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_kip625_varints_in_released_versions(capture: Path, sent: SpecSet, tmp_path: Path) -> None:
    after = proposal(tmp_path / "proposal", new_version=False)
    report = what_if_capture([capture], sent, after, repeat=1)
    bodies = metadata_bodies(capture, sent)
    assert bodies  # every capture has Metadata responses (v0 or v12)
    for version, items in bodies.items():
        g = group(report, "MetadataResponse", version)
        rows = [oracle.decode(sent["MetadataResponse"], version, b) for b in items]
        by_oracle = [len(oracle.encode(after["MetadataResponse"], version, r)) for r in rows]
        by_hand = [hand_count(r, len(b)) for r, b in zip(rows, items, strict=True)]
        assert by_oracle == by_hand
        assert (g.carried, g.bytes_before, g.bytes_after) == (len(items), sum(map(len, items)), sum(by_hand))
        deltas = [a - len(b) for a, b in zip(by_hand, items, strict=True)]
        assert (g.delta["min"], g.delta["max"]) == (min(deltas), max(deltas))
        assert g.bytes_after < g.bytes_before  # small ids: varints save bytes
        assert g.identical == 0
    for g in report.groups:  # nothing else changes
        if g.message != "MetadataResponse":
            assert g.bytes_after == g.bytes_before and g.identical == g.carried


def test_kip625_as_a_new_version(sent: SpecSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The compatible form: the encodings only from a new v13 (compat says so), and every
    Metadata response of the v12 captures written as v13 (``--latest``)."""
    folder = tmp_path / "proposal"
    after = proposal(folder, new_version=True)
    verdict = compare(
        {"MetadataResponse": sent["MetadataResponse"]}, {"MetadataResponse": after["MetadataResponse"]}
    )
    assert verdict.compatible
    capture = SHARED / "captures" / "tansu_confluent.pcap"
    status = main(["what-if", str(capture), "--specs", str(folder), "--latest", "--json", "--repeat", "1"])
    report = json.loads(capsys.readouterr().out)
    # 1: --latest writes every message in its highest version, and some of the capture's
    # requests and responses hold values their latest versions lack (FindCoordinator v2's
    # node_id ...); the capture's one MetadataRequest that does not decode is no part of it
    assert status == 1
    carried_not = {(g["message"], g["version"]) for g in report["groups"] if g["cannot_carry"]}
    assert ("FindCoordinatorResponse", 2) in carried_not
    assert not any(m.startswith("Metadata") for m, _ in carried_not)
    assert report["cannot_carry"] == sum(g["cannot_carry"] for g in report["groups"])
    g = next(g for g in report["groups"] if g["message"] == "MetadataResponse")
    assert (g["version"], g["target_version"]) == (12, 13)
    items = metadata_bodies(capture, sent)[12]
    rows = [oracle.decode(sent["MetadataResponse"], 12, b) for b in items]
    assert g["bytes_after"] == sum(len(oracle.encode(after["MetadataResponse"], 13, r)) for r in rows)
    assert g["bytes_after"] == sum(hand_count(r, len(b)) for r, b in zip(rows, items, strict=True))
    request = next(g for g in report["groups"] if g["message"] == "MetadataRequest")
    assert (request["target_version"], request["not_decoded"]) == (12, 1)


def test_what_the_proposal_cannot_carry(
    sent: SpecSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_json("MetadataResponse")
    field(spec, "Brokers.Port")["type"] = "int8"  # 9092 does not fit
    spec["validVersions"] = "1-12"  # and v0 is gone
    spec["deprecatedVersions"] = "1-3"
    folder = write(tmp_path / "proposal", {"MetadataResponse": spec})
    after = ak.load_specs(vendored_specs_dir(), folder)
    report = what_if_capture(CAPTURES, sent, after, repeat=1)
    v0 = group(report, "MetadataResponse", 0)
    assert (v0.carried, v0.cannot_carry) == (0, v0.messages)
    assert v0.cannot_carry_reason == "MetadataResponse has no version 0 there"
    v12 = group(report, "MetadataResponse", 12)
    with_brokers = [
        b for b in metadata_bodies_all(sent)[12] if oracle.decode(sent["MetadataResponse"], 12, b)["brokers"]
    ]
    assert v12.cannot_carry == len(with_brokers) > 16
    assert v12.carried == v12.messages - v12.cannot_carry
    # one reason, said once with its rows (the ports differ: 9092, 9093 ...)
    (reason,) = v12.cannot_carry_reasons
    assert reason.endswith("is out of range for int8 at $.brokers[0].port")
    assert v12.cannot_carry_reasons[reason] == v12.cannot_carry
    assert v12.cannot_carry_reason == f"{reason} ({v12.cannot_carry} rows)"
    assert report.cannot_carry == v0.messages + v12.cannot_carry
    # + the capture's own damage: the body that does not decode as sent, the frame cut by a
    # capture's end
    assert report.not_carried == report.cannot_carry + 1 + 1
    text = report.render()
    assert f"cannot carry: {v0.messages} x MetadataResponse v0 under the proposed specs" in text
    assert f"cannot carry: {v12.cannot_carry} x MetadataResponse v12" in text
    # the command: exit 1, and a capture or folder that is not there: 2, one line
    assert main(["what-if", str(CAPTURES[0]), "--specs", str(folder), "--repeat", "1"]) == 1
    capsys.readouterr()
    assert main(["what-if", str(tmp_path / "nope.pcap"), "--specs", str(folder)]) == 2
    assert main(["what-if", str(CAPTURES[0]), "--specs", str(tmp_path / "nope")]) == 2
    # a proposal folder without specs is refused too, as compat refuses one
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "README.md").write_text("no specs")
    assert main(["what-if", str(CAPTURES[0]), "--specs", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"arrowkafka: error: {tmp_path / 'nope.pcap'}: No such file or directory",
        f"arrowkafka: error: {tmp_path / 'nope'}: no such folder",
        f"arrowkafka: error: {tmp_path / 'nothing'}: holds no spec files (*.json)",
    ]


def metadata_bodies_all(sent: SpecSet) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for capture in CAPTURES:
        for version, items in metadata_bodies(capture, sent).items():
            out.setdefault(version, []).extend(items)
    return out


def test_the_readme_proposal_is_the_tested_one(tmp_path: Path) -> None:
    """tests/evolution/kip625/ (the README's example) holds the proposal these tests build."""
    proposal(tmp_path, new_version=False)
    shipped = Path(__file__).parent / "kip625" / "MetadataResponse.json"
    assert parse_jsonc(shipped.read_text()) == json.loads((tmp_path / "MetadataResponse.json").read_text())
    assert ak.load_specs(shipped.parent)["MetadataResponse"].root.fields  # and the loader takes it


def header_damaged(capture: Path, sent: SpecSet, out: Path) -> Path:
    """The capture with one flexible MetadataResponse's header broken (its tag count 127, the
    frame's size kept): the response header does not parse, a reject naming its message and
    version whose raw bytes are the whole frame."""
    bodies = {b for items in metadata_bodies(capture, sent).values() for b in items}
    packets, done = [], False
    for p in load(capture):
        seg = tcp_of(p)
        payload = seg.payload
        if (
            not done
            and seg.flow[0] == 9092
            and len(payload) > 9
            and payload[8] == 0
            and payload[9:] in bodies
        ):
            data = bytearray(p.data)
            data[seg.payload_at + 8] = 0x7F
            p, done = p._replace(data=bytes(data)), True
        packets.append(p)
    assert done
    out.write_bytes(write_pcap(packets))
    return out


SOURCES = [*(c.name for c in CAPTURES), "tansu_header_damaged.pcap"]


@pytest.mark.parametrize("name", SOURCES)
def test_outdir_gives_what_the_capture_gives(
    name: str, sent: SpecSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder `arrowkafka decode` wrote: its tables written back under the sending specs, and
    its rejects' bodies, are the capture's bodies, so the measurements are the same; the rejects
    that are no body (a header that does not parse, a frame cut short) count as frames in both."""
    if name == "tansu_header_damaged.pcap":
        capture = header_damaged(SHARED / "captures" / "tansu_confluent.pcap", sent, tmp_path / name)
    else:
        capture = SHARED / "captures" / name
    out = tmp_path / "out"
    main(["decode", str(capture), "-o", str(out)])
    capsys.readouterr()
    after = ak.load_specs(vendored_specs_dir(), Path(__file__).parent / "kip625")
    from_dir = what_if_outdir(out, sent, after, repeat=1)
    from_capture = what_if_capture([capture], sent, after, repeat=1)

    def facts(r: WhatIf) -> list[tuple[Any, ...]]:
        return [
            (g.direction, g.message, g.version, g.messages, g.bytes_in, g.not_decoded, g.carried, g.identical,
             g.bytes_before, g.bytes_after, g.delta, g.cannot_carry)
            for g in r.groups
        ]  # fmt: skip

    assert facts(from_dir) == facts(from_capture)
    assert from_dir.unframed_reasons == from_capture.unframed_reasons
    assert (from_dir.unframed, from_dir.not_carried) == (from_capture.unframed, from_capture.not_carried)
    if name == "tansu_header_damaged.pcap":  # the frame whose header does not parse: no body
        (reason,) = from_dir.unframed_reasons
        assert reason.startswith("Truncated: reading tagged field") and "$header" in reason
        assert group(from_dir, "MetadataResponse", 12).messages == 17
    metadata = group(from_dir, "MetadataResponse", README_TABLE.get(name, (12,))[0])
    assert metadata.bytes_after < metadata.bytes_before
    # the command takes the folder too: 0, as the proposal carries every body (the capture's
    # own damage is named, not in the exit status)
    assert main(["what-if", str(out), "--specs", str(Path(__file__).parent / "kip625"), "--repeat", "1"]) == 0
    text = capsys.readouterr().out
    assert f"{sum(g.messages for g in from_capture.groups)} message bodies in" in text
    assert "0 the proposal cannot carry" in text


def test_outdir_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    kip625 = str(Path(__file__).parent / "kip625")
    assert main(["what-if", str(empty), "--specs", kip625]) == 2
    stray = tmp_path / "stray"
    stray.mkdir()
    pq.write_table(pa.table({"x": [1]}), stray / "MetadataResponse.parquet")
    assert main(["what-if", str(stray), "--specs", kip625]) == 2
    assert main(["what-if", str(stray), str(CAPTURES[0]), "--specs", kip625]) == 2
    assert main(["what-if", str(CAPTURES[0]), "--specs", kip625, "--repeat", "0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"arrowkafka: error: {empty}: holds no message tables (<Message>.parquet) of `arrowkafka decode`",
        f"arrowkafka: error: {stray / 'MetadataResponse.parquet'}: no _version column: not a table of "
        "`arrowkafka decode`",
        f"arrowkafka: error: {stray}: a folder among captures: give one OUTDIR alone, or capture files",
        "arrowkafka: error: --repeat 0: time each step at least once",
    ]


# the README's table (Protocol evolution): MetadataResponse bytes before and after, and the
# whole capture's bodies before and after
README_TABLE = {
    "noida_kafka_python.pcap": (12, 10, 15_146, 9_724, 24_242, 18_820),
    "tansu_confluent.pcap": (12, 18, 2_907, 2_297, 36_227, 35_617),
    "kafka091_legacy.pcap": (0, 15, 1_031, 835, 20_051, 19_855),
}


@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_the_readme_table(capture: Path, sent: SpecSet) -> None:
    after = ak.load_specs(vendored_specs_dir(), Path(__file__).parent / "kip625")
    report = what_if_capture([capture], sent, after, repeat=1)
    version, n, before, after_bytes, total_before, total_after = README_TABLE[capture.name]
    g = group(report, "MetadataResponse", version)
    assert (g.messages, g.bytes_before, g.bytes_after) == (n, before, after_bytes)
    assert (report.bytes_in, report.bytes_out) == (total_before, total_after)


def test_a_renamed_field_is_carried(sent: SpecSet, tmp_path: Path) -> None:
    """Brokers.Port renamed PortNumber (compat: compatible, names are not on the wire): the
    before side's columns take the proposal's names, and every body comes back as sent."""
    spec = spec_json("MetadataResponse")
    field(spec, "Brokers.Port")["name"] = "PortNumber"
    after = ak.load_specs(vendored_specs_dir(), write(tmp_path / "proposal", {"MetadataResponse": spec}))
    report = what_if_capture(CAPTURES, sent, after, repeat=1)
    assert report.cannot_carry == 0
    for version in (0, 12):
        g = group(report, "MetadataResponse", version)
        assert g.carried == g.messages > 0
        assert g.identical == g.carried and g.bytes_after == g.bytes_before


def test_a_group_that_fails_as_a_whole_fails_in_one_step(
    sent: SpecSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is no row's (a column of a type the proposal does not take) stops the
    whole group at once: one reason, said once, and no encode per row."""
    spec = spec_json("MetadataResponse")
    field(spec, "Brokers.Port")["type"] = "string"
    after = ak.load_specs(vendored_specs_dir(), write(tmp_path / "proposal", {"MetadataResponse": spec}))
    calls: list[tuple[str, int, int]] = []
    encoded_size = SpecSet.encoded_size

    def counting(self: SpecSet, data: Any, name: str, version: int, **kw: Any) -> Any:
        calls.append((name, version, len(data)))
        return encoded_size(self, data, name, version, **kw)

    monkeypatch.setattr(SpecSet, "encoded_size", counting)
    report = what_if_capture(CAPTURES, sent, after, repeat=1)
    for version in (0, 12):
        g = group(report, "MetadataResponse", version)
        assert (g.carried, g.cannot_carry) == (0, g.messages)
        assert g.cannot_carry_reasons == {"expected string, got int32 at $.brokers[].port": g.messages}
        assert g.cannot_carry_reason == f"expected string, got int32 at $.brokers[].port ({g.messages} rows)"
        assert [c for c in calls if c[:2] == ("MetadataResponse", version)] == [
            ("MetadataResponse", version, 0)
        ]


def test_exit_status_is_the_proposal_s(
    sent: SpecSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 1 only for what the proposal cannot carry: the capture's own damage (tansu's
    MetadataRequest the sent specs refuse) is named in the output, not in the status. A
    proposal spec that replaces no sent spec is said, naming it."""
    capture = str(SHARED / "captures" / "tansu_confluent.pcap")
    kip625 = Path(__file__).parent / "kip625"
    assert main(["what-if", capture, "--specs", str(kip625), "--repeat", "1"]) == 0
    out = capsys.readouterr()
    assert "not decoded: 1 x MetadataRequest v12" in out.out
    assert "0 the proposal cannot carry; the capture's own damage (named above): 1 bodies" in out.out
    assert out.err == ""
    spec = spec_json("MetadataResponse")
    spec.update(name="MetaDataResponse", apiKey=9999)  # a typo'd name: replaces nothing
    folder = write(tmp_path / "proposal", {"MetaDataResponse": spec})
    assert main(["what-if", capture, "--specs", str(folder), "--repeat", "1", "--json"]) == 0
    out = capsys.readouterr()
    assert out.err.splitlines() == [
        f"arrowkafka: warning: {folder / 'MetaDataResponse.json'}: MetaDataResponse replaces no spec "
        "the traffic was sent with: nothing is measured under it"
    ]
    report = json.loads(out.out)
    assert (report["cannot_carry"], report["not_decoded"], report["unframed"]) == (0, 1, 0)


def test_the_readme_large_response() -> None:
    """The README's last row: 1,000 x a v12 MetadataResponse of 1 topic x 1,000 partitions and
    3 brokers, 42,147,000 B before and 32,997,000 B after, through the Python API; the size
    after also counted by hand."""
    sent = ak.load_specs()
    after = ak.load_specs(vendored_specs_dir(), Path(__file__).parent / "kip625")
    partition = {"error_code": 0, "leader_epoch": 0, "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2],
                 "offline_replicas": []}  # fmt: skip
    partitions = [{**partition, "partition_index": p, "leader_id": p % 3} for p in range(1000)]
    row = {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": i, "host": f"broker-{i}.local", "port": 9092, "rack": None} for i in range(3)
        ],
        "cluster_id": "MkU3OEVBNTcwNTJENDM2Qg",
        "controller_id": 0,
        "topics": [
            {
                "error_code": 0,
                "name": "page-events",
                "topic_id": bytes(range(16)),
                "is_internal": False,
                "partitions": partitions,
                "topic_authorized_operations": -2147483648,
            }
        ],
    }
    body = ak.encode(pa.Table.from_pylist([row]), "MetadataResponse", 12)[0].as_py()
    assert len(body) == 42_147
    report = what_if({("response", "MetadataResponse", 12): [body] * 1000}, sent, after, repeat=1)
    (g,) = report.groups
    assert (g.messages, g.carried, g.bytes_before, g.bytes_after) == (1000, 1000, 42_147_000, 32_997_000)
    assert g.bytes_after == 1000 * hand_count(row, len(body))
    assert f"{(g.bytes_after - g.bytes_before) / g.bytes_before:.1%}" == "-21.7%"
