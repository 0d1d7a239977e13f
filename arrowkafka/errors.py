"""The exceptions arrowkafka raises.

One small taxonomy, each class also a builtin (``ValueError``) so callers that do not know
arrowkafka still catch them:

- ``SpecError``: a message spec breaks a rule of the spec language (file, field path, rule).
"""

from __future__ import annotations

__all__ = ["ArrowKafkaError", "SpecError"]


class ArrowKafkaError(Exception):
    """Base class of every error arrowkafka raises on purpose."""


class SpecError(ArrowKafkaError, ValueError):
    """A spec file is malformed.

    Attributes
    ----------
    file : str
        The spec file (or ``<string>`` for specs given as text).
    path : str
        Where in the spec, e.g. ``FetchRequest.Topics.Partitions.FetchOffset``.
    rule : str
        The rule broken, in words.
    """

    def __init__(self, file: str, path: str, rule: str) -> None:
        self.file = file
        self.path = path
        self.rule = rule
        super().__init__(f"{file}: {path}: {rule}")
