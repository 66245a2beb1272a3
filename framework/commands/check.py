"""`lake check`: evaluate declared checks against the tables as they are now, without building.

Row-level and table-level checks both judge the whole table (its live rows, visible columns).
Nothing is committed or quarantined; the results are stored under the run id like a build's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from framework.errors import LakeError
from framework.project.config import Project
from framework.quality import freshness, store
from framework.quality.checks import evaluate
from framework.runtime import preload
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models
from framework.transform.reader import TableReader
from framework.transform.state import recorded as table_state
from models.config import OdsTable
from models.quality import CheckSpec
from models.quality_result import ModelQuality
from models.records import ModelResult, RunRecord


@dataclass(frozen=True)
class Target:
    """A model or ODS table with checks."""

    name: str
    checks: list[CheckSpec]
    key: list[str]


def targets(project: Project, selectors: list[str]) -> tuple[list[Target], list[OdsTable]]:
    """What `lake check SEL...` covers: models and ODS tables by selector (`ods.<name>`,
    `layer:ods`, `tag:x,layer:dws`, ...) that declare checks, and the selected ODS tables with a
    `freshness:` policy; everything when no selector is given."""
    models = load_models(project)
    g = build_graph(project, models)
    ods = {t.qualified_name: t for t in project.ods_tables}
    out = []
    names = select(g, models, selectors, project=project, recorded=table_state(project), nodes=True)
    for n in names:
        if n in ods:
            out.append(Target(n, list(ods[n].checks), list(ods[n].key)))
        elif n in models:
            out.append(Target(n, list(models[n].config.checks), list(models[n].config.key or [])))
    return [t for t in out if t.checks], freshness.declared(project, [n for n in names if n in ods])


def check_tables(spark: SparkSession, project: Project, selected: list[Target], run_id: str) -> tuple[list[ModelQuality], list[str]]:
    """Evaluate each target's checks on its current table; returns the results (stored) and the
    targets skipped because their table does not exist yet."""
    layout = Layout(project.warehouse)
    reader = TableReader(spark, layout)
    results: list[ModelQuality] = []
    missing: list[str] = []
    for t in selected:
        if not hudi.table_exists(layout.table(t.name)):
            missing.append(t.name)
            continue
        rows = reader.snapshot(t.name).persist()
        try:
            out = evaluate(spark, t.name, t.checks, rows, None, run_id=run_id, key=t.key)
        finally:
            rows.unpersist()
        store.save(layout, out.record)
        results.append(out.record)
    return results, missing


def run_check(*, project: Project, selectors: list[str], argv: Sequence[str]) -> tuple[RunRecord, list[ModelQuality], list[str]]:
    """Evaluate the declared checks of the selection against the tables as they are (no build,
    nothing committed or quarantined) and the selected ODS tables' freshness; the run record (its
    `sources` hold the freshness), the results, and what has no table yet."""
    from framework.commands.common import recorded
    from framework.quality.quarantine import outcomes
    from framework.table.session import ensure_storage, spark_session

    chosen, sources = targets(project, selectors)  # config and selector errors before Spark starts
    if not chosen and not sources:
        raise LakeError("no selected model or ODS table declares `checks:` or `freshness:`",
                        fix="add `checks:` to a model's YAML or an ODS table, or `freshness:` to an ODS table (docs/concepts/quality.md), or widen the selection")
    if chosen:
        preload.start([preload.QUALITY])  # imported while the JVM starts (framework/runtime/preload.py)
    spark = spark_session(project) if chosen else None
    ensure_storage(project)
    with recorded(project, "check", argv) as rec:
        rec.sources = {f.table: f for f in freshness.measure(project, sources)}
        results, missing = check_tables(spark, project, chosen, rec.run_id) if spark is not None else ([], [])
        rec.models = [ModelResult(model=r.model, strategy="-", mode="checked", reason="blocked" if r.blocked else "passed",
                                  checks=outcomes(r), seconds=r.seconds) for r in results]
        rec.models += [ModelResult(model=n, strategy="-", mode="skipped", reason="no table yet") for n in missing]
        blocked = [r.model for r in results if r.blocked]
        stale = [f.table for f in rec.sources.values() if f.status == "error"]
        problems = ([f"error checks fail in {', '.join(blocked)}"] if blocked else []) + ([f"past error_after: {', '.join(stale)}"] if stale else [])
        if problems:
            rec.status, rec.error = "failed", "; ".join(problems)
    return rec, results, missing
