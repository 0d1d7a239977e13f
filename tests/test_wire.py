"""One varint rule: ``arrowkafka.wire`` (what Python code reads and writes) agrees with the
kernels' own copies (kept for speed) and with the oracle's (kept apart on purpose), byte for
byte, on every width boundary; and its errors say what went wrong."""

from __future__ import annotations

import numpy as np
import pytest

from arrowkafka import oracle as ref
from arrowkafka import wire
from arrowkafka.kernels import isa
from arrowkafka.kernels.tiers import _pure_module

# every 7-bit group boundary up to 32 bits, and a few values in between
EDGES = {0, 1, 63, 64, 300, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31, 2**32 - 1}
VALUES = sorted(EDGES | {(1 << k) + d for k in range(0, 32, 3) for d in (-1, 0, 1) if (1 << k) + d >= 0})


@pytest.mark.parametrize("value", VALUES)
def test_the_writers_agree(value: int) -> None:
    raw = wire.uvarint_bytes(value)
    assert raw == ref.uvarint_bytes(value)
    encode = _pure_module("encode")  # the kernel's source, run as plain Python
    out = np.zeros(10, np.uint8)
    end = encode._put_uv(out, 0, np.int64(value))  # the position after it
    assert out[:end].tobytes() == raw
    assert encode._uvlen(np.int64(value)) == len(raw)


@pytest.mark.parametrize("value", VALUES)
def test_the_readers_agree(value: int) -> None:
    raw = wire.uvarint_bytes(value) + b"\x7f"  # a byte after it, not read
    assert wire.read_uvarint(raw, 0) == (value, len(raw) - 1)
    decode = _pure_module("decode")
    data = np.frombuffer(raw, np.uint8)
    got, pos, err = decode._uvarint(data, 0, len(data), 32)
    assert (int(got), int(pos), int(err)) == (value, len(raw) - 1, isa.OK)


def test_read_errors() -> None:
    with pytest.raises(IndexError, match="ends inside a varint at byte 2"):
        wire.read_uvarint(b"\x80\x80", 0)
    with pytest.raises(wire.VarintTooLong, match="longer than 5 bytes"):
        wire.read_uvarint(b"\x80" * 5 + b"\x01", 0)
    decode = _pure_module("decode")
    data = np.frombuffer(b"\x80" * 5 + b"\x01", np.uint8)
    assert int(decode._uvarint(data, 0, len(data), 32)[2]) == isa.E_VARINT_LONG
    with pytest.raises(ValueError, match="cannot hold -1"):
        wire.uvarint_bytes(-1)
