"""`catalog: {kind: hive}` against a real Hive metastore: lake (in its own processes) ingests CDC
and builds models; a plain pyspark session in another process, which knows nothing of lake but
the metastore's address and the Hudi bundle, reads `ods.*` and `dws.*` by name and must see
exactly the live rows, the new column and the new partitions. The oracle is the source's final
state, computed here from the events."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.demo.metastore import HiveMetastore
from framework.runtime.jars import HUDI_BUNDLE, ensure_jar
from tests.helpers import LakeProject, envelope

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = """
tables:
  - source: shop.user
    key: [id]
  - source: shop.user_order
    key: [id]
    columns: {create_time: timestamp}
    partition_by: {column: create_time, granularity: month}
    checks:
      - between: {column: amount, min_value: 0}
        severity: drop
"""
MODELS = {
    "dws/user_agg.sql": "select device_model, count(1) as num from ods.user group by device_model",
    "dws/user_agg.yaml": "key: [device_model]\nstrategy: aggregate\n",
    "dws/order_month.sql": "select year_month, count(1) as orders, sum(amount) as total from ods.user_order group by year_month",
    "dws/order_month.yaml": "key: [year_month]\npartition_by: year_month\n",
}

# A session that knows the metastore's address and has the Hudi bundle, nothing of lake. It
# prints one JSON line: per query the columns and the rows (every value cast to string), and the
# column names the metastore itself holds for the tables asked (what Trino/Athena see).
READER = r"""
import json, sys
from pyspark.sql import SparkSession
uri, jar, queries, tables = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
spark = (SparkSession.builder.master("local[1]").appName("plain-reader")
         .config("spark.jars", jar)
         .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
         .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
         .config("spark.hadoop.hive.metastore.uris", uri)
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false")
         .enableHiveSupport().getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {"queries": {}, "hive_columns": {}}
for name, q in queries.items():
    df = spark.sql(q)
    cols = df.columns
    rows = df.selectExpr(*[f"cast(`{c}` as string) as `{c}`" for c in cols]).collect()
    out["queries"][name] = {"columns": cols, "rows": [list(r) for r in rows]}
jvm = spark._jvm
conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
conf.set("hive.metastore.uris", uri)
client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
for t in tables:
    db, name = t.split(".")
    out["hive_columns"][t] = [c.getName() for c in client.getTable(db, name).getSd().getCols()]
client.close()
spark.stop()
print("RESULT " + json.dumps(out))
"""


def _read(hms: HiveMetastore, queries: dict[str, str], tables: list[str], cwd: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKE_")}  # nothing of lake
    r = subprocess.run([sys.executable, "-c", READER, hms.uri, str(ensure_jar(HUDI_BUNDLE)), json.dumps(queries), json.dumps(tables)],
                       capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def _lake(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def _visible(result: dict[str, Any], name: str, cols: list[str]) -> list[tuple[str | None, ...]]:
    """The query's rows on `cols` (data columns: lake's and Hudi's `_` columns may be there too)."""
    q = result["queries"][name]
    idx = [q["columns"].index(c) for c in cols]
    return sorted((tuple(row[i] for i in idx) for row in q["rows"]), key=str)


class Source:
    """The source database's tables as the events leave them: the independent oracle."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[int, dict[str, Any]]] = {"shop.user": {}, "shop.user_order": {}}
        self.pos = 0

    def event(self, op: str, table: str, row: dict[str, Any]) -> dict[str, Any]:
        self.pos += 100
        rows = self.tables[table]
        before = rows.get(row["id"])
        if op == "d":
            del rows[row["id"]]
            return envelope("d", table, before, None, pos=self.pos, ts=1_700_000_000_000 + self.pos)
        rows[row["id"]] = {**(before or {}), **row}
        return envelope(op, table, before, rows[row["id"]], pos=self.pos, ts=1_700_000_000_000 + self.pos)

    def rows(self, table: str, cols: list[str]) -> list[tuple[str | None, ...]]:
        return sorted((tuple(None if r.get(c) is None else str(r[c]) for c in cols) for r in self.tables[table].values()), key=str)

    def user_agg(self) -> list[tuple[str | None, ...]]:
        counts: dict[str, int] = {}
        for r in self.tables["shop.user"].values():
            counts[r["device_model"]] = counts.get(r["device_model"], 0) + 1
        return sorted(((d, str(n)) for d, n in counts.items()), key=str)

    def order_month(self) -> list[tuple[str | None, ...]]:
        groups: dict[str, list[int]] = {}
        for r in self.tables["shop.user_order"].values():
            groups.setdefault(r["create_time"][:7], []).append(r["amount"])
        return sorted(((ym, str(len(a)), str(sum(a))) for ym, a in groups.items()), key=str)


QUERIES = {
    "user": "select * from ods.user",
    "order": "select * from ods.user_order",
    "user_agg": "select * from dws.user_agg",
    "order_month": "select * from dws.order_month",
    "partitions": "show partitions ods.user_order",
    "quarantine": "select id, amount from _quarantine.ods_user_order",
    "dead_letter": "select reason from _lake.dead_letter",
}
TABLES_ASKED = ["ods.user", "ods.user_order", "dws.user_agg", "dws.order_month"]
USER_COLS = ["id", "name", "device_model"]
ORDER_COLS = ["id", "user_id", "amount", "create_time", "year_month"]


def _check(result: dict[str, Any], src: Source, user_cols: list[str]) -> None:
    assert _visible(result, "user", user_cols) == src.rows("shop.user", user_cols)
    expected_orders = [(*r[:4], r[3][:7]) for r in src.rows("shop.user_order", ORDER_COLS[:4])]  # type: ignore[index]
    assert _visible(result, "order", ORDER_COLS) == sorted(expected_orders, key=str)
    assert _visible(result, "user_agg", ["device_model", "num"]) == src.user_agg()
    assert _visible(result, "order_month", ["year_month", "orders", "total"]) == src.order_month()
    live_months = {f"year_month={r[1][:7]}" for r in src.rows("shop.user_order", ["id", "create_time"])}
    assert live_months <= {row[0] for row in result["queries"]["partitions"]["rows"]}


def test_plain_spark_reads_lake_tables_from_the_metastore(tmp_path: Path, hive_metastore: HiveMetastore) -> None:
    lp = LakeProject(tmp_path / "p", TABLES, lake_extra=f"catalog: {{kind: hive, uri: '{hive_metastore.uri}'}}\n").add_models(MODELS)
    src = Source()
    batch = [src.event("c", "shop.user", {"id": i, "name": f"u{i}", "device_model": m})
             for i, m in [(1, "pixel"), (2, "iphone"), (3, "nokia"), (4, "pixel"), (5, "iphone")]]
    batch += [src.event("c", "shop.user_order", {"id": i, "user_id": u, "amount": a, "create_time": t})
              for i, u, a, t in [(1, 1, 10, "2024-01-05 10:00:00"), (2, 2, 20, "2024-01-20 11:00:00"), (3, 3, 30, "2024-02-02 09:00:00"),
                                 (4, 1, 40, "2024-02-10 08:30:00"), (5, 4, 50, "2024-02-11 12:00:00"), (6, 5, 60, "2024-01-31 23:59:59")]]
    # Not in the source's state: a row the `drop` check quarantines, and a line that is no event.
    bad = {"id": 8, "user_id": 1, "amount": -5, "create_time": "2024-02-01 00:00:00"}
    batch += [envelope("c", "shop.user_order", None, bad, pos=src.pos + 1), "not json"]
    src.pos += 100
    lp.write_cdc(batch)
    _lake(lp.root, "run")
    first = _read(hive_metastore, QUERIES, TABLES_ASKED, tmp_path)
    _check(first, src, USER_COLS)
    assert "age" not in first["hive_columns"]["ods.user"]
    assert first["queries"]["quarantine"]["rows"] == [["8", "-5"]]
    assert len(first["queries"]["dead_letter"]["rows"]) == 1

    # Updates, deletes (a whole `nokia` group and the only order of a month among them), a row
    # moving to a new partition, a new partition, and a new source column `age`.
    lp.write_cdc([
        src.event("u", "shop.user", {"id": 2, "name": "u2-renamed"}),
        src.event("d", "shop.user", {"id": 3}),
        src.event("u", "shop.user", {"id": 1, "age": 41}),
        src.event("c", "shop.user", {"id": 6, "name": "u6", "device_model": "pixel", "age": 30}),
        src.event("d", "shop.user_order", {"id": 2}),
        src.event("u", "shop.user_order", {"id": 1, "amount": 11, "create_time": "2024-03-01 00:00:00"}),
        src.event("u", "shop.user_order", {"id": 6, "amount": 61}),
        src.event("c", "shop.user_order", {"id": 7, "user_id": 6, "amount": 70, "create_time": "2024-04-15 15:15:15"}),
    ])
    _lake(lp.root, "run")
    second = _read(hive_metastore, QUERIES, TABLES_ASKED, tmp_path)
    assert "age" in second["hive_columns"]["ods.user"]
    assert {"year_month=2024-03", "year_month=2024-04"} <= {row[0] for row in second["queries"]["partitions"]["rows"]}
    _check(second, src, [*USER_COLS, "age"])

    # Lake's own session resolves the same names through the metastore.
    r = _lake(lp.root, "sql", "select device_model, num from dws.user_agg", "--format", "json")
    assert sorted(((d["device_model"], str(d["num"])) for d in json.loads(r.stdout)), key=str) == src.user_agg()


def test_tables_written_before_the_switch_to_hive_are_registered(tmp_path: Path, hive_metastore: HiveMetastore) -> None:
    """A project that ran with the embedded catalog, then sets `kind: hive`: its existing tables
    (one partitioned) are in the metastore once a lake session starts, not only after their next
    commit. (Table names differ from the other test's: both share one metastore.)"""
    tables = """
tables:
  - source: crm.customer
    key: [id]
  - source: crm.visit
    key: [id]
    columns: {at: timestamp}
    partition_by: {column: at, granularity: day}
"""
    lp = LakeProject(tmp_path / "p", tables)
    lp.write_cdc([envelope("c", "crm.customer", None, {"id": 1, "name": "ann"}, pos=1),
                  envelope("c", "crm.visit", None, {"id": 1, "at": "2024-05-01 10:00:00"}, pos=2)])
    _lake(lp.root, "ingest", "--once")
    with open(lp.root / "lake.yaml", "a") as f:
        f.write(f"catalog: {{kind: hive, uri: '{hive_metastore.uri}'}}\n")
    r = _lake(lp.root, "sql", "select c.name, v.dt from ods.customer c join ods.visit v on c.id = v.id", "--format", "json")
    assert json.loads(r.stdout) == [{"name": "ann", "dt": "2024-05-01"}]
    seen = _read(hive_metastore, {"parts": "show partitions ods.visit"}, ["ods.customer", "ods.visit"], tmp_path)
    assert seen["queries"]["parts"]["rows"] == [["dt=2024-05-01"]]
    assert "name" in seen["hive_columns"]["ods.customer"]


def test_metastore_stops_and_leaves_nothing_running(tmp_path: Path) -> None:
    hms = HiveMetastore(tmp_path / "hms")
    hms.start()
    proc, port = hms.process, hms.port
    assert proc is not None and proc.poll() is None
    hms.stop()
    assert proc.poll() is not None  # reaped
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
