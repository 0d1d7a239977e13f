"""arrowkafka: an Arrow-native columnar batch codec for the Apache Kafka wire protocol.

>>> import arrowkafka as ak
>>> ak.arrow_schema("FetchRequest", 12).field("topics").type.value_type.field(0).name
'topic'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from arrowkafka.errors import ArrowKafkaError, Corrupt, DecodeError, EncodeError, SpecError, Truncated

if TYPE_CHECKING:
    import pyarrow as pa

    from arrowkafka.api import SpecSet, default_specs, load_specs
    from arrowkafka.codec.decode import Ranges
    from arrowkafka.records import Records


def __getattr__(name: str) -> Any:
    # the spec loader is imported on first use, not with the package: the command's entry
    # point (``arrowkafka.cli``) then starts in a few milliseconds, inside its own handling
    # of Ctrl-C
    if name in ("SpecSet", "default_specs", "load_specs"):
        from arrowkafka import api

        return getattr(api, name)
    if name == "Ranges":  # bodies (or records values) as byte ranges of one buffer: no copy
        from arrowkafka.codec.decode import Ranges

        return Ranges
    raise AttributeError(f"module 'arrowkafka' has no attribute {name!r}")


__all__ = [
    "ArrowKafkaError",
    "Corrupt",
    "DecodeError",
    "EncodeError",
    "Ranges",
    "SpecError",
    "Truncated",
    "decode",
    "decode_records",
    "encode",
    "encode_records",
    "encoded_size",
    "SpecSet",
    "arrow_schema",
    "default_specs",
    "load_specs",
    "request_header_version",
    "response_header_version",
]

__version__ = "0.1.0"


def _specs() -> SpecSet:
    from arrowkafka.api import default_specs

    return default_specs()


def arrow_schema(name: str, version: int | None = None) -> pa.Schema:
    """``load_specs().arrow_schema(name, version)``: see ``SpecSet.arrow_schema``."""
    return _specs().arrow_schema(name, version)


def decode(
    bodies: Any,
    name: str,
    version: int,
    *,
    errors: str = "raise",
    all_versions: bool = False,
    threads: int = 1,
    kernel: str = "auto",
    views: bool = False,
) -> pa.RecordBatch | tuple[pa.RecordBatch, pa.Table]:
    """``load_specs().decode(...)``: see ``SpecSet.decode``."""
    return _specs().decode(
        bodies,
        name,
        version,
        errors=errors,
        all_versions=all_versions,
        threads=threads,
        kernel=kernel,
        views=views,
    )


def encode(data: Any, name: str, version: int, *, threads: int = 1, kernel: str = "auto") -> pa.BinaryArray:
    """``load_specs().encode(...)``: see ``SpecSet.encode``."""
    return _specs().encode(data, name, version, threads=threads, kernel=kernel)


def encoded_size(
    data: Any, name: str, version: int, *, threads: int = 1, kernel: str = "auto"
) -> pa.Int64Array:
    """``load_specs().encoded_size(...)``: see ``SpecSet.encoded_size``."""
    return _specs().encoded_size(data, name, version, threads=threads, kernel=kernel)


def decode_records(
    records: Any,
    *,
    errors: str = "raise",
    payloads: bool = True,
    verify_crc: bool = True,
    max_uncompressed: int = 256 << 20,
    views: bool = False,
) -> Records:
    """Kafka record batches (magic 0, 1, 2; every codec) into Arrow tables: see
    ``arrowkafka.records.decode_records``."""
    from arrowkafka.records import decode_records as _decode_records  # loads pyarrow and Numba

    return _decode_records(
        records,
        errors=errors,
        payloads=payloads,
        verify_crc=verify_crc,
        max_uncompressed=max_uncompressed,
        views=views,
    )


def encode_records(batches: Any, records: Any, *, num_values: int | None = None) -> pa.BinaryArray:
    """Record batches (magic 0, 1, 2; every codec) from the tables ``decode_records`` returns:
    see ``arrowkafka.records.encode_records``."""
    from arrowkafka.records import encode_records as _encode_records  # loads pyarrow and Numba

    return _encode_records(batches, records, num_values=num_values)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for an API at a version, from the vendored specs."""
    return _specs().request_header_version(api_key, api_version)


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version for an API at a version, from the vendored specs."""
    return _specs().response_header_version(api_key, api_version)
