"""`lake build --env NAME`, `lake diff MODEL --env NAME`, `lake env list|promote|drop`:
environments without copies (framework/envs/layout.py)."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from framework.commands.build import run_build
from framework.commands.test import BuildTests, stopped_models
from framework.envs import layout as envs
from framework.errors import ConfigError
from framework.project.config import Project
from framework.runtime import history
from framework.runtime.history import settle_models
from framework.runtime.lock import hold, table_lock
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.session import spark_session
from framework.transform.loader import load_models
from framework.transform.runner import Selection, build, selection
from models.catalog import CatalogConfig
from models.records import LockHolder, ModelResult, RunRecord
from models.unit_test import UnitTestResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _production(spark: SparkSession, layout: Layout, tables: set[str]) -> dict[str, envs.Production]:
    """Production's latest commit and the cleaner's earliest retained commit of each table that
    exists (one timeline read each)."""
    out = {}
    for t in sorted(tables):
        tl = hudi.timeline(spark, layout.table(t))
        if tl.instants:
            out[t] = envs.Production(tl.instants[-1].completed, tl.earliest_retained)
    return out


def run_env_build(*, project: Project, selection: Selection, env: str, incremental: bool, lock_timeout: float, argv: Sequence[str],
                  on_start: Callable[[str], None] | None = None, on_result: Callable[[ModelResult], None] | None = None,
                  on_stale: Callable[[str, LockHolder], None] | None = None, unit_tests: bool = False,
                  on_tests: Callable[[list[UnitTestResult]], None] | None = None, rerun_tests: bool = False,
                  on_note: Callable[[str], None] | None = None) -> RunRecord:
    """Build the selection into environment `env`: its tables, run record, quality results and
    locks under `_env/<env>/`; every other table read from production as of its pin (a pin
    production's cleaner passed moves to the latest commit: `on_note` says so, else stderr). With
    `unit_tests`, the models' unit tests run first, as `lake build` runs them."""
    envs.check_name(env)
    tests = BuildTests.prepare(project, selection, enabled=unit_tests, rerun=rerun_tests)
    tests.before_spark()
    warehouse = project.warehouse
    root = envs.env_root(warehouse, env)
    names = [table_lock(n) for n in selection.chosen]
    with hold(Layout(root).locks, names, command=shlex.join(["lake", *argv]), timeout=lock_timeout, on_stale=on_stale,
              settings=project.config.locks, spark_conf=project.config.spark.conf):
        spark = spark_session(project)
        reads = {u for n in selection.chosen for u in selection.models[n].upstreams} - set(selection.chosen)
        layout, moved = envs.open_env(warehouse, env, list(selection.chosen), _production(spark, Layout(warehouse), reads))
        for note in moved:
            (on_note or _stderr)(note)
        # An environment's tables are never registered in a shared catalog: they would replace
        # production's entries there.
        private = replace(project, config=project.config.model_copy(update={"catalog": CatalogConfig()}))
        with history.recorded(layout, "build", list(argv), project.target) as rec:
            tested = tests.run(spark)
            if tested and on_tests:
                on_tests(tested)
            results = build(spark, private, list(selection.chosen), [], incremental, on_start=on_start, on_result=on_result,
                            run_id=rec.run_id, loaded=selection, layout=layout, stopped=stopped_models(tested))
            settle_models(rec, results)
    return rec


def _stderr(note: str) -> None:
    print(f"note: {note}", file=sys.stderr)


def promote(*, project: Project, env: str, lock_timeout: float, argv: Sequence[str],
            on_result: Callable[[ModelResult], None] | None = None,
            on_stale: Callable[[str, LockHolder], None] | None = None) -> RunRecord:
    """Production builds the environment's models and their descendants incrementally: a model
    whose code changed rebuilds fully (its fingerprint), the rest catch up."""
    layout = envs.existing(project.warehouse, env)
    chosen = selection(project, [f"{m}+" for m in layout.state.models])
    return run_build(project=project, selection=chosen, incremental=True, lock_timeout=lock_timeout, argv=argv,
                     on_result=on_result, on_stale=on_stale)


def drop(*, project: Project, env: str, lock_timeout: float, argv: Sequence[str],
         on_stale: Callable[[str, LockHolder], None] | None = None) -> envs.EnvState:
    """Delete environment `env` (nothing of production is touched) under the locks a build in it
    takes: the table lock of every model it owns, of every model of the project, and of every
    lock taken there before. A build running in it finishes first (or the drop waits, or fails
    naming it); a build that starts later creates the environment anew."""
    layout = envs.existing(project.warehouse, env)
    root = envs.env_root(project.warehouse, env)
    names = {table_lock(m) for m in layout.state.models} | set(envs.lock_names(project.warehouse, env))
    # A project whose models do not load builds nothing now; the other names cover builds begun before.
    with contextlib.suppress(ConfigError):
        names |= {table_lock(m) for m in load_models(project)}
    with hold(Layout(root).locks, names, command=shlex.join(["lake", *argv]), timeout=lock_timeout, on_stale=on_stale,
              settings=project.config.locks, spark_conf=project.config.spark.conf):
        envs.delete(project.warehouse, env)
    return layout.state


def list_envs(project: Project) -> list[envs.EnvState]:
    out = []
    for name in envs.names(project.warehouse):
        state = envs.load_state(project.warehouse, name)
        if state is not None:
            out.append(state)
    return out
