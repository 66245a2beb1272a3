"""The quality gate of a model commit: evaluate the model's checks on the rows about to be
written and on the table that would result, then block, quarantine or pass.

Called by `Committer.write` (commit.py) between computing the upserts and the Hudi commit. Checks see the
model's visible columns only; the drop split applies to the full rows (aggregate models carry
hidden `_lake_*` state). A row a `drop` check rejects is not visible in the model's table: its
key is treated like a key the query no longer returns (deleted if it was there), so an
incremental build leaves the same table as a full rebuild. Aggregate rows are hidden instead
(`_deleted`, as HAVING does): the commit moves the group, with its state for the next incremental
build, out of the model's table into its hidden-groups table (framework/transform/hidden.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.project.config import Project
from framework.quality import quarantine, store
from framework.quality.checks import GateResult, evaluate
from framework.quality.report import run_page
from framework.runtime.paths import Layout
from framework.table.columns import lake_key, live, visible_columns
from framework.table.held import is_held
from framework.table.lake_table import ProjectDefaults
from models.quality import CheckSpec


class ModelGate:
    """Evaluates the checks of every model an Evaluator writes, under one run id."""

    def __init__(self, spark: SparkSession, project: Project, layout: Layout, run_id: str) -> None:
        self.spark = spark
        self.project = project
        self.layout = layout
        self.run_id = run_id
        self.local = project.config.spark.master.startswith("local")
        self._cached: list[DataFrame] = []

    def check(
        self,
        model: str,
        checks: list[CheckSpec],
        out: DataFrame,
        key: list[str],
        target: DataFrame | None = None,
        scope: DataFrame | None = None,
        scope_col: str = "_lake_key",
        gone: DataFrame | None = None,
    ) -> tuple[DataFrame, GateResult]:
        """The rows to commit: `out` (full rows with `_lake_key` and `_deleted`) minus the rows
        `drop` checks reject, which are written to the quarantine table first; and what it found.

        Args:
            model: the model's name.
            checks: its checks (none: `out` is returned untouched, nothing is evaluated).
            out: the upsert rows, hidden columns included.
            key: the columns `_lake_key` is made of.
            target: the model's table (raw) when it exists; None for a first build.
            scope: what the write replaces in `target` (None: the whole table).
            scope_col: the column `scope` holds.
            gone: `_lake_key`s the write deletes besides the scope (aggregate groups emptied).

        Raises:
            QualityGateError: an `error` check failed; nothing is written. Its `outcome` is the
                GateResult.
        """
        if not checks:
            return out, GateResult()
        if not is_held(out):  # writes into an existing table arrive held already (Committer.write)
            out = out.persist()
            self._cached.append(out)
        cols = visible_columns(out)
        rows = out.where(~F.col("_deleted")).select(*cols)

        def resulting(kept: DataFrame) -> DataFrame:
            assert target is not None
            untouched = target.where(live(target))
            if scope is not None:
                untouched = untouched.join(scope, scope_col, "left_anti")
            untouched = untouched.join(out.select("_lake_key"), "_lake_key", "left_anti")
            if gone is not None:
                untouched = untouched.join(gone, "_lake_key", "left_anti")
            return untouched.select(*cols).unionByName(kept.select(*cols))

        table = resulting if (target is not None and scope is not None) else None
        outcome = evaluate(self.spark, model, checks, rows, table, run_id=self.run_id, key=key)
        store.save(self.layout, outcome.record)
        result = GateResult(checks=quarantine.outcomes(outcome.record))
        if outcome.blocked:
            self.release()
            error = outcome.error(report=f"{run_page(self.project, self.run_id)} (render it with `lake report`)")
            raise error
        if outcome.quarantined is None:
            return out, result
        return self._drop(model, out, key, outcome.quarantined, result), result

    def _drop(self, model: str, out: DataFrame, key: list[str], rejected: DataFrame, result: GateResult) -> DataFrame:
        """Quarantine the rows `drop` checks rejected and take them out of `out`."""
        bad = rejected.withColumn("_lake_key", lake_key(key))
        result.quarantined = quarantine.write(self.layout, model, bad, "_lake_key", ProjectDefaults.of(self.project))
        if not any(c.startswith("_lake_") and c != "_lake_key" for c in out.columns):
            return out.join(bad.select("_lake_key"), "_lake_key", "left_anti")
        # An aggregate's row carries its group's running state, which the next incremental
        # build adds to: hide the row as HAVING does (`_deleted`) instead of losing the state;
        # the commit keeps hidden groups out of the model's table (framework/transform/hidden.py).
        hidden = bad.select("_lake_key", F.lit(True).alias("_lake_dropped")).dropDuplicates(["_lake_key"])
        flagged = out.join(hidden, "_lake_key", "left")
        return flagged.withColumn("_deleted", F.col("_deleted") | F.coalesce(F.col("_lake_dropped"), F.lit(False))).drop("_lake_dropped").select(*out.columns)

    def release(self) -> None:
        """Unpersist what the last evaluations cached (after the commit that used it)."""
        for df in self._cached:
            df.unpersist()
        self._cached.clear()
