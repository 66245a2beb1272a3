"""`lake build`: the selected models, under their table locks, with a run record; their unit
tests first (framework/commands/test.py), as `dbt build` runs them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framework.commands.common import locked, recorded
from framework.commands.test import BuildTests, stopped_models
from framework.errors import LakeError
from framework.observe.observer import Observer
from framework.project.config import Project
from framework.runtime import preload
from framework.runtime.history import settle_models
from framework.runtime.lock import table_lock
from framework.runtime.paths import Layout
from framework.table.session import ensure_storage, spark_session
from framework.transform.evaluate import noop_result
from framework.transform.options import BuildOptions
from framework.transform.plan import ModelPlan
from framework.transform.runner import Selection, build, plan
from models.records import LockHolder, ModelResult, RunRecord
from models.unit_test import UnitTestResult


def run_build(*, project: Project, selection: Selection, incremental: bool, lock_timeout: float, argv: Sequence[str],
              on_start: Callable[[str], None] | None = None, on_result: Callable[[ModelResult], None] | None = None,
              on_stale: Callable[[str, LockHolder], None] | None = None, unit_tests: bool = False,
              on_tests: Callable[[list[UnitTestResult]], None] | None = None, rerun_tests: bool = False,
              options: BuildOptions | None = None) -> RunRecord:
    """Build the selection (one writer per model: its table lock, taken before Spark starts).
    With `unit_tests`, the selected models' unit tests run first: a model whose tests fail is not
    built (failed, with the diff as its error) and its descendants are skipped; `on_tests` gets
    the results. They share the build's session when it is local, else run in a child process;
    a test unchanged since it last passed is not rerun unless `rerun_tests`. `options`: `--allow-full`, `--restate`, `--forward-only`."""
    if not selection.chosen:  # nothing to build: the run record says so, and no JVM starts for it
        ensure_storage(project)
        with recorded(project, "build", argv) as rec:
            return rec
    tests = BuildTests.prepare(project, selection, enabled=unit_tests, rerun=rerun_tests)
    with locked(project, [table_lock(n) for n in selection.chosen], lock_timeout, argv, on_stale):
        restating = bool(options and options.restate)  # a restatement writes although nothing is new upstream
        unchanged = nothing_new(project, selection, options) if incremental and not tests.cases and not restating else None
        if unchanged is not None:  # every model is up to date: said from the timeline files, no JVM
            return _unchanged(project, unchanged, argv, tests.kept, on_start, on_result, on_tests)
        tests.before_spark()
        if any(selection.models[n].config.checks for n in selection.chosen if n in selection.models):
            preload.start([preload.QUALITY])  # imported while the JVM starts (framework/runtime/preload.py)
        spark = spark_session(project)
        obs = Observer(project)
        with recorded(project, "build", argv, obs) as rec:
            tested = tests.run(spark)
            if tested and on_tests:
                on_tests(tested)
            results = build(spark, project, list(selection.chosen), [], incremental, on_start=obs.on_start(rec, on_start),
                            on_result=obs.on_result(rec, on_result),
                            run_id=rec.run_id, loaded=selection, stopped=stopped_models(tested), options=options)
            settle_models(rec, results)
    return rec


def nothing_new(project: Project, selection: Selection, options: BuildOptions | None = None) -> list[ModelPlan] | None:
    """The plans of an incremental build of `selection` in which every model is a noop (no
    upstream commit since its checkpoint), read from the tables' timeline files without a JVM;
    None when any model would build, planning fails (the build then says why) or the warehouse
    is not local (its file system lives in the JVM)."""
    if not project.warehouse.is_local:
        return None
    try:
        plans = plan(None, project, list(selection.chosen), [], True, loaded=selection, allow_full=bool(options and options.allow_full),
                     forward_only=bool(options and options.forward_only))
    except LakeError:
        return None
    return [p for p, _ in plans] if all(p.mode == "noop" for p, _ in plans) else None


def _unchanged(project: Project, plans: list[ModelPlan], argv: Sequence[str], kept: list[UnitTestResult],
               on_start: Callable[[str], None] | None, on_result: Callable[[ModelResult], None] | None,
               on_tests: Callable[[list[UnitTestResult]], None] | None) -> RunRecord:
    """The run record of a build with nothing to do: each model's noop result, in build order."""
    obs = Observer(project)
    layout = Layout(project.warehouse)
    with recorded(project, "build", argv, obs) as rec:
        if kept and on_tests:
            on_tests(list(kept))
        start, done = obs.on_start(rec, on_start), obs.on_result(rec, on_result)
        results = []
        for p in plans:
            start(p.model.name)
            results.append(noop_result(layout, p))
            done(results[-1])
        settle_models(rec, results)
    return rec
