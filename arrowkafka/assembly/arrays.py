"""Arrow arrays from Python values, built from buffers.

pyarrow's own conversion of Python sequences (``pa.array(list)``) imports pandas whenever
pandas is installed, to check for pandas objects: most of a cold start. The decoder's
start-up path builds its few arrays from Python values here instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["binary_array", "bits", "empty_table", "int64_array", "string_array"]


def _validity(values: Sequence[object]) -> tuple[pa.Buffer | None, int]:
    nulls = [v is None for v in values]
    if not any(nulls):
        return None, 0
    bits = np.packbits(~np.asarray(nulls, bool), bitorder="little")
    return pa.py_buffer(bits), int(sum(nulls))


def binary_array(
    values: Sequence[bytes | bytearray | memoryview | None], t: pa.DataType | None = None
) -> pa.Array:
    """A binary (or, with ``t=pa.string()``, string) array; None is null. Large types past 2 GiB."""
    parts = [b"" if v is None else bytes(v) for v in values]
    lengths = np.fromiter((len(p) for p in parts), np.int64, len(parts))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = offsets[-1] >= 2**31
    t = t or pa.binary()
    if large:
        t = pa.large_string() if t == pa.string() else pa.large_binary()
    validity, nulls = _validity(values)
    offs = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    return pa.Array.from_buffers(
        t, len(parts), [validity, offs, pa.py_buffer(b"".join(parts))], null_count=nulls
    )


def string_array(values: Sequence[str | None]) -> pa.Array:
    return binary_array([None if v is None else v.encode() for v in values], pa.string())


def int64_array(values: Sequence[int] | np.ndarray) -> pa.Array:
    data = np.asarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def bits(arr: pa.Array) -> np.ndarray:
    """A boolean array's values, a uint8 0 or 1 each, read from its bits (a null reads as what
    its slot holds; pyarrow's own conversions import pandas)."""
    if len(arr) == 0:
        return np.zeros(0, np.uint8)
    packed = np.frombuffer(arr.buffers()[1], np.uint8)
    return np.unpackbits(packed, count=arr.offset + len(arr), bitorder="little")[arr.offset :]


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows (``Schema.empty_table`` imports pandas)."""
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
