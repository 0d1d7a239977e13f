"""Which request and response header version frames a message (KIP-482).

Request header v2 and response header v1 carry a tag section; an API uses them in the
versions its request spec marks flexible. Two exceptions, as the upstream generator
(``ApiMessageTypeGenerator``) writes them:

- ApiVersionsResponse always uses response header v0, so a client that sent a version the
  broker does not know can still read the error reply.
- ControlledShutdownRequest v0 uses request header v0, which has no client id.

``ClientId`` itself stays a classic nullable string in every header version; the
RequestHeader spec says so with a field-level ``flexibleVersions: none`` override.
"""

from __future__ import annotations

__all__ = [
    "API_VERSIONS",
    "CONTROLLED_SHUTDOWN",
    "has_client_id",
    "request_header_version",
    "response_header_version",
]

CONTROLLED_SHUTDOWN = 7
API_VERSIONS = 18


def request_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Request header version (0, 1 or 2) for a request of ``api_key`` at ``api_version``.

    ``flexible`` is whether ``api_version`` is a flexible version of the request spec.
    """
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if flexible else 1


def has_client_id(api_key: int, api_version: int) -> bool:
    """Does the request header carry a client id (header v1 and up)? Known from the first four
    bytes of any request, whatever the specs say of flexibility."""
    return request_header_version(api_key, api_version, flexible=False) >= 1


def response_header_version(api_key: int, api_version: int, flexible: bool) -> int:
    """Response header version (0 or 1) for a response of ``api_key`` at ``api_version``.

    ``flexible`` is whether ``api_version`` is a flexible version of the response spec.
    """
    if api_key == API_VERSIONS:
        return 0
    return 1 if flexible else 0
