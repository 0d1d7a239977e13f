"""Per-task throughput of decoding inside Spark's mapInArrow, against ak.decode on one core on
the same bytes (the Spark issue's target: at least half, once workers are warm).

What is measured: one partition of N copies of a MetadataResponse v12 body (42 KB), cached in
Spark's memory, so one task; ``decode_column(...)`` written to a real sink (the ``noop`` format,
which runs the whole job and drops the rows, and Parquet); best of a few runs after warm-up
runs (workers started, the plan moved to its generated kernel, as a long job's is; ak.decode
is timed on that kernel too). Two figures per task: the decoding inside it (the seconds the
function mapInArrow runs spends itself, timed in the worker, apart from waiting for Spark to
hand it input or take its output) and the task's wall time. Beside them, the same job without decoding (the
bodies go to Python and back: Spark's own transfer) and the CPU seconds each side spends per
job, read from /proc: the JVM (Spark sending the bodies to Python as Arrow, then turning the
decoded Arrow batches into its own rows) and the Python worker (decoding). A task is a JVM
thread plus a Python process, so its wall time can be below the sum of the two.

    python bench/spark_task.py [--copies 2000] [--memory 4g] [--batch-bytes 8m]

``--memory`` is the local JVM's heap (Spark's default 1g makes the row conversion spend a good
part of its time in GC); ``--batch-bytes`` sets ``spark.sql.execution.arrow.maxBytesPerBatch``
(Spark otherwise sends up to 10,000 rows to Python in one batch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.data import body

import arrowkafka as ak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=2000)
    parser.add_argument("--memory", default="4g", help="spark.driver.memory (local mode: the executor)")
    parser.add_argument("--batch-bytes", default="", help="spark.sql.execution.arrow.maxBytesPerBatch")
    parser.add_argument("--java-options", default="", help="spark.driver.extraJavaOptions")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="ak-spark-bench-"))
    from pyspark.sql import SparkSession

    from arrowkafka.spark import decode_column

    one = body("metadata_v12")
    bodies = pa.array([one] * args.copies, pa.binary())
    nbytes = len(one) * args.copies
    # the kernel a long job runs on (the workers' "auto" moves to it: see _warm)
    ak.decode(bodies.slice(0, 2), "MetadataResponse", 12, kernel="specialised")
    local = min(
        _timed(lambda: ak.decode(bodies, "MetadataResponse", 12, kernel="specialised")) for _ in range(5)
    )

    tmp = Path(tempfile.mkdtemp(prefix="ak-spark-bench-"))
    pq.write_table(pa.table({"value": bodies}), tmp / "bodies.parquet")
    builder = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", args.memory)
    )
    if args.java_options:
        builder = builder.config("spark.driver.extraJavaOptions", args.java_options)
    if args.batch_bytes:
        builder = builder.config("spark.sql.execution.arrow.maxBytesPerBatch", args.batch_bytes)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(tmp / "bodies.parquet")).coalesce(1).cache()
    df.count()
    decoded = decode_column(df, "value", "MetadataResponse", 12)
    lean = decode_column(df, "value", "MetadataResponse", 12, tag_columns=False)
    log = tmp / "worker.jsonl"
    timed = df.mapInArrow(_Timed(log), decoded.schema)
    jobs: dict[str, Callable[[], None]] = {
        "noop": lambda: timed.write.format("noop").mode("overwrite").save(),
        "parquet": lambda: decoded.write.mode("overwrite").parquet(str(tmp / "out.parquet")),
        "noop, body column dropped": lambda: (
            decoded.drop("value").write.format("noop").mode("overwrite").save()
        ),
        "noop, tag_columns=False": lambda: lean.write.format("noop").mode("overwrite").save(),
        "transfer only": lambda: (
            df.mapInArrow(_identity, df.schema).write.format("noop").mode("overwrite").save()
        ),
    }
    if args.json:  # compare.py reports these
        jobs = {k: jobs[k] for k in ("noop", "noop, tag_columns=False", "transfer only")}
    results = {}
    for name, job in jobs.items():
        for _ in range(3):  # warm: workers start; past 64 MB a plan moves to its generated kernel
            job()
            time.sleep(1)
        runs = [_measured(job) for _ in range(args.runs)]
        results[name] = min(runs)  # best wall, with that run's CPU seconds
    spark.stop()
    task = results["noop"][0]
    tasks = [json.loads(line) for line in log.read_text().splitlines()][-args.runs :]
    assert all(t["generated"] for t in tasks), "the measured tasks did not run the generated kernel"
    inside = min(t["own"] for t in tasks)
    if args.json:
        print(json.dumps({"local_mb_s": nbytes / local / 1e6, "task_mb_s": nbytes / task / 1e6,
                          "inside_mb_s": nbytes / inside / 1e6,
                          "lean_task_mb_s": nbytes / results["noop, tag_columns=False"][0] / 1e6,
                          "transfer_mb_s": nbytes / results["transfer only"][0] / 1e6}))  # fmt: skip
        return
    mb = nbytes / 1e6
    print(f"{args.copies} x MetadataResponse v12 ({mb:.0f} MB), local[1], heap {args.memory}")
    print(f"{'ak.decode, one core':<34} {local:6.2f} s {mb / local:6.0f} MB/s")
    print(f"{'decoding inside the task':<34} {inside:6.2f} s {mb / inside:6.0f} MB/s {local / inside:4.0%}"
          "   (the worker's own time: waits for Spark's input and output left out)")  # fmt: skip
    for name, (wall, jvm, python) in results.items():
        print(f"{'mapInArrow task, ' + name:<34} {wall:6.2f} s {mb / wall:6.0f} MB/s {local / wall:4.0%}"
              f"   CPU s: JVM {jvm:5.2f}  Python {python:5.2f}")  # fmt: skip


def _identity(batches: object) -> object:
    return batches


class _Timed:
    """``decode_column``'s function for mapInArrow, timed in the worker: the seconds it spends
    itself (decoding, casting for Spark), apart from the seconds it waits for Spark to hand it
    the next input batch or to take its output. One JSON line per task in ``log``."""

    def __init__(self, log: Path) -> None:
        from arrowkafka.spark.columns import _DecodeBatches

        # what decode_column(df, "value", "MetadataResponse", 12) maps
        self.fn = _DecodeBatches("value", "MetadataResponse", 12, None, "MetadataResponse", "raise", ())
        self.log = str(log)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from arrowkafka.codegen import promote

        waits = [0.0]

        def fed() -> Iterator[pa.RecordBatch]:
            it = iter(batches)
            while True:
                t = time.perf_counter()
                batch = next(it, None)
                waits[0] += time.perf_counter() - t
                if batch is None:
                    return
                yield batch

        start = time.perf_counter()
        for out in self.fn(fed()):
            t = time.perf_counter()
            yield out
            waits[0] += time.perf_counter() - t
        own = time.perf_counter() - start - waits[0]
        generated = [t.fast is not None for (kind, _), t in promote._TIERS.items() if kind == "decode"]
        with open(self.log, "a") as f:
            f.write(json.dumps({"own": own, "generated": all(generated) and bool(generated)}) + "\n")


def _measured(job: Callable[[], None]) -> tuple[float, float, float]:
    """Wall seconds of one run, and the CPU seconds the JVM and the Python workers spent."""
    jvm0, py0 = _cpu(b"SparkSubmit"), _cpu(b"pyspark.daemon", b"pyspark.worker")
    wall = _timed(job)
    return wall, _cpu(b"SparkSubmit") - jvm0, _cpu(b"pyspark.daemon", b"pyspark.worker") - py0


def _cpu(*marks: bytes) -> float:
    """CPU seconds (user + system) of the live processes whose command line has one of ``marks``."""
    ticks = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if not any(m in Path(f"/proc/{pid}/cmdline").read_bytes() for m in marks):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
