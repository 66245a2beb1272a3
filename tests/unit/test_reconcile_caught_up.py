"""How `lake reconcile` knows ODS has taken every change the database committed before a
position (framework/reconcile/caught_up.py): Debezium's source offsets against the database's
positions, and the Kafka offsets of the ODS stream's last committed micro-batch, read from a
checkpoint in Spark's own layout. The whole wait against a real connector and a lagging ingest is
tested in tests/integration/test_reconcile.py (nightly)."""

from __future__ import annotations

import json
from pathlib import Path

from framework.reconcile.caught_up import _behind, committed, has_positions, reached


def test_a_binlog_offset_reaches_a_position_by_file_number_then_position() -> None:
    assert reached({"file": "mysql-bin.000003", "pos": 1234}, "mysql-bin.000003:1234")
    assert reached({"file": "mysql-bin.000004", "pos": 4}, "mysql-bin.000003:999999")
    assert not reached({"file": "mysql-bin.000003", "pos": 1233}, "mysql-bin.000003:1234")
    assert not reached({"file": "mysql-bin.000002", "pos": 99999999}, "mysql-bin.000003:4")
    # Inside a snapshot the offset has not reached anything, nor has a connector with no offset yet.
    assert not reached({"file": "mysql-bin.000009", "pos": 4, "snapshot": True}, "mysql-bin.000003:4")
    assert not reached({"file": "mysql-bin.000009", "pos": 4, "snapshot": "INITIAL"}, "mysql-bin.000003:4")
    assert not reached({}, "mysql-bin.000003:4")


def test_a_postgres_offset_reaches_an_lsn_by_its_commit_lsn() -> None:
    assert reached({"lsn": 100, "lsn_commit": 250, "txId": 7}, "lsn:250")
    assert reached({"lsn": 300}, "lsn:250")
    assert not reached({"lsn": 249, "lsn_proc": 200}, "lsn:250")


def _checkpoint(root: Path, batches: dict[int, dict[str, dict[str, int]]], done: list[int]) -> None:
    """A streaming checkpoint in Spark's layout: offsets/<n> ('v1', metadata, the source's offsets), commits/<n>."""
    base = root / "warehouse" / "_lake" / "checkpoints" / "ods" / "stream"
    (base / "offsets").mkdir(parents=True)
    (base / "commits").mkdir(parents=True)
    for n, offs in batches.items():
        (base / "offsets" / str(n)).write_text("v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": {}}) + "\n" + json.dumps(offs))
        (base / "offsets" / f".{n}.crc").write_text("x")
    for n in done:
        (base / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_committed_offsets_are_the_last_committed_batchs_not_a_planned_one(tmp_path: Path) -> None:
    from framework.project.config import load_project

    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "lake.yaml").write_text("name: p\nwarehouse: warehouse\n")
    (tmp_path / "layers" / "ods" / "s.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    project = load_project(tmp_path)
    assert committed(project) is None  # no checkpoint yet
    _checkpoint(tmp_path, {0: {"p.shop.orders": {"0": 5}}, 1: {"p.shop.orders": {"0": 9, "1": 3}}, 2: {"p.shop.orders": {"0": 20, "1": 3}}},
                done=[0, 1])  # batch 2 planned, not committed (a crash or a batch under way)
    now = committed(project)
    assert now == {"p.shop.orders": {"0": 9, "1": 3}}
    assert _behind(now, {"p.shop.orders": {"0": 20, "1": 3}}) == 11
    assert _behind(now, {"p.shop.orders": {"0": 9, "1": 3}}) == 0


def test_positions_are_there_only_for_a_kafka_stream_that_has_committed(tmp_path: Path) -> None:
    """Without them reconcile re-reads after settle_seconds instead of waiting for nothing."""
    from framework.project.config import load_project

    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "s.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    (tmp_path / "lake.yaml").write_text("name: p\nwarehouse: warehouse\n")  # CDC files
    _checkpoint(tmp_path, {0: {"p.shop.orders": {"0": 5}}}, done=[0])
    assert not has_positions(load_project(tmp_path))
    (tmp_path / "lake.yaml").write_text("name: p\nwarehouse: warehouse\nods:\n  source: {kind: kafka, bootstrap_servers: 'k:9092', topic_pattern: 'p\\..*'}\n")
    assert has_positions(load_project(tmp_path))
    for f in (tmp_path / "warehouse" / "_lake" / "checkpoints" / "ods" / "stream" / "commits").iterdir():
        f.unlink()  # planned, never committed
    assert not has_positions(load_project(tmp_path))
