"""Encode kernels generated per plan (``arrowkafka.codegen.encode``): compiled by Numba for a
few plans that between them use every instruction, they write the reference encoder's bytes
(the interpreter's too) and give its errors, and a first small encode stays on the plain-Python
tier. (How ``kernel="auto"`` moves a plan to its kernel: tests/codegen/test_promote.py.)"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.codec.encode import encode_batch, uuids_as_bytes
from arrowkafka.codegen import encode as encode_codegen
from arrowkafka.plan import compile_plan
from tests.codec.encode.test_encode_roundtrip import storage_schema
from tests.codec.encode.test_encode_rules import rows as loose_rows
from tests.conftest import ROOT, SHARED, SPEC_FOLDERS
from tests.strategies import message_value

pytestmark = pytest.mark.usefixtures("own_kernel_folder")


SPECS = ak.load_specs()
FEATURES = ak.load_specs(SPEC_FOLDERS["features"])

# (specs, message, version, vector): together every instruction of the plans, every FIXED_RUN and
# LIST_FIXED shape that has its own code (int16/32/64, bool, uuid, an int64 as fixed32), every
# length kind, nullable structs with both markers, tag sections with and without known tags,
# the draft's optional-field buffer, KIP-625 varints.
COMPILED = [
    ("vendored", "MetadataResponse", 12, "metadata_response_v12_1t1000p"),
    ("vendored", "FetchRequest", 12, "fetch_request_v12"),
    ("features", "NullableStructsRequest", 3, None),
    ("features", "OptionalFieldsResponse", 2, None),
    ("features", "VarintEncodingsResponse", 0, None),
]


def specs_named(folder: str) -> ak.SpecSet:
    return SPECS if folder == "vendored" else FEATURES


@pytest.mark.jit
@pytest.mark.parametrize(("folder", "name", "version", "vector"), COMPILED, ids=[c[1] for c in COMPILED])
def test_compiled_kernel_writes_the_reference_bytes(
    folder: str, name: str, version: int, vector: str | None
) -> None:
    specs = specs_named(folder)
    spec = specs[name]
    schema = storage_schema(specs.arrow_schema(name, version))

    @settings(max_examples=12, suppress_health_check=list(HealthCheck))
    @given(st.lists(message_value(spec, version), min_size=1, max_size=4))
    def check(values: list[dict[str, Any]]) -> None:
        bodies = [ref.encode(spec, version, v) for v in values]
        batch = pa.RecordBatch.from_pylist(uuids_as_bytes(values), schema=schema)
        assert encode_batch(specs[name], batch, version, kernel="specialised").to_pylist() == bodies
        sizes = encode_batch(specs[name], batch, version, kernel="specialised", sizes_only=True)
        assert sizes.to_pylist() == [len(b) for b in bodies]
        every = specs.decode(bodies, name, version, all_versions=True)
        assert encode_batch(specs[name], every, version, kernel="specialised").to_pylist() == bodies

    check()
    if vector is not None:  # a real body, 130 times: enough rows for two threads
        body = (SHARED / "vectors" / f"{vector}.bin").read_bytes()
        batch = specs.decode([body] * 130, name, version)
        for threads in (1, 2):
            out = encode_batch(specs[name], batch, version, kernel="specialised", threads=threads)
            assert out.to_pylist() == [body] * 130


@pytest.mark.jit
def test_compiled_kernel_errors_are_the_interpreters() -> None:
    def both(batch: pa.RecordBatch, specs: ak.SpecSet, name: str, version: int) -> str:
        texts = set()
        for kernel in ("interpreter", "specialised"):
            with pytest.raises(ak.EncodeError) as e:
                encode_batch(specs[name], batch, version, kernel=kernel)
            texts.add(str(e.value))
        (text,) = texts
        return text

    wide = loose_rows("VarintEncodingsResponse", 0, [{"too_small": 1}, {"too_small": 2**31}], FEATURES)
    assert both(wide, FEATURES, "VarintEncodingsResponse", 0) == (
        "2147483648 is out of range for fixed32 at $.too_small (row 1, VarintEncodingsResponse v0)"
    )
    body = (SHARED / "vectors" / "metadata_response_v12_1t1000p.bin").read_bytes()
    batch = SPECS.decode([body, body], "MetadataResponse", 12)
    i = batch.schema.get_field_index("controller_id")
    holed = batch.set_column(i, pa.field("controller_id", pa.int32()), pa.array([1, None], pa.int32()))
    assert both(holed, SPECS, "MetadataResponse", 12) == (
        "null in non-nullable int32 field at $.controller_id (row 1, MetadataResponse v12)"
    )


def test_each_plan_has_its_own_module() -> None:
    plan = compile_plan(SPECS["FetchRequest"], 12)
    encode_codegen.generated_encoder(plan, jit=False)
    name, _, source = encode_codegen.module_for(plan)
    assert "def _fill(" in source and "def _sizes(" in source and "def run(" in source
    assert encode_codegen.module_for(compile_plan(SPECS["FetchRequest"], 11))[0] != name


SMALL_FIRST = f"""
import sys
import arrowkafka as ak
body = open({str(SHARED / "vectors" / "fetch_request_v12.bin")!r}, "rb").read()
batch = ak.decode([body], "FetchRequest", 12)
assert ak.encode(batch, "FetchRequest", 12).to_pylist() == [body]
assert "numba" not in sys.modules, "a first small encode must not import numba"
assert "arrowkafka.codegen.encode" not in sys.modules
print("ok")
"""


def test_a_first_small_encode_stays_plain_python() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SMALL_FIRST], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
