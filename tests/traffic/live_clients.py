"""What the confluent-kafka workloads of the live tests share. They run in the live venv (not the
project's): only the standard library at module level, confluent_kafka inside the functions."""

from __future__ import annotations

from typing import Any


def client_config(boot: str) -> dict[str, Any]:
    """Every client's settings: the broker over IPv4, and a socket timeout the tests outlast."""
    return {"bootstrap.servers": boot, "broker.address.family": "v4", "socket.timeout.ms": 10000}


def create_topics(boot: str, client_id: str, partitions: dict[str, int]) -> None:
    """Create each topic with its partition count (one replica), waiting until all exist."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**client_config(boot), "client.id": client_id})
    new = [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in partitions.items()]
    for future in admin.create_topics(new, request_timeout=10).values():
        future.result(timeout=15)
