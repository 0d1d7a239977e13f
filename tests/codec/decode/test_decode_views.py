"""``decode(views=True)``: bytes and records fields as ``binary_view`` arrays into the input.
For every (message, version) with such a field, in every spec folder: the same values as the
copies, in every form (one version, all versions, rejected rows), on one and two threads; the
rows encode back to the same bytes; Parquet and DuckDB read them; the views outlive the input
the caller handed in; an input too large for views is copied."""

from __future__ import annotations

import gc
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.api import SpecSet
from arrowkafka.assembly import assemble
from arrowkafka.kernels import decode as kernel
from arrowkafka.plan import compile_plan
from tests.conftest import SHARED, SPEC_FOLDERS
from tests.strategies import message_value


@cache
def specs_of(folder: str) -> SpecSet:
    return ak.load_specs(SPEC_FOLDERS[folder])


def viewed(specs: SpecSet, name: str, version: int, all_versions: bool = False) -> bool:
    return bool(compile_plan(specs[name], version, all_versions).view_nodes())


PAIRS = [
    (folder, name, v)
    for folder in sorted(SPEC_FOLDERS)
    for name, v in specs_of(folder).pairs()
    if viewed(specs_of(folder), name, v, True)
]


def binary_types(t: pa.DataType) -> list[pa.DataType]:
    """Every binary-like type inside ``t``."""
    if pa.types.is_struct(t):
        return [x for f in t for x in binary_types(f.type)]
    if pa.types.is_list(t):
        return binary_types(t.value_type)
    if pa.types.is_map(t):
        return binary_types(t.key_type) + binary_types(t.item_type)
    return [t] if pa.types.is_binary(t) or pa.types.is_binary_view(t) else []


def test_there_are_pairs_with_views() -> None:
    names = {n for _, n, _ in PAIRS}
    assert {"ProduceRequest", "FetchResponse"} <= names and len(PAIRS) > 50


@pytest.mark.parametrize(("folder", "name", "version"), PAIRS, ids=[f"{f}-{n}-v{v}" for f, n, v in PAIRS])
def test_views_hold_what_copies_hold(folder: str, name: str, version: int) -> None:
    specs = specs_of(folder)
    spec = specs[name]

    @settings(max_examples=3, suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.lists(message_value(spec, version), min_size=1, max_size=4))
    def check(values: list[dict[str, Any]]) -> None:
        bodies = [ref.encode(spec, version, v) for v in values]
        for all_versions in (False, True):
            copy = specs.decode(bodies, name, version, all_versions=all_versions)
            view = specs.decode(bodies, name, version, all_versions=all_versions, views=True)
            view.validate(full=True)
            assert view.to_pylist() == copy.to_pylist()
            types = [x for f in view.schema for x in binary_types(f.type)]
            if viewed(specs, name, version, all_versions):
                assert pa.binary_view() in types
            assert view.schema.names == copy.schema.names
        assert (
            specs.encode(specs.decode(bodies, name, version, views=True), name, version).to_pylist() == bodies
        )
        # a truncated body among them: its row is null, the others keep their views
        cut, _ = specs.decode([*bodies, bodies[0][:-1] or b"\x00"], name, version, errors="null", views=True)
        cut.validate(full=True)
        want, _ = specs.decode([*bodies, bodies[0][:-1] or b"\x00"], name, version, errors="null")
        assert cut.to_pylist() == want.to_pylist()

    check()


FETCH = (SHARED / "vectors" / "fetch_response_v12_10t10p_1k.bin").read_bytes()
PRODUCE = (SHARED / "vectors" / "produce_request_v9.bin").read_bytes()


@pytest.mark.parametrize(
    ("body", "name", "version"), [(FETCH, "FetchResponse", 12), (PRODUCE, "ProduceRequest", 9)]
)
def test_real_vectors_on_two_threads(body: bytes, name: str, version: int) -> None:
    bodies = [body] * 300  # past the plain-Python tier, and enough rows for two ranges
    copy = ak.decode(bodies, name, version)
    view = ak.decode(bodies, name, version, views=True, threads=2)
    view.validate(full=True)
    assert view.to_pylist() == copy.to_pylist()
    assert view.cast(copy.schema).equals(copy)  # a cast is the copy, where one is needed


def test_views_outlive_the_callers_input() -> None:
    bodies = [bytes(b) for b in [FETCH] * 3]
    view = ak.decode(bodies, "FetchResponse", 12, views=True)
    want = ak.decode([FETCH] * 3, "FetchResponse", 12).to_pylist()
    del bodies
    gc.collect()
    assert view.to_pylist() == want


def test_parquet_and_duckdb_read_views(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    view = ak.decode([FETCH] * 2, "FetchResponse", 12, views=True)
    copy = ak.decode([FETCH] * 2, "FetchResponse", 12)
    path = tmp_path / "fetch.parquet"
    pq.write_table(pa.Table.from_batches([view]), path)
    assert pq.read_table(path).to_pylist() == copy.to_pylist()
    (got,) = duckdb.sql(
        f"SELECT sum(octet_length(p.records)) FROM (SELECT unnest(r.partitions) AS p FROM "
        f"(SELECT unnest(responses) AS r FROM '{path}'))"
    ).fetchall()
    records = [p["records"] for row in copy.to_pylist() for r in row["responses"] for p in r["partitions"]]
    assert got[0] == sum(len(r) for r in records if r is not None) > 0


def test_an_input_too_large_for_views_is_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assemble, "VIEW_LIMIT", 1000)
    from arrowkafka.codec import decode as codec_decode

    monkeypatch.setattr(codec_decode, "VIEW_LIMIT", 1000)
    got = ak.decode([FETCH], "FetchResponse", 12, views=True)
    assert pa.binary_view() not in [x for f in got.schema for x in binary_types(f.type)]
    assert got.equals(ak.decode([FETCH], "FetchResponse", 12))


@pytest.mark.jit  # compiles the kernels generated for the two plans
@pytest.mark.parametrize(
    ("body", "name", "version"), [(FETCH, "FetchResponse", 12), (PRODUCE, "ProduceRequest", 9)]
)
def test_the_generated_kernel_writes_the_same_views(body: bytes, name: str, version: int) -> None:
    bodies = [body] * 3
    got = ak.decode(bodies, name, version, views=True, kernel="specialised")
    got.validate(full=True)
    assert got.equals(ak.decode(bodies, name, version, views=True, kernel="interpreter"))
    assert got.to_pylist() == ak.decode(bodies, name, version).to_pylist()


def test_views_of_both_sources_and_every_length() -> None:
    """The kernels' view writer on its own: values from the input and from the constants,
    empty, inline (up to 12 bytes) and longer, and nulls (left as the allocation's zeros),
    against pyarrow's own views of the same values."""
    data = np.frombuffer(bytes(range(256)) * 2, np.uint8)
    consts = np.frombuffer(b"constant-default-bytes-here", np.uint8)
    # (source, position, length); None: a null
    cases = [(data, 0, 0), (data, 5, 1), (data, 10, 12), (data, 3, 13), (data, 100, 200), (consts, 0, 8),
             (consts, 2, 20), None]  # fmt: skip
    a8 = np.zeros(16 * len(cases), np.uint8)
    for slot, case in enumerate(cases):
        if case is not None:
            src, pos, n = case
            kernel._put_view(a8, a8.view(np.int32), 16 * slot, src, pos, n, int(src is consts))
    valid = np.array([c is not None for c in cases])
    got = pa.Array.from_buffers(
        pa.binary_view(),
        len(cases),
        [
            pa.py_buffer(np.packbits(valid, bitorder="little")),
            pa.py_buffer(a8),
            pa.py_buffer(data),
            pa.py_buffer(consts),
        ],
    )
    got.validate(full=True)
    want = [None if c is None else c[0][c[1] : c[1] + c[2]].tobytes() for c in cases]
    assert got.to_pylist() == want
    assert got.equals(pa.array(want, pa.binary_view()))


def test_views_are_not_held_to_the_copies_2_gib() -> None:
    """2,100 bodies over the same 1 MB body: 2.1 GB of records as copies, which one batch
    cannot hold, but nothing to hold as views. (``ak.Ranges``: the public name.)"""
    Ranges = ak.Ranges

    rows = ak.decode([PRODUCE], "ProduceRequest", 9)
    value = rows.to_pylist()
    value[0]["topic_data"][0]["partition_data"][0]["records"] = b"r" * (1 << 20)
    body = ak.encode(pa.RecordBatch.from_pylist(value, schema=rows.schema), "ProduceRequest", 9)[0].as_py()
    n = 2100
    ranges = Ranges(np.frombuffer(body, np.uint8), np.zeros(n, np.int64), np.full(n, len(body), np.int64))
    with pytest.raises(ValueError, match="more than 2 GiB"):
        ak.decode(ranges, "ProduceRequest", 9)
    got = ak.decode(ranges, "ProduceRequest", 9, views=True)
    got.validate(full=True)
    assert got.slice(n - 1).to_pylist() == ak.decode([body], "ProduceRequest", 9).to_pylist()
