"""The live report test's client: confluent-kafka (librdkafka) against the live broker, with what
the report has sections for: an idempotent producer, a transactional producer whose first
transaction commits and second aborts, and a consumer group (read_committed) that commits what
it read, then reads a few more records without committing them (a lag), and leaves.

Runs in the live venv (not the project's): the standard library and confluent_kafka only, and
tests/traffic/live_clients.py (on PYTHONPATH). Writes a JSON report of what the client did and
was told. Every wait is bounded in count and time.

    python live_report_workload.py BOOTSTRAP TOPIC GROUP TXN_ID REPORT.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from live_clients import client_config, create_topics

PLAIN = 30  # idempotent producer, over both partitions
COMMITTED = 5  # the transaction that commits: partition 0
ABORTED = 3  # the transaction that aborts: partition 1
LATE = 4  # produced after the group's commit, read but never committed: partition 0


def main(argv: list[str]) -> int:
    boot, topic, group, txn_id, out = argv
    deadline = time.monotonic() + 60
    base = client_config(boot)
    report: dict[str, Any] = {"errors": []}
    create_topics(boot, "rep-admin", {topic: 2})

    def on_delivery(err: KafkaError | None, m: Any) -> None:
        if err is not None:
            report["errors"].append(str(err))

    idem = Producer({**base, "client.id": "rep-idempotent", "enable.idempotence": True, "linger.ms": 5})
    for i in range(PLAIN):
        idem.produce(topic, key=f"k{i}".encode(), value=f"plain {i}".encode(), partition=i % 2,
                     on_delivery=on_delivery)  # fmt: skip
        if i % 10 == 9:
            idem.flush(10)
    report["unflushed_idempotent"] = idem.flush(10)

    txn = Producer({**base, "client.id": "rep-transactional", "transactional.id": txn_id, "linger.ms": 5})
    txn.init_transactions(15)
    txn.begin_transaction()
    for i in range(COMMITTED):
        txn.produce(topic, key=f"t{i}".encode(), value=b"committed", partition=0, on_delivery=on_delivery)
    txn.commit_transaction(15)
    txn.begin_transaction()
    for i in range(ABORTED):
        txn.produce(topic, key=f"a{i}".encode(), value=b"aborted", partition=1, on_delivery=on_delivery)
    txn.flush(10)  # the records reach the log before the abort
    txn.abort_transaction(15)

    c = Consumer(
        {
            **base,
            "client.id": "rep-consumer",
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    c.subscribe([topic])
    consumed: list[list[Any]] = []

    def consume(n: int, idle: float) -> None:
        """Until ``n`` records are read and none came for ``idle`` seconds."""
        polls, last = 0, time.monotonic()
        while polls < 400 and time.monotonic() < deadline:
            if len(consumed) >= n and time.monotonic() - last >= idle:
                return
            polls += 1
            m = c.poll(0.25)
            if m is None:
                continue
            last = time.monotonic()
            if m.error():
                report["errors"].append(str(m.error()))
                continue
            consumed.append([m.partition(), m.offset(), m.value().decode()])

    # read_committed: a broker that lists the aborted transaction in its Fetch responses keeps
    # the aborted records from the application; one that does not (Tansu 0.6.0) lets them through
    consume(PLAIN + COMMITTED, idle=1.5)
    c.commit(asynchronous=False)
    report["committed"] = [[tp.partition, tp.offset] for tp in c.committed(c.assignment(), timeout=10)]
    # produced after the commit: read (so a Fetch response shows the new high watermark), not committed
    for i in range(LATE):
        idem.produce(topic, key=f"late{i}".encode(), value=b"late", partition=0, on_delivery=on_delivery)
    report["unflushed_late"] = idem.flush(10)
    consume(len(consumed) + LATE, idle=0.5)
    # the high watermarks of the consumer's last Fetch responses (cached: no request of its own)
    report["high_watermarks"] = [
        [p, c.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1]] for p in (0, 1)
    ]
    c.close()  # LeaveGroup
    report["consumed"] = consumed
    with open(out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
