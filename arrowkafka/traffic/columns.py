"""The output tables' columns: where each frame came from (``FRAME_COLUMNS``), the frames
table between pairing and decoding (``FRAMES_SCHEMA``), ``rejects`` (``REJECT_SCHEMA``), and
the builders of those columns from a chunk's arrays (endpoint text, byte slices, header tags).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrowkafka.kernels import capture as kc
from arrowkafka.schema import unknown_tags_type
from arrowkafka.traffic.chunks import Conns
from arrowkafka.traffic.frames import ConnKey

__all__ = [
    "CAPTURE",
    "FRAME_COLUMNS",
    "FRAMES_SCHEMA",
    "TABLE_COLUMNS",
    "REJECT_SCHEMA",
    "addr",
    "endpoints",
    "ends_of",
    "slices",
    "tags_column",
]

FRAME_COLUMNS = pa.schema(
    [
        pa.field("_client", pa.string(), nullable=False, metadata={"about": "client ip:port"}),
        pa.field("_broker", pa.string(), nullable=False, metadata={"about": "broker ip:port"}),
        pa.field("_ts_first", pa.timestamp("ns", "UTC"), nullable=False),
        pa.field("_ts_last", pa.timestamp("ns", "UTC"), nullable=False),
        pa.field(
            "_size",
            pa.int32(),
            nullable=False,
            metadata={"about": "the frame's bytes on the wire, its 4-byte size prefix included"},
        ),
        pa.field("_correlation_id", pa.int32(), nullable=False),
        pa.field(
            "_api_version", pa.int16(), nullable=False, metadata={"about": "the request header's api version"}
        ),
        pa.field("_client_id", pa.string()),
        pa.field("_header_tags", unknown_tags_type(), nullable=False),
        pa.field("_request_ts", pa.timestamp("ns", "UTC")),
        # int64 ns, not duration: Parquet has no duration type and readers see a bare int64
        pa.field(
            "_latency_ns", pa.int64(), metadata={"about": "response first segment - request first segment"}
        ),
    ]
)
CAPTURE = pa.field("_capture", pa.string(), nullable=False, metadata={"about": "the capture file"})
# What every message table starts with: the capture, then where the frame was
TABLE_COLUMNS = pa.schema([CAPTURE, *FRAME_COLUMNS])
# One row per whole frame, before its body is decoded (``frames_table``).
FRAMES_SCHEMA = pa.schema(
    [
        CAPTURE,
        pa.field("_direction", pa.string(), nullable=False, metadata={"about": "request or response"}),
        pa.field("_message", pa.string(), nullable=False, metadata={"about": "the body's message type"}),
        pa.field("_version", pa.int16(), nullable=False, metadata={"about": "the body's version"}),
        *FRAME_COLUMNS,
        pa.field("_body", pa.binary(), nullable=False, metadata={"about": "the frame after its header"}),
    ]
)
REJECT_SCHEMA = pa.schema(
    [
        pa.field("capture", pa.string(), nullable=False),
        pa.field("client", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("ts", pa.timestamp("ns", "UTC")),
        pa.field("message", pa.string()),
        pa.field("version", pa.int16()),
        pa.field("error", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("byte_offset", pa.int64()),
        pa.field("raw", pa.binary()),
    ]
)


def addr(ip: bytes, port: int) -> str:
    return f"{_ip(ip)}:{port}"


@lru_cache(maxsize=4096)
def _ip(ip: bytes) -> str:
    return ".".join(str(b) for b in ip) if len(ip) == 4 else f"[{ip.hex(':', 2)}]"


_OCTETS = pa.array([str(i) for i in range(256)], pa.string())


def endpoints(conns: Sequence[ConnKey], start: int) -> tuple[pa.Array, pa.Array]:
    """The client and broker ``ip:port`` strings of connections ``start`` onwards: those the
    kernels took formatted as arrays (IPv4; IPv6 as ``addr`` does), the others one by one."""
    out: tuple[list[pa.Array], list[pa.Array]] = ([], [])
    if isinstance(conns, Conns) and start < len(conns.rows):
        rows = conns.rows[start:]
        v6 = np.flatnonzero(rows[:, 32] != 4)
        for side, ip_at, port_at in ((0, 0, 33), (1, 16, 35)):
            port = (rows[:, port_at].astype(np.int64) << 8) | rows[:, port_at + 1]
            octets = [_OCTETS.take(rows[:, ip_at + j]) for j in range(4)]
            text = pc.binary_join_element_wise(
                pc.binary_join_element_wise(*octets, "."), pa.array(port).cast(pa.string()), ":"
            )
            if len(v6):
                mask = np.zeros(len(rows), np.bool_)
                mask[v6] = True
                py = [addr(rows[i, ip_at : ip_at + 16].tobytes(), int(port[i])) for i in v6.tolist()]
                text = pc.replace_with_mask(text, pa.array(mask), pa.array(py, pa.string()))
            out[side].append(text)
        start = len(conns.rows)
    rest = [conns[i] for i in range(start, len(conns))]
    out[0].append(pa.array([addr(c.client_ip, c.client_port) for c in rest], pa.string()))
    out[1].append(pa.array([addr(c.server_ip, c.server_port) for c in rest], pa.string()))
    return pa.concat_arrays(out[0]), pa.concat_arrays(out[1])


def ends_of(conn: ConnKey) -> dict[str, str]:
    """The client and broker columns of a rejects row for a connection."""
    return {
        "client": addr(conn.client_ip, conn.client_port),
        "broker": addr(conn.server_ip, conn.server_port),
    }


def slices(
    data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, valid: np.ndarray | None, t: pa.DataType
) -> pa.Array:
    """A binary or string array of ``data[starts[i] : starts[i] + lengths[i]]`` (null where not
    ``valid``)."""
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    kc.gather(data, starts, starts + lengths, out)
    if offsets[-1] >= 2**31:
        t = pa.large_string() if t == pa.string() else pa.large_binary()
    else:
        offsets = offsets.astype(np.int32)
    bits = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = 0 if valid is None else int(len(valid) - valid.sum())
    array = pa.Array.from_buffers(
        t, len(starts), [bits, pa.py_buffer(offsets), pa.py_buffer(out)], null_count=nulls
    )
    if t == pa.large_binary() or t == pa.large_string():
        array = array.cast(pa.binary() if t == pa.large_binary() else pa.string())
    return array


def tags_column(rows: np.ndarray, tags: dict[int, list[tuple[int, bytes]]]) -> pa.Array:
    if any(tags.values()):
        return pa.array([tags.get(i, []) for i in rows.tolist()], unknown_tags_type())
    t = unknown_tags_type()
    return pa.MapArray.from_arrays(
        pa.array(np.zeros(len(rows) + 1, np.int32)), pa.array([], t.key_type), pa.array([], t.item_type)
    )
