"""What Kafka's generated readers refuse, the decoder refuses, with the same class of error,
and says where; every tier (plain Python, the compiled interpreter, the kernel specialised to
the plan) says it in the same words and fills the same status slots.

- a null element in an array (Kafka's arrays never hold one): Corrupt, at the element;
- a string over 32767 bytes, compact lengths included (``bytes`` have no such limit);
- the first fault in byte order wins: an array count is bounded by a byte per element, as in
  Kafka's ``readArray``, not by its elements' smallest size, which reported Truncated ahead of
  a corrupt element; and a fault in a tag section's walk waits for the known values before it;
- a varint cut short by the end of the body says how many bytes were left, at its first byte.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec import decode as codec_decode
from arrowkafka.codec.decode import _Run, byte_ranges
from arrowkafka.kernels import isa
from arrowkafka.kernels.tiers import _pure_module
from arrowkafka.plan import compile_plan
from arrowkafka.wire import uvarint_bytes

SPECS = ak.load_specs()

# one topic: a null topic id, the name (compact: length + 1), its tags; two bools; the tags
LONG_NAME = b"\x02" + bytes(16) + uvarint_bytes(32768 + 1) + b"a" * 32768 + bytes.fromhex("00010000")
LONGEST_NAME = b"\x02" + bytes(16) + uvarint_bytes(32767 + 1) + b"a" * 32767 + bytes.fromhex("00010000")

CASES = [
    # (name, version, body, class, reason, path, offset)
    ("DescribeConfigsRequest", 1, bytes.fromhex("00000001020001610000000200016bffff00"), ak.Corrupt,
     "reading string: null element in an array (Kafka's arrays never hold one)",
     "$.resources[0].configuration_keys[1]", 15),
    # flexible: compact length 0 is null
    ("ConsumerGroupHeartbeatRequest", 0, bytes.fromhex("0267026d" + "00" * 10 + "03026b00" + "000000"),
     ak.Corrupt, "reading string: null element in an array (Kafka's arrays never hold one)",
     "$.subscribed_topic_names[1]", 17),
    ("ShareGroupHeartbeatRequest", 0, bytes.fromhex("0267026d0000000000" + "03026b00" + "00"), ak.Corrupt,
     "reading string: null element in an array (Kafka's arrays never hold one)",
     "$.subscribed_topic_names[1]", 12),
    ("MetadataRequest", 12, LONG_NAME, ak.Corrupt,
     "reading string: length 32768 is over the 32767 bytes a string may hold", "$.topics[0].name", 17),
    # 8 elements fit 8 bytes at a byte each; the first one's length is -513
    ("CreateDelegationTokenRequest", 1, bytes.fromhex("00000008fdffeffffffffffb"), ak.Corrupt,
     "reading string: negative length -513", "$.renewers[0].principal_type", 4),
    # ... and where the first fault is the end of the body, it is Truncated, at the element
    ("CreateDelegationTokenRequest", 1, bytes.fromhex("00000002000161"), ak.Truncated,
     "reading string: needs 2 bytes, 0 left", "$.renewers[0].principal_name", 7),
    ("CreateDelegationTokenRequest", 1, bytes.fromhex("00000009fdffeffffffffffb"), ak.Truncated,
     "reading []CreatableRenewers: 9 elements cannot fit in the 8 bytes left", "$.renewers", 0),
    # a varint cut short: the bytes left from its first byte, which is where it is reported
    ("ApiVersionsRequest", 3, bytes.fromhex("0101808080"), ak.Truncated,
     "reading tagged fields: varint cut short: needs more than the 3 bytes left", "$", 2),
    ("ApiVersionsRequest", 3, bytes.fromhex("8080"), ak.Truncated,
     "reading string: varint cut short: needs more than the 2 bytes left", "$.client_software_name", 0),
    ("ApiVersionsRequest", 3, bytes.fromhex("01"), ak.Truncated,
     "reading string: varint cut short: needs more than the 0 bytes left", "$.client_software_version", 1),
    # the size of a tagged field (after its tag): reported at the size's own first byte
    ("ApiVersionsRequest", 3, bytes.fromhex("0101010580"), ak.Truncated,
     "reading tagged fields: varint cut short: needs more than the 1 bytes left", "$", 4),
    # a tag section is walked before its known values are read, but a fault in a known value
    # comes first in byte order, so it wins over the walk's: a size past the end, a tag out of order
    ("ApiVersionsResponse", 3, bytes.fromhex("0000" "01" "00000000" "02" "000100" "017f00"), ak.Corrupt,
     "reading []SupportedFeatureKey: null in a field that is not nullable in this version",
     "$.supported_features", 10),
    ("ApiVersionsResponse", 3, bytes.fromhex("0000" "01" "00000000" "02" "000100" "000100"), ak.Corrupt,
     "reading []SupportedFeatureKey: null in a field that is not nullable in this version",
     "$.supported_features", 10),
    # ... and with the known value sound, the walk's fault stands
    ("ApiVersionsResponse", 3, bytes.fromhex("0000" "01" "00000000" "02" "000101" "017f00"), ak.Truncated,
     "reading tagged fields: needs 127 bytes, 1 left", "$", 11),
    # a fixed-width length says what it needs
    ("SaslHandshakeRequest", 1, bytes.fromhex("00"), ak.Truncated,
     "reading string: needs 2 bytes, 1 left", "$.mechanism", 0),
    ("DescribeConfigsRequest", 1, bytes.fromhex("000000"), ak.Truncated,
     "reading []DescribeConfigsResource: needs 4 bytes, 3 left", "$.resources", 0),
]  # fmt: skip

TIERS = ["plain", "interpreter", pytest.param("specialised", marks=pytest.mark.jit)]


def decode_on(tier: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, *args: Any,
              **kwargs: Any) -> Any:  # fmt: skip
    """``ak.decode`` on one tier of the decode kernel."""
    if tier == "specialised":
        request.getfixturevalue("own_kernel_folder")
        return ak.decode(*args, **kwargs, kernel="specialised")
    run = kernel_of(tier)
    monkeypatch.setattr(codec_decode, "kernel_run", lambda nbytes, kernel="decode": run)
    return ak.decode(*args, **kwargs, kernel="interpreter")


def kernel_of(tier: str) -> Any:
    if tier == "plain":
        return _pure_module("decode").run
    return importlib.import_module("arrowkafka.kernels.decode").run


def _case_id(case: tuple[Any, ...]) -> str:
    return f"{case[0]}-v{case[1]}-{case[2][:12].hex()}-{len(case[2])}"


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize(
    ("name", "version", "body", "cls", "reason", "path", "offset"), CASES, ids=[_case_id(c) for c in CASES]
)
def test_refused_in_both_modes(
    tier: str, name: str, version: int, body: bytes, cls: type, reason: str, path: str, offset: int,
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with pytest.raises(ak.DecodeError) as e:
        decode_on(tier, request, monkeypatch, [body], name, version)
    assert type(e.value) is cls
    assert str(e.value) == f"{reason} at {path} (message 0, byte {offset}/{len(body)}, {name} v{version})"
    # errors="null": the row is null, and its reject row says the same
    batch, rejects = decode_on(tier, request, monkeypatch, [body, body], name, version, errors="null")
    assert batch.num_rows == 2 and batch.column(0).null_count == 2
    assert rejects.column("byte_offset").to_pylist() == [offset, offset]
    rows = rejects.drop_columns(["body", "byte_offset"]).to_pylist()
    assert rows == [{"index": i, "error": cls.__name__, "reason": reason, "path": path} for i in (0, 1)]
    assert rejects.column("body").to_pylist() == [body, body]


@pytest.mark.parametrize("tier", TIERS)
def test_what_kafka_accepts_still_decodes(
    tier: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limits are Kafka's and no tighter: a 32767-byte string, a null array (the array is
    nullable, its elements are not), bytes over 32767 in a compact length, an empty array."""
    rows = decode_on(tier, request, monkeypatch, [LONGEST_NAME], "MetadataRequest", 12).to_pylist()
    assert rows[0]["topics"][0]["name"] == "a" * 32767
    assert rows == [ref.decode(SPECS["MetadataRequest"], 12, LONGEST_NAME)]
    null_keys = bytes.fromhex("0000000102000161ffffffff00")  # configuration_keys = null
    rows = decode_on(tier, request, monkeypatch, [null_keys], "DescribeConfigsRequest", 1).to_pylist()
    assert rows[0]["resources"][0]["configuration_keys"] is None
    auth = uvarint_bytes(40000 + 1) + b"\x07" * 40000 + b"\x00"
    rows = decode_on(tier, request, monkeypatch, [auth], "SaslAuthenticateRequest", 2).to_pylist()
    assert rows[0]["auth_bytes"] == b"\x07" * 40000
    no_renewers = bytes.fromhex("00000000000000000000000a")
    rows = decode_on(tier, request, monkeypatch, [no_renewers], "CreateDelegationTokenRequest", 1).to_pylist()
    assert rows == [{"renewers": [], "max_lifetime_ms": 10}]


def test_a_bytes_array_refuses_a_null_element_too(tmp_path: Any) -> None:
    """No Kafka spec has ``[]bytes`` yet; the rule is the array's, whatever its element."""
    (tmp_path / "BlobsRequest.json").write_text(
        '{"apiKey": 9000, "type": "request", "name": "BlobsRequest", "validVersions": "0-1",'
        ' "flexibleVersions": "1+", "fields": [{"name": "Blobs", "type": "[]bytes", "versions": "0+",'
        ' "nullableVersions": "0+"}]}'
    )
    specs = ak.load_specs(tmp_path)
    classic = bytes.fromhex("00000002" + "0000000161" + "ffffffff")
    with pytest.raises(ak.Corrupt) as e:
        specs.decode([classic], "BlobsRequest", 0)
    assert (e.value.reason, e.value.path, e.value.offset) == (
        "reading bytes: null element in an array (Kafka's arrays never hold one)",
        "$.blobs[1]",
        9,
    )
    compact = bytes.fromhex("03" + "0261" + "00" + "00")
    with pytest.raises(ak.Corrupt) as e:
        specs.decode([compact], "BlobsRequest", 1)
    assert (e.value.path, e.value.offset) == ("$.blobs[1]", 3)
    ok = bytes.fromhex("03" + "0261" + "01" + "00")
    assert specs.decode([ok], "BlobsRequest", 1).to_pylist() == [{"blobs": [b"a", b""], "_unknown_tags": []}]


# ---- the tiers fill the status alike ---------------------------------------------------------------


def damaged(body: bytes) -> list[bytes]:
    """Every cut of a small body, and each byte set to 0x00, 0x80, 0xff in turn."""
    if len(body) > 100:
        return [body[:cut] for cut in (0, 1, 17, 18, 19, 20, len(body) - 1)]
    out = [body[:cut] for cut in range(len(body))]
    for i in range(len(body)):
        for b in (0x00, 0x80, 0xFF):
            out.append(body[:i] + bytes([b]) + body[i + 1 :])
    return out


def statuses(fn: Any, name: str, version: int, bodies: list[bytes]) -> list[Any]:
    """Pass 1 of kernel ``fn``: per body alone (raise mode) its return code and status array,
    and for all at once in null mode the reject slots and the counts."""
    plan = compile_plan(SPECS[name], version)
    nn = len(plan.nodes)
    out: list[Any] = []
    for body in bodies:
        run = _Run(plan, *byte_ranges([body]), False)
        args = run.args(0, 1, False, np.zeros(nn, np.int64), np.zeros(nn, np.int64))
        out.append((int(fn(*args)), args[-4].tolist()))
    run = _Run(plan, *byte_ranges(bodies), True)
    counts, dcounts = np.zeros(nn, np.int64), np.zeros(nn, np.int64)
    assert fn(*run.args(0, len(bodies), False, counts, dcounts)) == 0
    out.append((run.reject_code.tolist(), run.reject_offset.tolist(), run.reject_pc.tolist()))
    out.append((counts.tolist(), dcounts.tolist(), run.bad.tolist()))
    return out


STATUS_CASES = [
    *sorted({(c[0], c[1], c[2]) for c in CASES if len(c[2]) < 100}),
    ("MetadataRequest", 12, LONG_NAME),
    ("MetadataRequest", 12, bytes.fromhex("02" + "00" * 16 + "0261" + "00010000")),
    # a fault held by the tag walk (size 127, 1 left), then one inside the known value before it
    # that sets no detail: the held fault's details are not left behind in the status
    ("ApiVersionsResponse", 3, bytes.fromhex("0000010000000002000702010000000080017f00")),
]


@pytest.mark.jit
@pytest.mark.usefixtures("own_kernel_folder")
@pytest.mark.parametrize(("name", "version", "body"), STATUS_CASES, ids=[_case_id(c) for c in STATUS_CASES])
def test_the_tiers_fill_the_same_status_slots(name: str, version: int, body: bytes) -> None:
    from arrowkafka.codegen.decode import generated_decoder

    bodies = [body, *damaged(body)]
    plain = statuses(kernel_of("plain"), name, version, bodies)
    # a varint cut short is reported at its first byte: from there to the end, every byte says
    # "more follows"
    cut_short = 0
    for b, (code, status) in zip(bodies, plain, strict=False):
        if code == isa.E_TRUNCATED and status[isa.S_D1] == 0:
            at = status[isa.S_OFFSET]
            assert status[isa.S_D2] == len(b) - at and all(x >= 0x80 for x in b[at:]), (b.hex(), status)
            cut_short += 1
    assert cut_short > 0 or not SPECS[name].is_flexible(version)
    assert statuses(kernel_of("interpreter"), name, version, bodies) == plain
    assert statuses(generated_decoder(compile_plan(SPECS[name], version)), name, version, bodies) == plain


@pytest.mark.parametrize(
    ("name", "version", "body", "cls", "reason", "path", "offset"), CASES, ids=[_case_id(c) for c in CASES]
)
def test_the_reference_decoder_refuses_them_alike(
    name: str, version: int, body: bytes, cls: type, reason: str, path: str, offset: int
) -> None:
    # the oracle shares no code with the codec: the same class and field, and for a corrupt
    # body the same byte (for a body cut short each names a byte of its own choosing)
    with pytest.raises(cls) as e:
        ref.decode(SPECS[name], version, body)
    assert e.value.path == path
    if cls is ak.Corrupt:
        assert e.value.offset == offset
