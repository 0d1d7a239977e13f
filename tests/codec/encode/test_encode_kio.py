"""The same bytes as kio 0.6.5's encoder, a codec we did not write, on the same values, for
every (message, version) kio covers."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, assume, given, settings

from arrowkafka import oracle as ref
from tests.codec.decode.test_kio import PAIRS as KIO_PAIRS
from tests.codec.decode.test_kio import SPECS, kio_classes, kio_serial
from tests.strategies import message_value


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
