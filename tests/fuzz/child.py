"""The fuzz runner's child process: reads one case a line on stdin, ``{"target", "seed",
"round"}`` (or ``{"warm": target}``), runs it and answers one JSON line on stdout. Before a
case decodes anything its input is written to ``WORKDIR/inflight.<ext>``, so when the case
kills or hangs this process the runner still has it. Run by ``tests/fuzz/runner.py``."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fuzz import harness


def main(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    answer = sys.stdout
    sys.stdout = sys.stderr  # nothing the code under test prints can break the protocol

    def save(ext: str, data: bytes) -> None:
        for old in workdir.glob("inflight.*"):
            old.unlink()
        (workdir / f"inflight.{ext}").write_bytes(data)

    for line in sys.stdin:
        ask = json.loads(line)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if "warm" in ask:
                    harness.warm(ask["warm"])
                    reply: dict = {"warm": ask["warm"]}
                else:
                    case_dir = workdir / "case"
                    case_dir.mkdir(exist_ok=True)
                    reply = {
                        "findings": harness.run_case(ask["target"], ask["seed"], ask["round"], case_dir, save)
                    }
        except Exception as e:
            reply = {
                "findings": [
                    {
                        "invariant": "harness",
                        "error": type(e).__name__,
                        "message": traceback.format_exc()[-1500:],
                    }
                ]
            }
        answer.write(json.dumps(reply) + "\n")
        answer.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
