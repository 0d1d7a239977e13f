"""The prefetches from where ``bytes`` and ``records`` values end (``kernels/hints.py``:
``hop_mark`` in pass 1, ``hop_ahead`` in pass 2 with views) change no result: the generated
kernel gives the interpreter's rows and rejects with views and copies, on one and two threads,
with bad rows on both sides of the split, and whatever the notes' array held before."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.codec import decode as codec_decode
from arrowkafka.codec.decode import decode_batch
from arrowkafka.plan import compile_plan
from tests.codegen.agree import assert_same, outcomes
from tests.conftest import SHARED

pytestmark = [pytest.mark.jit, pytest.mark.usefixtures("own_kernel_folder")]

SPECS = ak.load_specs()
CASES = [("fetch_response_v12_10t10p_1k", "FetchResponse", 12), ("produce_request_v9", "ProduceRequest", 9)]


def bodies(stem: str) -> list[bytes]:
    """200 copies of a real body, some cut or damaged: first, around the two-thread split
    (row 100), and last."""
    body = (SHARED / "vectors" / f"{stem}.bin").read_bytes()
    out = [body] * 200
    for i in (0, 57, 99, 100, 101, 199):
        out[i] = body[: len(body) // 2] if i % 2 else body[:-1] + b"\x07"
    return out


def decoded(name: str, version: int, rows: list[bytes], kernel: str, **options: Any) -> dict:
    out = outcomes(SPECS, name, version, rows, kernel, **options)
    assert out["null"][1].num_rows == 6  # the damaged rows: the rejects
    return out


@pytest.mark.parametrize(("stem", "name", "version"), CASES)
@pytest.mark.parametrize("views", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_generated_kernel_agrees_with_the_interpreter(
    stem: str, name: str, version: int, views: bool, threads: int
) -> None:
    rows = bodies(stem)
    options = {"views": views, "threads": threads}
    want = decoded(name, version, rows, "interpreter", **options)
    assert_same(want, decoded(name, version, rows, "specialised", **options))
    good = [r for r in rows if r == rows[2]]
    for kernel in ("interpreter", "specialised"):  # and the views hold the same values as copies
        got = decode_batch(SPECS[name], good, version, kernel=kernel, **options)
        assert got.to_pylist() == decode_batch(SPECS[name], good, version, kernel="interpreter").to_pylist()


@pytest.mark.parametrize(("stem", "name", "version"), CASES)
def test_stale_notes_change_nothing(
    stem: str, name: str, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Notes left in a reused block (or by a message that failed) are only hints: fill the
    array with positions far outside the input, negative ones and random ones first."""
    rows = bodies(stem)
    want = decoded(name, version, rows, "specialised", views=True, threads=2)
    made: list[np.ndarray] = []
    real = codec_decode._hops

    def garbage(*args: Any) -> np.ndarray:
        hops = real(*args)
        rng = np.random.default_rng(len(made))
        hops[...] = rng.choice([-(1 << 62), -1, 1 << 40, (1 << 63) - 1], size=hops.shape)
        hops.flat[::3] = rng.integers(0, 1 << 20, size=hops.flat[::3].shape)
        made.append(hops)
        return hops

    monkeypatch.setattr(codec_decode, "_hops", garbage)
    assert_same(want, decoded(name, version, rows, "specialised", views=True, threads=2))
    assert made and all(h.shape[0] == len(compile_plan(SPECS[name], version).view_nodes()) for h in made)
    assert all(h.shape[1] > 0 for h in made)


def test_plans_without_bytes_note_nothing() -> None:
    plan = compile_plan(SPECS["MetadataResponse"], 12)
    assert plan.view_nodes() == ()
    starts, ends = np.array([0], np.int64), np.array([100], np.int64)
    assert codec_decode._hops(plan, starts, ends, 0, 1) is codec_decode.NO_HOPS
    # and the notes' room follows the input, not a count the input could forge
    fetch = compile_plan(SPECS["FetchResponse"], 12)
    small = codec_decode._hops(fetch, starts, ends, 0, 1)
    assert small.shape == (1, 100 // codec_decode.HOP_BYTES + 64)
    big = codec_decode._hops(fetch, np.array([0], np.int64), np.array([1 << 40], np.int64), 0, 1)
    assert big.shape[1] * 8 * big.shape[0] <= codec_decode.HOPS_MAX_BYTES


@pytest.mark.parametrize(("stem", "name", "version"), CASES)
def test_notes_stay_inside_their_room(
    stem: str, name: str, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room for two notes where there are hundreds of values: nothing is written past it (the
    memory after it keeps its sentinels) and the rows are the same."""
    rows = bodies(stem)
    want = decoded(name, version, rows, "specialised", views=True)
    rooms: list[np.ndarray] = []

    def two(*args: Any) -> np.ndarray:
        room = np.full(2 + 64, 12345, np.int64)
        rooms.append(room)
        return room[:2].reshape(1, 2)

    monkeypatch.setattr(codec_decode, "_hops", two)
    assert_same(want, decoded(name, version, rows, "specialised", views=True))
    assert rooms and all((room[2:] == 12345).all() for room in rooms)
    assert all((room[:2] != 12345).all() for room in rooms)  # the first two were noted


def test_the_stride_guess_stays_inside_the_input() -> None:
    """The guess from the last two notes: only from a real earlier note (a null value leaves
    its slot as it was: any int64, which must not overflow into a wild address), only inside
    the input. (Runs with and without the JIT: the same arithmetic.)"""
    from arrowkafka.kernels.hints import HOPS_STRIDES, stride_ahead

    assert stride_ahead(150, 166, 400) == 166 + HOPS_STRIDES * 16
    assert stride_ahead(100, 166, 400) == -1  # past the end
    for stale in (-(3 << 60), -(1 << 62), -1, 166, 167, (1 << 63) - 1):
        assert stride_ahead(stale, 166, 400) == -1
    fn = getattr(stride_ahead, "py_func", stride_ahead)  # the plain-Python arithmetic too
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (numpy warns of an int64 overflow)
        assert fn(np.int64(-(3 << 60)), np.int64(166), 400) == -1
        assert fn(np.int64(150), np.int64(166), 400) == 166 + HOPS_STRIDES * 16


def test_a_null_value_between_present_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """EnvelopeRequest v0 has three bytes fields, one nullable: rows whose value is null
    between rows whose value is there, over notes filled with values that would overflow."""
    name, version = "EnvelopeRequest", 0
    spec = SPECS[name]
    values = [
        {
            "request_data": bytes(k % 7) * 40,
            "request_principal": None if k % 3 == 1 else b"p" * (k % 5),
            "client_host_address": b"\x7f\x00\x00\x01",
            "_unknown_tags": [],
        }
        for k in range(150)
    ]
    table = pa.RecordBatch.from_pylist(values, schema=SPECS.arrow_schema(name, version))
    rows = ak.encode(table, name, version).to_pylist()
    want = decode_batch(spec, rows, version, kernel="interpreter", views=True, threads=2)
    real = codec_decode._hops

    def stale(*args: Any) -> np.ndarray:
        hops = real(*args)
        hops[...] = -(3 << 60)
        return hops

    monkeypatch.setattr(codec_decode, "_hops", stale)
    got = decode_batch(spec, rows, version, kernel="specialised", views=True, threads=2)
    assert got.equals(want) and got.column("request_principal").null_count == 50
