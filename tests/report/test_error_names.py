"""Kafka's error names (``arrowkafka.report.errors``, written from Kafka's Errors.java) against two
tables we did not write: kio's ``ErrorCode`` (generated from Kafka's sources) and kafka-python's
error classes (written by hand, with some names from before Kafka renamed them)."""

from __future__ import annotations

import importlib
import inspect
import warnings

from kio.schema.errors import ErrorCode

from arrowkafka.report.errors import ERROR_NAMES, KAFKA_REVISION, error_name

# kafka-python keeps the names these codes had before Kafka renamed them (Kafka's name: its)
KAFKA_PYTHON_OLD_NAMES = {
    -1: "UNKNOWN",  # UNKNOWN_SERVER_ERROR
    0: "NO_ERROR",  # NONE
    6: "NOT_LEADER_FOR_PARTITION",  # NOT_LEADER_OR_FOLLOWER (KIP-392)
    10: "MESSAGE_SIZE_TOO_LARGE",  # MESSAGE_TOO_LARGE
    17: "INVALID_TOPIC",  # INVALID_TOPIC_EXCEPTION
    39: "INVALID_REPLICATION_ASSIGNMENT",  # INVALID_REPLICA_ASSIGNMENT
}


def test_every_code_from_minus_one_up_is_named_once() -> None:
    assert sorted(ERROR_NAMES) == list(range(-1, max(ERROR_NAMES) + 1))
    assert len(set(ERROR_NAMES.values())) == len(ERROR_NAMES)
    assert max(ERROR_NAMES) >= 128 and KAFKA_REVISION.startswith("apache/kafka@")
    assert (error_name(27), error_name(79)) == ("REBALANCE_IN_PROGRESS", "MEMBER_ID_REQUIRED")
    assert error_name(30000) == "UNKNOWN_ERROR_CODE_30000"


def test_the_same_names_as_kio() -> None:
    kio = {int(e.value): e.name.upper() for e in ErrorCode}
    assert {c: kio.get(c) for c in ERROR_NAMES} == ERROR_NAMES
    # kio, from a later Kafka, knows a few more codes: all after ours
    assert min(set(kio) - set(ERROR_NAMES)) > max(ERROR_NAMES)


def test_the_same_names_as_kafka_python_but_its_old_ones() -> None:
    with warnings.catch_warnings():  # kafka-python's package import uses importlib's deprecated read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        errors = importlib.import_module("kafka.errors")
    theirs = {
        c.errno: c.message
        for c in vars(errors).values()
        if inspect.isclass(c) and issubclass(c, errors.BrokerResponseError) and isinstance(c.errno, int)
    }
    both = set(theirs) & set(ERROR_NAMES)
    assert len(both) >= 120
    differ = {c: theirs[c] for c in both if theirs[c] != ERROR_NAMES[c]}
    assert differ == KAFKA_PYTHON_OLD_NAMES
