"""One header rule, three readers held together: the header specs' own plans (``ak.decode`` of
RequestHeader and ResponseHeader, the rule as Kafka states it), the Python parsers in
``traffic.headers`` and the capture kernel that reads the plain request headers of a chunk.
Every request API and version of the vendored specs, with client ids null, empty, ASCII and
not, with and without header tags, and cut short."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.errors import DecodeError
from arrowkafka.kernels import capture as kc
from arrowkafka.traffic.headers import header_tables, parse_request, parse_response

SPECS = ak.load_specs()
REQUESTS = [(s.api_key, v) for s in SPECS.values() if s.type == "request" for v in s.valid_versions]
CLIENT_IDS = [None, "", "rdkafka", "klïent-ü", "x" * 300]
TAGS = [[], [(0, b"\x01"), (7, b"")]]


def request_frame(key: int, version: int, client_id: str | None, tags: list, corr: int) -> tuple[bytes, int]:
    """A request frame (header + a body) made by encoding the RequestHeader spec; its header version."""
    hv = ak.request_header_version(key, version)
    row = {"request_api_key": key, "request_api_version": version, "correlation_id": corr}
    if hv >= 1:
        row["client_id"] = client_id
    schema = ak.arrow_schema("RequestHeader", hv)
    batch = pa.RecordBatch.from_pylist([{**row, "_unknown_tags": tags if hv >= 2 else []}], schema=schema)
    return ak.encode(batch, "RequestHeader", hv)[0].as_py() + b"BODY", hv


CASES = [
    (key, version, client_id, tags)
    for key, version in REQUESTS
    for client_id in CLIENT_IDS
    for tags in TAGS
    if random.Random(f"{key} {version} {client_id} {len(tags)}").random() < 0.25  # a quarter of them
]


@pytest.mark.parametrize(("key", "version", "client_id", "tags"), CASES)
def test_request_header(key: int, version: int, client_id: str | None, tags: list) -> None:
    frame, hv = request_frame(key, version, client_id, tags, corr=-7)
    header = parse_request(frame, SPECS)
    by_spec = ak.decode([frame[: len(frame) - 4]], "RequestHeader", hv).to_pylist()[0]
    assert (header.api_key, header.api_version, header.correlation_id) == (key, version, -7)
    assert header.header_version == hv
    assert header.client_id == by_spec.get("client_id")
    assert header.tags == (by_spec["_unknown_tags"] if hv >= 2 else [])
    assert header.body == b"BODY"
    # the kernel: the same fields where the header is plain, else it leaves the frame to Python
    request_hv = header_tables(SPECS)[0]
    data = np.frombuffer(frame, np.uint8)
    out = [np.zeros(1, np.int64) for _ in range(7)]
    kc.request_headers(data, np.zeros(1, np.int64), np.array([len(frame)]), request_hv, *out)
    k, v, c, cid_off, cid_len, body, status = (int(x[0]) for x in out)
    plain = (hv < 2 or not tags) and (client_id is None or client_id.isascii())
    assert status == (kc.H_OK if plain else kc.H_PYTHON)
    if plain:
        assert (k, v, c) == (key, version, -7)
        cid = None if cid_len < 0 else frame[cid_off : cid_off + cid_len].decode()
        assert cid == header.client_id
        assert frame[body:] == b"BODY"


@pytest.mark.parametrize(("key", "version"), REQUESTS[::7])
def test_cut_request_headers(key: int, version: int) -> None:
    """Every prefix of a header: the Python parser raises a typed error naming the field, the
    header spec's plan agrees it is short, and the kernel never calls it plain."""
    frame, hv = request_frame(key, version, "abc", TAGS[1], corr=1)
    header_len = len(frame) - 4
    request_hv = header_tables(SPECS)[0]
    for n in range(header_len):
        cut = frame[:n]
        with pytest.raises(DecodeError, match=r"\$header\."):
            parse_request(cut, SPECS)
        with pytest.raises(ak.Truncated):
            ak.decode([cut], "RequestHeader", hv)
        data = np.frombuffer(cut or b"\0", np.uint8)
        out = [np.zeros(1, np.int64) for _ in range(7)]
        kc.request_headers(data, np.zeros(1, np.int64), np.array([n]), request_hv, *out)
        assert out[6][0] == kc.H_PYTHON


@pytest.mark.parametrize("hv", [0, 1])
@pytest.mark.parametrize("tags", TAGS)
def test_response_header(hv: int, tags: list) -> None:
    schema = ak.arrow_schema("ResponseHeader", hv)
    row = {"correlation_id": 123456, "_unknown_tags": tags if hv else []}
    raw = ak.encode(pa.RecordBatch.from_pylist([row], schema=schema), "ResponseHeader", hv)[0].as_py()
    header = parse_response(raw + b"BODY", hv)
    by_spec = ak.decode([raw], "ResponseHeader", hv).to_pylist()[0]
    assert header.correlation_id == by_spec["correlation_id"] == 123456
    assert header.tags == (by_spec["_unknown_tags"] if hv else [])
    assert header.body == b"BODY"


def test_a_cut_varint_in_a_header_says_how_many_bytes_are_left() -> None:
    # a flexible request header whose tag count is two bytes that both say "more"
    frame, _ = request_frame(18, 3, "abc", TAGS[0], corr=1)  # ApiVersions v3: header v2
    cut = frame[:-5] + b"\x80\x80"  # the (empty) tag count and the body: a cut varint instead
    expected = r"reading tag count: varint cut short: needs more than the 2 bytes left"
    with pytest.raises(ak.Truncated, match=expected):
        parse_request(cut, SPECS)
