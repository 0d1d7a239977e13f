"""For every (message, version) of all three spec folders and our feature specs: generated
values, as Arrow rows, encode through the kernel to the reference encoder's bytes; decoded
rows (in the version's schema and in the all-versions schema) encode back to the same bytes;
``encoded_size`` agrees without writing; the kernel generated for the plan gives the same bytes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrowkafka import oracle as ref
from arrowkafka.codec.encode import uuids_as_bytes
from arrowkafka.schema import storage_type
from tests.codec.decode.test_roundtrip import PAIRS, specs_of
from tests.codec.encode.pure_kernel import encode_specialised
from tests.strategies import message_value


@pytest.mark.parametrize(("folder", "name", "version"), PAIRS, ids=[f"{f}-{n}-v{v}" for f, n, v in PAIRS])
def test_encode_roundtrip(folder: str, name: str, version: int) -> None:
    specs = specs_of(folder)
    spec = specs[name]
    schema = specs.arrow_schema(name, version)

    @settings(max_examples=30 if folder == "features" else 4, suppress_health_check=list(HealthCheck))
    @given(st.lists(message_value(spec, version), min_size=1, max_size=3))
    def check(values: list[dict[str, Any]]) -> None:
        bodies = [ref.encode(spec, version, v) for v in values]
        # (pyarrow cannot build nested uuid extension values from Python: use their storage)
        rows = pa.RecordBatch.from_pylist(uuids_as_bytes(values), schema=storage_schema(schema))
        if not schema:  # no columns: keep the row count
            rows = pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), len(values), [None]))
        assert specs.encode(rows, name, version).to_pylist() == bodies
        assert specs.encoded_size(rows, name, version).to_pylist() == [len(b) for b in bodies]
        assert specs.encode(specs.decode(bodies, name, version), name, version).to_pylist() == bodies
        every = specs.decode(bodies, name, version, all_versions=True)
        assert specs.encode(every, name, version).to_pylist() == bodies
        assert encode_specialised(specs, rows, name, version).to_pylist() == bodies
        assert encode_specialised(specs, every, name, version).to_pylist() == bodies
        sizes = encode_specialised(specs, rows, name, version, sizes_only=True)
        assert sizes.to_pylist() == [len(b) for b in bodies]

    check()


def storage_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(storage_type(f.type)) for f in schema])
