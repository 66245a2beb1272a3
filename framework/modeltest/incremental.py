"""Running a model's real incremental build over a test's change events, in a throw-away Hudi
warehouse in a temporary folder (never the project's).

The strategies read their upstreams' changes from Hudi's CDC query and merge into the model's
Hudi table (framework/transform/strategies/), so the test does what a build does, on tables of
its own: each upstream becomes a Hudi table with CDC enabled holding the given rows (an ODS
table keyed by its `key:`, a model's table by `_lake_key`, as lake writes them); the model is
built fully by lake's Evaluator; each commit of the change events is written to its upstream's
table (upserts and Hudi deletes); and the model is built again with `--incremental`, its
strategy chosen as a build chooses it but never replaced by a recompute because the tables are
small (`recompute_below_mib: 0`). The model's table is then its result. Quality checks do not
run (a unit test tests logic; `lake check` and builds check data), and the tables are written
without the project's `hudi:` options and catalog, so nothing is registered anywhere.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.modeltest.cases import Case, Input
from framework.modeltest.compare import frame
from framework.modeltest.rows import Row
from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.columns import lake_key
from framework.transform.evaluate import Evaluator
from framework.transform.loader import Model
from framework.transform.reader import TableReader
from models.catalog import CatalogConfig
from models.config import BuildSettings


def build_incrementally(spark: SparkSession, project: Project, models: dict[str, Model], case: Case, folder: Path) -> tuple[DataFrame, str]:
    """The model's rows after a full build over the given rows and an incremental build over the
    change events, and how lake built the change: its strategy (`aggregate`), or `recompute, full
    strategy` for a model lake always recomputes."""
    local = project.config.model_copy(update={
        "warehouse": str(folder), "catalog": CatalogConfig(), "hudi": {}, "build": BuildSettings(recompute_below_mib=0),
        "spark": project.config.spark.model_copy(update={"master": "local[1]"}),
    })
    tproject = replace(project, config=local)
    layout = Layout(tproject.warehouse)
    m = case.model
    mine = replace(m, config=m.config.model_copy(update={"checks": [], "recompute_below_mib": 0}))
    evaluator = Evaluator(spark, tproject, {**models, m.name: mine}, run_id="lake-test")
    for inp in case.inputs.values():
        _commit(spark, layout, inp, inp.rows, ())
    evaluator.run(evaluator.plan(mine, incremental=False))
    for r in case.rounds:
        for u in dict.fromkeys([*r.upserts, *r.deletes]):
            _commit(spark, layout, case.inputs[u], r.upserts.get(u, ()), r.deletes.get(u, ()))
    plan = evaluator.plan(mine, incremental=True)
    if plan.mode not in ("incremental", "recompute"):
        raise LakeError(f"lake planned a {plan.mode} build of the change events, not an incremental one: {plan.reason}",
                        fix="this is lake's problem, not the test's: report it")
    evaluator.run(plan)
    how = plan.analysis.strategy if plan.mode == "incremental" else f"recompute, {plan.analysis.strategy} strategy"
    return TableReader(spark, layout).snapshot(m.name), how


def _commit(spark: SparkSession, layout: Layout, inp: Input, upserts: tuple[Row, ...] | list[Row], deletes: tuple[Row, ...] | list[Row]) -> None:
    """One Hudi commit of an upstream's table: `upserts` written, `deletes` removed. The tables
    look as lake writes them: `_deleted` (always false) beside the data, and a model's rows keyed
    by `_lake_key` (its key values as JSON; every column for a model without a key)."""
    df = _flagged(spark, inp, upserts, False).unionByName(_flagged(spark, inp, deletes, True))
    if inp.name.startswith("ods."):
        record_key = list(inp.key or ())
    else:
        df = df.withColumn("_lake_key", lake_key(list(inp.key or (c for c, _t in inp.columns))))
        record_key = ["_lake_key"]
    kinds.plain(layout.table(inp.name), inp.name.replace(".", "_"), record_key).commit(df)


def _flagged(spark: SparkSession, inp: Input, rows: tuple[Row, ...] | list[Row], deleted: bool) -> DataFrame:
    return frame(spark, inp.columns, rows).withColumn("_deleted", F.lit(False)).withColumn("_hoodie_is_deleted", F.lit(deleted))
