"""The shared golden vectors decode to what their sidecars say, and every one of them cut short
at every byte raises Truncated with an offset inside the body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.decode import _Run
from arrowkafka.kernels import decode as kernel
from arrowkafka.plan import compile_plan
from tests.conftest import SHARED

VECTORS = sorted(
    p
    for p in (SHARED / "vectors").glob("*.json")
    if json.loads(p.read_text())["kind"] in ("request", "response")
)


def load(sidecar: Path) -> tuple[dict[str, Any], bytes, str]:
    meta = json.loads(sidecar.read_text())
    body = sidecar.with_suffix(".bin").read_bytes()
    specs = ak.load_specs()
    kind = specs.request if meta["kind"] == "request" else specs.response
    return meta, body, kind(meta["api_key"]).name


def test_there_are_vectors() -> None:
    assert len(VECTORS) == 5


@pytest.mark.parametrize("sidecar", VECTORS, ids=lambda p: p.stem)
def test_vector_decodes(sidecar: Path) -> None:
    meta, body, name = load(sidecar)
    assert len(body) == meta["size_bytes"]
    assert (
        meta["cross_checked"]["kio_roundtrip_equal"] and meta["cross_checked"]["kafka_python_roundtrip_equal"]
    )
    batch = ak.decode(pa.array([body, body], pa.binary()), name, meta["api_version"])
    batch.validate(full=True)
    assert batch.num_rows == 2
    (row, again) = batch.to_pylist()
    assert row == again == ref.decode(ak.load_specs()[name], meta["api_version"], body)
    assert ref.encode(ak.load_specs()[name], meta["api_version"], row) == body


@pytest.mark.jit
def test_metadata_vector_content() -> None:
    # "3 brokers with rack, cluster_id, 1 topic with topic_id, 1000 partitions x 3 replicas
    # (isr = replicas, offline empty), no tagged fields set"
    for stem, version in (("metadata_response_v12_1t1000p", 12), ("metadata_response_v1_1t1000p", 1)):
        body = (SHARED / "vectors" / f"{stem}.bin").read_bytes()
        batch = ak.decode([body], "MetadataResponse", version)
        brokers = batch.column("brokers")[0].as_py()
        assert len(brokers) == 3 and all(b["rack"] for b in brokers)
        (topic,) = batch.column("topics")[0].as_py()
        parts = topic["partitions"]
        assert len(parts) == 1000 and [p["partition_index"] for p in parts] == list(range(1000))
        assert all(len(p["replica_nodes"]) == 3 and p["isr_nodes"] == p["replica_nodes"] for p in parts)
        assert all(p.get("offline_replicas", []) == [] for p in parts)
        if version == 12:
            assert batch.column("cluster_id")[0].as_py() and topic["topic_id"].int != 0
            assert batch.column("_unknown_tags")[0].as_py() == []


def test_fetch_vector_records_are_the_record_batch() -> None:
    body = (SHARED / "vectors" / "fetch_response_v12_10t10p_1k.bin").read_bytes()
    record_batch = (SHARED / "vectors" / "record_batch_v2_10rec.bin").read_bytes()
    batch = ak.decode([body], "FetchResponse", 12)
    topics = batch.column("responses")[0].as_py()
    assert len(topics) == 10 and all(len(t["partitions"]) == 10 for t in topics)
    assert all(p["records"] == record_batch for t in topics for p in t["partitions"])


@pytest.mark.jit
@pytest.mark.parametrize("sidecar", VECTORS, ids=lambda p: p.stem)
def test_every_truncation_is_truncated(sidecar: Path) -> None:
    """All len(body) prefixes in one kernel call (null mode records each one's error)."""
    meta, body, name = load(sidecar)
    plan = compile_plan(ak.load_specs()[name], meta["api_version"])
    data = np.frombuffer(body, np.uint8)
    ends = np.arange(len(body), dtype=np.int64)  # prefixes of 0 .. len-1 bytes
    run = _Run(plan, data, np.zeros(len(body), np.int64), ends, null_mode=True)
    run.use("interpreter")
    nn = len(plan.nodes)
    run.call(0, len(body), False, np.zeros(nn, np.int64), np.zeros(nn, np.int64), None)
    assert run.bad.all()
    codes = set(run.reject_code.tolist())
    assert codes <= {kernel.E_TRUNCATED, kernel.E_FORGED_COUNT}, codes
    assert np.all(run.reject_offset <= ends)
    # and through the public API, a few of them with their exact error
    for cut in (0, 1, len(body) // 2, len(body) - 1):
        with pytest.raises(ak.Truncated) as e:
            ak.decode([body[:cut]], name, meta["api_version"])
        assert e.value.message_index == 0 and 0 <= e.value.offset <= cut and e.value.size == cut
