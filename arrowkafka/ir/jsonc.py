"""JSON with ``//`` and ``/* */`` comments, as Kafka's spec files are written.

Comments are blanked out (newlines kept, so JSON error positions still point at the right
line), then the standard library parses the rest. A key given twice with the same value is
tolerated (upstream DescribeTopicPartitionsRequest.json repeats ``"versions": "0+"``); given
twice with different values it is an error, where Jackson would silently keep the last.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["strip_comments", "parse_jsonc"]


def strip_comments(text: str) -> str:
    """Replace comments with spaces, leaving string literals untouched."""
    out: list[str] = []
    i, n = 0, len(text)
    start = 0
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(text[start:i])
            out.append(" " * (end - i))
            i = start = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError(f"unterminated /* comment at char {i}")
            end += 2
            out.append(text[start:i])
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = start = end
        else:
            i += 1
    out.append(text[start:])
    return "".join(out)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj and obj[key] != value:
            raise ValueError(f"key {key!r} is given twice with different values")
        obj[key] = value
    return obj


def parse_jsonc(text: str) -> Any:
    """Parse commented JSON; raise ValueError (with line and column) on bad syntax."""
    try:
        return json.loads(strip_comments(text), object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise ValueError(f"bad JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
