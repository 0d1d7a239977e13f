from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arrowkafka.ir import MAX_VERSION, Versions, parse_versions
from arrowkafka.ir.versions import NONE


@pytest.mark.parametrize(
    ("text", "lo", "hi", "shown"),
    [
        ("0+", 0, MAX_VERSION, "0+"),
        ("3", 3, 3, "3"),
        ("1-4", 1, 4, "1-4"),
        (" 2-2 ", 2, 2, "2"),
        ("12+", 12, MAX_VERSION, "12+"),
    ],
)
def test_parse(text: str, lo: int, hi: int, shown: str) -> None:
    v = parse_versions(text)
    assert (v.lo, v.hi) == (lo, hi)
    assert str(v) == shown


def test_none() -> None:
    v = parse_versions("none")
    assert v.empty and len(v) == 0 and str(v) == "none" and 0 not in v
    assert list(v) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "bad version range '' (expected none, N, N-M or N+)"),
        ("1-", "bad version range '1-' (expected none, N, N-M or N+)"),
        ("-1", "bad version range '-1' (expected none, N, N-M or N+)"),
        ("3-1", "bad version range '3-1' (start after end)"),
        ("1+2", "bad version range '1+2' (expected none, N, N-M or N+)"),
        ("40000+", "bad version range '40000+' (versions stop at 32767)"),
        ("all", "bad version range 'all' (expected none, N, N-M or N+)"),
    ],
)
def test_parse_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_versions(text)
    assert str(e.value) == message


def test_parse_rejects_non_string() -> None:
    with pytest.raises(ValueError, match="version range must be a string, got int 3"):
        parse_versions(3)  # type: ignore[arg-type]


def test_algebra_examples() -> None:
    a, b = parse_versions("0-5"), parse_versions("3+")
    assert a.intersect(b) == Versions(3, 5)
    assert a.union(b) == parse_versions("0+")
    assert parse_versions("0-2").union(parse_versions("4+")) is None
    assert parse_versions("0-2").union(parse_versions("3-4")) == parse_versions("0-4")
    assert parse_versions("0+").subtract(parse_versions("0-3")) == parse_versions("4+")
    assert parse_versions("0-9").subtract(parse_versions("3-4")) is None
    assert parse_versions("0-9").subtract(parse_versions("0+")) == NONE
    assert parse_versions("0-9").contains_range(parse_versions("2-3"))
    assert not parse_versions("2-3").contains_range(parse_versions("0-9"))
    assert parse_versions("1+").open_ended and not parse_versions("1-4").open_ended
    assert NONE.intersect(a) == NONE and a.union(NONE) == a and NONE.union(a) == a


ranges = st.one_of(
    st.just(NONE),
    st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda t: Versions(min(t), max(t))),
    st.integers(0, 40).map(lambda lo: Versions(lo, MAX_VERSION)),
)


@given(ranges, ranges, st.integers(0, 60))
def test_algebra_matches_sets(a: Versions, b: Versions, v: int) -> None:
    sa, sb = set(a), set(b)
    assert set(a.intersect(b)) == sa & sb
    assert (v in a) == (v in sa)
    u = a.union(b)
    if u is None:
        assert sorted(sa | sb) != list(range(min(sa | sb), max(sa | sb) + 1))
    else:
        assert set(u) == sa | sb
    d = a.subtract(b)
    if d is not None:
        assert set(d) == sa - sb
    assert a.contains_range(b) == (sb <= sa)
    assert parse_versions(str(a)) == (a if not a.empty else NONE)
