"""Executing plans: each model's plan runs its strategy (framework/transform/strategies/) and
commits through one Committer; the result is the model's ModelResult, quality outcomes included."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession

from framework.errors import LakeError
from framework.project.config import Project
from framework.project.externals import is_external
from framework.quality.model_gate import ModelGate
from framework.runtime.history import new_run_id
from framework.runtime.paths import Layout
from framework.table import hudi, timeline
from framework.table.columns import visible_columns
from framework.table.lake_table import ProjectDefaults
from framework.transform import model_history, strategies
from framework.transform import strict as strictness
from framework.transform.analysis import Analyses, declared_keys
from framework.transform.commit import Committer
from framework.transform.context import BuildContext
from framework.transform.loader import Model
from framework.transform.options import BuildOptions
from framework.transform.plan import BuildLimits, ModelPlan, PlanError, needs_sizes, plan_model
from framework.transform.reader import TableReader
from framework.transform.state import read_state
from models.records import ModelResult


def ods_keys(spark: SparkSession | None, project: Project, layout: Layout) -> dict[str, tuple[str, ...]]:
    """Every ODS table's key: its YAML's, or (declared without `key:`, Kafka source) the one its
    Hudi table was created with (its `hoodie.properties`, read without a JVM)."""
    out = {}
    for t in project.ods_tables:
        path = layout.table(t.qualified_name)
        if t.key or not hudi.table_exists(path):
            out.update(t.readable())
        else:
            out[t.qualified_name] = tuple(timeline.fields(timeline.properties(path), "recordkey"))
    return out


def source_keys(spark: SparkSession | None, project: Project, layout: Layout) -> dict[str, tuple[str, ...]]:
    """The keys of the tables models read that are not models: every ODS table's (`ods_keys`) and
    each external table's that declares `key:`."""
    return {**ods_keys(spark, project, layout), **{n: k for n, k in declared_keys(project).items() if is_external(n)}}


class Evaluator:
    """Plans and builds models one at a time on one session, under one run id."""

    def __init__(self, spark: SparkSession, project: Project, models: dict[str, Model], run_id: str | None = None,
                 layout: Layout | None = None, options: BuildOptions | None = None) -> None:
        self.spark = spark
        self.options = options or BuildOptions()
        self.project = project
        self.models = models
        self.layout = layout or Layout(project.warehouse)  # an environment's (framework/envs/layout.py), or production
        self.reader = TableReader(spark, self.layout, project.externals)
        # Quality checks run before each commit; results and quarantined rows carry the run id.
        self.gate = ModelGate(spark, project, self.layout, run_id or new_run_id())
        self.analyses = Analyses(models, source_keys(spark, project, self.layout))
        self.limits = BuildLimits(project.config.build.recompute_below_mib)
        committer = Committer(spark, project, self.layout, self.reader, self.gate)
        self.ctx = BuildContext(spark, self.reader, committer, self.analyses.key_of)

    def plan(self, m: Model, incremental: bool) -> ModelPlan:
        """`m`'s plan from the state of its tables now (after the upstreams built before it)."""
        sized = m.upstreams if needs_sizes(m, self.limits) else ()
        state = read_state(self.spark, self.layout, m.upstreams, [m.name], sized, self.project.externals)
        try:
            p = plan_model(m, self.analyses.of(m), state, incremental, self.limits, self.options.allow_full,
                           self.options.forward_only)
        except PlanError as e:
            raise LakeError(str(e), fix=e.fix) from e
        note = self.options.note
        return p if note is None or p.mode == "noop" else replace(p, note=note, reason=f"{p.reason}; {note}")

    def rows_as_of(self, m: Model, upstream: Mapping[str, str]) -> DataFrame:
        """Every row of `m` as a full build gives it from its upstreams as of `upstream` (completion
        times; an external table's version), lazily, nothing written (`lake verify`): the rows a
        full build would commit, before its quality gate, with an aggregate's state columns."""
        p = ModelPlan(m, self.analyses.of(m), "full", "as of recorded instants", end=dict(upstream))
        return strategies.full.rows(self.ctx, p)

    def run(self, p: ModelPlan) -> ModelResult:
        """Build one plan; then the model's history, when it keeps one, takes what its table committed."""
        res = self._run(p)
        m = p.model
        if m.kind != "seed" and m.config.history:  # framework/transform/model_history.py
            key = self.analyses.of(m).key or tuple(visible_columns(self.reader.snapshot(m.name)))
            model_history.catch_up(self.reader, ProjectDefaults.of(self.project), m, tuple(key))
        return res

    def _run(self, p: ModelPlan) -> ModelResult:
        if p.refused:  # an `incremental: strict` model that would fall back (strict.py)
            raise LakeError(p.refused, fix=strictness.allow_once(p.model))
        t0 = time.time()
        if p.mode == "noop":
            return noop_result(self.layout, p)
        res = ModelResult(model=p.model.name, strategy=p.analysis.strategy, mode=p.mode, reason=p.reason, upstream=dict(p.end))
        res.upstream_changed = upstream_changes(self.layout, p)
        if p.forward and not any(p.pending.values()):  # nothing new upstream: an empty commit records the change
            nothing = self.spark.createDataFrame([], "_lake_key string")
            done = self.ctx.write(p, self.ctx.query(p.model, self.ctx.snapshots(p)).limit(0), scope=nothing)
        else:
            done = strategies.for_plan(p)(self.ctx, p)
        res.rows_written, res.rows_deleted = done.rows, done.deletes
        res.rows_quarantined, res.checks = done.gate.quarantined, list(done.gate.checks)
        res.rows_read = self._rows_read(p, res.upstream_changed)
        res.seconds = round(time.time() - t0, 3)
        return res

    def restated(self, m: Model, first: ModelResult) -> ModelResult:
        """After `first`, the model's build, its partitions in `--restate`'s range recomputed as of
        its checkpoint (framework/transform/strategies/restate.py): one result for both."""
        window = self.options.restate
        assert window is not None
        if first.mode in ("full", "failed"):  # a full build has rewritten every partition
            return first
        p = self.plan(m, True)
        if not p.begin or set(p.begin) != set(m.upstreams):  # the checkpoint cannot serve: what it says instead
            return first.model_copy(update={"reason": f"{first.reason}; not restated: {p.reason}"})
        why = (f"restated {m.config.partition_by} in {window}: recomputed from the upstreams as of the model's checkpoint; "
               "other partitions left as built")
        r = self.run(replace(p, mode="restate", reason=why, end=dict(p.begin), pending=dict.fromkeys(p.begin, 0), window=window))
        if first.mode == "noop":
            return r
        return r.model_copy(update={"reason": f"{first.mode} build ({first.reason}), then {why}", "rows_written": r.rows_written + first.rows_written,
                                    "rows_deleted": r.rows_deleted + first.rows_deleted, "seconds": round(first.seconds + r.seconds, 3),
                                    "checks": [*first.checks, *r.checks], "rows_quarantined": first.rows_quarantined + r.rows_quarantined})

    def _rows_read(self, p: ModelPlan, changed: dict[str, int]) -> int:
        """Every live row of the upstreams as of the plan's end (a count of each snapshot: one Spark
        job per upstream) for full builds and recomputes; the changed rows for incremental ones."""
        if p.mode == "incremental":
            return sum(changed.values())
        return sum(self.reader.snapshot(u, p.end[u]).count() for u in p.model.upstreams)


def noop_result(layout: Layout, p: ModelPlan) -> ModelResult:
    """The result of a plan with nothing new upstream: nothing read, nothing written (no Spark)."""
    return ModelResult(model=p.model.name, strategy=p.analysis.strategy, mode="noop", reason=p.reason, upstream=dict(p.end),
                       upstream_changed=upstream_changes(layout, p), rows_read=0)


def upstream_changes(layout: Layout, p: ModelPlan) -> dict[str, int]:
    """Rows each upstream's commits in the plan's range (checkpoint, end] inserted, updated or
    deleted: Hudi's write statistics from the timeline, no Spark job. Empty without a checkpoint."""
    return {u: sum(c.changed for c in timeline.commits_between(layout.table(u), begin, p.end[u]))
            for u, begin in p.begin.items() if u in p.end and not is_external(u)}
