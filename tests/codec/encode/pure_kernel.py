"""Encoding through the kernel generated for a plan, its source run as plain Python: every
(message, version) is covered without compiling one kernel each (seconds per plan); the tests
in ``test_encode_specialised.py`` compile a few with Numba."""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa
import pytest

from arrowkafka.api import SpecSet
from arrowkafka.codec.encode import encode_batch
from arrowkafka.codegen import encode as encode_codegen

_JIT = encode_codegen.generated_encoder


def encode_specialised(specs: SpecSet, data: Any, name: str, version: int, **kw: Any) -> pa.Array:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(encode_codegen, "generated_encoder", functools.partial(_JIT, jit=False))
        return encode_batch(specs[name], data, version, kernel="specialised", **kw)
