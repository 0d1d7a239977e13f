"""The compression test's Python clients: confluent-kafka (librdkafka) or kafka-python, one
topic per codec, each fed the same plan of records, then read back from the start.

Runs in a venv of its own (not the project's), so it imports only the standard library and the
client named on the command line. The plan (JSON, written by the test) is a list of batches of
records; bytes travel as hex, null as null. Each batch is produced and flushed on its own, so
the client writes at least one record batch per batch of the plan and partition. The report
(JSON) says per topic what the client passed to produce, the offsets the broker acknowledged,
and every record the consumer returned. Every wait is bounded in count and time.

    python live_compress_workload.py confluent|kafka-python BOOTSTRAP PLAN.json PREFIX CODECS REPORT.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from live_clients import client_config, create_topics

PARTITIONS = 2
SECONDS = 60


def _b(h: str | None) -> bytes | None:
    return None if h is None else bytes.fromhex(h)


def _h(b: bytes | None) -> str | None:
    return None if b is None else bytes(b).hex()


def _record(partition: int, key: Any, value: Any, headers: Any, timestamp: int) -> dict[str, Any]:
    """One record as the report holds it (hex, null as None)."""
    return {
        "partition": partition,
        "key": _h(key),
        "value": _h(value),
        "headers": [[k, _h(v)] for k, v in headers or []],
        "timestamp": timestamp,
    }


def _received(report: dict[str, Any]) -> int:
    return sum(len(t["received"]) for t in report["topics"].values())


def run_confluent(boot: str, plan: list[list[dict[str, Any]]], topics: dict[str, str]) -> dict[str, Any]:
    import confluent_kafka
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

    deadline = time.monotonic() + SECONDS
    base = client_config(boot)
    report: dict[str, Any] = {
        "client": "confluent-kafka",
        "versions": {
            "confluent-kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0],
        },
        "topics": {},
    }
    create_topics(boot, "cfk-admin", dict.fromkeys(topics, PARTITIONS))

    for topic, codec in topics.items():
        entry: dict[str, Any] = {"codec": codec, "sent": [], "delivered": [], "received": []}
        report["topics"][topic] = entry
        # linger long and flush after each batch of the plan: the flush decides the batches
        p = Producer(
            {**base, "client.id": f"cfk-{codec}", "linger.ms": 1000, "acks": "all", "compression.type": codec}
        )
        slots: list[dict[str, Any]] = []

        def on_delivery(err: KafkaError | None, m: Any, slot: dict[str, Any]) -> None:
            slot.update(error=None if err is None else str(err), partition=m.partition(), offset=m.offset())

        for batch in plan:
            for r in batch:
                headers = [(k, _b(v)) for k, v in r["headers"]]
                slot: dict[str, Any] = {}
                slots.append(slot)
                key, value = _b(r["key"]), _b(r["value"])
                p.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=r["partition"],
                    headers=headers,
                    timestamp=r["timestamp"],
                    on_delivery=lambda err, m, slot=slot: on_delivery(err, m, slot),
                )
                entry["sent"].append(_record(r["partition"], key, value, headers, r["timestamp"]))
            entry.setdefault("unflushed", []).append(p.flush(10))
        entry["delivered"] = slots

    c = Consumer(
        {
            **base,
            "client.id": "cfk-consumer",
            "group.id": "cfk-reader",  # required by the client; assign() joins no group
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in topics for p in range(PARTITIONS)])
    want = sum(len(b) for b in plan) * len(topics)
    polls = 0
    while _received(report) < want and polls < 400 and time.monotonic() < deadline:
        polls += 1
        m = c.poll(0.25)
        if m is None:
            continue
        if m.error():
            report.setdefault("errors", []).append(str(m.error()))
            continue
        rec = _record(m.partition(), m.key(), m.value(), m.headers(), m.timestamp()[1])
        report["topics"][m.topic()]["received"].append({"offset": m.offset(), **rec})
    c.close()
    report["polls"] = polls
    return report


def run_kafka_python(boot: str, plan: list[list[dict[str, Any]]], topics: dict[str, str]) -> dict[str, Any]:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    deadline = time.monotonic() + SECONDS
    common = {"bootstrap_servers": boot, "request_timeout_ms": 10000}
    report: dict[str, Any] = {
        "client": "kafka-python",
        "versions": {"kafka-python": kafka.__version__},
        "topics": {},
    }
    admin = KafkaAdminClient(client_id="kp-admin", **common)
    admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics], timeout_ms=10000
    )
    admin.close()

    for topic, codec in topics.items():
        entry: dict[str, Any] = {"codec": codec, "sent": [], "delivered": [], "received": []}
        report["topics"][topic] = entry
        # batch_size above the plan's largest batch, so only the flush ends a batch
        p = KafkaProducer(
            client_id=f"kp-{codec}",
            acks="all",
            linger_ms=1000,
            batch_size=1 << 20,
            compression_type=None if codec == "none" else codec,
            **common,
        )
        futures = []
        for batch in plan:
            for r in batch:
                # send() takes only (str, bytes) headers, though its batch writer has nulls
                headers = [(k, _b(v) or b"") for k, v in r["headers"]]
                key, value = _b(r["key"]), _b(r["value"])
                futures.append(
                    p.send(
                        topic,
                        key=key,
                        value=value,
                        partition=r["partition"],
                        headers=headers,
                        timestamp_ms=r["timestamp"],
                    )
                )
                entry["sent"].append(_record(r["partition"], key, value, headers, r["timestamp"]))
            p.flush(timeout=10)
        for f in futures:
            try:
                md = f.get(timeout=10)
                entry["delivered"].append({"error": None, "partition": md.partition, "offset": md.offset})
            except Exception as e:  # the test names it
                entry["delivered"].append({"error": f"{type(e).__name__}: {e}"})
        p.close(timeout=10)

    c = KafkaConsumer(
        client_id="kp-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **common,
    )
    c.assign([TopicPartition(t, p) for t in topics for p in range(PARTITIONS)])
    c.seek_to_beginning()
    want = sum(len(b) for b in plan) * len(topics)
    polls = 0
    while _received(report) < want and polls < 200 and time.monotonic() < deadline:
        polls += 1
        for tp, records in c.poll(timeout_ms=500).items():
            for m in records:
                rec = _record(tp.partition, m.key, m.value, m.headers, m.timestamp)
                report["topics"][tp.topic]["received"].append({"offset": m.offset, **rec})
    c.close()
    report["polls"] = polls
    return report


def main(argv: list[str]) -> int:
    client, boot, plan_path, prefix, codecs, out = argv
    with open(plan_path) as f:
        plan = json.load(f)
    topics = {f"{prefix}-{codec}": codec for codec in codecs.split(",")}
    run = {"confluent": run_confluent, "kafka-python": run_kafka_python}[client]
    report = run(boot, plan, topics)
    with open(out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
