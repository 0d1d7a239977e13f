"""The mid-stream live test's client: confluent-kafka (librdkafka) producing and consuming
without pause over long-lived connections, so that a capture started late picks them up in the
middle.

Runs in the live venv (not the project's): at module level it imports only the standard
library, so the test imports ``key_of`` and ``value_of`` from here to check what it decodes;
confluent_kafka is imported inside ``main``.

It creates a topic, then runs two threads until STOP exists: a producer sending bursts of known
records (record ``i`` has key ``key_of(i)`` and value ``value_of(i)``; burst ``b`` goes to
partition ``b % partitions``), each burst flushed as one Produce request of 100 to 500 KB on
the producer's own connection (librdkafka sends one partition per request); and a consumer in a
group fetching in a tight loop (``fetch.wait.max.ms`` of 1 ms: hundreds of Fetch requests a
second). Once both have run for ``warm`` seconds and each has moved
records, it writes READY; after STOP it stops both, closes them, and writes the JSON report.
Every wait is bounded in count and time.

    python live_mid_stream_workload.py BOOTSTRAP TOPIC PARTITIONS WARM READY STOP REPORT.json
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from live_clients import client_config, create_topics

FILLER = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
LIMIT = 80  # seconds: the client gives up on its own after this, whatever the test does


def key_of(i: int) -> bytes:
    return f"k{i}".encode()


def value_of(i: int) -> bytes:
    """Record i's value: its number, then 1,000 to 8,000 bytes of filler that depend on i."""
    size = 1000 + (i * 7919) % 7001
    start = i % len(FILLER)
    body = (FILLER[start:] + FILLER * (size // len(FILLER) + 2))[:size]
    return f"mid-{i:09d}:".encode() + body


def burst_records(b: int) -> int:
    """Records in burst b: 25 to 110 records of 4.5 KB on average, so 100 to 500 KB a burst."""
    return 25 + (b * 37) % 86


def main(argv: list[str]) -> int:
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaError, Producer, libversion

    boot, topic, partitions, warm, ready, stop, out = argv
    n_parts, warm_s = int(partitions), float(warm)
    give_up = time.monotonic() + LIMIT
    base = client_config(boot)
    report: dict[str, Any] = {"confluent_kafka": confluent_kafka.__version__, "librdkafka": libversion()[0]}

    create_topics(boot, "mid-admin", {topic: n_parts})

    halt = threading.Event()
    errors: list[str] = []
    produced = {"records": 0, "bursts": 0, "delivered": 0, "unflushed": 0}
    # (partition, offset, i) of every delivered record, in delivery order
    delivered: list[list[int]] = []
    consumed = {"records": 0, "wrong": 0, "polls": 0}

    def on_delivery(err: KafkaError | None, m: Any) -> None:
        if err is not None:
            errors.append(f"delivery: {err}")
            return
        i = int(m.key()[1:])
        delivered.append([m.partition(), m.offset(), i])
        produced["delivered"] += 1

    def produce() -> None:
        # one flush per burst: each burst leaves as one Produce request (linger.ms longer than
        # a burst takes to queue; batch.size above the largest burst)
        p = Producer(
            {
                **base,
                "client.id": "mid-producer",
                "acks": "all",
                "linger.ms": 5000,
                "batch.size": 1_000_000,
                "compression.type": "none",
            }
        )
        i = 0
        try:
            while not halt.is_set() and time.monotonic() < give_up:
                b = produced["bursts"]
                for _ in range(burst_records(b)):
                    p.produce(topic, key=key_of(i), value=value_of(i), partition=b % n_parts,
                              on_delivery=on_delivery)  # fmt: skip
                    i += 1
                produced["unflushed"] = p.flush(10)
                produced["bursts"] += 1
                produced["records"] = i
                halt.wait(0.1)
        except Exception as e:  # reported, not lost in the thread
            errors.append(f"producer: {e!r}")
        finally:
            produced["unflushed"] = p.flush(10)

    def consume() -> None:
        c = Consumer(
            {
                **base,
                "client.id": "mid-consumer",
                "group.id": f"{topic}-group",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 1,
                "fetch.min.bytes": 1,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            }
        )
        try:
            c.subscribe([topic])
            while not halt.is_set() and time.monotonic() < give_up:
                consumed["polls"] += 1
                m = c.poll(0.1)
                if m is None:
                    continue
                if m.error():
                    errors.append(f"consume: {m.error()}")
                    continue
                i = int(m.key()[1:])
                consumed["records"] += 1
                if m.value() != value_of(i):
                    consumed["wrong"] += 1
        except Exception as e:
            errors.append(f"consumer: {e!r}")
        finally:
            c.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    while time.monotonic() < give_up:
        if time.monotonic() - t0 >= warm_s and produced["delivered"] and consumed["records"]:
            with open(ready + ".tmp", "w") as f:
                f.write(f"{produced['delivered']} {consumed['records']}\n")
            os.replace(ready + ".tmp", ready)
            break
        time.sleep(0.05)
    while not os.path.exists(stop) and time.monotonic() < give_up:
        time.sleep(0.05)
    halt.set()
    for t in threads:
        t.join(20)
    report.update(
        produced=produced,
        delivered=delivered,
        consumed=consumed,
        errors=errors,
        gave_up=time.monotonic() >= give_up,
    )
    with open(out, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
