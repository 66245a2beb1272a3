"""Kafka as the ODS source, against a real single-node KRaft broker (tests/kafka_fixture.py).

The same Debezium events, produced one topic per table or all into one topic, must give the same
ODS tables as each other and as the file source; a SIGKILL mid-batch and a restart must give the
tables of one clean run; bad messages go to the dead letter with topic/partition/offset.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, type: mor}   # no key: the Kafka message key gives it
"""
NAMES = ("users", "orders", "items")


def _events(seed: int, rounds: int = 2, per_round: int = 60) -> list[list[tuple[str, dict[str, Any] | None, dict[str, Any]]]]:
    """Rounds of (table, envelope or None for a tombstone, message key) in source order."""
    rnd = random.Random(seed)
    out, pos = [], 0
    for _ in range(rounds):
        batch: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = []
        for _ in range(per_round):
            pos += 10
            table = rnd.choice(["shop.users", "shop.orders", "shop.items"])
            k = rnd.randint(1, 10)
            key = {"sku": f"s{k}"} if table == "shop.items" else {"id": k}
            op = rnd.choice(["c", "u", "u", "d"])
            row = {**key, "v": rnd.randint(0, 99)}
            if table == "shop.orders":
                row["created"] = f"2024-0{rnd.randint(1, 3)}-01T00:00:00Z"
            batch.append((table, envelope(op, table, row if op == "d" else None, None if op == "d" else row, pos=pos), key))
            if op == "d":
                batch.append((table, None, key))  # Debezium's tombstone after a delete
        out.append(batch)
    return out


def _kafka_yaml(servers: str, **source: Any) -> str:
    src = {"kind": "kafka", "bootstrap_servers": servers, "connect_timeout_seconds": 20, **source}
    return "ods:\n  source: " + json.dumps(src) + "\n"


def _produce(broker: Any, rounds: list[list[tuple[str, dict[str, Any] | None, dict[str, Any]]]], topic_of: Any) -> None:
    for batch in rounds:
        by_topic: dict[str, list[tuple[str | None, str | None]]] = {}
        for table, env, key in batch:
            by_topic.setdefault(topic_of(table), []).append((json.dumps(key), None if env is None else json.dumps(env)))
        for topic, msgs in by_topic.items():
            broker.produce(topic, msgs)


def _snapshot(lp: LakeProject, spark: Any) -> dict[str, list[tuple]]:
    out = {}
    for t in NAMES:
        df = lp.raw(spark, t)
        # `_seq` ends with the arrival order, which is source-specific (file line vs offset).
        cols = sorted(c for c in df.columns if not c.startswith("_hoodie") and c not in ("_ingested_at", "_source", "_seq"))
        out[t] = sorted(tuple(str(v) for v in r) for r in df.select(*cols).collect())
    return out


@pytest.fixture(scope="module")
def file_run(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> dict[str, list[tuple]]:
    """The same events through the file source: what every Kafka layout must equal."""
    lp = LakeProject(tmp_path_factory.mktemp("files"), TABLES.replace("type: mor}", "type: mor, key: [sku]}"))
    for batch in _events(7):
        lp.write_cdc([env for _t, env, _k in batch if env is not None])
    lp.ingest(spark)
    return _snapshot(lp, spark)


@pytest.mark.parametrize("layout", ["topic_per_table", "one_topic"])
def test_kafka_layouts_equal_the_file_source(tmp_path: Path, spark: Any, kafka_broker: Any, file_run: dict, layout: str) -> None:
    prefix = f"lk{layout[:3]}{tmp_path.name[-6:]}".replace("_", "")
    if layout == "topic_per_table":
        for t in NAMES:
            kafka_broker.create_topic(f"{prefix}.shop.{t}", partitions=3)
        topic_of = lambda table: f"{prefix}.{table}"  # noqa: E731 - Debezium's server.db.table
        source = {"topic_pattern": re.escape(prefix) + r"\.shop\..*"}
    else:
        kafka_broker.create_topic(f"{prefix}.shop", partitions=2)
        topic_of = lambda table: f"{prefix}.shop"  # noqa: E731
        source = {"topics": [f"{prefix}.shop"]}
    rounds = _events(7)
    _produce(kafka_broker, rounds[:1], topic_of)
    lp = LakeProject(tmp_path, TABLES, _kafka_yaml(kafka_broker.bootstrap_servers, **source))
    first = lp.ingest(spark)
    _produce(kafka_broker, rounds[1:], topic_of)
    second = lp.ingest(spark)  # resumes from the checkpointed offsets
    assert first.status == second.status == "ok"
    assert sum(b.tombstones for b in first.batches + second.batches) == sum(1 for b in rounds for _t, e, _k in b if e is None)
    assert _snapshot(lp, spark) == file_run
    assert lp.dead_letters(spark) == []
    again = lp.ingest(spark)  # nothing new: nothing read twice
    assert sum(b.events for b in again.batches) == 0


def test_bad_messages_go_to_dead_letter_with_topic_partition_offset(tmp_path: Path, spark: Any, kafka_broker: Any) -> None:
    topic = f"lkbad{tmp_path.name[-6:]}"
    kafka_broker.create_topic(topic, partitions=1)
    good = envelope("c", "shop.users", None, {"id": 1, "v": 5}, pos=10)
    kafka_broker.produce(topic, [('{"id": 1}', json.dumps(good)), (None, "{not json"), ('{"id": 2}', json.dumps({"op": "x"}))])
    lp = LakeProject(tmp_path, TABLES, _kafka_yaml(kafka_broker.bootstrap_servers, topics=[topic]))
    lp.ingest(spark)
    assert lp.rows(spark, "users") == [{"id": 1, "v": 5}]
    dead = lp.dead_letters(spark)
    assert [(d["loc"], d["reason"]) for d in dead] == [
        (f"{topic}/0/1", "malformed JSON"),
        (f"{topic}/0/2", "unknown op 'x'"),
    ]


def test_table_without_key_and_without_message_key_is_dead_lettered(tmp_path: Path, spark: Any, kafka_broker: Any) -> None:
    topic = f"lknokey{tmp_path.name[-6:]}"
    kafka_broker.create_topic(topic, partitions=1)
    kafka_broker.produce(topic, [(None, json.dumps(envelope("c", "shop.items", None, {"sku": "a", "v": 1}, pos=10)))])
    lp = LakeProject(tmp_path, TABLES, _kafka_yaml(kafka_broker.bootstrap_servers, topics=[topic]))
    lp.ingest(spark)
    assert [d["reason"] for d in lp.dead_letters(spark)] == ["no record key: the table YAML declares no `key` and the Kafka message has no key"]


def _lake(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "framework.cli", "--project", str(root), *args],
        env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600,
    )


# A kill after a table commit is the file source's case (test_ods_crash.py); here, before one.
@pytest.mark.parametrize("failpoint", ["before_table_commit:1"])
def test_sigkill_mid_batch_then_restart_equals_clean_run(tmp_path: Path, spark: Any, kafka_broker: Any, file_run: dict, failpoint: str) -> None:
    prefix = f"lkcrash{failpoint[:3]}{tmp_path.name[-6:]}"
    for t in NAMES:
        kafka_broker.create_topic(f"{prefix}.shop.{t}", partitions=2)
    _produce(kafka_broker, _events(7), lambda table: f"{prefix}.{table}")
    lp = LakeProject(tmp_path, TABLES, _kafka_yaml(kafka_broker.bootstrap_servers, topic_pattern=re.escape(prefix) + r"\..*"))
    killed = _lake(tmp_path, "ingest", "--once", env={"LAKE_FAILPOINT": failpoint})
    assert killed.returncode == -9, killed.stdout + killed.stderr
    rerun = _lake(tmp_path, "ingest", "--once")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert _snapshot(lp, spark) == file_run


def test_continuous_reads_new_messages_and_stops_cleanly(tmp_path: Path, spark: Any, kafka_broker: Any) -> None:
    import threading
    import time

    from framework.table import hudi

    topic = f"lkcont{tmp_path.name[-6:]}"
    kafka_broker.create_topic(topic, partitions=1)
    kafka_broker.produce(topic, [('{"id": 1}', json.dumps(envelope("c", "shop.users", None, {"id": 1, "v": 1}, pos=1)))])
    lp = LakeProject(tmp_path, TABLES, _kafka_yaml(kafka_broker.bootstrap_servers, topics=[topic]))
    stop, done = threading.Event(), []
    worker = threading.Thread(target=lambda: done.append(lp.ingest(spark, continuous=True, trigger_seconds=1, stop_event=stop)))
    worker.start()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not hudi.completed_instants(spark, lp.layout.table("ods.users")):
            time.sleep(0.5)
        kafka_broker.produce(topic, [('{"id": 2}', json.dumps(envelope("c", "shop.users", None, {"id": 2, "v": 2}, pos=2))),
                                     ('{"id": 1}', json.dumps(envelope("d", "shop.users", {"id": 1, "v": 1}, None, pos=3))),
                                     ('{"id": 1}', None)])
        while time.time() < deadline and lp.rows(spark, "users", ["id"]) != [{"id": 2}]:
            time.sleep(1)
    finally:
        stop.set()
        worker.join(timeout=120)
    assert not worker.is_alive()
    (summary,) = done
    assert summary.status == "ok" and len(summary.batches) >= 2 and summary.tombstones == 1
    assert lp.rows(spark, "users", ["id", "v"]) == [{"id": 2, "v": 2}]
