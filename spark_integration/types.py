"""Arrow types as Spark exchanges them: Spark has no unsigned integers and no uuid type, so
decoded columns are cast (``spark_arrow_type``) and the declared Spark schema is derived from
the same Arrow schema (``spark_type``); and the spec sets the tasks load, once per worker."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import pyarrow as pa

import arrowkafka as ak
from arrowkafka.schema import portable_type

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

__all__ = ["spark_arrow_type", "spark_type", "task_specs"]


def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark exchanges for the Spark type of ``t``: the portable type every
    Parquet file of the project holds (``arrowkafka.schema.portable_type``)."""
    return portable_type(t)


def spark_type(t: pa.DataType) -> DataType:
    """The Spark SQL type of a decoded Arrow type (after ``spark_arrow_type``)."""
    from pyspark.sql import types as T

    t = spark_arrow_type(t)
    if pa.types.is_struct(t):
        return T.StructType(
            [
                T.StructField(f.name, spark_type(f.type), f.nullable)
                for f in (t.field(i) for i in range(t.num_fields))
            ]
        )
    if pa.types.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), t.item_field.nullable)
    if pa.types.is_list(t):
        return T.ArrayType(spark_type(t.value_type), t.value_field.nullable)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    simple = {
        pa.bool_(): T.BooleanType(),
        pa.int8(): T.ByteType(),
        pa.int16(): T.ShortType(),
        pa.int32(): T.IntegerType(),
        pa.int64(): T.LongType(),
        pa.float64(): T.DoubleType(),
        pa.string(): T.StringType(),
        pa.binary(): T.BinaryType(),
    }
    return simple[t]


@cache
def task_specs(folders: tuple[str, ...]) -> ak.SpecSet:
    return ak.load_specs(*folders) if folders else ak.load_specs()
