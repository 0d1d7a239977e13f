"""The header-version rule, for every API and version, against an independent implementation.

kio (a Kafka codec generated from the same specs by other people) records, in every generated
request and response class, which header schema frames it. Our rule, computed from our specs'
flexible versions, must agree wherever both know the (api, version).
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import arrowkafka as ak
from arrowkafka.ir import request_header_version, response_header_version


def kio_classes() -> list[type]:
    kio_schema = pytest.importorskip("kio.schema")
    out = []
    for info in pkgutil.walk_packages(kio_schema.__path__, "kio.schema."):
        if info.name.endswith((".request", ".response")):
            module = importlib.import_module(info.name)
            out += [
                obj
                for name, obj in vars(module).items()
                if isinstance(obj, type)
                and name.endswith(("Request", "Response"))
                and obj.__module__ == info.name
            ]
    return out


def test_rule_against_kio() -> None:
    specs = ak.load_specs()
    checked = 0
    for cls in kio_classes():
        key, version = cls.__api_key__, cls.__version__  # type: ignore[attr-defined]
        header = cls.__header_schema__.__version__  # type: ignore[attr-defined]
        is_request = cls.__name__.endswith("Request")
        try:
            spec = specs.request(key) if is_request else specs.response(key)
        except KeyError:
            continue  # an API newer than our vendored specs
        if version not in spec.valid_versions:
            continue
        ours = (specs.request_header_version if is_request else specs.response_header_version)(key, version)
        assert ours == header, (cls.__name__, version)
        checked += 1
    assert checked > 500  # kio 0.6.5 covers 604 request/response versions


def test_rule_for_every_api_and_version() -> None:
    specs = ak.load_specs()
    for name, version in specs.pairs():
        spec = specs[name]
        if spec.type == "request":
            got = specs.request_header_version(spec.api_key, version)  # type: ignore[arg-type]
            want = 0 if (spec.api_key, version) == (7, 0) else (2 if version in spec.flexible_versions else 1)
        elif spec.type == "response":
            got = specs.response_header_version(spec.api_key, version)  # type: ignore[arg-type]
            want = 0 if spec.api_key == 18 else (1 if version in spec.flexible_versions else 0)
        else:
            continue
        assert got == want, (name, version)


@pytest.mark.parametrize(
    ("api_key", "version", "req", "resp"),
    [
        (18, 3, 2, 0),  # ApiVersions: flexible request header, but response header v0 always
        (18, 2, 1, 0),
        (7, 0, 0, 0),  # ControlledShutdown v0: request header v0 (no client id)
        (7, 1, 1, 0),
        (7, 3, 2, 1),
        (1, 11, 1, 0),  # Fetch: flexible from 12
        (1, 12, 2, 1),
        (0, 9, 2, 1),  # Produce: flexible from 9
    ],
)
def test_rule_examples(api_key: int, version: int, req: int, resp: int) -> None:
    assert ak.request_header_version(api_key, version) == req
    assert ak.response_header_version(api_key, version) == resp


def test_pure_rule() -> None:
    assert request_header_version(7, 0, False) == 0
    assert request_header_version(3, 0, True) == 2
    assert response_header_version(18, 4, True) == 0
    assert response_header_version(3, 9, True) == 1


def test_header_specs_load_at_their_versions() -> None:
    specs = ak.load_specs()
    assert str(specs["RequestHeader"].valid_versions) == "0-2"
    assert str(specs["ResponseHeader"].valid_versions) == "0-1"
    # v2 is flexible but ClientId keeps the classic nullable string (field-level override).
    assert ak.arrow_schema("RequestHeader", 2).names == [
        "request_api_key",
        "request_api_version",
        "correlation_id",
        "client_id",
        "_unknown_tags",
    ]
    assert ak.arrow_schema("RequestHeader", 0).names == [
        "request_api_key",
        "request_api_version",
        "correlation_id",
    ]


def test_unknown_api_key() -> None:
    with pytest.raises(KeyError, match="no request spec for api key 999"):
        ak.request_header_version(999, 0)
