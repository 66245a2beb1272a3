"""`lake reconcile`: each selected ODS table against the source table it mirrors
(framework/reconcile/), with a run record and, with `--repair`, the differing keys written from
the source into ODS under the table's lock."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framework.commands.common import locked, recorded
from framework.errors import LakeError
from framework.observe.observer import Observer
from framework.project.config import Project
from framework.reconcile.repair import repair as repair_table
from framework.reconcile.table import reconcile_table
from framework.reconcile.target import SourceTarget, settings_of, target_of
from framework.runtime.lock import table_lock
from framework.table.session import ensure_storage, spark_session
from models.config import OdsTable
from models.reconcile import TableReconcile
from models.records import LockHolder, RunRecord


def chosen_tables(project: Project, names: Sequence[str]) -> list[tuple[OdsTable, SourceTarget]]:
    """The ODS tables named (all when none) with their source tables; config errors before Spark."""
    tables = [project.ods_table(n) for n in names] if names else list(project.ods_tables)
    if not tables:
        raise LakeError("no ODS tables to reconcile", fix="declare tables under layers/ods/")
    return [(t, target_of(project, t)) for t in tables]


def run_reconcile(*, project: Project, tables: Sequence[tuple[OdsTable, SourceTarget]], repair: bool, lock_timeout: float,
                  argv: Sequence[str], settle: float | None = None, timeout: float | None = None,
                  on_result: Callable[[TableReconcile], None] | None = None,
                  on_stale: Callable[[str, LockHolder], None] | None = None) -> RunRecord:
    """Reconcile each table; the run record holds each result (`reconciled`). Failed when any
    table differs or could not be compared. `settle`, `timeout`: over lake.yaml's
    `reconcile.settle_seconds` and `timeout_seconds`."""
    over = {k: v for k, v in (("settle_seconds", settle), ("timeout_seconds", timeout)) if v is not None}
    cfg = settings_of(project).model_copy(update=over)
    ensure_storage(project)
    spark = spark_session(project)
    obs = Observer(project)
    with recorded(project, "reconcile", argv, obs) as rec:
        for t, target in tables:
            try:
                res, settled, cols, ranged = reconcile_table(spark, project, t, target, cfg)
                if repair and res.status == "differs":
                    with locked(project, [table_lock(t.qualified_name)], lock_timeout, argv, on_stale):
                        done = repair_table(spark, project, t, target, cols, ranged, [d for d, _, _ in settled.differences], rec.run_id)
                    res.repaired, res.requested = done.written, done.requested
                    res.reason += f"; repair: {done.describe(t.qualified_name)}"
            except LakeError as e:
                res = TableReconcile(table=t.qualified_name, source=t.source, status="failed", reason=str(e))
            rec.reconciled.append(res)
            if on_result is not None:
                on_result(res)
        bad = [r.table for r in rec.reconciled if r.status in ("differs", "failed")]
        if bad:
            rec.status, rec.error = "failed", f"not equal to the source: {', '.join(bad)}"
    return rec
