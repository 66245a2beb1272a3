"""`lake build` / `lake plan`: plan and build selected models in dependency order.

A failing model does not stop its siblings: its descendants are skipped with the reason and
the run exits non-zero.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import networkx as nx
from pyspark.sql import SparkSession

from framework.config import Project
from framework.errors import LakeError
from framework.transform.dag import build_graph, select
from framework.transform.engine import Builder, Plan
from framework.transform.loader import Model, load_models
from models.records import ModelResult


def load(project: Project) -> tuple[dict[str, Model], nx.DiGraph]:
    models = load_models(project)
    return models, build_graph(project, models)


def build(
    spark: SparkSession,
    project: Project,
    selectors: list[str],
    exclude: list[str],
    incremental: bool,
    on_start: Callable[[str], None] | None = None,
    on_result: Callable[[ModelResult], None] | None = None,
    run_id: str | None = None,
) -> list[ModelResult]:
    """Build the selected models in dependency order. `run_id` (the run record's) labels the
    quality results and quarantined rows; a fresh id is made when None."""
    models, g = load(project)
    order = select(g, models, selectors, exclude)
    builder = Builder(spark, project, models, run_id=run_id)
    results: list[ModelResult] = []
    blocked: dict[str, str] = {}
    for name in order:
        if on_start:
            on_start(name)
        m = models[name]
        bad = [u for u in m.upstreams if u in blocked]
        if bad:
            r = ModelResult(model=name, strategy="-", mode="skipped", reason=f"upstream {bad[0]} failed")
            blocked[name] = r.reason
        else:
            try:
                r = builder.run(builder.plan(m, incremental))
            except LakeError as e:
                r = ModelResult(model=name, strategy="-", mode="failed", reason=e.message, error=str(e))
                blocked[name] = str(e)
            except Exception as e:  # noqa: BLE001 - report per model, keep building other branches
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                r = ModelResult(model=name, strategy="-", mode="failed", reason=f"{type(e).__name__}: {first[:300]}", error=str(e))
                blocked[name] = r.reason
        gated = builder.gate.summaries.pop(name, None)
        if gated is not None:
            r.rows_quarantined, r.checks = gated.quarantined, gated.checks
        if r.mode in ("full", "incremental") and r.committed_at is None:
            r.committed_at = datetime.now(timezone.utc)
        results.append(r)
        if on_result:
            on_result(r)
    return results


def plan(spark: SparkSession, project: Project, selectors: list[str], exclude: list[str], incremental: bool) -> list[tuple[Plan, dict[str, int]]]:
    models, g = load(project)
    order = select(g, models, selectors, exclude)
    builder = Builder(spark, project, models)
    out = []
    for name in order:
        p = builder.plan(models[name], incremental)
        out.append((p, builder.changed_rows(p) if p.mode == "incremental" else {}))
    return out
