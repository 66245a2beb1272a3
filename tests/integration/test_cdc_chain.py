"""The real chain: SQL into MariaDB -> Debezium's MariaDB connector (Kafka Connect) -> Kafka -> lake.

MariaDB is the oracle: after each `lake run` cycle every ODS table must equal `SELECT *` of its
source table and every model the rows MariaDB returns for the model's own SQL. The workload has a
snapshot, inserts, updates, deletes, primary-key changes, delete-then-reinsert, multi-statement
transactions, NULLs, unicode, DECIMAL, DATETIME(3), TIMESTAMP(3), an added column, a widened
VARCHAR and a truncate. The connector runs with heartbeats, transaction metadata, schema-change
events and truncates on, and lake subscribes to all of its topics (issue 18, section 3).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from framework.demo.oracle import compare_all
from framework.demo.shop import MODELS, TABLES, Shop, oracle_views, project_files
from framework.ops.continuous import run_cycle
from framework.project.config import load_project
from models.records import RunRecord
from tests.cdc_chain import dead_letters

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

MODEL_NAMES = [name.replace("/", ".") for name in MODELS]


def _project(root: Path, database: str, servers: str, prefix: str, models: bool = True, pattern: str | None = None) -> Path:
    for rel, text in project_files(database, servers, prefix, models, pattern).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _round(spark: Any, root: Path, chain: Any, connect: Any, database: str, models: list[str],
           tables: tuple[str, ...] = TABLES) -> RunRecord:
    """Wait until Debezium published every committed transaction, run one `lake run` cycle, and
    compare every table and model with MariaDB."""
    connect.wait_caught_up()
    rec = run_cycle(spark, load_project(root), [], [], ["run"])
    assert rec.status == "ok", rec.error
    failed = [m for m in rec.models if m.mode in ("failed", "skipped")]
    assert not failed, failed
    assert not dead_letters(spark, root), dead_letters(spark, root)[:5]
    oracle_views(chain.db, database)
    comparisons = compare_all(spark, root / "warehouse", chain.db, database, list(tables), models)
    assert all(c.equal for c in comparisons), "\n".join(c.describe() for c in comparisons if not c.equal)
    assert all(c.expected > 0 for c in comparisons), [c.describe() for c in comparisons]
    return rec


def test_ods_and_models_equal_mariadb_through_the_real_chain(tmp_path: Path, spark: Any, cdc_chain: Any) -> None:
    db, database = cdc_chain.db, "t_chain"
    shop = Shop(db, database, seed=11)
    shop.create(customers=30, products=12, orders=80)
    root = _project(tmp_path, database, cdc_chain.broker.bootstrap_servers, "chain")
    with cdc_chain.connector("chain", [database]) as connect:
        # Round 1: the snapshot (op=r, snapshot=first|true|last), then random transactions.
        connect.wait_caught_up()
        shop.changes(40)
        rec = _round(spark, root, cdc_chain, connect, database, MODEL_NAMES)
        assert rec.ingest is not None and rec.ingest.control > 0  # schema changes, heartbeats, transactions: skipped

        # Round 2: an added column and a widened VARCHAR; TRUNCATE (Debezium op=t) with two
        # thirds of the keys inserted again (if lake ignored the truncate, the rest would stay);
        # then changes that use them.
        shop.alter()
        gone = shop.refill("product")
        shop.changes(40)
        rec = _round(spark, root, cdc_chain, connect, database, MODEL_NAMES)
        assert gone > 0 and rec.ingest is not None and rec.ingest.totals()["product"].deletes >= gone


def test_lossless_widening_through_the_real_chain(tmp_path: Path, spark: Any, cdc_chain: Any) -> None:
    """DECIMAL(10,2) -> DECIMAL(12,2) and INT -> BIGINT in MariaDB, then values only the wider
    types hold: ODS must still equal the source (the product events were dead-lettered before
    lake took lossless widenings)."""
    db, database = cdc_chain.db, "t_widen"
    shop = Shop(db, database, seed=5)
    shop.create(customers=5, products=8, orders=10)
    # Only the product topic: the other tables have nothing to widen.
    root = _project(tmp_path, database, cdc_chain.broker.bootstrap_servers, "widen", models=False, pattern=rf"^widen\.{database}\.product$")
    with cdc_chain.connector("widen", [database]) as connect:
        _round(spark, root, cdc_chain, connect, database, [], ("product",))
        shop.ddl("ALTER TABLE product MODIFY price DECIMAL(12,2) NULL")
        shop.ddl("ALTER TABLE product MODIFY stock BIGINT NULL")
        shop.run([shop.update("product", pid) for pid in sorted(shop.keys["product"])[:3]]
                 + [("UPDATE product SET price = %s, stock = %s WHERE pid = %s", (Decimal("1234567890.12"), 9_000_000_000, 1))])
        _round(spark, root, cdc_chain, connect, database, [], ("product",))
