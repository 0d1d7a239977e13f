"""The live broker test's client: one fixed script with confluent-kafka (librdkafka).

Runs in the live venv (not the project's), so it imports only the standard library and
confluent_kafka. It creates a topic, produces known messages (plain batches, then one gzip
batch), consumes them in a group, commits twice and leaves; then writes a JSON report of what
the client did and what the client was told (delivery offsets, commits), for the test to check
the decoded capture against. Every wait is bounded in count and time.

    python live_workload.py BOOTSTRAP TOPIC PARTITIONS PLAIN GZIPPED GROUP REPORT.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition, libversion
from live_clients import client_config, create_topics


def message(i: int, partitions: int, plain: int) -> dict[str, Any]:
    """Message i of the script: partition, key, value, headers (str, None for null)."""
    if i >= plain:  # the gzip batch: one partition, so one batch
        return {"partition": 0, "key": f"gz-{i}", "value": f"compressed value {i} " * 8, "headers": []}
    return {
        "partition": i % partitions,
        "key": None if i == 3 else f"key-{i}",
        "value": None if i == 5 else f"value-{i:03d}" * (1 + i % 3),
        "headers": [] if i % 4 == 1 else [["idx", str(i)], ["src", "live"]],
    }


def _b(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def _tps(tps: list[TopicPartition] | None) -> list[list[Any]]:
    return sorted([tp.partition, tp.offset, None if tp.error is None else str(tp.error)] for tp in tps or [])


def main(argv: list[str]) -> int:
    boot, topic, partitions, plain, gzipped, group, out = argv
    n, k_plain, k_gz = int(partitions), int(plain), int(gzipped)
    deadline = time.monotonic() + 60
    base = client_config(boot)
    report: dict[str, Any] = {"confluent_kafka": confluent_kafka.__version__, "librdkafka": libversion()[0]}

    create_topics(boot, "live-admin", {topic: n})

    sent = [message(i, n, k_plain) for i in range(k_plain + k_gz)]
    delivered: list[dict[str, Any]] = []

    def on_delivery(err: KafkaError | None, m: Any) -> None:
        delivered.append(
            {
                "error": None if err is None else str(err),
                "partition": m.partition(),
                "offset": m.offset(),
                "key": _s(m.key()),
                "value": _s(m.value()),
            }
        )

    # plain: several batches per partition (a flush every 16 messages), no compression
    p = Producer(
        {**base, "client.id": "live-plain", "linger.ms": 20, "acks": "all", "compression.type": "none"}
    )
    for i, m in enumerate(sent[:k_plain]):
        headers = [(h, v.encode()) for h, v in m["headers"]]
        p.produce(
            topic,
            key=_b(m["key"]),
            value=_b(m["value"]),
            partition=m["partition"],
            headers=headers,
            on_delivery=on_delivery,
        )
        if i % 16 == 15:
            p.flush(10)
    report["unflushed_plain"] = p.flush(10)
    # one gzip batch: every message queued well inside linger.ms
    pz = Producer(
        {**base, "client.id": "live-gzip", "linger.ms": 200, "acks": "all", "compression.type": "gzip"}
    )
    for m in sent[k_plain:]:
        pz.produce(
            topic, key=_b(m["key"]), value=_b(m["value"]), partition=m["partition"], on_delivery=on_delivery
        )
    report["unflushed_gzip"] = pz.flush(10)

    c = Consumer(
        {
            **base,
            "client.id": "live-consumer",
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    consumed: list[dict[str, Any]] = []
    commits: list[list[list[Any]]] = []
    polls = 0
    while len(consumed) < len(sent) and polls < 400 and time.monotonic() < deadline:
        polls += 1
        m = c.poll(0.25)
        if m is None:
            continue
        if m.error():
            report.setdefault("consume_errors", []).append(str(m.error()))
            continue
        consumed.append(
            {
                "partition": m.partition(),
                "offset": m.offset(),
                "key": _s(m.key()),
                "value": _s(m.value()),
                "headers": [[h, _s(v)] for h, v in m.headers() or []],
            }
        )
        if len(consumed) == len(sent) // 2:  # a commit of this message's partition only
            commits.append(_tps(c.commit(message=m, asynchronous=False)))
    commits.append(_tps(c.commit(asynchronous=False)))  # every assigned partition's position
    report["committed"] = _tps(c.committed(c.assignment(), timeout=10))
    c.close()
    report.update(sent=sent, delivered=delivered, consumed=consumed, commits=commits, polls=polls)
    with open(out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
