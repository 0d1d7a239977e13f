"""Run by test_fuzz.py in a subprocess, so a crash in a kernel fails the test instead of
killing pytest. Mutates real bodies (bit flips, random bytes, forged lengths and counts,
truncations) and decodes them; anything but a clean result or a DecodeError is a failure."""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import arrowkafka as ak

TARGETS = [
    ("fetch_request_v12.bin", "FetchRequest", 12),
    ("produce_request_v9.bin", "ProduceRequest", 9),
    ("metadata_response_v1_1t1000p.bin", "MetadataResponse", 1),
    ("metadata_response_v12_1t1000p.bin", "MetadataResponse", 12),
    ("fetch_response_v12_10t10p_1k.bin", "FetchResponse", 12),
]


def mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    kind = rng.randrange(5)
    if kind == 0:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # random bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 2:  # a forged int32 length/count
        i = rng.randrange(max(1, len(b) - 4))
        b[i : i + 4] = struct.pack(">i", rng.choice([0x7FFFFFFF, -2, 65535, 1 << 24, len(b)]))
    elif kind == 3:  # a forged varint
        i = rng.randrange(len(b))
        b[i : i + 1] = rng.choice(
            [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80", b"\xfe\xff\xff\xff\x07"]
        )
    else:  # truncate or extend
        b = b[: rng.randrange(len(b))] if rng.random() < 0.5 else b + bytes(rng.randrange(1, 9))
    return bytes(b)


def main(vectors: Path, rounds: int) -> None:
    rng = random.Random(0)
    seen = {"ok": 0, "Truncated": 0, "Corrupt": 0}
    for file, name, version in TARGETS:
        body = (vectors / file).read_bytes()
        clean = ak.decode([body], name, version).to_pylist()
        for _ in range(rounds):
            bodies = [mutate(rng, body) for _ in range(4)] + [body]
            try:
                ak.decode(bodies, name, version).validate(full=True)
                seen["ok"] += 1
            except ak.DecodeError as e:
                seen[type(e).__name__] += 1
            batch, rejects = ak.decode(bodies, name, version, errors="null")
            batch.validate(full=True)
            assert batch.num_rows == 5 and batch.slice(4).to_pylist() == clean
            assert rejects.num_rows <= 4 and rejects.column("body").to_pylist() == [
                bodies[i] for i in rejects.column("index").to_pylist()
            ]
    print(seen)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
