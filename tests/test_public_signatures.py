"""The public functions forward to the layers below them (``ak.decode`` -> ``SpecSet.decode``
-> ``codec.decode.decode_batch``; the encoders alike): their options and defaults are written
at each layer, so they are held equal here, where a default changed in one place would
otherwise go unseen."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import arrowkafka as ak
from arrowkafka.api import SpecSet
from arrowkafka.codec.decode import decode_batch
from arrowkafka.codec.encode import encode_batch


def options(f: Callable[..., Any]) -> dict[str, Any]:
    """Keyword-only parameters and their defaults."""
    params = inspect.signature(f).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


@pytest.mark.parametrize(
    "layers",
    [(ak.decode, SpecSet.decode, decode_batch), (ak.encode, SpecSet.encode, encode_batch)],
    ids=["decode", "encode"],
)
def test_each_layer_takes_the_same_options_with_the_same_defaults(
    layers: tuple[Callable[..., Any], ...],
) -> None:
    top = options(layers[0])
    assert top  # (a function with no options would pass vacuously)
    for f in layers[1:]:  # (a lower layer may take more: encode_batch's sizes_only)
        below = options(f)
        assert {k: below.get(k, "missing") for k in top} == top, f.__qualname__


def test_every_job_listens_on_the_same_broker_port_by_default() -> None:
    """The Spark jobs write the default port out (their driver side imports no capture reader);
    the rest take it from traffic.frames."""
    from arrowkafka.evolution.whatif import what_if_capture
    from arrowkafka.spark.captures import capture_frames, decode_captures
    from arrowkafka.traffic import decode_capture
    from arrowkafka.traffic.frames import DEFAULT_BROKER_PORTS

    for f in (capture_frames, decode_captures, decode_capture, what_if_capture):
        default = inspect.signature(f).parameters["broker_ports"].default
        assert set(default) == set(DEFAULT_BROKER_PORTS) == {9092}, f.__qualname__
