"""DESIGN.md invariant: after random CDC batches (inserts, updates, deletes, re-inserts, a schema
addition) over several tables, `lake build --incremental` leaves every model equal to its query
run by plain Spark over the same upstream rows (the model's SQL as written, over views of the ODS
tables' live rows; not lake's own full-rebuild code, whose bugs an incremental build would
share). Models: the repo's seed models plus a few that exercise HAVING, WHERE, MIN/MAX retraction
on timestamps and `select *` through a schema addition."""

from __future__ import annotations

import os
import runpy
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import networkx as nx
import pytest
from chispa import assert_approx_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from framework.demo import Simulator
from framework.table.columns import lake_key, visible_columns
from framework.transform import hidden
from framework.transform.evaluate import Evaluator
from framework.transform.runner import build, load
from framework.transform.strategies import aggregate
from tests.conftest import REPO
from tests.helpers import LakeProject

EXTRA = {
    "dws/device_stats.sql": "select device_model, count(*) as users, max(id) as max_id, min(create_time) as first_seen "
                            "from ods.user where email is not null and id % 3 <> 0 group by device_model having count(*) > 1",
    "dwd/user_all.sql": "select * from ods.user where id > 0",
    # No key, partitioned: a partition-scoped rescan.
    "dwd/order_lines.sql": "select date_format(o.create_time, 'yyyy-MM') as month, o.oid, p.pname, o.onum "
                           "from ods.user_order o join ods.product p on o.pid = p.pid",
    "dwd/order_lines.yaml": "partition_by: month",  # (YAML, not SQL)
    "dws/segment_sites.sql": "select s.state, count(distinct c.mktsegment) as segments from ods.customer_site s "
                             "join ods.customer c on s.cust_id = c.cust_id group by s.state",
}


def make_project(root: Path, lake_extra: str = "", model_type: str | None = None) -> LakeProject:
    ods = "\n".join((REPO / "layers" / "ods" / f).read_text().split("tables:", 1)[1] for f in ("test_db.yaml", "salesdb.yaml"))
    lp = LakeProject(root, "tables:" + ods, lake_extra)
    for layer in ("dwd", "dws"):
        shutil.copytree(REPO / "layers" / layer, root / "layers" / layer, dirs_exist_ok=True)
    for rel, sql in EXTRA.items():
        (root / "layers" / rel).write_text(sql + "\n")
    if model_type:  # every model's table of that Hudi type
        for model in [*(root / "layers").glob("dw[ds]/*.sql"), *(root / "layers").glob("dw[ds]/*.py")]:
            sidecar = model.with_suffix(".yaml")
            text = sidecar.read_text() if sidecar.exists() else ""
            sidecar.write_text(text + ("" if not text or text.endswith("\n") else "\n") + f"type: {model_type}\n")
    return lp


def plain_spark_models(spark: Any, lp: LakeProject) -> tuple[dict[str, DataFrame], list[str]]:
    """Every model's rows as plain Spark computes them, independent of lake's build code: each
    SQL model's SQL as written, as a view named like the model (`dwd.x`), over views of the ODS
    tables' live rows (`ods.user`: the Hudi table without soft-deleted rows and Hudi's columns);
    a Python model is its function over those views. Returns the rows and the views to drop."""
    project = lp.project
    models, g = load(project)
    views: list[str] = []
    for db in ("ods", "dwd", "dws", "oracle_raw"):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
    for path in sorted((project.warehouse / "ods").local.iterdir()):
        if not (path / ".hoodie").is_dir():
            continue
        raw = f"oracle_raw.`{path.name}`"
        spark.sql(f"DROP TABLE IF EXISTS {raw}")
        spark.sql(f"CREATE TABLE {raw} USING hudi LOCATION '{path}'")
        views.append(raw)
        cols = [c for c in spark.table(raw).columns if not c.startswith("_hoodie_") and c != "_deleted"]
        spark.sql(f"CREATE OR REPLACE VIEW ods.`{path.name}` AS SELECT {', '.join(f'`{c}`' for c in cols)} FROM {raw} WHERE NOT _deleted")
        views.append(f"ods.`{path.name}`")
    out: dict[str, DataFrame] = {}
    for name in nx.topological_sort(g):
        if name not in models:
            continue
        m = models[name]
        if m.kind == "python":
            assert not any(models[d].kind == "sql" for d in g.successors(name) if d in models), "a SQL model reads a Python model"
            mod = runpy.run_path(str(m.path))
            out[name] = mod["model"](SimpleNamespace(spark=spark, read=lambda t: spark.table(t)))
            continue
        assert m.sql is not None
        spark.sql(f"CREATE OR REPLACE VIEW {name} AS {m.sql}")
        views.append(name)
        out[name] = spark.table(name)
    return out, views


def assert_models_equal_plain_spark(spark: Any, lp: LakeProject) -> None:
    """Each model's table (live rows, visible columns) equals its query run by plain Spark over
    the upstreams' current rows; a model without a key is a set (lake stores equal rows once)."""
    project = lp.project
    models, _ = load(project)
    builder = Evaluator(spark, project, models)
    expected, views = plain_spark_models(spark, lp)
    try:
        for name, m in models.items():
            want = expected[name]
            if builder.analyses.of(m).key is None:
                want = want.distinct()
            table = spark.read.format("hudi").load(str(lp.layout.table(name)))
            if "_deleted" in table.columns:  # groups HAVING hides
                table = table.where("NOT _deleted")
            assert_approx_df_equality(table.select(*want.columns), want, precision=1e-9, ignore_row_order=True, ignore_nullable=True)
            if builder.analyses.of(m).strategy == "aggregate":
                _assert_state_consistent(spark, builder, m, name)
    finally:
        for v in reversed(views):
            spark.sql(f"DROP {'TABLE' if v.startswith('oracle_raw.') else 'VIEW'} IF EXISTS {v}")


def _assert_state_consistent(spark: Any, builder: Evaluator, m: Any, name: str) -> None:
    """An aggregate's hidden state (sums, counts, extremes) equals a fresh state query, and so
    does how many rows hold each MIN/MAX where the table knows it (NULL: unknown): a wrong holder
    count shows in the visible columns only after a later retraction. (Lake's own state query:
    an internal consistency check on top of the plain-Spark comparison above.)"""
    p = builder.plan(m, incremental=False)
    a = p.analysis
    exact = aggregate.finalize(builder.ctx, p, aggregate.state_query(builder.ctx, p, builder.ctx.snapshots(p)[a.upstreams[0]], holders=True))
    exact = exact.withColumn("_lake_key", lake_key(list(a.key or ())))
    cols = visible_columns(exact)
    state = [c for c in exact.columns if c.startswith("_lake_") and c != "_lake_key"] + ["_deleted"]
    holders = [c for c in state if c.startswith("_lake_c")]
    raw = builder.reader.raw(name)
    assert raw.where("_deleted").count() == 0, name  # hidden groups are not rows of the model's table
    kept = hidden.stored(spark, builder.layout, name, p.hidden)  # they are in its hidden-groups table
    stored = (raw if kept is None else raw.unionByName(kept, allowMissingColumns=True)).select("_lake_key", *cols, *state)
    plain = [c for c in state if c not in holders]
    assert_approx_df_equality(stored.select(*cols, *plain), exact.select(*cols, *plain),
                              precision=1e-9, ignore_row_order=True, ignore_nullable=True)
    for c in holders:
        wrong = stored.alias("s").join(exact.alias("e"), "_lake_key").where(f"s.{c} IS NOT NULL AND NOT (s.{c} <=> e.{c})")
        assert wrong.count() == 0, (name, c, wrong.select("_lake_key", f"s.{c}", f"e.{c}").limit(5).collect())


# Examples of the default run. Measured on the 2-core test machine: the whole file (2 examples +
# the recompute test) takes 360 s of JVM CPU, 5.3 min of wall time at load ~4 and 8 min at load
# ~10 (the comparison with plain Spark is ~1/4 of a round). The default runs 1 (3, then 2, until the suite outgrew CI);
# `LAKE_INVARIANT_EXAMPLES=<n>` runs n more, randomised and with up to 5 rounds, in the `nightly`
# test (`pytest -m nightly tests/integration/test_models_invariant.py`).
EXAMPLES = 1  # make test's budget: one derandomised example; nightly runs more
NIGHTLY = int(os.environ.get("LAKE_INVARIANT_EXAMPLES", "0"))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 10_000), rounds=st.lists(st.integers(20, 120), min_size=2, max_size=2), age_at=st.integers(0, 1))
def test_incremental_equals_full_rebuild(spark: Any, seed: int, rounds: list[int], age_at: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _rounds_equal_full_rebuild(spark, make_project(Path(tmp)), seed, rounds, age_at, modes=("incremental", "noop"))


@pytest.mark.nightly
@pytest.mark.skipif(not NIGHTLY, reason="nightly size: set LAKE_INVARIANT_EXAMPLES=<examples>")
@settings(max_examples=max(NIGHTLY, 1), deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(seed=st.integers(0, 1_000_000), rounds=st.lists(st.integers(1, 400), min_size=2, max_size=5), age_at=st.integers(0, 4))
def test_incremental_equals_full_rebuild_nightly(spark: Any, seed: int, rounds: list[int], age_at: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _rounds_equal_full_rebuild(spark, make_project(Path(tmp)), seed, rounds, age_at, modes=("incremental", "noop"), expect_changes=False)


def test_incremental_equals_full_rebuild_on_merge_on_read_models(spark: Any) -> None:
    """The same invariant with every model's table merge-on-read (`type: mor`): change reads of
    upstream models then come from log files and time travel, and the rounds cross an inline
    compaction (inline every 2 delta commits here)."""
    with tempfile.TemporaryDirectory() as tmp:
        lp = make_project(Path(tmp), 'hudi: {"hoodie.compact.inline.max.delta.commits": "2"}\n', model_type="mor")
        # Two rounds: the first build and round 0 are each model's two delta commits, so round 0's
        # build compacts every model inline and round 1 builds incrementally (with the replayed
        # window) over the compactions; a third round only repeated that cycle.
        _rounds_equal_full_rebuild(spark, lp, 11, [30, 15], 0, modes=("incremental", "noop"))
        timeline = (lp.layout.table("dws.product_sales") / ".hoodie" / "timeline").local
        assert any(p.name.endswith(".commit") for p in timeline.iterdir()), "no compaction ran"
        # A compaction carries none of lake's commit metadata: the checkpoint is read from the
        # delta commit before it, so the next build is not "no checkpoint: first build" (full).
        # (A model downstream of a compacted MOR model may still run an incremental build over
        # the compaction instant, which changes no row: a cost, not a wrong result.)
        again = build(spark, lp.project, [], [], incremental=True)
        assert not [r for r in again if r.strategy != "full" and r.mode == "full"], [(r.model, r.mode, r.reason) for r in again]
        props = (lp.layout.table("dws.product_sales") / ".hoodie" / "hoodie.properties").local.read_text()
        assert "MERGE_ON_READ" in props


@pytest.mark.nightly
@pytest.mark.skipif(not NIGHTLY, reason="nightly size: set LAKE_INVARIANT_EXAMPLES=<examples>")
def test_recompute_equals_full_rebuild(spark: Any) -> None:
    """The same rounds with every upstream under `build.recompute_below_mib`: the rows-that-differ
    writes leave every model equal to its query run by plain Spark too. Nightly (make test's
    budget): recompute is what small projects build by default, so the CLI and demo tests and
    test_models_build's recompute test run it in make test."""
    with tempfile.TemporaryDirectory() as tmp:
        _rounds_equal_full_rebuild(spark, make_project(Path(tmp), "build: {recompute_below_mib: 1024}\n"), 7, [50, 20], 1,
                                   modes=("recompute", "noop"))


def _rounds_equal_full_rebuild(spark: Any, lp: LakeProject, seed: int, rounds: list[int], age_at: int, modes: tuple[str, ...],
                               expect_changes: bool = True) -> None:
    sim = Simulator(seed)
    lp.write_cdc(sim.snapshot())
    lp.ingest(spark)
    first = build(spark, lp.project, [], [], incremental=True)
    assert all(r.mode == "full" for r in first), [(r.model, r.mode, r.reason) for r in first]
    changed: set[str] = set()  # models that built from a change (not full, not a no-op) in some round
    for i, n in enumerate(rounds):
        t0 = time.time()
        if i == age_at:
            sim.add_column_user_age()
        lines = sim.changes(n)
        lp.write_cdc(lines)
        if i == 1:  # a replay of an older window on top
            lp.write_cdc(lines[: n // 2])
        lp.ingest(spark)
        t1 = time.time()
        results = build(spark, lp.project, [], [], incremental=True)
        t2 = time.time()
        failed = [(r.model, r.reason) for r in results if r.mode == "failed"]
        assert not failed, failed
        assert all(r.mode in modes for r in results if r.strategy != "full"), [(r.model, r.mode, r.reason) for r in results]
        changed |= {r.model for r in results if r.mode in ("incremental", "recompute")}
        lines_model = next(r for r in results if r.model == "dwd.order_lines")
        assert lines_model.strategy == "rescan"
        if lines_model.mode == "incremental":
            assert "partitions the changed rows reach" in lines_model.reason
        assert_models_equal_plain_spark(spark, lp)
        print(f"round {i} ({n} changes): ingest {t1 - t0:.0f} s, build {t2 - t1:.0f} s, comparison {time.time() - t2:.0f} s")
    # Each strategy ran on a change at least once (not only full builds and no-ops).
    assert not expect_changes or {"dws.user_agg", "dwd.big_orders", "dws.product_sales", "dwd.order_lines"} <= changed, changed
