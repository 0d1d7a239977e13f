"""Kafka frames -> (header, body): the request and response headers.

A frame is what follows the int32 size prefix. Its header version comes from the API and
version (``spec.headers``): request header v0 is api key, api version, correlation id; v1 adds
the client id (a classic nullable string in every version); v2 adds a tag section. Response
header v0 is the correlation id; v1 adds a tag section. The first eight bytes of a request and
the first four of a response are the same in every header version, which is how the version
is known before the header is read.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import Corrupt, DecodeError, Truncated
from .specset import SpecSet

__all__ = ["RequestHeader", "ResponseHeader", "parse_request", "parse_response"]


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    tags: list[tuple[int, bytes]]  # header tagged fields (v2), raw
    header_version: int
    body: bytes


class ResponseHeader(NamedTuple):
    correlation_id: int
    tags: list[tuple[int, bytes]]
    header_version: int
    body: bytes


class _Cursor:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def fail(self, cls: type[DecodeError], reason: str) -> DecodeError:
        return cls(
            reason, path=f"$header.{self.what}", offset=self.pos, size=len(self.data), message="header"
        )

    def take(self, n: int, what: str) -> bytes:
        self.what = what
        if n > len(self.data) - self.pos:
            raise self.fail(Truncated, f"reading {what}: needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uvarint(self, what: str) -> int:
        value = shift = 0
        for _ in range(5):
            b = self.take(1, what)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
        raise self.fail(Corrupt, f"reading {what}: varint too long")

    def tags(self) -> list[tuple[int, bytes]]:
        out = []
        for _ in range(self.uvarint("tag count")):
            tag = self.uvarint("tag")
            out.append((tag, self.take(self.uvarint("tag size"), "tagged field")))
        return out


def parse_request(frame: bytes, specs: SpecSet) -> RequestHeader:
    """Split a request frame into its header and body; KeyError for an API the specs lack."""
    c = _Cursor(frame, "request_api_key")
    api_key, api_version, correlation_id = struct.unpack(">hhi", c.take(8, "request header"))
    version = specs.request_header_version(api_key, api_version)
    client_id = None
    tags: list[tuple[int, bytes]] = []
    if version >= 1:
        (n,) = struct.unpack(">h", c.take(2, "client_id"))
        if n < -1:
            raise c.fail(Corrupt, f"reading client_id: negative length {n}")
        if n >= 0:
            raw = c.take(n, "client_id")
            try:
                client_id = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise c.fail(Corrupt, "reading client_id: invalid UTF-8") from None
    if version >= 2:
        tags = c.tags()
    return RequestHeader(api_key, api_version, correlation_id, client_id, tags, version, frame[c.pos :])


def parse_response(frame: bytes, header_version: int) -> ResponseHeader:
    """Split a response frame into its header (of the given version) and body."""
    c = _Cursor(frame, "correlation_id")
    (correlation_id,) = struct.unpack(">i", c.take(4, "correlation_id"))
    tags = c.tags() if header_version >= 1 else []
    return ResponseHeader(correlation_id, tags, header_version, frame[c.pos :])
