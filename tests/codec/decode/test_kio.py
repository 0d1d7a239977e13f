"""Cross-check with an implementation we did not write: kio 0.6.5 (a Kafka codec generated
from the same specs by other people) decodes the same bytes for every (message, version) it
covers, and its values agree with ours field by field."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import pkgutil
import uuid
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

import arrowkafka as ak
from arrowkafka import oracle as ref
from tests.strategies import message_value

kio_schema = pytest.importorskip("kio.schema")
kio_serial = pytest.importorskip("kio.serial")


@cache
def kio_classes() -> dict[tuple[str, int, int], type]:
    out = {}
    for info in pkgutil.walk_packages(kio_schema.__path__, "kio.schema."):
        if info.name.endswith((".request", ".response")):
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if (
                    isinstance(obj, type)
                    and name.endswith(("Request", "Response"))
                    and obj.__module__ == info.name
                ):
                    kind = "request" if name.endswith("Request") else "response"
                    out[(kind, obj.__api_key__, obj.__version__)] = obj
    return out


def plain(x: Any) -> Any:
    """A kio value as our rows hold it: dicts, lists, ints for enums and durations."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, tuple | list):
        return [plain(i) for i in x]
    if isinstance(x, datetime.timedelta):
        return x // datetime.timedelta(milliseconds=1)
    if isinstance(x, datetime.datetime):
        return round(x.timestamp() * 1000)
    if isinstance(x, enum.Enum):
        return x.value
    return x


# Fields Kafka renamed between kio's spec revision and ours (same wire layout).
RENAMED = {
    "config_resources": "client_metrics_resources",  # ListConfigResources was ListClientMetricsResources
    "replica_epoch": "candidate_epoch",  # VoteRequest
    "replica_id": "candidate_id",  # VoteRequest
    "replica_directory_id": "candidate_directory_id",  # VoteRequest
    "resource_name": "name",  # ListConfigResources
}


def agree(ours: Any, theirs: Any, path: str = "$") -> int:
    """Compare field by field; kio names a few fields without their unit suffix. Returns the
    number of leaf values compared."""
    if isinstance(theirs, dict):
        n = 0
        for key, value in theirs.items():
            # kio's names: `id_`, `throttle_time` (a timedelta), `k_raft_...`
            names = (
                key,
                key.rstrip("_"),
                key + "_ms",
                key + "_id",
                key.replace("k_raft", "kraft"),
                RENAMED.get(key),
            )
            mine = next((k for k in names if k in ours), None)
            assert mine is not None, f"{path}.{key}: not in our row {sorted(ours)}"
            n += agree(ours[mine], value, f"{path}.{mine}")
        return n
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), path
        return sum(agree(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(ours, theirs, strict=True)))
    if isinstance(theirs, uuid.UUID) or isinstance(ours, uuid.UUID):
        assert (ours or uuid.UUID(int=0)) == (theirs or uuid.UUID(int=0)), path
        return 1
    if theirs is None and ours == -1:
        return 1  # kio models a -1 timestamp as None
    assert ours == theirs, f"{path}: ours {ours!r}, kio {theirs!r}"
    return 1


# Pairs whose layout differs between kio's spec revision and ours: not the same message.
OTHER_LAYOUT = {
    # kio's PartitionResult has LeaderEpoch in v0; Kafka's spec at our pinned commit does not
    ("ReadShareGroupStateSummaryResponse", 0),
}

SPECS = ak.load_specs()
PAIRS = [
    (name, v)
    for name, v in SPECS.pairs()
    if SPECS[name].type in ("request", "response")
    and (SPECS[name].type, SPECS[name].api_key, v) in kio_classes()
    and not (SPECS[name].latest_version_unstable and v == SPECS[name].valid_versions.hi)
    and (name, v) not in OTHER_LAYOUT
]


def test_kio_covers_most_pairs() -> None:
    assert len(PAIRS) > 450


@pytest.mark.parametrize(("name", "version"), PAIRS, ids=[f"{n}-v{v}" for n, v in PAIRS])
def test_agrees_with_kio(name: str, version: int) -> None:
    spec = SPECS[name]
    cls = kio_classes()[(spec.type, spec.api_key, version)]
    reader = kio_serial.entity_reader(cls)

    @settings(max_examples=3, suppress_health_check=list(HealthCheck))
    @given(message_value(spec, version, unknown_tags=False).map(lambda v: ref.encode(spec, version, v)))
    def check(body: bytes) -> None:
        try:
            theirs, used = reader(body, 0)
            theirs = plain(theirs)
        except (ValueError, OverflowError, TypeError, kio_serial.errors.OutOfBoundValue):
            assume(False)  # kio refuses values its Python types cannot hold (e.g. huge durations)
            return
        assert used == len(body)
        (ours,) = SPECS.decode([body], name, version).to_pylist()
        agree(ours, theirs)

    check()
