"""The Kafka broker tests share: one real KRaft broker per test session (see tests/conftest.py).

Started from the jars `make install` fetched (framework.runtime.jars), on free loopback ports, in a
pytest temp dir whose logs/server.log is the place to look when a Kafka test fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

from framework.demo.broker import KafkaBroker


def running_broker(work_dir: Path) -> Iterator[KafkaBroker]:
    """Yield a started broker; stop it afterwards, whatever happened in between."""
    broker = KafkaBroker(work_dir, num_partitions=1)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def unique_topic(prefix: str = "t") -> str:
    """Tests share one broker: a topic per test keeps them independent."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def consume(
    bootstrap_servers: str, topic: str, count: int, *, timeout: float = 30.0
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Read `count` messages from the start of `topic` in a fresh consumer group.

    Returns (partition, offset, key, value) in arrival order; fewer when `timeout` runs out.
    """
    import time

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": unique_topic("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(out), timeout=0.5):
                if msg.error():
                    raise RuntimeError(f"consuming {topic}: {msg.error()}")
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                out.append((partition, offset, msg.key(), msg.value()))
    finally:
        consumer.close()
    return out
