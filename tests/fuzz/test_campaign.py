"""The fuzz campaign, short: every target (bodies, record batches, captures, segment files,
encoder inputs) for ``ARROWKAFKA_FUZZ_SECONDS`` (45) seconds of cases in a child process, with
its invariants checked. Every finding must be one of ``KNOWN.json``, whose entries each name
the fault; and every entry there must still reproduce, so a fixed fault fails this test until
its entry goes. The long run is ``bench/fuzz.py``. A planted wrong result, a planted crash and a
planted hang show that the runner reports each."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.harness import TARGETS
from tests.fuzz.runner import parse_case, run

KNOWN = Path(__file__).with_name("KNOWN.json")


def _known() -> list[dict[str, Any]]:
    entries = json.loads(KNOWN.read_text())
    for e in entries:
        assert set(e) >= {"case", "invariant", "fault"} and e["fault"].strip(), (
            f"KNOWN entry without a fault: {e}"
        )
    return list(entries)


def _key(f: dict[str, Any]) -> tuple[str, str]:
    return f"{f['target']}:{f['seed']}:{f['round']}", f["invariant"]


def test_short_campaign_finds_only_known_faults(tmp_path: Path) -> None:
    seconds = float(os.environ.get("ARROWKAFKA_FUZZ_SECONDS", "45"))
    summary = run(tmp_path, seconds)
    print(json.dumps(summary["tried"]))
    assert all(summary["tried"][t] > 0 for t in TARGETS), summary["tried"]
    known = {(e["case"], e["invariant"]) for e in _known()}
    new = [f for f in summary["findings"] if _key(f) not in known]
    assert not new, "new findings (fix them, or name the fault in KNOWN.json):\n" + json.dumps(new, indent=1)


def test_known_faults_still_reproduce(tmp_path: Path) -> None:
    entries = _known()
    if not entries:
        return
    summary = run(tmp_path, 0, cases=sorted({parse_case(e["case"]) for e in entries}))
    seen = {_key(f) for f in summary["findings"]}
    gone = [e for e in entries if (e["case"], e["invariant"]) not in seen]
    assert not gone, "fixed? these no longer reproduce; take them out of KNOWN.json:\n" + json.dumps(
        gone, indent=1
    )


# cases that were findings once, now fixed: (case, what it was)
FIXED = [
    ("body:20261125:1028", "a NaN float (ClientQuotaRecord v0): Arrow's equals held the same rows unequal"),
]


def test_fixed_faults_stay_fixed(tmp_path: Path) -> None:
    summary = run(tmp_path, 0, cases=[parse_case(case) for case, _ in FIXED])
    assert sum(summary["tried"].values()) == len(FIXED)
    assert summary["findings"] == [], json.dumps(summary["findings"], indent=1)


@pytest.mark.parametrize(
    ("target", "invariant"),
    [
        ("plant-wrong", "rows + rejects = inputs"),
        ("plant-crash", "no crash"),
        ("plant-hang", "no hang (limit 5 s)"),
    ],
)
def test_planted_faults_are_reported(tmp_path: Path, target: str, invariant: str) -> None:
    summary = run(tmp_path, 0, cases=[(target, 0, r) for r in range(4)], case_limit=5)
    assert summary["tried"][target] == 4
    hits = [f for f in summary["findings"] if f["invariant"] == invariant]
    assert hits, summary
    assert all(Path(f["input"]).is_file() for f in hits)
    if target == "plant-wrong":  # every case: the check is always fed a lost row
        assert len(hits) == 4
        assert json.loads(Path(hits[0]["input"]).read_text())["bodies"]
    else:  # the planted fault strikes about half the cases, and the child after it goes on
        assert 0 < len(hits) < 4
