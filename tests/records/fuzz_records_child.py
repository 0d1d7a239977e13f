"""Run in a subprocess by test_real_records: damage real record values and check that
decode_records only ever raises ``Corrupt``, and that with errors="null" every byte is in a
batch row and every failed batch has a reject row. A crash in a kernel kills this process, not
the test run. Prints one JSON line of counts."""

from __future__ import annotations

import json
import random
import sys

import pyarrow as pa

import arrowkafka as ak
from arrowkafka import Corrupt


def check(value: bytes, counts: dict[str, int]) -> None:
    try:
        ak.decode_records([value])
        counts["decoded"] += 1
    except Corrupt:
        counts["corrupt"] += 1
    got = ak.decode_records([value], errors="null")
    errors = got.batches.column("error").to_pylist()
    assert got.rejects.num_rows == sum(e is not None for e in errors)
    assert sum(got.batches.column("size").to_pylist()) == len(value)
    good = [n for n, e in zip(got.batches.column("record_count").to_pylist(), errors, strict=True)
            if e is None and n is not None]  # fmt: skip
    assert got.records.num_rows == sum(good)


def main() -> None:
    path, seed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    values = pa.ipc.open_file(path).read_all().column(0).to_pylist()
    rng = random.Random(seed)
    counts = {"decoded": 0, "corrupt": 0}
    for value in values:  # every cut of every value
        for cut in range(0, len(value), max(1, len(value) // 100)):
            check(value[:cut], counts)
    for _ in range(rounds):  # random damage: flipped bytes, forged lengths, spliced values
        value = bytearray(rng.choice(values))
        if not value:
            continue
        for _ in range(rng.randint(1, 6)):
            if not value:
                break
            r = rng.random()
            at = rng.randrange(len(value))
            if r < 0.6:
                value[at] = rng.randrange(256)
            elif r < 0.8:
                value[at : at + 4] = rng.choice(
                    [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"]
                )
            else:
                other = rng.choice(values)
                value[at:] = other[rng.randrange(len(other) or 1) :]
        check(bytes(value), counts)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
