"""Stage 1 of the pipeline: Kafka JSON message specs -> a frozen IR.

Imports neither pyarrow nor numba (a test checks), so tools that only read specs stay light.
"""

from arrowkafka.ir.headers import request_header_version, response_header_version
from arrowkafka.ir.load import load_folder, load_folders, load_spec_file, load_spec_text
from arrowkafka.ir.model import (
    DIALECT_DRAFT,
    DIALECT_TAGGED,
    PRIMITIVES,
    STRUCT_DEFAULTS,
    Encoding,
    Field,
    MessageSpec,
    Struct,
)
from arrowkafka.ir.versions import MAX_VERSION, Versions, parse_versions

__all__ = [
    "DIALECT_DRAFT",
    "DIALECT_TAGGED",
    "MAX_VERSION",
    "PRIMITIVES",
    "STRUCT_DEFAULTS",
    "Encoding",
    "Field",
    "MessageSpec",
    "Struct",
    "Versions",
    "load_folder",
    "load_folders",
    "load_spec_file",
    "load_spec_text",
    "parse_versions",
    "request_header_version",
    "response_header_version",
]
