"""Planning is a pure function of a hand-made State: every mode and reason, no Spark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from framework.table.hudi import Instant
from framework.transform.loader import Model
from framework.transform.plan import (
    BuildLimits,
    PlanError,
    State,
    TargetState,
    UpstreamState,
    make_plan,
    plan_model,
)
from framework.transform.strategy import Analysis
from models.config import ModelConfig

REPO = Path(__file__).resolve().parents[2]
AGG = Analysis("aggregate", "GROUP BY of one upstream", ("ods.user",), ("device_model",))
FULL = Analysis("full", "window function: full rebuild", ("ods.user",), None)
LIMITS = BuildLimits(recompute_below_mib=0)


def model(fingerprint: str = "fp1", **cfg: object) -> Model:
    return Model("dws.user_agg", "dws", "user_agg", "sql", Path("layers/dws/user_agg.sql"), ModelConfig(**cfg),  # type: ignore[arg-type]
                 "select count(1) as num, device_model from ods.user group by device_model", ("ods.user",), fingerprint)


def commits(*times: str) -> tuple[Instant, ...]:
    """Completed commits requested one unit before they completed."""
    return tuple(Instant(str(int(t) - 1), t, "commit") for t in times)


def state(instants: tuple[Instant, ...], ckpt: str | None = None, fingerprint: str = "fp1", retained: str | None = None, size: int = 0,
          hidden: str | None = "-") -> State:
    target = TargetState({"ods.user": ckpt}, fingerprint, hidden) if ckpt else TargetState()
    return State({"ods.user": UpstreamState(instants, retained, size)}, {"dws.user_agg": target})


def test_full_when_asked() -> None:
    p = plan_model(model(), AGG, state(commits("10", "20"), ckpt="20"), incremental=False, limits=LIMITS)
    assert (p.mode, p.reason, dict(p.end)) == ("full", "full build requested", {"ods.user": "20"})


def test_first_build_has_no_checkpoint() -> None:
    p = plan_model(model(), AGG, state(commits("10")), incremental=True, limits=LIMITS)
    assert (p.mode, p.reason) == ("full", "no checkpoint: first build")


def test_changed_fingerprint_rebuilds() -> None:
    p = plan_model(model("fp2"), AGG, state(commits("10", "20"), ckpt="10"), incremental=True, limits=LIMITS)
    assert p.mode == "full" and "fingerprint fp1 → fp2" in p.reason


def test_fingerprint_of_an_older_lake_is_not_a_change() -> None:
    """A table built before the data/metadata split records the old single fingerprint: the model
    whose old fingerprint it is has not changed (no rebuild on upgrade); any other has."""
    from dataclasses import replace

    upgraded = replace(model("fp-new"), legacy_fingerprint="fp1")
    p = plan_model(upgraded, AGG, state(commits("10", "20"), ckpt="10"), incremental=True, limits=LIMITS)
    assert p.mode == "incremental"
    p = plan_model(replace(upgraded, legacy_fingerprint="fp0"), AGG, state(commits("10", "20"), ckpt="10"), incremental=True, limits=LIMITS)
    assert p.mode == "full" and "fingerprint fp1 → fp-new" in p.reason


def test_nothing_new_is_a_noop() -> None:
    p = plan_model(model(), AGG, state(commits("10", "20"), ckpt="20"), incremental=True, limits=LIMITS)
    assert (p.mode, dict(p.pending), dict(p.begin)) == ("noop", {"ods.user": 0}, {"ods.user": "20"})


def test_pending_commits_run_the_strategy() -> None:
    p = plan_model(model(), AGG, state(commits("10", "20", "30"), ckpt="10"), incremental=True, limits=LIMITS)
    assert (p.mode, p.reason, dict(p.pending)) == ("incremental", AGG.reason, {"ods.user": 2})


def test_aggregate_table_with_hidden_rows_in_it_rebuilds_once() -> None:
    """A commit without `hidden` metadata was written before hidden groups moved to their own
    table: its hidden groups are `_deleted` rows of the model's table, which outside readers
    see. A full build moves them; other strategies never kept hidden rows."""
    old = plan_model(model(), AGG, state(commits("10", "20"), ckpt="10", hidden=None), incremental=True, limits=LIMITS)
    assert old.mode == "full" and "a full build moves them" in old.reason
    assert plan_model(model(), FULL, state(commits("10", "20"), ckpt="10", hidden=None), incremental=True, limits=LIMITS).mode == "recompute"
    p = plan_model(model(), AGG, state(commits("10", "20"), ckpt="10", hidden="15"), incremental=True, limits=LIMITS)
    assert (p.mode, p.hidden) == ("incremental", "15")
    assert plan_model(model(), AGG, state(commits("10", "20"), ckpt="10", hidden="15"), incremental=False, limits=LIMITS).hidden == "15"


def test_holder_count_threshold_resolves_and_reaches_the_plan() -> None:
    """A full build's commit records `this` (its own instant is not known before it commits):
    planning reads it as the latest commit's requested instant (a MOR compaction after it writes
    no row), an instant carried by later commits as itself, and no record as "every count known"."""
    from framework.transform import holders

    done = (Instant("09", "10", "deltacommit"), Instant("19", "21", "deltacommit"), Instant("20", "22", "commit"))
    assert holders.threshold({holders.META: holders.THIS}, done) == "20"
    assert holders.threshold({holders.META: "19"}, done) == "19"
    assert holders.threshold({}, done) is None
    assert [c for c in ("_lake_c0", "_lake_c12", "_lake_n0", "_lake_cx", "_lake_c1x", "count") if holders.is_count(c)] == ["_lake_c0", "_lake_c12"]
    target = TargetState({"ods.user": "10"}, "fp1", "15", "19")
    st = State({"ods.user": UpstreamState(commits("10", "20"))}, {"dws.user_agg": target})
    assert plan_model(model(), AGG, st, incremental=True, limits=LIMITS).counts == "19"
    assert plan_model(model(), AGG, st, incremental=False, limits=LIMITS).counts == "19"


def test_checkpoint_archived_or_rebuilt() -> None:
    archived = plan_model(model(), AGG, state(commits("30", "40"), ckpt="10"), incremental=True, limits=LIMITS)
    assert archived.mode == "full" and "older than its timeline" in archived.reason
    rebuilt = plan_model(model(), AGG, state(commits("30", "40"), ckpt="35"), incremental=True, limits=LIMITS)
    assert rebuilt.mode == "full" and "was rebuilt" in rebuilt.reason


def test_checkpoint_cleaned_past() -> None:
    """On the timeline, but the cleaner kept only commits requested from 29 on: the commit
    completed at 20 (requested 19) that the change read needs has lost its files."""
    p = plan_model(model(), AGG, state(commits("10", "20", "30"), ckpt="10", retained="29"), incremental=True, limits=LIMITS)
    assert p.mode == "full" and "cleaner kept (earliest retained commit 29): cleaned" in p.reason
    ok = plan_model(model(), AGG, state(commits("10", "20", "30"), ckpt="10", retained="19"), incremental=True, limits=LIMITS)
    assert ok.mode == "incremental"


def test_recompute_below_a_size_project_wide_and_per_model() -> None:
    small = state(commits("10", "20"), ckpt="10", size=80 * 1024)
    p = plan_model(model(), AGG, small, incremental=True, limits=BuildLimits(256))
    assert p.mode == "recompute" and "upstreams hold 80 KiB (≤ build.recompute_below_mib: 256 MiB)" in p.reason
    own = plan_model(model(recompute_below_mib=0), AGG, small, incremental=True, limits=BuildLimits(256))
    assert own.mode == "incremental"
    big = plan_model(model(), AGG, state(commits("10", "20"), ckpt="10", size=300 * 2**20), incremental=True, limits=BuildLimits(256))
    assert big.mode == "incremental"


def test_full_strategy_recomputes_in_incremental_runs() -> None:
    p = plan_model(model(), FULL, state(commits("10", "20"), ckpt="10"), incremental=True, limits=LIMITS)
    assert p.mode == "recompute" and p.reason.startswith("window function")


def test_upstream_without_data_is_an_error_with_a_fix() -> None:
    with pytest.raises(PlanError, match="reads ods.user, which has no data yet") as e:
        plan_model(model(), AGG, State({"ods.user": UpstreamState(())}, {}), incremental=True, limits=LIMITS)
    assert "lake build +dws.user_agg" in e.value.fix


def test_whole_selection_in_order() -> None:
    plans = make_plan([(model(), AGG), (model(), AGG)], state(commits("10"), ckpt="10"), incremental=True, limits=LIMITS)
    assert [p.mode for p in plans] == ["noop", "noop"]


@pytest.mark.parametrize("module", ["framework.transform.plan", "framework.transform.dag", "framework.transform.strategy",
                                    "framework.transform.loader", "framework.transform.analysis", "framework.transform.lineage",
                                    "framework.project.config", "framework.transform.state",
                                    "framework.modeltest.cases",
                                    "framework.project.config", "framework.transform.state", "framework.transform.selector",
                                    "framework.transform.fingerprint", "framework.table.timeline", "framework.commands.freshness"])
def test_core_modules_import_no_spark_or_great_expectations(module: str) -> None:
    """The boundary: config, DAG, selection, strategy inference and planning load without a JVM
    library (so `lake dag`, `lake lineage` and `lake plan` of an unbuilt project start fast)."""
    code = f"import sys, {module}; bad = [m for m in ('pyspark', 'great_expectations', 'py4j') if m in sys.modules]; assert not bad, bad"
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_upstream_column_retyped_since_the_checkpoint_rebuilds() -> None:
    """A change read would span a widening the upstream took in place: a full build instead."""
    types = {"10": {"id": "INT", "price": "DECIMAL(10,2)"}, "30": {"id": "INT", "price": "DECIMAL(12,2)", "new": "STRING"}}
    s = State({"ods.user": UpstreamState(commits("10", "20", "30"), types=types)}, {"dws.user_agg": TargetState({"ods.user": "10"}, "fp1", "-")})
    p = plan_model(model(), AGG, s, incremental=True, limits=LIMITS)
    assert (p.mode, p.reason) == ("full", "ods.user column price changed type from DECIMAL(10,2) to DECIMAL(12,2) since the checkpoint (10): "
                                          "rebuilt in the new type")
    # A column added since is no type change.
    added = {"10": {"id": "INT"}, "30": {"id": "INT", "new": "STRING"}}
    s = State({"ods.user": UpstreamState(commits("10", "20", "30"), types=added)}, {"dws.user_agg": TargetState({"ods.user": "10"}, "fp1", "-")})
    assert plan_model(model(), AGG, s, incremental=True, limits=LIMITS).mode == "incremental"


def test_rebuilt_upstream_says_so() -> None:
    """`lake ingest --rebuild` (or a rewrite) gives the upstream a new timeline after the checkpoint."""
    up = UpstreamState(commits("50", "60"), rebuilt=("50", "ods.user was rebuilt by lake ingest --rebuild"))
    s = State({"ods.user": up}, {"dws.user_agg": TargetState({"ods.user": "20"}, "fp1", "-")})
    p = plan_model(model(), AGG, s, incremental=True, limits=LIMITS)
    assert p.mode == "full" and p.reason == ("ods.user was rebuilt after the checkpoint (20), so the model is rebuilt from it: "
                                             "ods.user was rebuilt by lake ingest --rebuild")
    # Without a record, the same timeline reads as cleaned or archived.
    s = State({"ods.user": UpstreamState(commits("50", "60"))}, {"dws.user_agg": TargetState({"ods.user": "20"}, "fp1", "-")})
    assert "cleaned or archived" in plan_model(model(), AGG, s, incremental=True, limits=LIMITS).reason


def test_lenient_plan_says_what_a_build_waits_for() -> None:
    """`lake plan` of an unbuilt project: no PlanError, the full build and what it waits for; a
    model reading a model this build creates first says so."""
    down = Model("dws.top", "dws", "top", "sql", Path("layers/dws/top.sql"), ModelConfig(), "select * from dws.user_agg",  # type: ignore[arg-type]
                 ("dws.user_agg",), "fp9")
    empty = State({"ods.user": UpstreamState(())}, {})
    with pytest.raises(PlanError, match="ods.user, which has no data yet") as e:
        make_plan([(model(), AGG)], empty, True, LIMITS)
    assert "lake ingest" in e.value.fix
    plans = make_plan([(model(), AGG), (down, FULL)], empty, True, LIMITS, lenient=True)
    assert [(p.mode, p.reason) for p in plans] == [("full", "full build; waits for ods.user (no data yet)"),
                                                    ("full", "full build; after this build creates dws.user_agg")]
