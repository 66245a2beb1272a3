"""`lake reconcile` (issue 44) against the real chains: SQL into MariaDB / PostgreSQL -> Debezium
-> Kafka -> `lake ingest` -> ODS, then ODS compared with the live database.

Each test ingests tables of many column types (NULLs, '', unicode, DECIMAL, DOUBLE, FLOAT,
DATETIME(6), TIMESTAMP(3), DATE, TIME, binary; on MariaDB a TINYINT(1); one table keyed by an
integer, one by a string and an integer) and reconciles equal; then breaks rows on purpose on
both sides: in the database without the connector seeing it (MariaDB: `SET sql_log_bin = 0`),
and in the ODS table's Hudi files by plain Spark (a value changed, a row deleted). Reconcile must
find exactly those keys and columns, exit 1 and leave a run record; `--repair` puts them right
and reconcile is equal again. Last, a workload writes to the database while ingest runs and
reconcile compares: no false difference."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pyspark.sql import functions as F

from framework.cli.main import main
from framework.ops.continuous import run_cycle
from framework.project.config import load_project
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.hudi import HOODIE_META_COLUMNS
from framework.table.lake_table import ProjectDefaults
from tests.cdc_chain import dead_letters

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ROWS = 1200


def _items_row(i: int) -> tuple[Any, ...]:
    """Row `i` of `items`: every 11th row NULL in every column but the key."""
    if i % 11 == 0:
        return (i, *([None] * 12))
    name = ["", "Zoë 李雷 🚀", "a|b:c", f"n{i}"][i % 4]
    return (i, i * 1_000_003 - 500_000_000, i % 3, Decimal(i * 37 % 100_000 - 20_000) / 10_000, i / 7.0, i * 0.25,
            name, "長" * (i % 5) + "x" * (i % 300), datetime(2024, 1, 1) + timedelta(seconds=i * 3671, microseconds=i * 7),
            datetime(2023, 6, 1) + timedelta(seconds=i * 97, milliseconds=i % 1000), date(2020, 1, 1) + timedelta(days=i),
            timedelta(seconds=i * 37 % 86_400, microseconds=i * 13 % 1_000_000), bytes([i % 256, 0, 255 - i % 256]))


MARIADB_DDL = [
    "CREATE TABLE items (id INT PRIMARY KEY, qty BIGINT NULL, active TINYINT(1) NULL, price DECIMAL(12,4) NULL, ratio DOUBLE NULL, "
    "weight FLOAT NULL, name VARCHAR(64) NULL, note TEXT NULL, created DATETIME(6) NULL, updated TIMESTAMP(3) NULL DEFAULT NULL, "
    "day DATE NULL, at_time TIME(6) NULL, raw VARBINARY(16) NULL)",
    "CREATE TABLE tags (code VARCHAR(20), n INT, label VARCHAR(40) NULL, PRIMARY KEY (code, n))",
    # The connector's signal table (Debezium's documented shape): --repair's incremental snapshots.
    "CREATE TABLE debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)",
]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _project(root: Path, servers: str, prefix: str, db: str, dialect: str, port: int, user: str, sources: list[tuple[str, str]],
             signal: str | None = None, connect: Any = None) -> None:
    tables = "".join(f"  - {{source: {s}, key: [{k}]}}\n" for s, k in sources)
    _write(root, {
        "lake.yaml": (
            f"name: recon\nwarehouse: warehouse\nspark: {{master: 'local[2]', conf: {{spark.sql.shuffle.partitions: '2'}}}}\n"
            f"ods:\n  source:\n    kind: kafka\n    bootstrap_servers: '{servers}'\n"
            f"    topic_pattern: '^(__debezium-heartbeat\\.)?{prefix}(\\..*)?$'\n    connect_timeout_seconds: 20\n"
            f"reconcile:\n  sources:\n    {db}:\n      dialect: {dialect}\n      host: 127.0.0.1\n      port: {port}\n"
            f"      user: {user}\n      password: ${{RECON_DB_PASSWORD}}\n"
            + (f"      signal: {signal}\n" if signal else "")
            + (f"      connect: {{url: '{connect.worker.rest}', connector: {connect.name}}}\n" if connect else "")
            +             "  segments: 8\n  fetch_below: 16\n  settle_seconds: 2\n  timeout_seconds: 60\n"
        ),
        "layers/ods/recon.yaml": "tables:\n" + tables,
    })


def lake(root: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--project", str(root), *args], catch_exceptions=False, env={"COLUMNS": "200"})


def _ingest(spark: Any, root: Path, connect: Any) -> None:
    connect.wait_caught_up()
    rec = run_cycle(spark, load_project(root), [], [], ["run"])
    assert rec.status == "ok", rec.error


def _ingest_until_equal(spark: Any, root: Path, connect: Any) -> None:
    """Ingest and reconcile until ODS equals the source (a repair's incremental snapshot on its
    way through the stream), for up to three minutes."""
    deadline = time.monotonic() + 180
    while True:
        _ingest(spark, root, connect)
        r = lake(root, "reconcile", "--json", "--settle", "0", "--timeout", "30")
        if all(t["status"] == "equal" for t in _results(r).values()) or time.monotonic() > deadline:
            break
    assert all(t["status"] == "equal" for t in _results(r).values()), r.output


def _results(r: Result) -> dict[str, dict[str, Any]]:
    return {t["table"]: t for t in json.loads(r.stdout)}


def _keys(res: dict[str, Any], kind: str) -> set[tuple[str, ...]]:
    return {tuple(str(v) for v in s["key"].values()) for s in res["samples"] if s["kind"] == kind}


def _break_ods(spark: Any, root: Path, table: str, where: str, change: dict[str, Any] | None) -> None:
    """Upsert (change: columns -> Spark expressions) or delete (None) the rows `where` in the ODS
    table's Hudi files by plain Spark, not through lake; a greater `_seq` so Hudi takes it."""
    project = load_project(root)
    t = project.ods_table(table)
    target = kinds.ods(Layout(project.warehouse), ProjectDefaults.of(project), t)
    rows = target.read(spark).where(where).drop(*HOODIE_META_COLUMNS)
    for col, expr in (change or {}).items():
        rows = rows.withColumn(col, F.expr(expr))
    rows = rows.withColumn("_seq", F.concat(F.col("_seq"), F.lit("9"))).withColumn("_hoodie_is_deleted", F.lit(change is None))
    assert rows.count() > 0
    target.commit(rows)


def _during_workload(spark: Any, root: Path, connect: Any, writes: Callable[[int], None], seconds: float, settle: str = "90") -> Result:
    """Reconcile while `writes(round)` changes the database and ingest keeps ODS following it."""
    stop, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def workload() -> None:
        try:
            n = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                writes(n)
                n += 1
                time.sleep(0.2)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    cycles: list[tuple[float, float, int]] = []  # (start, seconds, events) of each ingest cycle

    def ingest() -> None:
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                connect.wait_caught_up()
                rec = run_cycle(spark, load_project(root), [], [], ["run"])
                assert rec.status == "ok", rec.error
                cycles.append((round(t0 - began, 1), round(time.monotonic() - t0, 1), rec.ingest.events if rec.ingest else -1))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    began = time.monotonic()
    threads = [threading.Thread(target=workload), threading.Thread(target=ingest)]
    for th in threads:
        th.start()
    try:
        time.sleep(2)
        # Ingest's lag here (a cycle of `lake run` on two cores shared with other JVMs: 5-60 s) is
        # what a key must hold still longer than to count as a difference.
        r = lake(root, "reconcile", "--json", "--settle", settle, "--timeout", "300")
        finished = round(time.monotonic() - began, 1)
        done.wait()
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert not errors, errors
    assert r.exit_code == 0, f"reconcile ended at {finished} s; ingest cycles (start, seconds, events): {cycles}\n{r.output}"
    return r


def test_reconcile_mariadb(tmp_path: Path, spark: Any, cdc_chain: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from framework.demo.mariadb import PASSWORD, USER

    db, database, prefix = cdc_chain.db, "t_recon", "recon"
    monkeypatch.setenv("RECON_DB_PASSWORD", PASSWORD)
    db.execute([f"CREATE DATABASE {database}"])
    db.execute(MARIADB_DDL, database)
    conn = db.connect(database)
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO items VALUES ({', '.join(['%s'] * 13)})", [_items_row(i) for i in range(1, ROWS + 1)])
        cur.executemany("INSERT INTO tags VALUES (%s, %s, %s)", [(f"c{i % 17}", i, None if i % 9 == 0 else f"l{i}") for i in range(300)])
    conn.close()
    signal = f"{database}.debezium_signal"
    _project(tmp_path, cdc_chain.broker.bootstrap_servers, prefix, database, "mariadb", db.port, USER,
             [(f"{database}.items", "id"), (f"{database}.tags", "code, n")], signal=signal)
    with cdc_chain.connector(prefix, [database], **{"signal.data.collection": signal}) as connect:
        _ingest(spark, tmp_path, connect)

        # Equal: every type's canonical text agrees between MariaDB's SQL and Spark.
        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 0, r.output
        res = _results(r)
        assert res["ods.items"]["status"] == "equal" and res["ods.items"]["ods_rows"] == ROWS, res["ods.items"]
        assert res["ods.tags"]["status"] == "equal" and res["ods.tags"]["source_rows"] == 300, res["ods.tags"]

        # Broken on purpose. In MariaDB with the binlog off for the session (Debezium never sees
        # it): id 10 changed, id 20 deleted (ODS keeps it: extra), id 5000 inserted (missing).
        _hidden(db, database)
        # In ODS by plain Spark: id 30's price changed, id 40 deleted; a tag's label changed.
        _break_ods(spark, tmp_path, "ods.items", "id = 30", {"price": "CAST(price + 1 AS DECIMAL(12,4))"})
        _break_ods(spark, tmp_path, "ods.items", "id = 40", None)
        _break_ods(spark, tmp_path, "ods.tags", "code = 'c3' AND n = 3", {"label": "'broken'"})

        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 1, r.output
        items, tags = _results(r)["ods.items"], _results(r)["ods.tags"]
        assert (items["status"], items["missing"], items["extra"], items["changed"]) == ("differs", 2, 1, 2), items
        assert _keys(items, "missing") == {("40",), ("5000",)} and _keys(items, "extra") == {("20",)}
        assert _keys(items, "changed") == {("10",), ("30",)} and items["columns"] == {"name": 1, "price": 1}, items
        assert items["rows_fetched"] < ROWS * 0.1, items  # bisection read a few ranges, not the table
        assert (tags["status"], tags["changed"], tags["columns"]) == ("differs", 1, {"label": 1}), tags
        rec = history.latest(Layout(load_project(tmp_path).warehouse), lambda x: x.command == "reconcile")
        assert rec is not None and rec.status == "failed" and {x.table for x in rec.reconciled if x.status == "differs"} == {"ods.items", "ods.tags"}

        # --repair through the stream: the missing and changed keys are asked of the connector as an
        # incremental snapshot (one signal per table); the extra key, which no snapshot can delete,
        # is deleted at the database's position. The snapshot's reads reach ODS with the next ingest.
        r = lake(tmp_path, "reconcile", "--repair", "--json")
        assert r.exit_code == 1, r.output
        items, tags = _results(r)["ods.items"], _results(r)["ods.tags"]
        assert (items["requested"], items["repaired"], tags["requested"], tags["repaired"]) == (4, 1, 1, 0), r.output
        assert "incremental snapshot" in items["reason"], items["reason"]
        _ingest_until_equal(spark, tmp_path, connect)
        assert dead_letters(spark, tmp_path) == []  # the signal table's own events (signals, watermarks) are skipped
        ods = kinds.ods(Layout(load_project(tmp_path).warehouse), ProjectDefaults.of(load_project(tmp_path)), load_project(tmp_path).ods_table("ods.items"))
        came = {r["id"]: (r["_op"], r["_source"]) for r in ods.read(spark).where("id IN (10, 30, 40, 5000)").select("id", "_op", "_source").collect()}
        assert set(came) == {10, 30, 40, 5000} and all(op == "r" and not src.startswith("reconcile:") for op, src in came.values()), came

        # Ingest lagging far longer than settle_seconds: a change the database committed before the
        # reconcile reaches ODS only 20 s into it. With the connector's offset and ODS's checkpoint to
        # compare (`connect:`), reconcile re-reads the key once ODS has reached the database's
        # position: in flight, not a difference. (Re-read after the 1-s pause alone, it would be one.)
        _project(tmp_path, cdc_chain.broker.bootstrap_servers, prefix, database, "mariadb", db.port, USER,
                 [(f"{database}.items", "id"), (f"{database}.tags", "code, n")], signal=signal, connect=connect)
        db.execute(["UPDATE items SET name = 'lagging' WHERE id = 7"], database)
        late = threading.Timer(20, lambda: _ingest(spark, tmp_path, connect))
        late.start()
        try:
            r = lake(tmp_path, "reconcile", "--json", "--settle", "1", "--timeout", "180")
        finally:
            late.join()
        assert r.exit_code == 0, r.output
        items = _results(r)["ods.items"]
        assert (items["status"], items["rechecked"]) == ("equal", 1) and "re-read once ODS had taken" in items["reason"], items

        # A workload during the reconcile: updates streamed and ingested meanwhile are no difference.
        def writes(n: int) -> None:
            db.execute([f"UPDATE items SET qty = qty + 1, name = 'w{n}' WHERE id IN ({n % 50 + 100}, {n % 50 + 600}, {n % 50 + 1100})"], database)

        r = _during_workload(spark, tmp_path, connect, writes, 8)
        assert r.exit_code == 0, r.output
        assert all(t["missing"] + t["extra"] + t["changed"] == 0 for t in _results(r).values()), r.output
        assert _results(r)["ods.items"]["rechecked"] > 0, r.output  # the workload's keys were in flight at the first read


def _hidden(db: Any, database: str) -> None:
    """Changes MariaDB does not write to its binlog: the connector never sees them."""
    conn = db.connect(database)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("UPDATE items SET name = 'hidden' WHERE id = 10")
            cur.execute("DELETE FROM items WHERE id = 20")
            cur.execute(f"INSERT INTO items VALUES ({', '.join(['%s'] * 13)})", _items_row(5000))
    finally:
        conn.close()


PG_DDL = [
    "CREATE TABLE {s}.items (id int PRIMARY KEY, qty bigint, active boolean, price numeric(12,4), ratio double precision, weight real, "
    "name varchar(64), note text, created timestamp(6), updated timestamptz(3), day date, at_time time(6), raw bytea)",
    "CREATE TABLE {s}.tags (code varchar(20), n int, label varchar(40), PRIMARY KEY (code, n))",
    "CREATE TABLE {s}.debezium_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))",
]


def _pg_row(i: int) -> tuple[Any, ...]:
    row = _items_row(i)
    if i % 11 == 0:
        return row
    big = "長" * 2000 + f"{i}" if i % 50 == 1 else row[7]  # TOASTed text on some rows
    at = (datetime.min + row[11]).time()
    return (*row[:2], i % 3 == 1, *row[3:7], big, row[8], row[9].replace(tzinfo=timezone.utc), row[10], at, row[12])


# The same on PostgreSQL (its own checksum SQL, TOAST placeholders, a repair below the commit
# order): nightly (LAKE_NIGHTLY=1), for make test's budget; test_pg_chain keeps the PostgreSQL
# chain itself in make test and tests/unit/test_reconcile.py its canonical text (PostgreSQL's types too) and bisection.
@pytest.mark.nightly
@pytest.mark.skipif(not os.environ.get("LAKE_NIGHTLY"), reason="nightly: set LAKE_NIGHTLY=1")
def test_reconcile_postgres(tmp_path: Path, spark: Any, pg_chain: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from framework.demo.postgres import DBNAME, PASSWORD, USER

    db, schema, prefix = pg_chain.db, "t_rpg", "rpg"
    monkeypatch.setenv("RECON_DB_PASSWORD", PASSWORD)
    db.execute([f"CREATE SCHEMA {schema}", *[d.format(s=schema) for d in PG_DDL]])
    conn = db.connect()
    try:
        cur = conn.cursor()
        cur.executemany(f"INSERT INTO {schema}.items VALUES ({', '.join(['%s'] * 13)})", [_pg_row(i) for i in range(1, ROWS + 1)])
        cur.executemany(f"INSERT INTO {schema}.tags VALUES (%s, %s, %s)", [(f"c{i % 17}", i, None if i % 9 == 0 else f"l{i}") for i in range(300)])
    finally:
        conn.close()
    _project(tmp_path, pg_chain.broker.bootstrap_servers, prefix, DBNAME, "postgres", db.port, USER,
             [(f"{DBNAME}.{schema}.items", "id"), (f"{DBNAME}.{schema}.tags", "code, n")])
    signal = f"{schema}.debezium_signal"
    with pg_chain.connector(prefix, [schema], **{"signal.data.collection": signal}) as connect:
        # Updates that leave the TOASTed note alone: Debezium sends the placeholder, lake keeps the value.
        db.execute([f"UPDATE {schema}.items SET qty = qty + 1 WHERE id % 50 = 1"])
        _ingest(spark, tmp_path, connect)
        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 0, r.output
        res = _results(r)
        assert res["ods.items"]["status"] == "equal" and res["ods.items"]["ods_rows"] == ROWS, res["ods.items"]
        assert res["ods.tags"]["status"] == "equal" and res["ods.tags"]["source_rows"] == 300, res["ods.tags"]

        # Broken in ODS by plain Spark: a value changed, a row deleted, a row added; a placeholder
        # where lake never had the value (unknown, not a difference).
        _break_ods(spark, tmp_path, "ods.items", "id = 30", {"created": "created + INTERVAL 1 MICROSECOND"})
        _break_ods(spark, tmp_path, "ods.items", "id = 40", None)
        _break_ods(spark, tmp_path, "ods.items", "id = 45", {"id": "90045"})
        _break_ods(spark, tmp_path, "ods.items", "id = 51", {"note": "'__debezium_unavailable_value'"})
        _break_ods(spark, tmp_path, "ods.tags", "code = 'c3' AND n = 3", {"label": "CAST(NULL AS STRING)"})
        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 1, r.output
        items, tags = _results(r)["ods.items"], _results(r)["ods.tags"]
        assert (items["missing"], items["extra"], items["changed"], items["unknown"]) == (1, 1, 1, 1), items
        assert _keys(items, "missing") == {("40",)} and _keys(items, "extra") == {("90045",)} and _keys(items, "changed") == {("30",)}
        assert items["columns"] == {"created": 1} and (tags["changed"], tags["columns"]) == (1, {"label": 1}), (items, tags)

        r = lake(tmp_path, "reconcile", "--repair", "--json")
        assert r.exit_code == 1 and _results(r)["ods.items"]["repaired"] == 3, r.output
        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 0 and _results(r)["ods.items"]["unknown"] == 1, r.output

        # With the connector's signal table and its Connect worker. --repair still writes the rows
        # itself: PostgreSQL's incremental-snapshot reads carry no LSN, so ODS could not rank them
        # above the rows they repair (framework/reconcile/signal.py). Then a workload during a
        # reconcile that re-reads once ODS has reached the database's LSN.
        _project(tmp_path, pg_chain.broker.bootstrap_servers, prefix, DBNAME, "postgres", db.port, USER,
                 [(f"{DBNAME}.{schema}.items", "id"), (f"{DBNAME}.{schema}.tags", "code, n")], signal=signal, connect=connect)
        _break_ods(spark, tmp_path, "ods.items", "id = 60", {"name": "'broken'"})
        _break_ods(spark, tmp_path, "ods.items", "id = 70", None)
        r = lake(tmp_path, "reconcile", "--repair", "--json")  # no ingest runs: the wait for the stream finds nothing of items pending
        items = _results(r)["ods.items"]
        assert r.exit_code == 1 and (items["changed"], items["missing"], items["repaired"], items["requested"]) == (1, 1, 2, 0), r.output
        r = lake(tmp_path, "reconcile", "--json")
        assert r.exit_code == 0 and _results(r)["ods.items"]["status"] == "equal", r.output

        def writes(n: int) -> None:
            db.execute([f"UPDATE {schema}.items SET qty = qty + 1, name = 'w{n}' WHERE id IN ({n % 50 + 100}, {n % 50 + 600})"])

        r = _during_workload(spark, tmp_path, connect, writes, 8, settle="1")
        assert all(t["missing"] + t["extra"] + t["changed"] == 0 for t in _results(r).values()), r.output
        assert dead_letters(spark, tmp_path) == []  # the `log` signals the waits wrote are skipped
