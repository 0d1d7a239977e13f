"""Version ranges as the specs write them: ``none``, ``N``, ``N-M`` and ``N+``.

A range is contiguous (that is all the spec language can say), so a small closed algebra
(contains, intersect, subtract, union-if-contiguous) covers every rule the loader checks.
``N+`` is stored with the upper bound 32767, the largest version a request header can carry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_VERSION", "Versions", "parse_versions"]

MAX_VERSION = 0x7FFF  # versions travel as int16 on the wire

_RANGE = re.compile(r"^(\d+)(?:(\+)|-(\d+))?$")


@dataclass(frozen=True, order=True)
class Versions:
    """An inclusive range ``lo..hi``; ``lo > hi`` means the empty range (``none``)."""

    lo: int
    hi: int

    @classmethod
    def none(cls) -> Versions:
        return NONE

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @property
    def open_ended(self) -> bool:
        return not self.empty and self.hi == MAX_VERSION

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.lo, self.hi + 1))

    def __len__(self) -> int:
        return 0 if self.empty else self.hi - self.lo + 1

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def contains_range(self, other: Versions) -> bool:
        return other.empty or (self.lo <= other.lo and other.hi <= self.hi)

    def union(self, other: Versions) -> Versions | None:
        """The union if it is one contiguous range, else None."""
        if self.empty:
            return other
        if other.empty:
            return self
        if other.lo > self.hi + 1 or self.lo > other.hi + 1:
            return None
        return Versions(min(self.lo, other.lo), max(self.hi, other.hi))

    def subtract(self, other: Versions) -> Versions | None:
        """``self`` minus ``other`` if the rest is contiguous, else None."""
        cut = self.intersect(other)
        if cut.empty:
            return self
        if cut == self:
            return NONE
        if cut.lo == self.lo:
            return Versions(cut.hi + 1, self.hi)
        if cut.hi == self.hi:
            return Versions(self.lo, cut.lo - 1)
        return None

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


def parse_versions(text: str) -> Versions:
    """Parse a version range string; raise ValueError naming what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"version range must be a string, got {type(text).__name__} {text!r}")
    s = text.strip()
    if s == "none":
        return NONE
    m = _RANGE.match(s)
    if m is None:
        raise ValueError(f"bad version range {text!r} (expected none, N, N-M or N+)")
    lo = int(m.group(1))
    hi = MAX_VERSION if m.group(2) else int(m.group(3)) if m.group(3) is not None else lo
    if lo > MAX_VERSION or hi > MAX_VERSION:
        raise ValueError(f"bad version range {text!r} (versions stop at {MAX_VERSION})")
    if lo > hi:
        raise ValueError(f"bad version range {text!r} (start after end)")
    return Versions(lo, hi)
