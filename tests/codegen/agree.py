"""Does a generated kernel decode as the interpreter does? What a decode gives in both error
modes, and one check that two of those are the same: the tests of the generated decoder
(``test_decode_kernels``, ``test_decode_hops``) share them."""

from __future__ import annotations

import struct
from typing import Any

import arrowkafka as ak
from arrowkafka.api import SpecSet
from arrowkafka.codec.decode import decode_batch

ERRORS = ("raise", "null")


def outcomes(
    specs: SpecSet, name: str, version: int, bodies: list[bytes], kernel: str, **options: Any
) -> dict:
    """Per error mode, what ``decode_batch`` gives: the batch ("raise"), (batch, rejects)
    ("null"), or the error's type and text."""
    out: dict[str, Any] = {}
    for errors in ERRORS:
        try:
            out[errors] = decode_batch(specs[name], bodies, version, errors=errors, kernel=kernel, **options)
        except ak.DecodeError as e:
            out[errors] = (type(e), str(e))
    return out


def assert_same(a: dict, b: dict) -> None:
    """The same outcomes: the same error word for word, or the same schema, rows (floats by
    their bits: a NaN is not equal to itself) and rejects; the batch is valid Arrow."""
    for errors in ERRORS:
        x, y = a[errors], b[errors]
        assert _failed(x) == _failed(y), (x, y)
        if _failed(x):
            assert x == y
            continue
        if errors == "null":
            assert x[1].equals(y[1])
            x, y = x[0], y[0]
        assert x.schema == y.schema and rows(x) == rows(y)
        y.validate(full=True)


def _failed(outcome: Any) -> bool:
    return isinstance(outcome, tuple) and len(outcome) == 2 and isinstance(outcome[0], type)


def rows(batch: Any) -> list[Any]:
    """The rows as Python values, each float as its bits."""

    def plain(v: Any) -> Any:
        if isinstance(v, float):
            return ("float", struct.pack("<d", v))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, tuple):
            return tuple(plain(x) for x in v)
        return v

    return [plain(r) for r in batch.to_pylist()]
