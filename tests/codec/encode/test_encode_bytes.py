"""encode(decode(b)) == b, byte for byte: every vector body and every request and response
body of the real captures that the decoder accepts (unknown tagged fields, and known ones a
peer wrote at their default, included); the kernel generated for each plan too."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.traffic import group_frames
from tests.codec.encode.pure_kernel import encode_specialised
from tests.conftest import SHARED

SPECS = ak.load_specs()

VECTORS = sorted(
    p
    for p in (SHARED / "vectors").glob("*.json")
    if json.loads(p.read_text())["kind"] in ("request", "response")
)


@pytest.mark.parametrize("sidecar", VECTORS, ids=[p.stem for p in VECTORS])
def test_vectors_encode_to_their_own_bytes(sidecar) -> None:  # type: ignore[no-untyped-def]
    meta = json.loads(sidecar.read_text())
    spec = SPECS.request(meta["api_key"]) if meta["kind"] == "request" else SPECS.response(meta["api_key"])
    body = (SHARED / "vectors" / meta["file"]).read_bytes()
    batch = SPECS.decode([body, body], spec.name, meta["api_version"])
    assert SPECS.encode(batch, spec.name, meta["api_version"]).to_pylist() == [body, body]
    assert SPECS.encoded_size(batch, spec.name, meta["api_version"]).to_pylist() == [len(body)] * 2
    assert encode_specialised(SPECS, batch, spec.name, meta["api_version"]).to_pylist() == [body, body]


CAPTURES = sorted((SHARED / "captures").glob("*.pcap"))


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_capture_bodies_encode_to_their_own_bytes(capture) -> None:  # type: ignore[no-untyped-def]
    groups = group_frames([capture], SPECS)
    checked = 0
    for (_, message, version), frames in sorted(groups.items()):
        bodies = pa.array([f.body for f in frames], pa.binary())
        batch, rejects = SPECS.decode(bodies, message, version, errors="null")
        good = pa.array([True] * len(frames))
        if rejects.num_rows:
            good = pa.array([i not in set(rejects.column("index").to_pylist()) for i in range(len(frames))])
        accepted = batch.filter(good)
        out = SPECS.encode(accepted, message, version)
        assert out.to_pylist() == bodies.filter(good).to_pylist(), (message, version)
        again = encode_specialised(SPECS, accepted, message, version)
        assert again.to_pylist() == bodies.filter(good).to_pylist(), (message, version)
        checked += len(accepted)
    assert checked > 90
