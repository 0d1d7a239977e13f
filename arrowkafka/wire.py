"""Kafka's unsigned varint in plain Python: the one place Python code reads or writes it.

The header readers (``traffic.headers``), the internal-topic framing (``topics``) and the
encode code generator (``codegen.encode``, which writes tags as literal bytes) use these.
The kernels keep their own Numba copies for speed (``kernels/decode.py``, ``kernels/encode.py``)
and the oracle its own on purpose (it shares no code with the codec); tests pin all of them
to these functions (``tests/test_wire.py``).

An unsigned varint is LEB128: seven bits a byte, low group first, the high bit set on every
byte but the last (KIP-482).
"""

from __future__ import annotations

__all__ = ["VarintTooLong", "read_uvarint", "uvarint_bytes"]


class VarintTooLong(ValueError):
    """A varint with more bytes than its width allows (5 for 32 bits)."""


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint of a non-negative int."""
    if value < 0:
        raise ValueError(f"an unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """(value, position after it) of the unsigned varint at ``data[pos]``. Raises
    ``IndexError`` where the data ends inside it and ``VarintTooLong`` past ``max_bytes``."""
    value = shift = 0
    for _ in range(max_bytes):
        if pos >= len(data):
            raise IndexError(f"the data ends inside a varint at byte {pos}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise VarintTooLong(f"varint longer than {max_bytes} bytes")
