"""`lake check`: evaluate declared checks against the tables as they are now, without building.

Row-level and table-level checks both judge the whole table (its live rows, visible columns).
Nothing is committed or quarantined; the results are stored under the run id like a build's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from framework import hudi
from framework.config import Project
from framework.errors import LakeError
from framework.paths import Layout
from framework.quality import store
from framework.quality.checks import evaluate
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models
from framework.transform.reader import TableReader
from framework.transform.state import recorded
from models.quality import CheckSpec
from models.quality_result import ModelQuality
from models.records import ModelResult, RunRecord


@dataclass(frozen=True)
class Target:
    """A model or ODS table with checks."""

    name: str
    checks: list[CheckSpec]
    key: list[str]


def targets(project: Project, selectors: list[str]) -> list[Target]:
    """What `lake check SEL...` covers: models and ODS tables by selector (`ods.<name>`,
    `layer:ods`, `tag:x,layer:dws`, ...); everything with checks when no selector is given."""
    models = load_models(project)
    g = build_graph(project, models)
    ods = {t.qualified_name: t for t in project.ods_tables}
    out = []
    for n in select(g, models, selectors, project=project, recorded=recorded(project), nodes=True):
        if n in ods:
            out.append(Target(n, list(ods[n].checks), list(ods[n].key)))
        elif n in models:
            out.append(Target(n, list(models[n].config.checks), list(models[n].config.key or [])))
    return [t for t in out if t.checks]


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
    nothing committed or quarantined); the run record, the results, and what has no table yet."""
    from framework.commands.common import recorded
    from framework.quality.quarantine import outcomes
    from framework.session import spark_session

    chosen = targets(project, selectors)  # config and selector errors before Spark starts
    if not chosen:
        raise LakeError("no selected model or ODS table declares `checks:`",
                        fix="add `checks:` to a model's YAML or an ODS table (see README, Quality gates), or widen the selection")
    spark = spark_session(project)
    with recorded(project, "check", argv) as rec:
        results, missing = check_tables(spark, project, chosen, rec.run_id)
        rec.models = [ModelResult(model=r.model, strategy="-", mode="checked", reason="blocked" if r.blocked else "passed",
                                  checks=outcomes(r), seconds=r.seconds) for r in results]
        rec.models += [ModelResult(model=n, strategy="-", mode="skipped", reason="no table yet") for n in missing]
        blocked = [r.model for r in results if r.blocked]
        if blocked:
            rec.status, rec.error = "failed", f"error checks fail in {', '.join(blocked)}"
    return rec, results, missing
