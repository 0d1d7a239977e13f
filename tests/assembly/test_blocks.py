"""Large kernel buffers are reused from batch to batch (``arrowkafka.assembly.blocks``), but never while
anything still refers to them: a batch kept by the caller keeps its values whatever is decoded
after it, and what the process keeps stays under its bound."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka.assembly import blocks
from tests.conftest import SHARED


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "_kept", [])
    monkeypatch.setattr(blocks, "_largest", 0)


def address(a: np.ndarray) -> int:
    return int(a.ctypes.data)


def test_a_block_comes_back_only_when_nothing_refers_to_it() -> None:
    first = blocks.block(3 << 20)
    at = address(first)
    view = first[64:].view(np.int32)
    del first
    assert address(blocks.block(3 << 20)) != at  # a view of it is alive
    buffer = pa.py_buffer(view)
    del view
    assert address(blocks.block(3 << 20)) != at  # an Arrow buffer over it
    array = pa.Array.from_buffers(pa.int32(), 10, [None, buffer])
    del buffer
    assert address(blocks.block(3 << 20)) != at  # an Arrow array
    del array
    assert address(blocks.block(3 << 20)) == at  # all gone: the same memory again
    assert address(blocks.block(6 << 20)) != at  # (too small for this one)


@pytest.mark.jit  # megabytes of decoding: minutes as plain Python
def test_a_kept_batch_keeps_its_values() -> None:
    body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
    other = ak.encode(
        ak.decode([body], "MetadataResponse", 12).set_column(
            0, "throttle_time_ms", pa.array([7], pa.int32())
        ),
        "MetadataResponse",
        12,
    )[0].as_py()
    kept = ak.decode([body] * 100, "MetadataResponse", 12)
    want = kept.to_pylist()
    for _ in range(3):  # later batches of the same size: they may only reuse free blocks
        again = ak.decode([other] * 100, "MetadataResponse", 12)
        assert again.column("throttle_time_ms").to_pylist() == [7] * 100
        del again
    assert kept.to_pylist() == want


@pytest.mark.jit
def test_decoding_again_reuses_the_blocks() -> None:
    body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
    ak.decode([body] * 100, "MetadataResponse", 12)
    kept = [address(b) for b in blocks._kept]
    assert kept, "a 4 MB batch decodes into blocks of a megabyte or more"
    ak.decode([body] * 100, "MetadataResponse", 12)
    assert [address(b) for b in blocks._kept] == kept


def test_what_is_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "KEEP_BYTES", 8 << 20)
    held = [blocks.block(1 << 20) for _ in range(10)]  # all in use: past the bound, not kept
    assert sum(len(b) for b in blocks._kept) == 8 << 20
    del held
    blocks.block(2 << 20)  # the free ones make room
    assert sum(len(b) for b in blocks._kept) <= 8 << 20
    small = blocks.block(1000)
    assert len(small) == 1000 and all(len(b) >= blocks.SMALLEST for b in blocks._kept)


def test_the_bound_holds_four_of_the_largest_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``KEEP_BYTES`` the bound is four times the largest block made, so that one big
    batch's blocks (its input, arenas and output) are all there for the next batch."""
    monkeypatch.setattr(blocks, "KEEP_BYTES", 8 << 20)
    held = [blocks.block(3 << 20) for _ in range(5)]
    kept = [address(b) for b in blocks._kept]
    assert len(kept) == 4 and sum(len(b) for b in blocks._kept) == 12 << 20  # the fifth is not kept
    del held
    again = [blocks.block(3 << 20) for _ in range(4)]  # the same four, no new memory
    assert sorted(address(b) for b in again) == sorted(kept)


def test_a_block_past_keep_bytes_is_kept_and_the_bound_has_a_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block that raises the bound is counted in it (a 9 MB block with an 8 MB bound is kept);
    and however large a block was asked for (a length the input claims), the bound stops at
    ``KEEP_MOST``."""
    monkeypatch.setattr(blocks, "KEEP_BYTES", 8 << 20)
    monkeypatch.setattr(blocks, "KEEP_MOST", 20 << 20)
    big = blocks.block(9 << 20)
    assert [address(b) for b in blocks._kept] == [address(big)]
    claimed = blocks.block(64 << 20)  # never written: its pages cost nothing, and it is not kept
    assert len(claimed) == 64 << 20 and sum(len(b) for b in blocks._kept) == 9 << 20
    held = [blocks.block(4 << 20) for _ in range(4)]  # 9 + 4 x 4 = 25 MB: past the ceiling of 20
    assert len(held) == 4 and sum(len(b) for b in blocks._kept) == 17 << 20


def test_a_block_the_system_refuses_is_a_memory_error() -> None:
    """A new block is a mapping of its own: one the system refuses (here more than any address
    space holds) is a ``MemoryError``, as ``np.empty`` would raise, and nothing is kept."""
    with pytest.raises(MemoryError, match="cannot map"):
        blocks.block(1 << 60)
    assert blocks._kept == [] and blocks._largest == 0  # nor does it raise the bound


def test_tracemalloc_counts_a_new_block_while_it_lives() -> None:
    """Blocks are mappings numpy did not make, so ``tracemalloc`` would not see them: a test
    that bounds what a decode allocates with it (``test_forged_count_does_not_allocate``) would
    pass whatever the decoder mapped. They are counted as numpy's own memory is."""
    import gc
    import tracemalloc

    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        b = blocks.block(24 << 20)
        held, peak = tracemalloc.get_traced_memory()
        assert held - before >= 24 << 20 and peak >= held
        again = blocks.block(24 << 20)  # in use: a second mapping, counted too
        assert tracemalloc.get_traced_memory()[0] - before >= 48 << 20
        del b, again
        blocks._kept.clear()
        gc.collect()
        assert tracemalloc.get_traced_memory()[0] - before < 1 << 20  # unmapped: no longer counted
    finally:
        tracemalloc.stop()
