"""Kernels specialised to a plan (``arrowkafka.codegen.decode``) behave exactly as the interpreter:
the same rows, the same rejects, the same errors word for word, on real vectors, every kind of
damage, and generated values of the feature specs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowkafka as ak
from arrowkafka import oracle as ref
from arrowkafka.api import SpecSet
from tests.codegen.agree import assert_same, outcomes
from tests.conftest import SHARED, SPEC_FOLDERS
from tests.strategies import message_value

# each plan compiles for seconds: pointless without the JIT
pytestmark = [pytest.mark.jit, pytest.mark.usefixtures("own_kernel_folder")]


def both(specs: SpecSet, bodies: list[bytes], name: str, version: int) -> None:
    """Decode with both kernels in both error modes; everything must be equal."""
    want = outcomes(specs, name, version, bodies, "interpreter")
    assert_same(want, outcomes(specs, name, version, bodies, "specialised"))


def damaged(body: bytes, rng: random.Random) -> list[bytes]:
    out = [body[:cut] for cut in range(0, len(body), max(1, len(body) // 60))]
    for _ in range(40):
        b = bytearray(body)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    return [*out, body + b"\x00"]


@pytest.mark.parametrize(
    ("stem", "name", "version"),
    [
        ("metadata_response_v12_1t1000p", "MetadataResponse", 12),
        ("metadata_response_v1_1t1000p", "MetadataResponse", 1),
        ("fetch_response_v12_10t10p_1k", "FetchResponse", 12),
    ],
)
def test_vectors_and_their_damage(stem: str, name: str, version: int) -> None:
    body = (SHARED / "vectors" / f"{stem}.bin").read_bytes()
    specs = ak.load_specs()
    both(specs, [body, body], name, version)
    for bad in damaged(body, random.Random(0)):
        both(specs, [body, bad], name, version)


FEATURES = [("NullableStructsRequest", 3), ("NullableStructsRequest", 1), ("OptionalFieldsResponse", 2),
            ("VarintEncodingsResponse", 4), ("VarintEncodingsResponse", 0)]  # fmt: skip


@pytest.mark.parametrize(("name", "version"), FEATURES)
def test_feature_specs(name: str, version: int) -> None:
    specs = ak.load_specs(SPEC_FOLDERS["features"])
    spec = specs[name]
    rng = random.Random(1)

    @settings(max_examples=20, suppress_health_check=list(HealthCheck))
    @given(st.lists(message_value(spec, version), min_size=1, max_size=4))
    def check(values: list[dict]) -> None:
        bodies = [ref.encode(spec, version, v) for v in values]
        both(specs, bodies, name, version)
        both(specs, bodies + [d for b in bodies for d in damaged(b, rng)[:8]], name, version)

    check()


def test_generated_module_is_cached_on_disk(tmp_path: Path) -> None:
    from arrowkafka.codegen.modules import cache_dir

    assert any(cache_dir().glob("ak_*.py"))


def test_the_generated_source_runs_without_the_jit(tmp_path: Path) -> None:
    """``kernel="specialised"`` with NUMBA_DISABLE_JIT=1: the generated module runs as Python
    (its helpers are the interpreter's, plain functions then), decoding and encoding, with views too."""
    import os
    import subprocess
    import sys

    code = (
        "import arrowkafka as ak\n"
        f"b = open({str(SHARED / 'vectors' / 'fetch_request_v12.bin')!r}, 'rb').read()\n"
        "a = ak.decode([b] * 3, 'FetchRequest', 12, kernel='specialised')\n"
        "assert a.equals(ak.decode([b] * 3, 'FetchRequest', 12, kernel='interpreter'))\n"
        "v = ak.decode([b] * 3, 'FetchRequest', 12, kernel='specialised', views=True)\n"
        "assert v.to_pylist() == a.to_pylist()\n"
        "assert ak.encode(a, 'FetchRequest', 12, kernel='specialised').to_pylist() == [b] * 3\n"
        "print('ok')\n"
    )
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "ARROWKAFKA_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]
