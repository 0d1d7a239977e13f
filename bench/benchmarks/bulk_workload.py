"""The bulk capture's client (bulk_capture.py records it): Produce and Fetch carrying record
batches, as in the captures users decode, rather than control-plane chatter.

Runs in the live venv (tests/traffic/live_env.py), not the project's: it imports only the
standard library, and confluent_kafka inside ``main`` (so that asv, which imports every module
of this folder, can import it too). Against one broker it creates a topic, produces about
``MB`` megabytes of JSON-like event records (keys, three headers; two producers, one without
compression, one with lz4; large batches: linger 5 ms, 256 KB), then reads them all back in a
consumer group (Fetch responses carry the batches back), committing as it goes. Every wait is
bounded; the report says what was sent and read.

    python bulk_workload.py BOOTSTRAP TOPIC PARTITIONS MB GROUP REPORT.json
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

LIMIT = 150  # seconds for the whole script
LZ4_SHARE = 5  # every 5th record goes through the lz4 producer

_EVENTS = ("page_view", "add_to_cart", "checkout", "search", "login", "logout", "purchase", "click")
_COUNTRIES = ("DE", "FR", "US", "GB", "NL", "IN", "BR", "JP", "ES", "IT", "PL", "SE")
_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0",
)
_WORDS = (
    "order shipped delayed warehouse customer refund premium basket voucher express standard "
    "return item colour size medium large small blue green red black white cotton wool leather "
    "discount member newsletter gift card store pickup tracking courier invoice payment card "
    "wallet transfer pending confirmed cancelled review rating stars helpful question answer"
).split()


def record(rng: random.Random, i: int, t0_ms: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """Record i: key, a JSON value of about 1 KB (varied, somewhat compressible), headers."""
    user = rng.randrange(200_000)
    items = [
        {
            "sku": f"SKU-{rng.randrange(10**6):06d}",
            "qty": rng.randint(1, 4),
            "price": round(rng.uniform(1, 300), 2),
            "tags": rng.sample(_WORDS, 3),
        }
        for _ in range(rng.randint(1, 5))
    ]
    value = {
        "event_id": f"{rng.getrandbits(128):032x}",
        "seq": i,
        "ts": t0_ms + i * 3 + rng.randrange(3),
        "type": rng.choice(_EVENTS),
        "user": {"id": user, "name": f"user{user}", "country": rng.choice(_COUNTRIES),
                 "segment": rng.choice(("new", "returning", "vip"))},
        "session": f"{rng.getrandbits(64):016x}",
        "page": f"/shop/{rng.choice(_WORDS)}/{rng.randrange(5000)}",
        "referrer": rng.choice((None, "https://search.example/", "https://mail.example/", "direct")),
        "agent": rng.choice(_AGENTS),
        "items": items,
        "note": " ".join(rng.choices(_WORDS, k=rng.randint(30, 95))),
    }  # fmt: skip
    headers = [
        ("trace-id", f"{rng.getrandbits(128):032x}".encode()),
        ("content-type", b"application/json"),
        ("source", rng.choice((b"web", b"ios", b"android"))),
    ]
    return f"user-{user}".encode(), json.dumps(value, separators=(",", ":")).encode(), headers


def main(argv: list[str]) -> int:
    from confluent_kafka import Consumer, KafkaException, Producer, libversion
    from confluent_kafka.admin import AdminClient, NewTopic

    boot, topic, partitions, mb, group, out = argv
    deadline = time.monotonic() + LIMIT
    base = {"bootstrap.servers": boot, "broker.address.family": "v4", "socket.timeout.ms": 10000}
    report: dict[str, Any] = {"librdkafka": libversion()[0]}
    seconds: dict[str, float] = {}

    # the records made before connecting, so that they are produced as fast as the client takes them
    rng = random.Random(20240601)
    t0_ms = 1_717_200_000_000
    want = int(float(mb) * 1e6)
    records: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = []
    sent_bytes = 0
    while sent_bytes < want:
        key, value, headers = record(rng, len(records), t0_ms)
        records.append((key, value, headers))
        sent_bytes += len(key) + len(value) + sum(len(h) + len(v) for h, v in headers)
    sent = len(records)

    admin = AdminClient({**base, "client.id": "bulk-admin"})
    futures = admin.create_topics([NewTopic(topic, num_partitions=int(partitions), replication_factor=1)],
                                  request_timeout=10)  # fmt: skip
    futures[topic].result(timeout=15)

    batching = {"linger.ms": 5, "batch.size": 256 * 1024, "acks": "all"}
    producers = [
        Producer({**base, **batching, "client.id": "bulk-orders", "compression.type": "none"}),
        Producer({**base, **batching, "client.id": "bulk-clicks", "compression.type": "lz4"}),
    ]
    errors: list[str] = []
    delivered = [0]

    def on_delivery(err: Any, m: Any) -> None:
        if err is None:
            delivered[0] += 1
        else:
            errors.append(str(err))

    t = time.monotonic()
    for i, (key, value, headers) in enumerate(records):
        if time.monotonic() > deadline:
            raise TimeoutError(f"produced {i} of {sent} records in {LIMIT} s")
        p = producers[1 if i % LZ4_SHARE == LZ4_SHARE - 1 else 0]
        while True:
            try:
                p.produce(topic, key=key, value=value, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                p.poll(0.05)
        if i % 1000 == 999:
            for q in producers:
                q.poll(0)
    report["unflushed"] = sum(q.flush(max(1.0, deadline - time.monotonic())) for q in producers)
    seconds["produce"] = time.monotonic() - t
    report.update(sent=sent, sent_bytes=sent_bytes, delivered=delivered[0], delivery_errors=errors[:10])
    if report["unflushed"] or errors or delivered[0] != sent:
        raise RuntimeError(f"produce incomplete: {json.dumps(report)}")

    t = time.monotonic()
    c = Consumer({**base, "client.id": "bulk-consumer", "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})  # fmt: skip
    c.subscribe([topic])
    consumed = consumed_bytes = 0
    consume_errors: list[str] = []
    while consumed < sent and time.monotonic() < deadline:
        for m in c.consume(num_messages=1000, timeout=0.5):
            if m.error():
                consume_errors.append(str(m.error()))
                continue
            consumed += 1
            consumed_bytes += len(m.value() or b"")
    try:
        c.commit(asynchronous=False)
    except KafkaException as e:
        consume_errors.append(f"commit: {e}")
    c.close()
    seconds["consume"] = time.monotonic() - t
    report.update(consumed=consumed, consumed_value_bytes=consumed_bytes,
                  consume_errors=consume_errors[:10], seconds=seconds)  # fmt: skip
    with open(out, "w") as f:
        json.dump(report, f)
    if consumed != sent:
        print(f"consumed {consumed} of {sent} records", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
