"""Per-task throughput of decoding inside Spark's mapInArrow, against ak.decode on one core
on the same bytes (the Spark issue's target: at least half). One partition, so one task;
warm workers (a first run compiles and fills the Numba cache), then the best of a few.

    python bench/spark_task.py [--copies 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from benchmarks.data import body

import arrowkafka as ak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="print one JSON line (for compare.py)")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="ak-spark-bench-"))
    from pyspark.sql import SparkSession

    from arrowkafka.spark import decode_column

    one = body("metadata_v12")
    bodies = pa.array([one] * args.copies, pa.binary())
    nbytes = len(one) * args.copies
    ak.decode(bodies.slice(0, 2), "MetadataResponse", 12)
    local = min(_timed(lambda: ak.decode(bodies, "MetadataResponse", 12)) for _ in range(5))

    path = Path(tempfile.mkdtemp(prefix="ak-spark-bench-")) / "bodies.parquet"
    pq.write_table(pa.table({"value": bodies}), path)
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(path)).coalesce(1).cache()
    df.count()
    job = decode_column(df, "value", "MetadataResponse", 12)
    job.write.format("noop").mode("overwrite").save()  # warm: workers start, kernels load
    task = min(_timed(lambda: job.write.format("noop").mode("overwrite").save()) for _ in range(3))
    empty = df.mapInArrow(lambda batches: batches, df.schema)  # the same job without decoding
    empty.write.format("noop").mode("overwrite").save()
    base = min(_timed(lambda: empty.write.format("noop").mode("overwrite").save()) for _ in range(3))
    spark.stop()
    if args.json:
        print(json.dumps({"local_mb_s": nbytes / local / 1e6, "task_mb_s": nbytes / task / 1e6}))
        return
    print(f"ak.decode, one core:              {nbytes / local / 1e6:8.0f} MB/s")
    print(
        f"mapInArrow task, whole job:       {nbytes / task / 1e6:8.0f} MB/s ({local / task:.0%} of ak.decode)"
    )
    print(f"mapInArrow task, minus Spark's own transfer of the same rows ({base:.2f} s): "
          f"{nbytes / max(task - base, 1e-9) / 1e6:.0f} MB/s")  # fmt: skip


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
