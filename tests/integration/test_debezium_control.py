"""What a real Debezium connector writes besides row changes, read from Kafka with a topic pattern
that takes all of its topics (issue 18, section 3).

The messages are verbatim what Debezium's MariaDB connector 2.7.0 wrote for MariaDB 10.11 (JsonConverter
with schemas; tests/data/mariadb_connector_messages.jsonl, captured from the chain of
tests/cdc_chain.py): a schema-change event (topic `<prefix>`), a schema-history record (pretty-printed
JSON without a schema block), transaction BEGIN/END (provide.transaction.metadata), a heartbeat,
and row events with op r (snapshot first/last), c, u, d, a tombstone and a truncate (op t).
Control messages are counted and skipped, never dead-lettered; rows land as the source had them.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.helpers import LakeProject

DATA = Path(__file__).resolve().parent.parent / "data" / "mariadb_connector_messages.jsonl"


def _messages(prefix: str) -> list[tuple[str, str | None, str | None]]:
    """(topic, key, value) in capture order, the topics renamed from `chain` to `prefix`."""
    out = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        topic = m["topic"].replace("chain", prefix, 1)
        out.append((topic, m["key"], m["value"]))
    return out


def _op(value: str | None) -> str | None:
    body = json.loads(value) if value else None
    return body["payload"].get("op") if body and isinstance(body.get("payload"), dict) else None


def _signal_event(msgs: list[tuple[str, str | None, str | None]]) -> tuple[str, str | None, str | None]:
    """An insert into the signal table `shop.debezium_signal`, made from a captured insert."""
    topic, _, value = next(m for m in msgs if _op(m[2]) == "c")
    body = json.loads(value or "")
    body["payload"]["source"]["table"] = "debezium_signal"
    body["payload"]["after"] = {"id": "lake-reconcile-1", "type": "execute-snapshot", "data": "{}"}
    return topic.rsplit(".", 1)[0] + ".debezium_signal", json.dumps({"id": "lake-reconcile-1"}), json.dumps(body)


def test_control_messages_are_skipped_and_rows_land(tmp_path: Path, spark: Any, kafka_broker: Any) -> None:
    prefix = f"ctl{uuid.uuid4().hex[:8]}"
    pattern = rf"(__debezium-heartbeat\.)?{prefix}(\..*)?"
    source = {"kind": "kafka", "bootstrap_servers": kafka_broker.bootstrap_servers, "topic_pattern": pattern, "connect_timeout_seconds": 20}
    # No `key:`: the key comes from the Kafka message key, which a schema change ({databaseName})
    # and a heartbeat ({serverName}) must not supply.
    # The connector's signal table (reconcile --repair's incremental snapshots): its own change
    # events are control messages too, not an undeclared table's dead letters.
    signal = "reconcile:\n  sources:\n    shop: {dialect: mariadb, host: 127.0.0.1, user: lake, signal: shop.debezium_signal}\n"
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.product, name: product}\n", "ods:\n  source: " + json.dumps(source) + "\n" + signal)
    msgs = _messages(prefix)
    truncate = [m for m in msgs if _op(m[2]) == "t"]
    first = [m for m in msgs if m not in truncate] + [_signal_event(msgs)]
    for topic, key, value in first:
        kafka_broker.produce(topic, [(key, value)])

    s = lp.ingest(spark)
    assert s.dead_letter == 0, lp.dead_letters(spark)
    assert s.control == 6  # schema change, schema history, BEGIN, END, heartbeat, the signal table's insert
    assert s.tombstones == 1
    # Snapshot pid 1 and 2, insert 3, update 1 (59.00 -> 60.00), delete 2.
    rows = lp.rows(spark, "product", ["pid", "pname", "pprice"])
    assert rows == [{"pid": 1, "pname": "mouse", "pprice": Decimal("60.00")}, {"pid": 3, "pname": "kbd", "pprice": Decimal("399.00")}]

    for topic, key, value in truncate:
        kafka_broker.produce(topic, [(key, value)])
    s = lp.ingest(spark)
    assert s.dead_letter == 0 and lp.rows(spark, "product") == []
