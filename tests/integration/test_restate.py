"""`lake build MODEL --restate START..END` on a partitioned aggregate: the partitions in the range
equal plain Spark's aggregate over the ODS rows, keys the query no longer returns there are
deleted, partitions outside the range keep what the table held (damaged here on purpose, standing
for rows an earlier bug or an out-of-band write left wrong) apart from the changes the incremental
build before the restatement merged, the reader downstream follows incrementally, and the next
incremental build is a no-op (the checkpoint went on). Oracle: plain Spark over the ODS table."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.table import kinds, timeline
from framework.table.lake_table import ProjectDefaults
from framework.transform.options import BuildOptions
from framework.transform.runner import build
from models.commit_meta import ModelCheckpoint
from models.restatement import RestateRange
from tests.helpers import LakeProject, envelope

MODELS = {
    "dws/daily_sales.sql": "select day, count(*) as n, sum(amount) as total, max(amount) as top from ods.orders group by day",
    "dws/daily_sales.yaml": "partition_by: day\n",
    "dws/big_days.sql": "select day, total from dws.daily_sales where total > 100",
}


def _order(i: int, day: str, amount: int, op: str = "c") -> dict[str, Any]:
    row = {"id": i, "day": day, "amount": amount}
    return envelope(op, "shop.orders", None if op == "c" else row, row, pos=1000 + i * 10 + (5 if op == "u" else 0))


def _truth(spark: Any, lp: LakeProject) -> dict[date, tuple[int, int, int]]:
    ods = lp.raw(spark, "orders").where("NOT _deleted")
    agg = ods.groupBy(F.to_date("day").alias("day")).agg(F.count("*").alias("n"), F.sum("amount").alias("total"), F.max("amount").alias("top"))
    return {r["day"]: (r["n"], r["total"], r["top"]) for r in agg.collect()}


def _table(spark: Any, lp: LakeProject, name: str) -> dict[date, tuple[Any, ...]]:
    df = spark.read.format("hudi").load(str(lp.layout.table(name)))
    cols = [c for c in df.columns if not c.startswith("_") and c != "day"]
    return {r["day"]: tuple(r[c] for c in cols) for r in df.collect()}


def _damage(spark: Any, lp: LakeProject, totals: dict[str, int], bogus: str, gone: str) -> None:
    """Write wrong rows into dws.daily_sales with its own last commit record (the checkpoint
    unchanged): `totals` overwritten, a row for `bogus` (a day without orders) added, `gone`'s
    row deleted."""
    project = lp.project
    t = kinds.model(lp.layout, ProjectDefaults.of(project), "dws.daily_sales", _config(lp))
    last = t.last_commit()
    assert last is not None
    record = ModelCheckpoint.from_meta(last.lake)
    raw = spark.read.format("hudi").load(str(lp.layout.table("dws.daily_sales")))
    rows = raw.select(*[c for c in raw.columns if not c.startswith("_hoodie_")])
    day = F.date_format("day", "yyyy-MM-dd")
    total = F.col("total")
    for d, v in totals.items():
        total = F.when(day == d, F.lit(v)).otherwise(total)
    changed = rows.where(day.isin(list(totals))).withColumn("total", total.cast("bigint")).withColumn("_hoodie_is_deleted", F.lit(False))
    fake = (rows.where(day == F.lit(min(totals))).withColumn("day", F.lit(bogus).cast("date"))
            .withColumn("_lake_key", F.lit(bogus)).withColumn("_hoodie_is_deleted", F.lit(False)))
    dropped = rows.where(day == gone).withColumn("_hoodie_is_deleted", F.lit(True))
    t.commit(changed.unionByName(fake).unionByName(dropped), record)


def _config(lp: LakeProject) -> Any:
    from framework.transform.runner import load

    models, _ = load(lp.project)
    return models["dws.daily_sales"].config


def test_restate_recomputes_the_range_and_leaves_the_rest(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.orders, key: [id], columns: {day: date}}\n").add_models(MODELS)
    days = ["2026-11-01", "2026-11-02", "2026-11-04", "2026-11-05", "2026-11-07", "2026-11-08"]  # none on 11-03
    lp.write_cdc([_order(i, days[i % len(days)], 10 + 7 * i) for i in range(30)])
    lp.ingest(spark)
    assert {r.mode for r in build(spark, lp.project, [], [], incremental=True)} == {"full"}
    truth = _truth(spark, lp)

    _damage(spark, lp, {"2026-11-02": -1, "2026-11-04": -1, "2026-11-07": -1}, bogus="2026-11-03", gone="2026-11-05")
    # Late orders: one inside the range, one outside; the build merges them before restating.
    lp.write_cdc([_order(100, "2026-11-04", 500), _order(101, "2026-11-08", 700), _order(3, "2026-11-05", 1, op="u")])
    lp.ingest(spark)
    window = RestateRange.parse("2026-11-02..2026-11-05")
    results = build(spark, lp.project, ["dws.daily_sales+"], [], incremental=True, options=BuildOptions(restate=window))
    by = {r.model: r for r in results}
    assert by["dws.daily_sales"].mode == "restate", by["dws.daily_sales"]
    assert "incremental build" in by["dws.daily_sales"].reason and "restated day in 2026-11-02..2026-11-05" in by["dws.daily_sales"].reason
    assert by["dws.big_days"].mode == "incremental", by["dws.big_days"]

    now = _truth(spark, lp)
    table = _table(spark, lp, "dws.daily_sales")
    inside = [d for d in now if date(2026, 11, 2) <= d <= date(2026, 11, 5)]
    assert {d: table[d] for d in inside} == {d: now[d] for d in inside}
    assert date(2026, 11, 3) not in table  # the bogus row of a day without orders: deleted
    # Outside: the damaged day stays as damaged; the undamaged ones took the late order.
    assert table[date(2026, 11, 7)][1] == -1
    assert table[date(2026, 11, 1)] == now[date(2026, 11, 1)] == truth[date(2026, 11, 1)]
    assert table[date(2026, 11, 8)] == now[date(2026, 11, 8)] != truth[date(2026, 11, 8)]
    # The reader downstream equals plain Spark's filter over the table as it is now.
    big = _table(spark, lp, "dws.big_days")
    assert big == {d: (v[1],) for d, v in table.items() if v[1] > 100}

    again = build(spark, lp.project, [], [], incremental=True)
    assert {r.mode for r in again} == {"noop"}, [(r.model, r.mode, r.reason) for r in again]
    commits = timeline.commits(lp.layout.table("dws.daily_sales"))
    assert ModelCheckpoint.from_meta(commits[-1].lake).mode == "restate"  # type: ignore[union-attr]

    # As `lake build` runs it: with nothing new upstream (which a plain incremental build answers
    # from the timeline without Spark), the restatement still rewrites its range.
    from framework.commands.build import run_build
    from framework.transform.runner import selection

    _damage(spark, lp, {"2026-11-04": -7, "2026-11-07": -7}, bogus="2026-11-03", gone="2026-11-02")
    rec = run_build(project=lp.project, selection=selection(lp.project, ["dws.daily_sales"]), incremental=True, lock_timeout=30,
                    argv=["build", "dws.daily_sales", "--restate", "2026-11-02..2026-11-05"], options=BuildOptions(restate=window))
    assert [m.mode for m in rec.models] == ["restate"], rec.models
    table = _table(spark, lp, "dws.daily_sales")
    assert {d: table[d] for d in inside} == {d: now[d] for d in inside} and date(2026, 11, 3) not in table
    assert table[date(2026, 11, 7)][1] == -7

    with pytest.raises(LakeError, match="is not a DATE"):
        from framework.transform.evaluate import Evaluator
        from framework.transform.runner import load

        models, _ = load(lp.project)
        ev = Evaluator(spark, lp.project, models, options=BuildOptions(restate=RestateRange.parse("2026-11..2026-12")))
        ev.restated(models["dws.daily_sales"], ev.run(ev.plan(models["dws.daily_sales"], True)))
