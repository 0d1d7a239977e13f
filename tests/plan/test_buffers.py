"""Stage 5: buffers have stable names (``n7-offsets`` ...) that match the arrays built on them."""

from __future__ import annotations

import numpy as np

import arrowkafka as ak
from arrowkafka.assembly.assemble import allocate, assemble
from arrowkafka.codec.decode import _input, _Run, as_bodies
from arrowkafka.plan import compile_plan
from tests.conftest import SHARED


def test_named_buffers_are_the_arrays_buffers() -> None:
    body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
    plan = compile_plan(ak.load_specs()["MetadataResponse"], 12)
    data, starts, ends = _input(as_bodies([body, body]))
    run = _Run(plan, data, starts, ends, null_mode=False)
    run.use("interpreter")
    nn = len(plan.nodes)
    counts, dcounts = np.zeros(nn, np.int64), np.zeros(nn, np.int64)
    run.call(0, 2, False, counts, dcounts, None)
    bufs = allocate(plan, counts, dcounts)
    run.call(0, 2, True, np.zeros(nn, np.int64), np.zeros(nn, np.int64), bufs)
    named = bufs.named(plan, counts, dcounts)
    batch = assemble(plan, bufs, counts, dcounts, 2)
    partitions = next(n for n in plan.nodes if n.path == "$.topics[].partitions")
    index = next(n for n in plan.nodes if n.path == "$.topics[].partitions[].partition_index")
    host = next(n for n in plan.nodes if n.path == "$.brokers[].host")
    flat = batch.column("topics").flatten().field("partitions")
    assert np.array_equal(named[f"n{partitions.id}-offsets"], flat.offsets.to_numpy())
    assert named[f"n{index.id}-values"].view(np.int32).tolist() == list(range(1000)) * 2
    assert bytes(named[f"n{host.id}-data"]).startswith(b"broker-1.kafka.local")
    assert f"n{host.id}-validity" not in named  # not nullable: no validity buffer
