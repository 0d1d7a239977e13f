"""The long fuzz run: the same runner as ``tests/fuzz/test_campaign.py``, for as long as asked.

    .venv/bin/python bench/fuzz.py --minutes 30 --out fuzz-out
    .venv/bin/python bench/fuzz.py --case body:0:17 --out fuzz-out   # one finding again

Prints a JSON summary (inputs tried per target, findings with their inputs under
``OUT/findings/``) and exits 1 when something was found. Cases are ``(target, seed, round)``;
``--seed`` starts a campaign over other cases.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.runner import main

if __name__ == "__main__":
    sys.exit(main(default_seconds=30 * 60))
