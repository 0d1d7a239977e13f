"""For every (message, version) of all three spec folders: generated values, encoded by the
reference codec, decode through the kernels to the same values, and the kernels' rows encode
back to the same bytes."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka import schema
from arrowkafka.api import SpecSet
from arrowkafka.ir import MessageSpec, Struct
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, VERSION_COLUMN, column_name
from tests.conftest import SPEC_FOLDERS
from tests.strategies import message_value


@cache
def specs_of(folder: str) -> SpecSet:
    return ak.load_specs(SPEC_FOLDERS[folder])


PAIRS = [(folder, name, v) for folder in sorted(SPEC_FOLDERS) for name, v in specs_of(folder).pairs()]


@pytest.mark.parametrize(("folder", "name", "version"), PAIRS, ids=[f"{f}-{n}-v{v}" for f, n, v in PAIRS])
def test_roundtrip(folder: str, name: str, version: int) -> None:
    specs = specs_of(folder)
    spec = specs[name]

    @settings(max_examples=30 if folder == "features" else 4, suppress_health_check=list(HealthCheck))
    @given(st.lists(message_value(spec, version), min_size=1, max_size=3))
    def check(values: list[dict[str, Any]]) -> None:
        bodies = [ref.encode(spec, version, v) for v in values]
        batch = specs.decode(bodies, name, version)
        batch.validate(full=True)
        assert batch.schema == specs.arrow_schema(name, version)
        rows = batch.to_pylist()
        assert rows == values
        assert rows == [ref.decode(spec, version, b) for b in bodies]
        assert [ref.encode(spec, version, r) for r in rows] == bodies

        every = specs.decode(bodies, name, version, all_versions=True)
        every.validate(full=True)
        assert every.schema == specs.arrow_schema(name)
        for wide, row in zip(every.to_pylist(), rows, strict=True):
            assert wide.pop(VERSION_COLUMN) == version
            assert project(spec, spec.root, version, wide, row) == row

    check()


def project(
    spec: MessageSpec, s: Struct, version: int, wide: dict[str, Any], row: dict[str, Any]
) -> dict[str, Any]:
    """``wide`` (an all-versions row) cut down to ``row``'s fields; what is cut must hold the
    field's default."""
    out: dict[str, Any] = {}
    fields = {column_name(f.name): f for f in (*s.optional_fields, *s.fields)}
    for key, value in wide.items():
        if key not in row:
            if key in (UNKNOWN_TAGS, TAGS_PRESENT):
                assert value == [], key
            else:
                assert value == schema.default_value(spec, fields[key], None), key
            continue
        f = fields.get(key)
        if f is not None and f.struct is not None and value is not None:
            if f.kind == "array":
                value = [project(spec, f.struct, version, w, r) for w, r in zip(value, row[key], strict=True)]
            else:
                value = project(spec, f.struct, version, value, row[key])
        out[key] = value
    return out
