"""Kafka frames -> (header, body): the request and response headers, the one place they are
read (the capture kernel reads the plain ones, ``kernels/capture.py``, and hands every other
to the parsers here, whose errors are the reference; a test pins the two together).

A frame is what follows the int32 size prefix. Its header version comes from the API and
version (``spec.headers``): request header v0 is api key, api version, correlation id; v1 adds
the client id (a classic nullable string in every version); v2 adds a tag section. Response
header v0 is the correlation id; v1 adds a tag section. The first eight bytes of a request and
the first four of a response are the same in every header version, which is how the version
is known before the header is read.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from arrowkafka.api import SpecSet
from arrowkafka.errors import Corrupt, DecodeError, Truncated
from arrowkafka.kernels import capture as kc
from arrowkafka.traffic.chunks import FrameArrays
from arrowkafka.wire import VarintTooLong, read_uvarint

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "parse_request",
    "parse_response",
    "FrameHeaders",
    "read_request_headers",
    "read_response_headers",
    "header_tables",
]


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
        self.what = what
        try:
            value, self.pos = read_uvarint(self.data, self.pos)
        except IndexError:  # every byte left says "more": the varint needs one beyond them
            left = len(self.data) - self.pos
            raise self.fail(
                Truncated, f"reading {what}: varint cut short: needs more than the {left} bytes left"
            ) from None
        except VarintTooLong:
            self.pos += 5
            raise self.fail(Corrupt, f"reading {what}: varint too long") from None
        return value

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


# by id, with the SpecSet itself held so that its id cannot be reused by another
_TABLES: dict[int, tuple[SpecSet, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]] = {}


def header_tables(specs: SpecSet) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Per (api key, version): the request header version (-1 where the specs have no such
    request) and the response header version; and the request and response names by key."""
    if id(specs) in _TABLES:
        return _TABLES[id(specs)][1:]
    apis = [s for s in specs.values() if s.api_key is not None and s.type in ("request", "response")]
    keys = max((s.api_key for s in apis if s.api_key is not None), default=0) + 1
    # versions past 255 (open-ended user specs) are left to the Python header parsers
    versions = min(max((s.valid_versions.hi for s in apis if not s.valid_versions.empty), default=0), 255) + 1
    req = np.full((keys, versions), -1, np.int64)
    resp = np.zeros((keys, versions), np.int64)
    names = (np.full(keys, "", object), np.full(keys, "", object))
    for s in apis:
        assert s.api_key is not None
        if s.type == "request":
            names[0][s.api_key] = s.name
            for v in range(s.valid_versions.lo, min(s.valid_versions.hi + 1, versions)):
                req[s.api_key, v] = specs.request_header_version(s.api_key, v)
        else:
            names[1][s.api_key] = s.name
            for v in range(s.valid_versions.lo, min(s.valid_versions.hi + 1, versions)):
                resp[s.api_key, v] = specs.response_header_version(s.api_key, v)
    _TABLES[id(specs)] = (specs, req, resp, names)
    return req, resp, names


class FrameHeaders:
    """The headers of a chunk's frames, one slot per frame of its ``FrameArrays``: api key,
    version, correlation id, where the client id and the body start; ``ok`` once read."""

    def __init__(self, n: int) -> None:
        self.key, self.ver, self.corr = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        self.cid_off, self.cid_len = np.zeros(n, np.int64), np.full(n, -1, np.int64)  # -1: null
        self.body = np.zeros(n, np.int64)  # where the body starts in the chunk's data
        self.ok = np.zeros(n, np.bool_)
        self.client_ids: dict[int, str | None] = {}  # the client ids the Python parser read
        self.tags: dict[int, list[tuple[int, bytes]]] = {}  # header tagged fields, raw


# reject(frame index, error class name, reason, frame bytes, **known rejects columns)
Reject = Callable[..., None]


def frame_bytes(a: FrameArrays, i: int) -> bytes:
    """Frame ``i`` of a chunk (after its size prefix)."""
    return a.data[int(a.off[i]) : int(a.off[i] + a.size[i])].tobytes()


def read_request_headers(
    a: FrameArrays, req: np.ndarray, h: FrameHeaders, specs: SpecSet, request_hv: np.ndarray, reject: Reject
) -> None:
    """The headers of requests ``req`` (frame indices of ``a``) into ``h``: a kernel reads the
    plain ones, ``parse_request`` the others; one that does not parse, or names an API or
    version the specs lack, goes to ``reject``."""
    n = len(req)
    rk, rv, rc, ro, rl, rb, rs = (np.zeros(n, np.int64) for _ in range(7))
    kc.request_headers(a.data, a.off[req], a.size[req], request_hv, rk, rv, rc, ro, rl, rb, rs)
    h.key[req], h.ver[req], h.corr[req], h.cid_off[req], h.cid_len[req], h.body[req] = rk, rv, rc, ro, rl, rb
    h.ok[req] = rs == kc.H_OK
    for i in req[rs != kc.H_OK].tolist():
        frame = frame_bytes(a, i)
        try:
            header = parse_request(frame, specs)
            specs.request(header.api_key).check_version(header.api_version)
        except (DecodeError, KeyError) as e:
            reason = e.args[0] if isinstance(e, KeyError) else str(e)
            reject(a, i, type(e).__name__, str(reason), frame)
            continue
        h.key[i], h.ver[i], h.corr[i] = header.api_key, header.api_version, header.correlation_id
        h.client_ids[i], h.tags[i] = header.client_id, header.tags
        h.body[i] = a.off[i] + a.size[i] - len(header.body)
        h.ok[i] = True


def read_response_headers(
    a: FrameArrays, paired: np.ndarray, hv: np.ndarray, h: FrameHeaders, reject: Reject, names: np.ndarray
) -> None:
    """The headers of responses ``paired`` (their api key and version in ``h`` from their
    requests; ``hv`` their header versions) into ``h``: a v0 header, or a v1 header with no
    tags, is read here; the others by ``parse_response``. ``names``: response name by key."""
    plain = (hv == 0) | (
        (a.size[paired] >= 5) & (a.data[np.minimum(a.off[paired] + 4, len(a.data) - 1)] == 0)
    )
    h.body[paired] = a.off[paired] + 4 + hv
    h.ok[paired[plain]] = True
    for j, i in zip(np.flatnonzero(~plain).tolist(), paired[~plain].tolist(), strict=True):
        frame = frame_bytes(a, i)
        try:
            rheader = parse_response(frame, int(hv[j]))
        except DecodeError as e:
            reject(a, i, type(e).__name__, str(e), frame, message=names[int(h.key[i])], version=int(h.ver[i]))
            continue
        h.tags[i] = rheader.tags
        h.body[i] = a.off[i] + a.size[i] - len(rheader.body)
        h.ok[i] = True
