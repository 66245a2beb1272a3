"""`lake build` / `lake plan`: plan and build selected models in dependency order.

Models build one at a time on one SparkSession: building independent models on concurrent
threads was measured (BENCHMARKS.md, freshness) and dropped — the machine was CPU-bound already.
A failing model does not stop its siblings: its descendants are skipped with
the reason and the run exits non-zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import networkx as nx
from pyspark.sql import SparkSession

from framework.errors import LakeError, QualityGateError
from framework.project.config import Project
from framework.runtime import jvm
from framework.runtime.paths import Layout
from framework.table import timeline
from framework.transform.analysis import Analyses
from framework.transform.dag import build_graph, select
from framework.transform.evaluate import Evaluator, source_keys
from framework.transform.loader import Model, load_models
from framework.transform.options import BuildOptions
from framework.transform.plan import (
    BuildLimits,
    ModelPlan,
    PlanError,
    State,
    make_plan,
    needs_sizes,
    plan_model,
)
from framework.transform.reader import CLEANED
from framework.transform.state import read_state, recorded
from models.records import BUILT_MODES, ModelResult


def load(project: Project) -> tuple[dict[str, Model], nx.DiGraph]:
    models = load_models(project)
    return models, build_graph(project, models)


@dataclass(frozen=True)
class Selection:
    """The project's models and graph, loaded once per command, and the models selected."""

    models: dict[str, Model]
    graph: nx.DiGraph
    chosen: list[str]


def selection(project: Project, selectors: Sequence[str], exclude: Sequence[str] = ()) -> Selection:
    """Load the models (config and model errors, before Spark starts) and select."""
    models, g = load(project)
    return Selection(models, g, select(g, models, list(selectors), list(exclude), project=project, recorded=recorded(project)))


def build(
    spark: SparkSession,
    project: Project,
    selectors: list[str],
    exclude: list[str],
    incremental: bool,
    on_start: Callable[[str], None] | None = None,
    on_result: Callable[[ModelResult], None] | None = None,
    run_id: str | None = None,
    loaded: Selection | None = None,
    layout: Layout | None = None,
    stopped: Mapping[str, ModelResult] | None = None,
    options: BuildOptions | None = None,
) -> list[ModelResult]:
    """Build the selected models one at a time, upstreams first and the serving layer's chains
    before models that feed no DWS model (`serving_first`). `run_id` (the run record's) labels
    the quality results and quarantined rows; a fresh id is made when None. Results come back in
    the order the models were built. `loaded`: the project's models, already loaded. `layout`:
    where tables are (an environment's, framework/envs/layout.py; default production). `stopped`:
    models not to build, with their (failed) results (their unit tests failed): their
    descendants are skipped like those of a model that failed to build. `options`: `--allow-full`
    (framework/transform/options.py)."""
    models, g = (loaded.models, loaded.graph) if loaded else load(project)
    order = serving_first(g, models, select(g, models, selectors, exclude, project=project, recorded=recorded(project)))
    builder = Evaluator(spark, project, models, run_id=run_id, layout=layout, options=options)
    results: list[ModelResult] = []
    blocked: set[str] = set()
    for name in order:
        bad = [u for u in models[name].upstreams if _writer(g, u) in blocked]
        if bad:
            r = ModelResult(model=name, strategy="-", mode="skipped", reason=f"upstream {bad[0]} failed")
        elif stopped and name in stopped:
            r = stopped[name]
        else:
            if on_start:
                on_start(name)
            r = _build_one(builder, models[name], incremental)
        if r.mode in ("failed", "skipped"):
            blocked.add(name)
        results.append(r)
        if on_result:
            on_result(r)
    return results


def serving_first(g: nx.DiGraph, models: dict[str, Model], order: list[str]) -> list[str]:
    """`order` (a dependency order) re-ranked for freshness of the serving layer: longest chain of
    selected models ending in a DWS model first, models that feed no DWS model last; ties keep
    their place. Only a preference: a model still waits for its upstreams."""
    chosen = set(order)
    height: dict[str, int] = {}
    for name in reversed(order):  # descendants before ancestors
        below = [height[d] for d in _readers(g, name) if d in chosen and height.get(d, 0) > 0]
        mine = 1 if models[name].layer == "dws" else 0
        height[name] = max(below, default=0) + 1 if below else mine
    pos = {n: i for i, n in enumerate(order)}
    return sorted(order, key=lambda n: (-height[n], pos[n]))


def _readers(g: nx.DiGraph, name: str) -> list[str]:
    """The nodes reading `name`'s output: its successors, and those of its history table (a
    model's `history: true`, built with it)."""
    out = []
    for d in g.successors(name):
        out += list(g.successors(d)) if g.nodes[d].get("kind") == "history" else [d]
    return out


def _writer(g: nx.DiGraph, name: str) -> str:
    """What builds table `name`: the model whose history it is, else itself."""
    if name in g and g.nodes[name].get("kind") == "history":
        return next(iter(g.predecessors(name)))
    return name


def _build_one(builder: Evaluator, m: Model, incremental: bool) -> ModelResult:
    """Plan and build one model; any error becomes its failed result (siblings keep building)."""
    try:
        r = builder.run(builder.plan(m, incremental))
        if builder.options.restate and m.config.partition_by and m.kind != "seed":  # `--restate`: then its range
            r = builder.restated(m, r)
    except LakeError as e:
        r = ModelResult(model=m.name, strategy="-", mode="failed", reason=e.message, error=str(e))
        if isinstance(e, QualityGateError):  # a blocked quality gate says what it found
            r.rows_quarantined, r.checks = e.quarantined, list(e.checks)
    except Exception as e:  # noqa: BLE001 - report per model, keep building other branches
        died = jvm.explain(e)
        if died is not None and died.dead:  # no model can build without a driver
            raise died from e
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        reason = f"{type(e).__name__}: {first[:300]}"
        if died is not None:
            reason = died.message
        elif CLEANED in first:  # planned on a state the cleaner removed while the build ran (an environment's pin)
            reason = ("an upstream's cleaner removed the files of the instant this build reads while it ran "
                      "(its table committed meanwhile): run the build again, which plans from the current timeline")
        r = ModelResult(model=m.name, strategy="-", mode="failed", reason=reason, error=str(e))
    if r.mode in BUILT_MODES and r.committed_at is None:
        r.committed_at = datetime.now(timezone.utc)
    return r


def plan(spark: SparkSession | None, project: Project, selectors: list[str], exclude: list[str], incremental: bool,
         loaded: Selection | None = None, lenient: bool = False, allow_full: bool = False,
         forward_only: bool = False) -> list[tuple[ModelPlan, dict[str, int]]]:
    """Each selected model's plan (and its upstreams' changed rows), in the order `build` would run
    them, from one read of the selection's state, without Spark (timelines are read from their
    files). `loaded`: the models and the selection, already loaded (else from the selectors);
    `lenient`: a model whose upstream has no data yet is planned as the full build it waits to
    run (`lake plan`) instead of failing."""
    chosen = loaded or selection(project, selectors, exclude)
    models = chosen.models
    order = serving_first(chosen.graph, models, list(chosen.chosen))
    limits = BuildLimits(project.config.build.recompute_below_mib)
    sized = [u for n in order if needs_sizes(models[n], limits) for u in models[n].upstreams]
    analyses, state = _planning_inputs(spark, project, models, order, sized)
    try:
        plans = make_plan([(models[n], analyses.of(models[n])) for n in order], state, incremental, limits, lenient=lenient,
                          allow_full=allow_full, forward_only=forward_only)
    except PlanError as e:
        raise LakeError(str(e), fix=e.fix) from e
    layout = Layout(project.warehouse)
    return [(p, _changed_rows(layout, p) if p.mode in ("incremental", "recompute") else {}) for p in plans]


def _planning_inputs(spark: SparkSession | None, project: Project, models: dict[str, Model], names: Sequence[str],
                     sized: Sequence[str] = ()) -> tuple[Analyses, State]:
    """What planning `names` reads: every model's analysis (with the ODS tables' keys) and one read
    of the state of their tables and their upstreams' (`sized`: upstreams whose size counts)."""
    layout = Layout(project.warehouse)
    analyses = Analyses(models, source_keys(spark, project, layout))
    return analyses, read_state(spark, layout, [u for n in names for u in models[n].upstreams], names, sized, project.externals)


def _changed_rows(layout: Layout, p: ModelPlan) -> dict[str, int]:
    """Rows changed per upstream in the plan's range (for `lake plan`): the inserts, updates and
    deletes of its commits in the range, from their write statistics (timeline files, no JVM)."""
    out: dict[str, int] = {}
    for u, n in p.pending.items():
        if n and p.begin.get(u):
            out[u] = sum(c.changed for c in timeline.commits_between(layout.table(u), p.begin[u], p.end[u]))
    return out


def behind(spark: SparkSession, project: Project, chosen: Selection, names: Sequence[str]) -> list[str]:
    """The models among `names` an incremental build would not leave as they are: a checkpoint
    behind its upstreams (a run killed between its ingest and its builds), a changed model, no
    table yet. One read of their tables' state; models whose upstreams have no data are left out."""
    models = chosen.models
    analyses, state = _planning_inputs(spark, project, models, names)
    limits = BuildLimits(0)
    out = []
    for n in names:
        try:
            if plan_model(models[n], analyses.of(models[n]), state, True, limits).mode != "noop":
                out.append(n)
        except PlanError:
            continue
    return out
