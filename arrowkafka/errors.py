"""The exceptions arrowkafka raises.

One small taxonomy; each class is also a ``ValueError`` so callers that do not know
arrowkafka still catch them::

    ArrowKafkaError
    ├── SpecError            a spec breaks a rule of the spec language (file, field path, rule)
    ├── DecodeError          bytes that do not decode (message index, byte offset, field path)
    │   ├── Truncated        the body ends before the message does: more bytes could fix it
    │   └── Corrupt          the bytes contradict the spec: no more bytes could fix it
    └── EncodeError          a value that cannot be written in the asked version

"Truncated" and "corrupt" stay apart because a TCP reassembler retries on the first and gives
up on the second.
"""

from __future__ import annotations

__all__ = ["ArrowKafkaError", "Corrupt", "DecodeError", "EncodeError", "SpecError", "Truncated"]


class ArrowKafkaError(Exception):
    """Base class of every error arrowkafka raises on purpose."""


class SpecError(ArrowKafkaError, ValueError):
    """A spec file is malformed.

    Attributes
    ----------
    file : str
        The spec file (or ``<string>`` for specs given as text).
    path : str
        Where in the spec, e.g. ``FetchRequest.Topics.Partitions.FetchOffset`` (``$``: the
        file's top level; empty where the file or folder itself is at fault).
    rule : str
        The rule broken, in words.
    """

    def __init__(self, file: str, path: str, rule: str) -> None:
        self.file = file
        self.path = path
        self.rule = rule
        super().__init__(f"{file}: {path}: {rule}" if path else f"{file}: {rule}")


class DecodeError(ArrowKafkaError, ValueError):
    """A message body does not decode.

    The text reads like
    ``reading int32 at $.topics[2].partitions[0].error_code: 2 bytes left
    (message 1834, byte 57/212, FetchResponse v12)``.

    Attributes
    ----------
    reason : str
        What went wrong, in words.
    path : str
        The field being read, ``$`` being the message itself.
    message_index : int
        Which message of the batch (0-based).
    offset : int
        Byte offset inside that message's body.
    size : int
        The body's length in bytes.
    message : str
        Message name, e.g. ``FetchResponse``.
    version : int
        Message version.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str = "$",
        message_index: int = 0,
        offset: int = 0,
        size: int = 0,
        message: str = "",
        version: int = -1,
    ) -> None:
        self.reason = reason
        self.path = path
        self.message_index = message_index
        self.offset = offset
        self.size = size
        self.message = message
        self.version = version
        what = f"{message} v{version}" if version >= 0 else message  # (-1: no version to name)
        super().__init__(f"{reason} at {path} (message {message_index}, byte {offset}/{size}, {what})")


class Truncated(DecodeError):
    """The body ends before the message does (a length, count or field runs past the end)."""


class Corrupt(DecodeError):
    """The bytes contradict the spec: a bad length, an unexpected null, invalid UTF-8, an
    overlong varint, tags out of order, bytes left over after the last field."""


class EncodeError(ArrowKafkaError, ValueError):
    """A value cannot be written in the version asked for (row and field path named)."""

    def __init__(self, reason: str, *, path: str = "$", row: int = 0, message: str = "", version: int = -1):
        self.reason = reason
        self.path = path
        self.row = row
        self.message = message
        self.version = version
        what = f"{message} v{version}" if version >= 0 else message
        where = f"row {row}, {what}" if row >= 0 else what  # (-1: a whole column's mistake)
        super().__init__(f"{reason} at {path} ({where})")
