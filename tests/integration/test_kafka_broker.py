"""The test Kafka broker is real: keyed messages round-trip in partition order, stop() leaves no
process, a broken start says why. No Spark here; jars come from framework.runtime.jars."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest

from framework.demo.broker import KafkaBroker
from framework.errors import EnvironmentProblem
from framework.runtime import jars
from tests.kafka_fixture import consume, unique_topic


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_keyed_messages_round_trip_in_partition_order(kafka_broker: KafkaBroker) -> None:
    topic = unique_topic("orders")
    kafka_broker.create_topic(topic, partitions=3)
    sent = [(f"key-{i % 10}".encode(), f"{i:03d}".encode()) for i in range(100)]
    assert kafka_broker.produce(topic, sent) == 100

    got = consume(kafka_broker.bootstrap_servers, topic, 100)

    assert sorted((k, v) for _, _, k, v in got) == sorted(sent)
    partitions_of_key: dict[bytes | None, set[int]] = defaultdict(set)
    by_partition: dict[int, list[tuple[int, bytes | None, bytes | None]]] = defaultdict(list)
    for partition, offset, key, value in got:
        partitions_of_key[key].add(partition)
        by_partition[partition].append((offset, key, value))
    assert all(len(ps) == 1 for ps in partitions_of_key.values()), "a key went to two partitions"
    assert len(by_partition) > 1, "ten keys over three partitions all hashed to one"
    for partition, rows in by_partition.items():
        offsets = [o for o, _, _ in rows]
        assert offsets == sorted(offsets) == list(range(len(rows))), f"partition {partition} offsets"
        # Within a partition, messages are in the order they were produced.
        assert [v for _, _, v in rows] == [v for k, v in sent if partitions_of_key[k] == {partition}]


def test_tombstones_and_str_payloads(kafka_broker: KafkaBroker) -> None:
    topic = unique_topic("cdc")
    kafka_broker.produce(topic, [("1", '{"op": "d"}'), ("1", None)])  # auto-created topic
    got = consume(kafka_broker.bootstrap_servers, topic, 2)
    assert [(k, v) for _, _, k, v in got] == [(b"1", b'{"op": "d"}'), (b"1", None)]


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path)
    broker.start()
    pid = broker.pid
    assert pid is not None and _alive(pid)
    assert broker.bootstrap_servers.startswith("127.0.0.1:")
    broker.stop()
    assert not _alive(pid) and not Path(f"/proc/{pid}").exists()
    assert broker.pid is None
    broker.stop()  # idempotent


def test_broken_config_fails_clearly_and_leaves_no_process(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, extra_properties={"process.roles": "nonsense"})
    with pytest.raises(EnvironmentProblem) as e:
        broker.start()
    assert "Kafka" in str(e.value) and "fix:" in str(e.value)
    assert broker.process is None


def test_connector_jars_add_nothing_pyspark_already_has() -> None:
    import pyspark

    def artifact(name: str) -> str:  # "zstd-jni-1.5.5-4.jar" -> "zstd-jni", keeps "..._2.12"
        parts = name.removesuffix(".jar").split("-")
        while parts and parts[-1][:1].isdigit() and "_" not in parts[-1]:
            parts.pop()
        return "-".join(parts)

    spark_jars = {artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    connector = {artifact(p.name) for p in jars.kafka_connector_jars()}
    assert "spark-sql-kafka-0-10_2.12" in connector and "kafka-clients" in connector
    assert not connector & spark_jars
