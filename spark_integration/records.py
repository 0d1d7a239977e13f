"""Record batches on Spark: a DataFrame column of ``records`` values decoded inside
``mapInArrow`` (``decode_records_column``), and log segment files read one task per file
(``decode_segments``). Each task runs ``arrowkafka.records`` as a local job would; the driver
builds only the schemas (its imports of ``arrowkafka.records`` load Numba, but compile nothing)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .types import spark_arrow_type, spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from arrowkafka.segments import SegmentSummary

__all__ = ["decode_records_column", "decode_segments"]

WHAT = ("records", "batches")


def _out_fields(kept: list[pa.Field], what: str, payloads: bool) -> list[pa.Field]:
    """The Arrow fields (as Spark exchanges them) of the rows ``decode_records_column`` makes."""
    from arrowkafka.records.tables import linked_schemas

    tables = linked_schemas([], payloads)  # decode_records' tables without their row and batch indices
    batch_fields = list(tables["record_batches"])
    if what == "batches":
        fields = [*kept, *batch_fields]
    else:
        fields = [*kept, pa.field("batch", pa.struct(batch_fields)), *tables["records"]]
    return [f.with_type(spark_arrow_type(f.type)).with_nullable(True) for f in fields]


class _DecodeRecords:
    """The function mapInArrow runs on each task's batches (a class: it pickles by reference)."""

    def __init__(self, column: str, what: str, payloads: bool, out: pa.Schema) -> None:
        self.column, self.what, self.payloads, self.out = column, what, payloads, out

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from arrowkafka.records import decode_records  # in the task: the driver never loads Numba
        from arrowkafka.schema import portable_table

        from .columns import _slices

        for batch in _slices(batches, self.column, 4 << 20):
            got = decode_records(batch.column(self.column), errors="null", payloads=self.payloads)
            others = pa.Table.from_batches([batch]).drop_columns([self.column])
            # (portable: a time microseconds cannot hold is null, here as in the struct below)
            batches_ = portable_table(got.batches.drop_columns(["row"]))
            if self.what == "batches":
                cols = [*others.take(got.batches.column("row")).columns, *batches_.columns]
            else:
                b = got.records.column("batch")
                row = got.batches.column("row").take(b)
                struct = pa.StructArray.from_arrays(
                    [c.combine_chunks() for c in batches_.take(b).columns], fields=list(batches_.schema)
                )
                cols = [*others.take(row).columns, struct, *got.records.drop_columns(["batch"]).columns]
            table = pa.Table.from_arrays(cols, names=self.out.names)
            # (portable first: a time microseconds cannot hold is null, not wrapped around)
            yield from portable_table(table).cast(self.out).to_batches()


def decode_records_column(
    df: DataFrame, column: str, *, what: str = "records", payloads: bool = True
) -> DataFrame:
    """``df``'s ``column`` of ``records`` values (record batches back to back, a Produce or
    Fetch ``records`` field or a segment's bytes) decoded: one row per record (``what="records"``:
    the other input columns, a ``batch`` struct with the batch's header fields, then the
    record's offset, timestamp, key, value, headers and sizes) or one row per batch
    (``what="batches"``). Bad batches are left out of the records and kept in the batches with
    ``error`` saying why; ``payloads=False`` leaves keys and values out."""
    if what not in WHAT:
        raise ValueError(f"what must be one of {WHAT}, not {what!r}")
    from pyspark.sql.pandas.types import to_arrow_schema

    kept = [f for f in to_arrow_schema(df.schema) if f.name != column]
    out = pa.schema(_out_fields(kept, what, payloads))
    from pyspark.sql import types as T

    spark_schema = spark_type(pa.struct(list(out)))
    assert isinstance(spark_schema, T.StructType)
    return df.mapInArrow(_DecodeRecords(column, what, payloads, out), spark_schema)


def _segment_task(outdir: str, payloads: bool, compression: str) -> Any:
    def run(index: int, files: Iterator[str]) -> Iterator[SegmentSummary]:
        from arrowkafka.segments import decode_segments as decode

        for path in files:  # (no writer thread: a task has one core, the executor's other tasks the rest)
            yield decode([path], outdir, payloads=payloads, part=f"part-{index:05d}",
                         first_batch_id=index << 40, compression=compression, background=False)  # fmt: skip

    return run


def decode_segments(
    spark: SparkSession,
    paths: str | Sequence[str],
    outdir: str | Path,
    *,
    payloads: bool = True,
    compression: str = "snappy",
    overwrite: bool = False,
) -> SegmentSummary:
    """Log segment files (or the ``*.log`` files under folders) decoded on Spark, one task per
    file, into ``outdir``: ``record_batches.parquet``, ``records.parquet``, ... each a folder
    of Parquet parts (one per file), with the columns ``arrowkafka segments`` writes; the
    tasks' summaries added up. The workers must see the paths and ``outdir`` (local mode, or a
    shared file system). ``compression``: as ``arrowkafka segments --compression``. An
    ``outdir`` holding an earlier run's tables is refused, or with ``overwrite=True`` those
    tables are removed first (as ``decode_captures``)."""
    from arrowkafka.output import check_compression, refuse_or_remove_earlier
    from arrowkafka.segments import SegmentSummary, job_tables, segment_files

    check_compression(compression)
    refuse_or_remove_earlier(str(outdir), *job_tables(), overwrite)
    files = [str(p) for p in segment_files([paths] if isinstance(paths, str) else paths)]
    Path(outdir).mkdir(parents=True, exist_ok=True)
    summary = SegmentSummary()
    if files:
        rdd = spark.sparkContext.parallelize(files, len(files))
        for task in rdd.mapPartitionsWithIndex(_segment_task(str(outdir), payloads, compression)).collect():
            summary.add(task)
    return summary
