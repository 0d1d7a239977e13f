"""The README's report example runs as printed, on a decoded real capture."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT


def test_the_readme_example_runs(decoded: dict[str, Path]) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Capture report") : text.index("## Spark")]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    assert 'rep.build_report("out")' in code
    folder = decoded["tansu_confluent"]
    values: dict[str, object] = {}
    for line in code.splitlines():  # each line's expression kept, with "out" the decoded folder
        line = line.split("#")[0].rstrip().replace('"out"', repr(str(folder)))
        if line.startswith("import"):
            exec(line, values)
        elif line:
            values[f"_{len(values)}"] = eval(line, values)
    results = list(values.values())
    assert results[-1] == "REBALANCE_IN_PROGRESS" and results[-2] == folder / "report.html"
