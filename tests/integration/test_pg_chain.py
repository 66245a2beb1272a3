"""The real chain from PostgreSQL: SQL into PostgreSQL -> Debezium's PostgreSQL connector (pgoutput,
Kafka Connect) -> Kafka -> lake. PostgreSQL is the oracle: after each `lake run` cycle every ODS
table must equal `SELECT *` of its source table and every model the rows PostgreSQL returns for
the model's own SQL (framework/demo/pgshop.py has the workload).

What PostgreSQL does differently is all in it: unchanged TOASTed `text`/`jsonb`/`bytea` values
arrive as Debezium's placeholder (an update of a stored row, updates in the batch of the insert,
in its transaction, several in a row, after a primary-key change); REPLICA IDENTITY DEFAULT
deletes carry the key and type defaults (`changed_at` = 1970) on a table ordered by
`changed_at`; events order by LSN; tables are `db.schema.table`; a column is added; a table is
truncated. One test, two cycles, on the session's broker, Connect worker and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from framework.demo.oracle import compare_all
from framework.demo.pgshop import MODELS, TABLES, PgShop, oracle_views, project_files
from framework.ods.unavailable import DEFAULT_PLACEHOLDER
from framework.ops.continuous import run_cycle
from framework.project.config import load_project
from models.records import RunRecord
from tests.cdc_chain import dead_letters
from tests.kafka_fixture import consume

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

MODEL_NAMES = [name.replace("/", ".") for name in MODELS]


def _round(spark: Any, root: Path, chain: Any, connect: Any, schema: str) -> RunRecord:
    connect.wait_caught_up()
    rec = run_cycle(spark, load_project(root), [], [], ["run"])
    assert rec.status == "ok", rec.error
    assert not [m for m in rec.models if m.mode in ("failed", "skipped")], rec.models
    assert not dead_letters(spark, root), dead_letters(spark, root)[:3]
    oracle_views(chain.db, schema)
    comparisons = compare_all(spark, root / "warehouse", chain.db, schema, list(TABLES), MODEL_NAMES)
    assert all(c.equal for c in comparisons), "\n".join(c.describe(3)[:3000] for c in comparisons if not c.equal)
    assert all(c.expected > 0 for c in comparisons), [c.describe() for c in comparisons]
    return rec


def test_ods_and_models_equal_postgres_through_the_real_chain(tmp_path: Path, spark: Any, pg_chain: Any) -> None:
    schema, prefix = "t_pg", "pgchain"
    shop = PgShop(pg_chain.db, schema, seed=11)
    shop.create(accounts=20, items=8, orders=40)
    for rel, text in project_files(schema, pg_chain.broker.bootstrap_servers, prefix).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    with pg_chain.connector(prefix, [schema]) as connect:
        # Round 1: the snapshot, then random transactions and every placeholder case in one batch.
        shop.changes(20)
        shop.toast_cases()
        rec = _round(spark, tmp_path, pg_chain, connect, schema)
        assert rec.ingest is not None and rec.ingest.control > 0  # heartbeats, transaction markers: skipped

        # Round 2: placeholders of rows stored in round 1; an added column and changes that use it;
        # TRUNCATE (op=t) with two thirds of the keys inserted again.
        shop.toast_cases()
        shop.alter()
        gone = shop.refill("item")
        shop.changes(20)
        rec = _round(spark, tmp_path, pg_chain, connect, schema)
        assert gone > 0 and rec.ingest is not None and rec.ingest.totals()["item"].deletes >= gone

    # The cases were there: placeholders in updates, key-only deletes ordered as 1970.
    values = [json.loads(v) for _p, _o, _k, v in consume(pg_chain.broker.bootstrap_servers, f"{prefix}.{schema}.account", 10_000, timeout=3) if v]
    payloads = [m["payload"] for m in values]
    assert sum(DEFAULT_PLACEHOLDER in json.dumps(p["after"]) for p in payloads if p["op"] in ("u", "c")) >= 10
    assert sum(1 for p in payloads if p["op"] == "d" and p["before"]["changed_at"].startswith("1970-01-01")) >= 3
