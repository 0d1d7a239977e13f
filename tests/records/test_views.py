"""``decode_records(views=True)``: keys and values as binary_view arrays pointing into the input
(or the decompressed records) hold exactly what the copying decode holds, in every format, for
every codec, for control records and with ``payloads=False``; and views past the first GiB of a
large input name the right window of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from batchtools import CODEC_IDS, Rec, build, rewrap_v2

import arrowkafka as ak
import arrowkafka.records.decode as decode_module
from arrowkafka.codec.decode import Ranges

RECS = [
    Rec(None, None, [], 1_700_000_000_000),
    Rec(b"", b"", [("h", None)], 1_700_000_000_001),
    Rec(b"k" * 12, b"v" * 12, [("a", b"1")], 1_700_000_000_002),  # inline: 12 bytes fit in a view
    Rec(b"k" * 13, b"v" * 13, [], 1_700_000_000_003),  # 13: the first that points
    Rec(b"key-4", bytes(range(256)) * 40, [("x", b"y" * 100)], 1_700_000_000_004),
]


def _same(values: list[bytes] | Ranges, **kw: object) -> ak.records.Records:
    copied = ak.decode_records(values, **kw)
    viewed = ak.decode_records(values, views=True, **kw)
    for name in ("key", "value"):
        if name in viewed.records.column_names:
            assert viewed.records.schema.field(name).type == pa.binary_view()
    assert viewed.records.cast(copied.records.schema).equals(copied.records)
    assert viewed.batches.equals(copied.batches) and viewed.markers.equals(copied.markers)
    return viewed


FORMATS = [(m, c) for m in (0, 1, 2) for c in CODEC_IDS if m == 2 or c != "zstd"]  # zstd: magic 2 only


@pytest.mark.parametrize(("magic", "codec"), FORMATS)
def test_views_hold_what_copies_hold(magic: int, codec: str) -> None:
    recs = RECS if magic == 2 else [Rec(r.key, r.value, [], r.timestamp) for r in RECS]
    one = build(magic, CODEC_IDS[codec], recs)
    values = [one + build(magic, CODEC_IDS[codec], recs, offset=5), b"", one[:-3]]  # the last one partial
    got = _same(values)
    assert got.records.num_rows >= 2 * len(recs)
    assert got.records.column("value").to_pylist()[: len(recs)] == [r.value for r in recs]
    assert got.records.column("key").to_pylist()[: len(recs)] == [r.key for r in recs]


def test_views_with_payloads_off_keep_control_records() -> None:
    commit = Rec(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07", [], 5)
    marker = build(2, 0, [commit], transactional=True, producer_id=9, producer_epoch=1, base_sequence=0)
    marker = rewrap_v2(marker, attributes=0x30)  # a control batch
    values = [build(2, 0, RECS) + marker]
    got = _same(values, payloads=False)
    assert "value" not in got.records.column_names
    assert got.markers.column("type").to_pylist() == ["COMMIT"]
    assert _same(values).markers.column("coordinator_epoch").to_pylist() == [7]


def test_views_past_the_first_gib_name_their_window() -> None:
    # batches straddling and past the 1 GiB mark of one buffer (Ranges: read where they lie)
    one = build(2, 0, RECS)
    gib = 1 << 30
    data = np.zeros(gib + (4 << 20), np.uint8)  # untouched pages cost nothing
    starts = np.array([100, gib - 2000, gib + 12345, 2 * len(one)], np.int64)
    for s in starts:
        data[s : s + len(one)] = np.frombuffer(one, np.uint8)
    got = _same(Ranges(data, starts, starts + len(one)))
    assert got.records.column("value").to_pylist() == [r.value for r in RECS] * 4
    assert len(got.records.column("value").chunk(0).buffers()) > 3  # validity, views, 2+ windows


def test_views_write_to_parquet_and_read_back(tmp_path: Path) -> None:
    got = _same([build(2, 3, RECS)])
    path = tmp_path / "records.parquet"
    pq.write_table(got.records, path)
    back = pq.read_table(path)
    assert back.column("value").to_pylist() == [r.value for r in RECS]


def test_strided_and_reversed_ranges_read_the_right_bytes() -> None:
    # the kernels load words and copy by raw pointer: a strided view must reach them contiguous
    one = np.frombuffer(build(2, 0, RECS), np.uint8)
    spread = np.zeros(2 * len(one), np.uint8)
    spread[::2] = one
    backwards = one[::-1].copy()[::-1]  # a negative-stride view of the same bytes
    for data in (spread[::2], backwards):
        got = _same(Ranges(data, np.array([0]), np.array([len(one)])))
        assert got.records.column("value").to_pylist() == [r.value for r in RECS]


@pytest.mark.parametrize(("views", "limit"), [(False, 12_000), (True, 300)])  # views: headers alone
def test_output_is_cut_into_chunks_under_the_offsets_limit(
    monkeypatch: pytest.MonkeyPatch, views: bool, limit: int
) -> None:
    # the int32 offsets limit, lowered so a test reaches it: records and headers count too
    values = [build(2, 0, RECS, offset=10 * i) for i in range(6)]
    whole = ak.decode_records(values, views=views)
    monkeypatch.setattr(decode_module, "OFFSETS_LIMIT", limit)
    cut = ak.decode_records(values, views=views, max_uncompressed=100)
    assert cut.records.column("value").num_chunks > 1
    assert cut.records.combine_chunks().equals(whole.records.combine_chunks())
    assert cut.batches.equals(whole.batches)


def test_views_of_every_short_length_hold_their_bytes_and_zeros() -> None:
    """Keys and values of 0 to 20 bytes (inline up to 12, pointing from 13), distinct bytes
    each: the same as copies, and an inline view's unused bytes zero, as Arrow's format asks."""
    recs = [Rec(bytes(range(7 + n, 7 + 2 * n)), bytes(range(100 + n, 100 + 2 * n)), [], n) for n in range(21)]
    got = _same([build(2, 0, recs)])
    for name in ("key", "value"):
        column = got.records.column(name).combine_chunks()
        assert column.to_pylist() == [getattr(r, name) for r in recs]
        views = np.frombuffer(column.buffers()[1], np.uint8)[: 16 * len(recs)].reshape(-1, 16)
        for n, view in enumerate(views):
            assert int.from_bytes(view[:4].tobytes(), "little") == n
            if n <= 12:
                assert view[4 + n :].tobytes() == bytes(12 - n)
            else:
                assert view[4:8].tobytes() == getattr(recs[n], name)[:4]
