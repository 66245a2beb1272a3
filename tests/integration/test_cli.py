"""The `lake` command in fresh processes: SQL output formats, errors without stack traces, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import LakeProject, envelope

SCHEMA_ENV = {
    "schema": {"type": "struct", "name": "s.shop.prices.Envelope", "fields": [
        {"type": "struct", "field": "after", "optional": True, "fields": [
            {"type": "int32", "field": "id", "optional": False},
            {"type": "bytes", "field": "price", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
            {"type": "string", "field": "at", "name": "io.debezium.time.ZonedTimestamp"},
        ]},
        {"type": "struct", "field": "source", "fields": []},
        {"type": "string", "field": "op"},
    ]},
    "payload": {"before": None, "after": {"id": 1, "price": "MN4=", "at": "2024-05-01T12:30:00Z"},
                "source": {"db": "shop", "table": "prices", "file": "mysql-bin.000001", "pos": 5, "row": 0, "ts_ms": 1714566600000},
                "op": "c", "ts_ms": 1714566600001},
}


def lake(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)


def test_ingest_then_sql_json_in_new_processes(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.prices, key: [id]}\n")
    lp.write_cdc([SCHEMA_ENV])
    r = lake(tmp_path, "ingest", "--once")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ods.prices" in r.stdout and "Traceback" not in r.stdout + r.stderr
    r = lake(tmp_path, "sql", "select id, price, at, _op from ods.prices", "--format", "json")
    assert r.returncode == 0, r.stderr
    # base64 MN4= is 0x30DE = 12510 → 125.10 at scale 2; decimals as strings, timestamps ISO-8601 UTC.
    assert json.loads(r.stdout) == [{"id": 1, "price": "125.10", "at": "2024-05-01T12:30:00Z", "_op": "c"}]
    r = lake(tmp_path, "sql", "select id, price from ods.prices", "--format", "csv")
    assert r.stdout.splitlines() == ["id,price", "1,125.10"]
    # Run history: the ingest left a record with its summary (no Spark needed to read it).
    r = lake(tmp_path, "runs", "--format", "json")
    (rec,) = json.loads(r.stdout)
    assert rec["command"] == "ingest" and rec["status"] == "ok" and rec["ingest"]["batches"][0]["events"] == 1
    shown = json.loads(lake(tmp_path, "runs", "show", rec["run_id"][:17]).stdout)
    assert shown["run_id"] == rec["run_id"]
    assert "ingest" in lake(tmp_path, "runs").stdout


def test_config_error_exits_1_before_spark(tmp_path: Path) -> None:
    LakeProject(tmp_path, "tables:\n  - source: shop.prices\n    kee: [id]\n")
    r = lake(tmp_path, "ingest", "--once")
    assert r.returncode == 1
    assert "layers/ods/tables.yaml:3: tables[0].kee: unknown key" in r.stderr
    assert "did you mean `key`" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "warehouse").exists()  # no Spark, no warehouse


def test_missing_cdc_directory_is_a_clear_error(tmp_path: Path) -> None:
    LakeProject(tmp_path, "tables:\n  - {source: shop.prices, key: [id]}\n")
    (tmp_path / "cdc").rmdir()
    r = lake(tmp_path, "ingest", "--once")
    assert r.returncode == 1
    assert "the CDC directory" in r.stderr and "does not exist" in r.stderr and "fix:" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_java_is_a_clear_error(tmp_path: Path) -> None:
    LakeProject(tmp_path, "tables:\n  - {source: shop.prices, key: [id]}\n")
    env = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": str(tmp_path / "no-java")}
    r = lake(tmp_path, "ingest", "--once", env=env)
    assert r.returncode == 1
    assert "no Java runtime found" in r.stderr and "openjdk-17" in r.stderr


def test_bad_sql_is_a_user_error(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.t, key: [id]}\n")
    lp.write_cdc([envelope("c", "shop.t", None, {"id": 1}, pos=1)])
    lp.ingest(spark)
    r = lake(tmp_path, "sql", "select nope from ods.t")
    assert r.returncode == 1 and "query failed" in r.stderr and "Traceback" not in r.stderr
    # A failing build exits 1, names the model and is recorded as failed.
    (tmp_path / "layers" / "dws").mkdir(parents=True)
    (tmp_path / "layers" / "dws" / "bad.sql").write_text("select id, nope from ods.t")
    r = lake(tmp_path, "build")
    assert r.returncode == 1 and "dws.bad" in r.stdout and "Traceback" not in r.stdout + r.stderr
    runs = json.loads(lake(tmp_path, "runs", "--format", "json").stdout)
    assert runs[-1]["command"] == "build" and runs[-1]["status"] == "failed" and "dws.bad" in runs[-1]["error"]


def test_init_scaffold_ingests(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    r = subprocess.run([sys.executable, "-m", "framework.cli", "init", str(root)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = lake(root, "ingest", "--once", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["status"] == "ok" and summary["batches"][0]["dead_letter"] == 0
    r = lake(root, "sql", "select count(*) as n from ods.customers", "--format", "json")
    assert json.loads(r.stdout)[0]["n"] > 0


def test_target_picks_the_warehouse_without_spark(tmp_path: Path) -> None:
    """`--target` and LAKE_TARGET choose lake.yaml's target: `lake runs` (no JVM) reads the run
    history of the target's warehouse, and a wrong name fails before anything runs."""
    from framework.runtime import history
    from framework.runtime.paths import Layout

    LakeProject(tmp_path, "tables:\n  - {source: shop.prices, key: [id]}\n",
                "targets:\n  dev:\n    warehouse: ${DEV_ROOT:-dev-wh}\n    spark: {conf: {spark.sql.shuffle.partitions: '1'}}\n")
    rec = history.new_run("build", ["build"], "dev").model_copy(update={"status": "ok"})
    history.save(Layout(tmp_path / "dev-wh"), rec)  # what a build under --target dev leaves
    r = lake(tmp_path, "--target", "dev", "runs", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [(x["run_id"], x["target"]) for x in json.loads(r.stdout)] == [(rec.run_id, "dev")]
    assert "target: dev" in r.stderr
    assert json.loads(lake(tmp_path, "runs", "--format", "json").stdout) == []  # the top level's warehouse
    r = lake(tmp_path, "runs", env={"LAKE_TARGET": "dev", "COLUMNS": "200"})
    assert rec.run_id in r.stdout and "build (dev)" in r.stdout
    r = lake(tmp_path, "--target", "dve", "dag")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "lake.yaml:5: targets: no target named 'dve' (asked for by --target)" in r.stderr and "did you mean dev?" in r.stderr


def test_plan_of_a_new_project_needs_no_jvm_and_says_what_a_build_would_do(tmp_path: Path) -> None:
    """Issue 28 item 3: after `lake init`, `lake plan` describes the build (the model waits for
    its ODS table) instead of failing, and starts no JVM (JAVA_HOME points nowhere)."""
    env = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": str(tmp_path / "no-java")}
    r = subprocess.run([sys.executable, "-m", "framework.cli", "init", str(tmp_path / "p")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    r = lake(tmp_path / "p", "plan", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    planned, seed = json.loads(r.stdout)
    assert (planned["model"], planned["mode"]) == ("dws.customers_by_domain", "full")
    assert planned["reason"] == "full build; waits for ods.customers (no data yet)"
    assert (seed["model"], seed["mode"], seed["reason"]) == ("seed.email_domains", "full", "first load of layers/seed/email_domains.csv")
    r = lake(tmp_path / "p", "plan", env={**env, "COLUMNS": "200"})
    assert r.returncode == 0 and "waits for ods.customers" in r.stdout and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
