"""`lake run`: ingest then build the affected models incrementally, one run record per cycle
with freshness; `--continuous` repeats and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from framework.ops.continuous import run_continuous
from framework.runtime import history
from framework.transform.reader import TableReader
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

ODS = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id]}
"""
MODELS = {
    "dws/users_by_city.sql": "select city, count(*) as n, sum(score) as score from ods.users group by city",
    "dwd/big_orders.sql": "select id, amount from ods.orders where amount > 5",
}


def _project(root: Path) -> LakeProject:
    return LakeProject(root, ODS).add_models(MODELS)


def _rows(spark: Any, lp: LakeProject, model: str) -> list[tuple]:
    return sorted(tuple(r) for r in TableReader(spark, lp.layout).snapshot(model).collect())


def test_cycles_build_only_what_new_events_reach(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    now_ms = int(time.time() * 1000)
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1, "city": "sh", "score": 5}, pos=1, ts=now_ms - 2000),
        envelope("c", "shop.users", None, {"id": 2, "city": "bj", "score": 7}, pos=2, ts=now_ms - 1000),
        envelope("c", "shop.orders", None, {"id": 10, "amount": 9}, pos=3, ts=now_ms),
    ])
    first, idle = run_continuous(spark, lp.project, [], [], ["run"], trigger_seconds=0, max_cycles=2)
    assert {m.model: m.mode for m in first.models} == {"dwd.big_orders": "full", "dws.users_by_city": "full"}
    f = first.freshness["dws.users_by_city"]
    assert f.events == 2 and f.oldest_event_lag_s >= f.newest_event_lag_s + 0.9 > 0.9
    assert idle.models == [] and idle.ingest is not None and idle.ingest.events == 0
    # Only users change: only the users model is built, incrementally, and equals the source state.
    lp.write_cdc([envelope("u", "shop.users", {"id": 2, "city": "bj", "score": 7}, {"id": 2, "city": "sh", "score": 1}, pos=4)])
    (third,) = run_continuous(spark, lp.project, [], [], ["run"], trigger_seconds=0, max_cycles=1)
    assert [(m.model, m.mode) for m in third.models] == [("dws.users_by_city", "incremental")]
    assert _rows(spark, lp, "dws.users_by_city") == [("sh", 2, 6)]
    stored = history.runs(lp.layout)
    assert [r.command for r in stored] == ["run", "run", "run"]
    assert stored[0].freshness["dws.users_by_city"].events == 2


def test_selectors_limit_the_models(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "city": "sh", "score": 5}, pos=1),
                  envelope("c", "shop.orders", None, {"id": 10, "amount": 9}, pos=2)])
    stop = threading.Event()
    (rec,) = run_continuous(spark, lp.project, ["dwd.big_orders"], [], ["run"], trigger_seconds=0, max_cycles=1, stop_event=stop)
    assert [m.model for m in rec.models] == ["dwd.big_orders"]


def test_continuous_subprocess_stops_cleanly_on_sigterm(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "city": "sh", "score": 5}, pos=1)])
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "run", "--continuous", "--trigger", "2s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    deadline = time.time() + 240

    def cycles_with_events() -> int:
        return sum(1 for r in history.runs(lp.layout) if r.status == "ok" and r.ingest and r.ingest.events)

    # A run's record is stored as `running` when the cycle starts: wait for the first cycle to
    # finish, or it could take the second file too and the second wait would run to the deadline.
    while time.time() < deadline and cycles_with_events() < 1:
        time.sleep(0.5)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 2, "city": "bj", "score": 1}, pos=2)])
    while time.time() < deadline and cycles_with_events() < 2:
        time.sleep(0.5)
    assert cycles_with_events() == 2, "the continuous run did not ingest the second file in a cycle of its own"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    records = history.runs(lp.layout)
    assert len(records) >= 2 and all(r.status == "ok" for r in records)
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 1), ("sh", 1, 5)]


MODELS_BUILT = ("dws.users_by_city", "dwd.big_orders")


def test_kill_between_ingest_and_build_then_rerun(tmp_path_factory: Any, spark: Any) -> None:
    """`lake run` killed after its ingest committed and before any model was built. The next
    `lake run` ingests nothing new; the models must still end equal to a run that was not killed."""
    events = [envelope("c", "shop.users", None, {"id": 1, "city": "sh", "score": 5}, pos=1),
              envelope("c", "shop.users", None, {"id": 2, "city": "bj", "score": 7}, pos=2),
              envelope("c", "shop.orders", None, {"id": 10, "amount": 9}, pos=3),
              envelope("c", "shop.orders", None, {"id": 11, "amount": 2}, pos=4)]
    later = [envelope("u", "shop.users", {"id": 2, "city": "bj", "score": 7}, {"id": 2, "city": "sh", "score": 1}, pos=5),
             envelope("u", "shop.orders", {"id": 11, "amount": 2}, {"id": 11, "amount": 20}, pos=6)]
    clean, lp = _project(tmp_path_factory.mktemp("clean")), _project(tmp_path_factory.mktemp("crashed"))
    for p in (clean, lp):
        p.write_cdc(events)
        run_continuous(spark, p.project, [], [], ["run"], trigger_seconds=0, max_cycles=1)
        p.write_cdc(later)
    run_continuous(spark, clean.project, [], [], ["run"], trigger_seconds=0, max_cycles=1)
    proc = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(lp.root), "run"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "LAKE_FAILPOINT": "after_run_ingest"})
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    # Where it landed: the ODS tables hold the later events, the models do not.
    assert lp.rows(spark, "users", ["id", "city"]) == clean.rows(spark, "users", ["id", "city"])
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 7), ("sh", 1, 5)]
    assert history.runs(lp.layout)[-1].status == "crashed"
    (rerun,) = run_continuous(spark, lp.project, [], [], ["run"], trigger_seconds=0, max_cycles=1)
    # The rerun ingests nothing new, and still builds the models whose checkpoints lag.
    assert sorted(r.model for r in rerun.models if r.mode not in ("noop",)) == sorted(MODELS_BUILT), [(r.model, r.mode) for r in rerun.models]
    for m in MODELS_BUILT:
        assert _rows(spark, lp, m) == _rows(spark, clean, m), m
    # Nothing is left for a build to do.
    assert all(r.mode == "noop" for r in build(spark, lp.project, [], [], incremental=True))
