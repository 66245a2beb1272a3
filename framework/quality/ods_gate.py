"""The quality gate of an ODS table's micro-batch commit.

Checks judge what the commit would make visible: the batch's latest event per key (Hudi keeps
only that one) when it is live, not soft deletes; table-level checks judge the table's live rows
after the commit. A `drop` check holds back a key's change: the event goes to
`_quarantine.ods_<name>` and the table keeps that key's previous state (the ODS table mirrors the
source, so a rejected event is an event not applied). An `error` check blocks the table's commit;
the writer commits the other tables and then fails the micro-batch, so the streaming checkpoint
does not advance and the next run replays it (tables that committed skip the replay).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from framework.errors import QualityGateError
from framework.project.config import Project
from framework.quality import quarantine, store
from framework.quality.checks import GateResult, evaluate
from framework.quality.report import run_page
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.columns import visible_columns
from framework.table.lake_table import ProjectDefaults
from models.config import OdsTable
from models.records import BatchResult, IngestSummary


@dataclass
class TableGate:
    """The gate's verdict on one table's batch: what to commit, what it found, and the error when
    an `error` check blocked the table."""

    rows: DataFrame
    result: GateResult = field(default_factory=GateResult)
    error: QualityGateError | None = None


class BatchBlocked(QualityGateError):
    """Error checks blocked one or more ODS tables in a micro-batch; the others committed."""

    def __init__(self, batch_id: int, errors: list[QualityGateError], result: BatchResult) -> None:
        names = ", ".join(e.model for e in errors)
        text = "\n".join(e.message for e in errors)
        super().__init__(
            f"micro-batch {batch_id}: the quality gate blocked {names}; the other tables committed and this batch is "
            f"retried by the next run\n{text}",
            model=names,
            failed=[f for e in errors for f in e.failed],
            report=errors[0].report,
            fix="fix the check (severity warn, or drop to quarantine the failing events) in the table's YAML under "
            "layers/ods/, then rerun `lake ingest`; the blocked events stay in the source until then",
        )
        self.result = result
        self.summary: IngestSummary | None = None  # the whole run so far, set by run_ingest


def latest_per_key(out: DataFrame, key: list[str]) -> DataFrame:
    """The event per key Hudi would keep from this batch (highest `_seq`)."""
    if not key:  # keyless events never get here (dead letter); keep every row rather than one
        return out
    w = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy(F.col("_seq").desc())
    return out.withColumn("_lake_rank", F.row_number().over(w)).where("_lake_rank = 1").drop("_lake_rank")


def check_table(spark: SparkSession, project: Project, t: OdsTable, out: DataFrame, run_id: str, cache: list[DataFrame]) -> TableGate:
    """Evaluate `t.checks` on the batch rows `out` (every event, soft deletes included); what it
    caches is appended to `cache` for the caller to unpersist after the commit.

    Returns:
        The rows to commit (latest event per key, minus quarantined events) and the verdict;
        `error` is set when an error check failed (then nothing of this table is committed).
    """
    layout = Layout(project.warehouse)
    out = latest_per_key(out, t.key).persist()
    cache.append(out)
    cols = visible_columns(out)
    rows = out.where(~F.col("_deleted")).select(*cols)
    path = layout.table(t.qualified_name)

    def resulting(kept: DataFrame) -> DataFrame:
        existing = hudi.read(spark, path)
        untouched = existing.where(~F.col("_deleted")).join(out.select(*t.key), list(t.key), "left_anti")
        return untouched.select(*[c for c in visible_columns(existing) if c in cols]).unionByName(kept.select(*cols), allowMissingColumns=True)

    outcome = evaluate(spark, t.qualified_name, t.checks, rows, resulting if hudi.table_exists(path) else None, run_id=run_id, key=t.key)
    store.save(layout, outcome.record)
    gate = TableGate(rows=out, result=GateResult(checks=quarantine.outcomes(outcome.record)))
    if outcome.blocked:
        gate.error = outcome.error(report=f"{run_page(project, run_id)} (render it with `lake report`)")
        return gate
    if outcome.quarantined is not None:
        gate.result.quarantined = quarantine.write(layout, t.qualified_name, outcome.quarantined, "_source", ProjectDefaults.of(project))
        gate.rows = out.join(outcome.quarantined.select("_source"), "_source", "left_anti")
    return gate
