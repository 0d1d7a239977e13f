"""encode(decode(b)) == b, byte for byte: every vector body and every request and response
body of the real captures that the decoder accepts (unknown tagged fields included); and the
same bytes as kio 0.6.5's encoder, a codec we did not write, on the same values."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings

import arrowkafka as ak
from arrowkafka import reference as ref
from arrowkafka.traffic import group_frames
from tests.conftest import SHARED
from tests.decoder.test_kio import PAIRS as KIO_PAIRS
from tests.decoder.test_kio import SPECS, kio_classes, kio_serial
from tests.strategies import message_value

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
        checked += len(accepted)
    assert checked > 90


@pytest.mark.parametrize(("name", "version"), KIO_PAIRS, ids=[f"{n}-v{v}" for n, v in KIO_PAIRS])
def test_same_bytes_as_kio(name: str, version: int) -> None:
    spec = SPECS[name]
    cls = kio_classes()[(spec.type, spec.api_key, version)]
    reader, writer = kio_serial.entity_reader(cls), kio_serial.entity_writer(cls)

    @settings(max_examples=3, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version, unknown_tags=False).map(lambda v: ref.encode(spec, version, v)))
    def check(body: bytes) -> None:
        try:
            theirs, _ = reader(body, 0)
            buf = io.BytesIO()
            writer(buf, theirs)
        except (ValueError, OverflowError, TypeError, kio_serial.errors.OutOfBoundValue):
            assume(False)  # kio refuses values its Python types cannot hold (e.g. huge durations)
            return
        ours = SPECS.encode(SPECS.decode([body], name, version), name, version)[0].as_py()
        assert ours == buf.getvalue()

    check()


def test_kio_pairs_are_many() -> None:
    assert len(KIO_PAIRS) > 450
    assert isinstance(ak.encode, type(ak.decode))
