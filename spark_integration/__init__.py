"""arrowkafka on Spark: decode a column of Kafka message bodies through ``DataFrame.mapInArrow``.

Each Spark task hands its rows to the same batch kernels as ``ak.decode``, as Arrow record
batches, and gets one struct column back. Spark has no unsigned integers and no uuid type, so
the decoded Arrow columns are cast to what Spark exchanges (``spark_arrow_type``) and the
declared Spark schema is derived from the same Arrow schema (``spark_type``): names, order and
types match exactly, as Spark requires (it matches fields by position).

Workers must run the driver's Python (``PYSPARK_PYTHON``); Numba caches the kernels on disk,
so set ``NUMBA_CACHE_DIR`` to a folder the workers can write, and each worker compiles once.
"""

from .captures import CaptureSummary, capture_frames, decode_captures, decoded_frames
from .columns import decode_cluster_metadata, decode_column, decode_consumer_offsets
from .records import decode_records_column, decode_segments
from .types import spark_arrow_type, spark_type

__all__ = [
    "CaptureSummary",
    "capture_frames",
    "decode_captures",
    "decode_cluster_metadata",
    "decode_column",
    "decode_consumer_offsets",
    "decode_records_column",
    "decode_segments",
    "decoded_frames",
    "spark_arrow_type",
    "spark_type",
]
