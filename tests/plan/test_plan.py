"""Stage 3: plans are data the kernel agrees with, and say what they do."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa

import arrowkafka as ak
from arrowkafka.kernels import decode as kernel_decode
from arrowkafka.kernels import encode as kernel_encode
from arrowkafka.kernels import isa
from arrowkafka.plan import compile_plan


def test_one_instruction_set() -> None:
    """Opcodes are named once (kernels/isa.py); the interpreters dispatch on those names, never
    on bare numbers, and every op a plan holds is one of them."""
    for i, name in enumerate(isa.OPS):
        assert getattr(isa, name) == i == isa.OP[name], name
    for module in (kernel_decode, kernel_encode):
        source = Path(str(module.__file__)).read_text()
        compared = re.findall(r"\bop (?:==|!=|<|>=) (\w+)", source)
        assert compared and all(name in isa.OPS for name in compared), (module.__name__, compared)
    ops = set()
    for spec in ak.load_specs().values():
        for version in (spec.valid_versions.lo, spec.valid_versions.hi):
            ops |= {int(op) for op in compile_plan(spec, version).code[:, 0]}
    assert ops <= set(range(len(isa.OPS)))
    assert {isa.OPS[op] for op in ops} >= {"TAGS", "TAGGED", "NSTRUCT", "LIST", "LIST_FIXED", "FIXED_RUN"}


def test_plans_are_cached_and_version_free() -> None:
    spec = ak.load_specs()["FetchRequest"]
    assert compile_plan(spec, 12) is compile_plan(spec, 12)
    assert compile_plan(spec, 12) is not compile_plan(spec, 12, all_versions=True)
    assert compile_plan(spec, 12).code.dtype == np.int32 and compile_plan(spec, 12).code.shape[1] == 8


def test_describe_shows_fused_runs_and_paths() -> None:
    text = compile_plan(ak.load_specs()["MetadataResponse"], 12).describe()
    assert "FIXED_RUN" in text and "$.topics[].partitions[].leader_epoch" in text
    assert "LIST_FIXED" in text and "$.topics[].partitions[].replica_nodes" in text
    # a node per Arrow array, in the schema's pre-order
    assert "n0   struct" in text


def test_node_tree_matches_schema() -> None:
    specs = ak.load_specs()
    for name in ("FetchResponse", "MetadataResponse", "ConsumerGroupMemberMetadataValue"):
        spec = specs[name]
        for all_versions in (False, True):
            plan = compile_plan(spec, spec.valid_versions.hi, all_versions)
            assert plan.root.type == pa.struct(list(plan.schema))
            assert [n.id for n in plan.nodes] == list(range(len(plan.nodes)))
