"""The fuzz runner: feeds cases to a child process (``child.py``) target by target, round-robin,
until the time budget is spent, and sees every way a case can fail: a broken invariant (the
child says so), a crash (the child dies: a segfault, an abort, a kernel's bounds check) and a
hang (no answer within the per-case limit: the child is killed). After a crash or a hang a new
child takes over from the next case. Each finding keeps its input in ``OUT/findings/``.

The child's kernels are compiled with ``NUMBA_BOUNDSCHECK=1`` (an index out of bounds raises
instead of reading memory it does not own) into a cache of the campaign's own, kept between
runs (``ARROWKAFKA_FUZZ_CACHE``, else ~/.cache/arrowkafka-fuzz): the first run on a machine
spends minutes compiling; that time and each target's seed building ("warm") are not counted
in the budget.

    python -m tests.fuzz.runner --seconds 60 --out DIR [--target body ...] [--seed N]
    python -m tests.fuzz.runner --case body:0:17 --out DIR     # one case again
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fuzz.harness import TARGETS

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("child.py")
CASE_LIMIT = 120.0  # seconds a case may take before it is a hang
WARM_LIMIT = 1800.0  # seconds a target's warm-up may take (a cold compile with bounds checks)


def cache_dir() -> Path:
    return Path(os.environ.get("ARROWKAFKA_FUZZ_CACHE") or Path.home() / ".cache" / "arrowkafka-fuzz")


class Child:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        cache = cache_dir()
        env = {
            **os.environ,
            "NUMBA_BOUNDSCHECK": "1",
            "NUMBA_CACHE_DIR": str(cache / "numba"),
            "ARROWKAFKA_CACHE_DIR": str(cache / "kernels"),
            "PYTHONFAULTHANDLER": "1",
        }
        workdir.mkdir(parents=True, exist_ok=True)
        self.stderr = open(workdir / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=ROOT,
            env=env,
        )
        self.buffer = b""
        self.warm: set[str] = set()

    def ask(self, request: dict[str, Any], limit: float) -> dict[str, Any] | str:
        """The child's answer, or "crash" or "hang"."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash"
        deadline = time.monotonic() + limit
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return "hang"
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.proc.wait()
                    return "crash"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return dict(json.loads(line))

    def stderr_tail(self) -> str:
        if not self.stderr.closed:
            self.stderr.flush()
        text = (self.workdir / "stderr.log").read_bytes().decode(errors="replace")
        return text.split("\nExtension modules:")[0][-2000:]  # faulthandler's stack, not its module list

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
        return self.proc.returncode


def run(
    out: Path,
    seconds: float,
    targets: tuple[str, ...] = TARGETS,
    seed: int = 0,
    cases: list[tuple[str, int, int]] | None = None,
    case_limit: float = CASE_LIMIT,
) -> dict[str, Any]:
    """Run until ``seconds`` of case time are spent (or, given ``cases``, exactly those cases);
    return the summary (also written to ``OUT/summary.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "findings").mkdir(exist_ok=True)
    tried = dict.fromkeys(targets, 0)
    findings: list[dict[str, Any]] = []
    next_round = dict.fromkeys(targets, 0)
    queue = list(cases) if cases is not None else None
    for t, _, _ in queue or []:
        tried.setdefault(t, 0)
    child: Child | None = None
    spent = 0.0
    n = 0
    while True:
        if queue is not None:
            if not queue:
                break
            target, case_seed, round_ = queue.pop(0)
        else:
            if spent >= seconds:
                break
            target = targets[n % len(targets)]
            case_seed, round_ = seed, next_round[target]
            next_round[target] += 1
        n += 1
        if child is None:
            child = Child(out / "work")
        if target not in child.warm:
            got = child.ask({"warm": target}, WARM_LIMIT)
            if isinstance(got, dict) and not got.get("findings"):
                child.warm.add(target)
            else:  # a seed that does not go through cleanly: the campaign cannot run this target
                findings.append(
                    {
                        "target": target,
                        "seed": case_seed,
                        "round": -1,
                        "invariant": "warm-up",
                        "error": got if isinstance(got, str) else "",
                        "message": json.dumps(got)[-1500:] if isinstance(got, dict) else child.stderr_tail(),
                    }
                )
                child.stop()
                child = None
                if queue is None:  # leave the target out of the rest of the run
                    targets = tuple(t for t in targets if t != target)
                    if not targets:
                        break
                continue
        start = time.monotonic()
        got = child.ask({"target": target, "seed": case_seed, "round": round_}, case_limit)
        spent += time.monotonic() - start
        tried[target] += 1
        name = f"{target}-{case_seed}-{round_}"
        if isinstance(got, str):
            status = child.stop()
            broke = [
                {
                    "invariant": "no crash" if got == "crash" else f"no hang (limit {case_limit:.0f} s)",
                    "error": got if got == "hang" else f"exit {status}",
                    "message": child.stderr_tail(),
                }
            ]
            child = None
        else:
            broke = got["findings"]
        if not broke:
            continue
        kept = next((out / "work").glob("inflight.*"), None)
        saved = None
        if kept is not None:
            saved = out / "findings" / f"{name}{kept.suffix}"
            shutil.copyfile(kept, saved)
        for b in broke:
            findings.append(
                {
                    "target": target,
                    "seed": case_seed,
                    "round": round_,
                    **b,
                    "input": str(saved) if saved else None,
                    "repro": f"python bench/fuzz.py --case {target}:{case_seed}:{round_}",
                }
            )
    if child is not None:
        child.stop()
    summary = {"seconds": round(spent, 1), "tried": tried, "findings": findings}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def parse_case(text: str) -> tuple[str, int, int]:
    target, seed, round_ = text.rsplit(":", 2)
    return target, int(seed), int(round_)


def main(argv: list[str] | None = None, default_seconds: float = 60) -> int:
    parser = argparse.ArgumentParser(description="Fuzz arrowkafka in a child process; print a JSON summary.")
    parser.add_argument("--seconds", type=float, default=default_seconds, help="case time to spend in all")
    parser.add_argument("--minutes", type=float, help="the same, in minutes")
    parser.add_argument(
        "--out", type=Path, default=Path("fuzz-out"), help="summary, findings and their inputs"
    )
    parser.add_argument("--target", action="append", help=f"one of {', '.join(TARGETS)} (default all)")
    parser.add_argument(
        "--seed", type=int, default=0, help="the campaign's seed: cases are (target, seed, round)"
    )
    parser.add_argument("--case", action="append", type=parse_case, help="run only TARGET:SEED:ROUND")
    parser.add_argument(
        "--case-limit", type=float, default=CASE_LIMIT, help="seconds before a case is a hang"
    )
    args = parser.parse_args(argv)
    seconds = args.minutes * 60 if args.minutes is not None else args.seconds
    summary = run(args.out, seconds, tuple(args.target or TARGETS), args.seed, args.case, args.case_limit)
    print(json.dumps(summary, indent=1))
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
