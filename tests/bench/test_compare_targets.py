"""bench/compare.py's BEHIND TARGET lines for the records issue, on made-up rows: a target a run
misses is named, with what the run measured; one it meets is not."""

from __future__ import annotations

import sys
from typing import Any

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import compare

ONE_KB = "records: 1 KB values, uncompressed"
BARE = "arrowkafka decode_records, views, no CRC check (as the Python peers read)"


def _rows(copies: float, views: float, bare: float, peer: float = 100.0) -> list[dict[str, Any]]:
    made = {"arrowkafka decode_records": copies, "arrowkafka decode_records, views": views, BARE: bare}
    rows = [{"workload": ONE_KB, "impl": impl, "mb_per_s": mb, "ratio_to_best_peer": mb / peer}
            for impl, mb in made.items()]  # fmt: skip
    for impl, mb in (("arrowkafka decode_records", 700.0), ("arrowkafka decode_records, views", 750.0),
                     (BARE, 760.0), ("the decompression alone", 1000.0)):  # fmt: skip
        rows.append({"workload": "records: 200 B values, lz4", "impl": impl, "mb_per_s": mb,
                     "ratio_to_best_peer": mb / 40})  # fmt: skip
    return rows


def test_records_targets_missed_are_named_with_the_figures() -> None:
    assert compare.records_behind(_rows(2400, 4000, 5600)) == [
        f"{ONE_KB}: 2400 MB/s, 24.0x the best Python peer (40.0x with views; 56.0x with views and no"
        " CRC check, as the peers read), target 2,000 and 50x",
        "records: 200 B values, lz4: 0.70 of the decompression alone, 0.75 with views, target 0.8",
    ]


def test_a_missed_ratio_names_what_this_machine_allows() -> None:
    rows = _rows(2500, 5100, 6000)
    for impl, mb in ((compare.CEILING_COPIES, 860.0), (compare.CEILING_VIEWS, 940.0)):
        rows.append({"workload": "records: 200 B values, lz4", "impl": impl, "mb_per_s": mb})
    assert compare.records_behind(rows) == [
        "records: 200 B values, lz4: 0.70 of the decompression alone, 0.75 with views (at most 0.86 and"
        " 0.94 here), target 0.8"
    ]


def test_records_targets_met_are_not_named() -> None:
    # 50x reached with views (every CRC checked) and 2 GB/s with copies: met
    assert not [x for x in compare.records_behind(_rows(2500, 5100, 6000)) if x.startswith(ONE_KB)]
    assert [x for x in compare.records_behind(_rows(1900, 5100, 6000)) if x.startswith(ONE_KB)]  # < 2 GB/s
