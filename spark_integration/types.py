"""Arrow types as Spark exchanges them: Spark has no unsigned integers and no uuid type, so
decoded columns are cast (``spark_arrow_type``) and the declared Spark schema is derived from
the same Arrow schema (``spark_type``); and the spec sets the tasks load, once per worker."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

import arrowkafka as ak
from arrowkafka.schema import TAGS_PRESENT, UNKNOWN_TAGS, portable_type

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

__all__ = ["spark_arrow_type", "spark_type", "task_specs", "without_tag_columns", "drop_tag_columns"]

# what re-encoding a row needs, not what a query reads: unknown tags' raw bytes, and which known
# tags were on the wire. A list or map per struct, and Spark's JVM turns each into an object of
# its own even when empty, so ``decode_column(..., tag_columns=False)`` leaves them out.
TAG_COLUMNS = frozenset({UNKNOWN_TAGS, TAGS_PRESENT})


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


def without_tag_columns(t: pa.DataType) -> pa.DataType:
    """``t`` with the ``TAG_COLUMNS`` fields of its structs left out, at every depth."""
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(without_tag_columns(f.type)) for f in t if f.name not in TAG_COLUMNS])
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(without_tag_columns(t.key_type)),
            t.item_field.with_type(without_tag_columns(t.item_type)),
        )
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(without_tag_columns(t.value_type)))
    return t


def drop_tag_columns(a: pa.Array) -> pa.Array:
    """``a`` as ``without_tag_columns(a.type)``: the same buffers, less the tag columns."""
    t = a.type
    if without_tag_columns(t) == t:
        return a
    mask = a.is_null() if a.null_count else None
    if pa.types.is_struct(t):
        keep = [f for f in t if f.name not in TAG_COLUMNS]
        if not keep:  # (Arrow takes a struct's length from its children: here there are none)
            valid = None if mask is None else pc.invert(mask).buffers()[1]
            return pa.StructArray.from_buffers(pa.struct([]), len(a), [valid], a.null_count, children=[])
        children = [drop_tag_columns(a.field(f.name)) for f in keep]  # offset applied
        return pa.StructArray.from_arrays(
            children, fields=[f.with_type(c.type) for f, c in zip(keep, children, strict=True)], mask=mask
        )
    # Arrow takes a null mask only with offsets of their own: a slice's are copied (4 bytes a row)
    offsets = a.offsets if mask is None else pa.array(a.offsets.to_numpy())
    if pa.types.is_map(t):
        keys, items = drop_tag_columns(a.keys), drop_tag_columns(a.items)
        return pa.MapArray.from_arrays(offsets, keys, items, type=without_tag_columns(t), mask=mask)
    assert pa.types.is_list(t), t
    values = drop_tag_columns(a.values)
    return pa.ListArray.from_arrays(offsets, values, type=without_tag_columns(t), mask=mask)


@cache
def task_specs(folders: tuple[str, ...]) -> ak.SpecSet:
    return ak.load_specs(*folders) if folders else ak.load_specs()
