"""`lake reconcile` against one full-table checksum query in the source database (issue 44).

    .venv/bin/python benchmarks/reconcile_cost.py [--rows 1000000] [--out BENCHMARKS.md]

A real MariaDB server (framework/demo/mariadb.py: the packages the tests start, on loopback) holds
`shop.orders` with N rows (BIGINT key, BIGINTs, DECIMAL(12,2), INT, VARCHAR, DATETIME), generated
in the database from its sequence engine; the ODS table `ods.orders` holds the same rows, loaded
by lake's bootstrap from a Parquet dump Spark generates with the same expressions
(benchmarks/incremental.py's `Shape.orders_dump`). One SparkSession. Measured, each the faster of
two runs:

- **checksum query**: the one aggregate query over the whole table that reconcile's own SQL
  generator writes (`Dialect.checksum_sql` with one range), run on the database alone: what
  comparing the table costs the database at the least;
- **reconcile, no difference**: `reconcile_table` (what `lake reconcile ods.orders` runs), the
  checksums of both sides by ranges, bisected where they differ (nowhere);
- **reconcile, 10 differing rows**: 10 rows changed in the database (an UPDATE of `amount`),
  then `reconcile_table`: it must report exactly those 10 keys; the rows it fetched from the
  database and from ODS, against the table's size (goal: under 5 %). Its one re-read of the
  differing keys pauses `settle_seconds` (1 s here; nothing is in flight), reported apart.

Runs wait while a pytest process runs on the machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import machine_info, write_markdown  # noqa: E402
from benchmarks.incremental import BASE_TS, BOOTSTRAP_POSITION, STATUSES, Shape, pytest_running  # noqa: E402

SECTION = "## Reconcile cost (benchmarks/reconcile_cost.py)"
TARGET = 1.5  # reconcile / one checksum query, no difference
SETTLE = 1.0
CHANGED = 10

DDL = ("CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, uid BIGINT, pid BIGINT, amount DECIMAL(12,2), qty INT, "
       "status VARCHAR(16), ts DATETIME)")


def fill_sql(shape: Shape, n: int) -> str:
    """The rows of `Shape.orders_dump`, generated inside MariaDB (its sequence engine)."""
    statuses = ", ".join(f"'{s}'" for s in STATUSES)
    return (f"INSERT INTO shop.orders SELECT seq, (seq * 7919) % {shape.users} + 1, (seq * 104729) % {shape.products} + 1, "
            "CAST(((seq * 2654435761) % 100000 + 100) / 100 AS DECIMAL(12,2)), (seq * 31) % 10 + 1, "
            f"ELT((seq * 13) % 5 + 1, {statuses}), TIMESTAMP'{datetime.fromtimestamp(BASE_TS, tz=timezone.utc):%Y-%m-%d %H:%M:%S}' "
            f"+ INTERVAL seq SECOND FROM seq_1_to_{n}")


PROJECT = """\
name: reconbench
warehouse: warehouse
spark: {{master: "local[2]"}}
reconcile:
  sources:
    shop:
      dialect: mariadb
      host: 127.0.0.1
      port: {port}
      user: {user}
      password: ${{RECON_BENCH_PASSWORD}}
  settle_seconds: {settle}
"""
TABLES = """\
tables:
  - source: shop.orders
    key: [id]
    columns: {id: bigint, uid: bigint, pid: bigint, amount: "decimal(12,2)", qty: int, status: string, ts: timestamp}
"""


@dataclass
class Figures:
    rows: int
    checksum_s: float
    ods_s: float
    equal_s: float
    equal_queries: int
    diff_s: float
    diff_queries: int
    found: int
    fetched_source: int


def wait_idle(say: Any) -> None:
    if pytest_running():
        say("pytest is running on the machine: waiting for it to finish")
        while pytest_running():
            time.sleep(30)


def measure(spark: Any, db: Any, root: Path, n: int, say: Any) -> Figures:
    from framework.demo import mariadb
    from framework.ods.bootstrap import run_bootstrap
    from framework.project.config import load_project
    from framework.reconcile.ods import OdsSide
    from framework.reconcile.source import SourceTable
    from framework.reconcile.sql import Ranged
    from framework.reconcile.table import compared_columns, ods_table, reconcile_table
    from framework.reconcile.target import settings_of, target_of

    shape = Shape()
    db.execute(["DROP DATABASE IF EXISTS shop", "CREATE DATABASE shop", DDL])
    t0 = time.perf_counter()
    db.execute(fill_sql(shape, n), database="shop")
    say(f"  {n:,} rows into MariaDB in {time.perf_counter() - t0:.1f} s")
    shutil.rmtree(root, ignore_errors=True)
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "lake.yaml").write_text(PROJECT.format(port=db.port, user=mariadb.USER, settle=SETTLE))
    (root / "layers" / "ods" / "shop.yaml").write_text(TABLES)
    os.environ["RECON_BENCH_PASSWORD"] = mariadb.PASSWORD
    project = load_project(root)
    t0 = time.perf_counter()
    shape.orders_dump(spark, n).write.mode("overwrite").parquet(str(root / "dump"))
    run_bootstrap(spark, project, project.ods_table("orders"), root / "dump", position=BOOTSTRAP_POSITION)
    say(f"  dump + bootstrap of ods.orders in {time.perf_counter() - t0:.1f} s")
    t = project.ods_table("orders")
    target = target_of(project, t)
    cfg = settings_of(project)

    def checksum_once() -> tuple[float, float]:
        """The whole table's checksum in the database alone, then on the ODS side alone (Spark:
        read the Hudi table, hash every row, as reconcile's first step does)."""
        table = ods_table(project, t)
        types = {f.name: f.dataType.simpleString() for f in table.schema(spark).fields}
        with SourceTable(target.settings, target.db_name, target.parts, cfg.float_digits) as src:
            cols, _ = compared_columns(t, types, src.columns(), ["id"])
            r = Ranged(tuple(c for c in cols if c.name == "id"))
            lo, hi = src.bounds(r)
            assert lo is not None and hi is not None
            t0 = time.perf_counter()
            sums = src.checksums(r, cols, lo, hi + 1, hi + 1 - lo)
            took = time.perf_counter() - t0
        assert sum(c for c, _ in sums.values()) == n, sums
        t0 = time.perf_counter()
        ods = OdsSide(spark, table, r, cols, cfg.float_digits)
        try:
            theirs = ods.checksums(lo, hi + 1, hi + 1 - lo)
        finally:
            ods.close()
        assert theirs == sums, (theirs, sums)
        return took, time.perf_counter() - t0

    def reconcile() -> tuple[float, Any]:
        t0 = time.perf_counter()
        res, _settled, _cols, _r = reconcile_table(spark, project, t, target, cfg)
        return time.perf_counter() - t0, res

    wait_idle(say)
    checksum = [checksum_once()]
    equal = [reconcile() for _ in range(2)]
    checksum.append(checksum_once())
    for s, res in equal:
        say(f"  reconcile, no difference: {s:.2f} s, {res.status}, {res.checksum_queries} checksum queries, {res.rows_fetched} rows fetched")
        if res.status != "equal":
            raise SystemExit(f"FAILED: reconcile of equal tables said {res.status}: {res.reason}")
    ids = sorted(random.Random(n).sample(range(1, n + 1), CHANGED))
    db.execute(f"UPDATE shop.orders SET amount = amount + 1 WHERE id IN ({', '.join(map(str, ids))})")
    diff = [reconcile() for _ in range(2)]
    for s, res in diff:
        keys = sorted(int(x.key["id"]) for x in res.samples)
        say(f"  reconcile, {CHANGED} changed: {s:.2f} s, {res.status}, {res.changed} changed, {res.checksum_queries} checksum "
            f"queries, {res.rows_fetched} source rows fetched; keys {keys}")
        if res.status != "differs" or (res.missing, res.extra, res.changed) != (0, 0, CHANGED) or keys != ids:
            raise SystemExit(f"FAILED: expected exactly the keys {ids} changed, got {res.reason}")
    best_eq = min(equal, key=lambda x: x[0])
    best_diff = min(diff, key=lambda x: x[0])
    say(f"  checksum query alone: {', '.join(f'{c:.2f}' for c, _ in checksum)} s; the ODS side alone: "
        f"{', '.join(f'{o:.2f}' for _, o in checksum)} s")
    return Figures(n, min(c for c, _ in checksum), min(o for _, o in checksum), best_eq[0], best_eq[1].checksum_queries, best_diff[0], best_diff[1].checksum_queries,
                   best_diff[1].changed, best_diff[1].rows_fetched)


def section(figs: list[Figures], command: str, info: dict[str, str]) -> str:
    lines = [SECTION, "", f"`{command}`, {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; {info.get('CPU', '?')}, "
             f"{info.get('cores (nproc)', '?')} cores; MariaDB (the packages the tests start) and one SparkSession on the same "
             f"machine; the faster of two runs each; `settle_seconds: {SETTLE:g}`.", "",
             "| rows | checksum query alone s | ODS side alone s | reconcile, equal s | equal / checksum | target | checksum queries | "
             f"reconcile, {CHANGED} changed s | found | source rows fetched | share of the table | target |",
             "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for f in figs:
        r = f.equal_s / f.checksum_s
        share = f.fetched_source / f.rows
        lines.append(f"| {f.rows:,} | {f.checksum_s:.2f} | {f.ods_s:.2f} | {f.equal_s:.2f} | **{r:.2f}x** | ≤ {TARGET}x: {'met' if r <= TARGET else 'not met'} "
                     f"| {f.equal_queries} | {f.diff_s:.2f} | {f.found} of {CHANGED} | {f.fetched_source:,} | {share:.4%} "
                     f"| < 5 %: {'met' if share < 0.05 else 'not met'} |")
    lines += ["", "The checksum query alone is the database's floor: one pass over the table computing each row's hash; the "
              "ODS side alone is the same over the Hudi table in Spark (read, every row's canonical text hashed; the same sums). "
              "Reconcile runs the same pass split into ranges (one query per level, `segments` ranges each), and the ODS "
              "side's checksums in Spark over the Hudi table at the same time as the database's; a mismatching range is "
              "split again until it holds at most `fetch_below` rows, which are fetched from both sides and compared (ODS "
              "returns the same ranges' rows as the database: the source count is the transfer of each side). "
              f"The {CHANGED}-row figure includes one `settle_seconds` pause before the differing keys are read again."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--warmup-rows", type=int, default=20_000)
    ap.add_argument("--out", type=Path, default=None, help="replace this benchmark's section of this Markdown file")
    args = ap.parse_args(argv)
    command = "python benchmarks/reconcile_cost.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    from framework.demo.mariadb import MariaDB
    from framework.project.config import load_project
    from framework.table.session import spark_session

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-reconcile-"))
    try:
        with MariaDB(tmp / "mariadb") as db:
            say(f"MariaDB up on port {db.port}")
            (tmp / "session" / "layers" / "ods").mkdir(parents=True)
            (tmp / "session" / "lake.yaml").write_text(PROJECT.format(port=db.port, user="x", settle=SETTLE))
            (tmp / "session" / "layers" / "ods" / "shop.yaml").write_text(TABLES)
            os.environ.setdefault("RECON_BENCH_PASSWORD", "x")
            spark = spark_session(load_project(tmp / "session"))
            try:
                say(f"warm-up, {args.warmup_rows:,} rows")
                measure(spark, db, tmp / "warmup", args.warmup_rows, say)
                say(f"main, {args.rows:,} rows")
                figs = [measure(spark, db, tmp / "main", args.rows, say)]
                info = machine_info()
            finally:
                spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = section(figs, command, info)
    print(text)
    if args.out:
        write_markdown(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
