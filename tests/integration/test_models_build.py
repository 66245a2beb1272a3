"""Build behaviour on real Hudi tables: checkpoints in commit metadata, no-op without upstream
commits, fingerprint change → full rebuild with the reason, plan, crash and rerun."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from framework.table import hudi
from framework.transform.runner import build, load, plan
from tests.helpers import LakeProject, envelope

ODS = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id]}
"""
MODELS = {
    "dws/users_by_city.sql": "select city, count(*) as n, sum(score) as score, min(score) as lo from ods.users group by city",
    "dwd/orders_enriched.sql": "select o.id, o.amount, u.city from ods.orders o join ods.users u on o.uid = u.id",
    "dwd/orders_enriched.yaml": "key: [id]\n",
    "dwd/vip.sql": "select id, city from ods.users where score >= 10",
}


def _project(root: Path) -> LakeProject:
    return LakeProject(root, ODS).add_models(MODELS)


def _seed(lp: LakeProject, spark: Any) -> None:
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1, "city": "sh", "score": 5}, pos=1),
        envelope("c", "shop.users", None, {"id": 2, "city": "bj", "score": 12}, pos=2),
        envelope("c", "shop.users", None, {"id": 3, "city": "sh", "score": 3}, pos=3),
        envelope("c", "shop.orders", None, {"id": 10, "uid": 1, "amount": 7}, pos=4),
        envelope("c", "shop.orders", None, {"id": 11, "uid": 2, "amount": 9}, pos=5),
    ])
    lp.ingest(spark)


def _rows(spark: Any, lp: LakeProject, model: str) -> list[tuple]:
    from framework.transform.reader import TableReader

    df = TableReader(spark, lp.layout).snapshot(model)
    return sorted((tuple(r) for r in df.collect()), key=lambda r: tuple((v is None, v) for v in r))  # NULLs last


def test_recompute_below_size_writes_only_the_rows_that_differ(tmp_path: Path, spark: Any) -> None:
    """`build.recompute_below_mib`: small upstreams are recomputed, and the commit holds only the
    rows that differ from the table (so downstream CDC stays as small as the change)."""
    lp = LakeProject(tmp_path, ODS, lake_extra="build: {recompute_below_mib: 64}\n").add_models(MODELS)
    lp.add_models({"dwd/vip.yaml": "recompute_below_mib: 0\n"})  # a model's own setting wins: its strategy runs
    _seed(lp, spark)
    build(spark, lp.project, [], [], incremental=True)
    agg = lp.layout.table("dws.users_by_city")
    # An update that changes nothing the models read: recomputed, nothing written, no commit.
    lp.write_cdc([envelope("u", "shop.users", {"id": 1, "city": "sh", "score": 5}, {"id": 1, "city": "sh", "score": 5}, pos=10)])
    lp.ingest(spark)
    (p, _), = [(p, c) for p, c in plan(spark, lp.project, ["dws.users_by_city"], [], incremental=True)]
    assert p.mode == "recompute" and "build.recompute_below_mib: 64 MiB" in p.reason, p.reason
    before = hudi.completed_instants(spark, agg)
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert {m: (r.mode, r.rows_written, r.rows_deleted) for m, r in res.items()} == {
        "dws.users_by_city": ("recompute", 0, 0), "dwd.vip": ("incremental", 0, 0), "dwd.orders_enriched": ("recompute", 0, 0)}
    assert hudi.completed_instants(spark, agg) == before
    # User 3 moves to bj: both city groups change; nobody else's rows do.
    lp.write_cdc([envelope("u", "shop.users", {"id": 3, "city": "sh", "score": 3}, {"id": 3, "city": "bj", "score": 3}, pos=11)])
    lp.ingest(spark)
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert (res["dws.users_by_city"].rows_written, res["dws.users_by_city"].rows_deleted) == (2, 0)
    assert (res["dwd.vip"].rows_written, res["dwd.vip"].rows_deleted) == (0, 0)
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 2, 15, 3), ("sh", 1, 5, 5)]
    # User 2 is deleted: one group changes, one vip row and one enriched order go.
    lp.write_cdc([envelope("d", "shop.users", {"id": 2, "city": "bj", "score": 12}, None, pos=12)])
    lp.ingest(spark)
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert {m: (r.rows_written, r.rows_deleted) for m, r in res.items()} == {
        "dws.users_by_city": (1, 0), "dwd.vip": (0, 1), "dwd.orders_enriched": (0, 1)}
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 3, 3), ("sh", 1, 5, 5)]
    assert _rows(spark, lp, "dwd.vip") == []
    assert _rows(spark, lp, "dwd.orders_enriched") == [(10, 7, "sh")]


def test_checkpoint_noop_retraction_and_fingerprint(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    # Two users without a city: a NULL group, whose MIN is retracted below.
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 4, "city": None, "score": 4}, pos=6),
                  envelope("c", "shop.users", None, {"id": 5, "city": None, "score": 8}, pos=7)])
    _seed(lp, spark)
    first = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert {m: r.reason for m, r in first.items()}["dws.users_by_city"] == "no checkpoint: first build"
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12, 12), ("sh", 2, 8, 3), (None, 2, 12, 4)]
    # The checkpoint is in the commit's extra metadata: the upstream completion times.
    _inst, meta = hudi.last_commit_metadata(spark, lp.layout.table("dws.users_by_city"))
    users_last = hudi.completed_instants(spark, lp.layout.table("ods.users"))[-1].completed
    assert json.loads(meta["ckpt"]) == {"ods.users": users_last}
    before = hudi.completed_instants(spark, lp.layout.table("dws.users_by_city"))
    again = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert all(r.mode == "noop" for r in again.values())
    assert hudi.completed_instants(spark, lp.layout.table("dws.users_by_city")) == before  # no empty commit
    # Update user 3 (the current minimum of 'sh'), delete user 2, and delete user 4 (the minimum
    # of the NULL group): retractions + MIN recomputes, one of them for a NULL group key.
    lp.write_cdc([
        envelope("u", "shop.users", {"id": 3, "city": "sh", "score": 3}, {"id": 3, "city": "sh", "score": 30}, pos=10),
        envelope("d", "shop.users", {"id": 2, "city": "bj", "score": 12}, None, pos=11),
        envelope("d", "shop.users", {"id": 4, "city": None, "score": 4}, None, pos=12),
    ])
    lp.ingest(spark)
    planned = {p.model.name: (p, rows) for p, rows in plan(spark, lp.project, [], [], incremental=True)}
    p, changed = planned["dws.users_by_city"]
    assert p.mode == "incremental" and p.pending == {"ods.users": 1} and changed == {"ods.users": 3}
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert res["dws.users_by_city"].mode == "incremental"
    assert _rows(spark, lp, "dws.users_by_city") == [("sh", 2, 35, 5), (None, 1, 8, 8)]  # bj's count reached 0: deleted
    assert _rows(spark, lp, "dwd.vip") == [(3, "sh")]
    assert _rows(spark, lp, "dwd.orders_enriched") == [(10, 7, "sh")]
    assert res["dwd.orders_enriched"].rows_deleted == 1
    # Changing the SQL changes the fingerprint: a full rebuild that says why.
    (tmp_path / "layers" / "dwd" / "vip.sql").write_text("select id, city from ods.users where score >= 4")
    res = {r.model: r for r in build(spark, lp.project, ["dwd.vip"], [], incremental=True)}
    assert res["dwd.vip"].mode == "full" and "the model changed (fingerprint" in res["dwd.vip"].reason
    assert _rows(spark, lp, "dwd.vip") == [(1, "sh"), (3, "sh"), (5, None)]
    # A full rebuild of an existing table writes only the rows that differ (3 was there already).
    assert (res["dwd.vip"].rows_written, res["dwd.vip"].rows_deleted) == (2, 0)
    # A change that gives the same rows: the rebuild writes none but commits, empty, the new
    # fingerprint (else every later build would be full); then nothing is left to do.
    vip = lp.layout.table("dwd.vip")
    # A comment, the layout or a description is not a change: nothing to do.
    (tmp_path / "layers" / "dwd" / "vip.sql").write_text("-- VIPs\nSELECT id, city\nFROM ods.users\nWHERE score >= 4\n")
    (tmp_path / "layers" / "dwd" / "vip.yaml").write_text("description: VIPs\ntags: [crm]\n")
    assert [r.mode for r in build(spark, lp.project, ["dwd.vip"], [], incremental=True)] == ["noop"]
    (tmp_path / "layers" / "dwd" / "vip.sql").write_text("select id, city from ods.users where score >= 4 and id is not null\n")
    commits = len(hudi.completed_instants(spark, vip))
    res = {r.model: r for r in build(spark, lp.project, ["dwd.vip"], [], incremental=True)}
    assert res["dwd.vip"].mode == "full" and (res["dwd.vip"].rows_written, res["dwd.vip"].rows_deleted) == (0, 0)
    assert len(hudi.completed_instants(spark, vip)) == commits + 1
    assert hudi.last_commit_metadata(spark, vip)[1]["fingerprint"] == load(lp.project)[0]["dwd.vip"].fingerprint
    assert [r.mode for r in build(spark, lp.project, ["dwd.vip"], [], incremental=True)] == ["noop"]
    assert [r.rows_written for r in build(spark, lp.project, ["dwd.vip"], [], incremental=False)] == [0]  # `lake build`: full
    assert len(hudi.completed_instants(spark, vip)) == commits + 1  # ... and no second empty commit
    assert _rows(spark, lp, "dwd.vip") == [(1, "sh"), (3, "sh"), (5, None)]


def test_min_max_holders_decide_the_recompute(tmp_path: Path, spark: Any, monkeypatch: Any) -> None:
    """MIN/MAX keep how many rows hold the extreme (NULL: unknown, after a full build): retracting
    one of several known holders merges without reading the upstream; retracting the last one, or
    one of an unknown number, recomputes that group only. Tables written before the counts
    existed build incrementally, their counts unknown."""
    from framework.transform.strategies import aggregate

    lp = LakeProject(tmp_path, ODS).add_models({"dws/score_range.sql": "select city, min(score) as lo, max(score) as hi from ods.users group by city"})
    recomputed: list[list[tuple]] = []
    real = aggregate._rows_of_groups

    def spy(a: Any, key: list[str], upstream: Any, groups: Any) -> Any:
        recomputed.append(sorted(tuple(r) for r in groups.drop("_lake_key").collect()))
        return real(a, key, upstream, groups)

    monkeypatch.setattr(aggregate, "_rows_of_groups", spy)
    path = lp.layout.table("dws.score_range")

    def state() -> list[tuple]:
        return sorted(tuple(r) for r in hudi.read(spark, path).select("city", "lo", "_lake_c0", "hi", "_lake_c1").collect())

    def round_(*events: dict) -> str:
        lp.write_cdc(list(events))
        lp.ingest(spark)
        res, = build(spark, lp.project, [], [], incremental=True)
        return res.mode

    def user(op: str, i: int, before: tuple | None, after: tuple | None, pos: int) -> dict:
        def img(t: tuple | None) -> dict | None:
            return None if t is None else {"id": i, "city": t[0], "score": t[1]}

        return envelope(op, "shop.users", img(before), img(after), pos=pos)

    first = [user("c", i, None, v, i) for i, v in {1: ("sh", 3), 2: ("sh", 3), 3: ("sh", 7), 4: ("bj", 5)}.items()]
    assert round_(*first) == "full"
    assert state() == [("bj", 5, None, 5, None), ("sh", 3, None, 7, None)]  # one pass: counts unknown
    # A holder of sh's minimum goes, their number unknown: sh is recomputed, counts and all.
    assert round_(user("d", 1, ("sh", 3), None, 10)) == "incremental"
    assert state() == [("bj", 5, None, 5, None), ("sh", 3, 1, 7, 1)] and recomputed == [[("sh",)]]
    # Another 3 arrives, then one of the two goes: merged from the change.
    assert round_(user("c", 7, None, ("sh", 3), 11)) == "incremental"
    assert state() == [("bj", 5, None, 5, None), ("sh", 3, 2, 7, 1)]
    assert round_(user("d", 2, ("sh", 3), None, 12)) == "incremental"
    assert state() == [("bj", 5, None, 5, None), ("sh", 3, 1, 7, 1)] and len(recomputed) == 1
    # The last holder goes: recomputed.
    assert round_(user("u", 7, ("sh", 3), ("sh", 9), 13)) == "incremental"
    assert state() == [("bj", 5, None, 5, None), ("sh", 7, 1, 9, 1)] and len(recomputed) == 2
    # bj's only row moves (every old value retracted: the inserted one is all there is), sh gets
    # a second 9 and a new minimum: merged from the change.
    assert round_(user("u", 4, ("bj", 5), ("bj", 6), 14), user("c", 5, None, ("sh", 9), 15), user("c", 6, None, ("sh", 1), 16)) == "incremental"
    assert state() == [("bj", 6, 1, 6, 1), ("sh", 1, 1, 9, 2)] and len(recomputed) == 2
    # A table written without the counts (before they existed): they read as unknown.
    old = hudi.read(spark, path).drop("_lake_c0", "_lake_c1")
    old = old.select(*[c for c in old.columns if not c.startswith("_hoodie_")]).toPandas()
    _inst, meta = hudi.last_commit_metadata(spark, path)
    shutil.rmtree(path.local)
    opts = hudi.write_options(name="dws_score_range", key=["_lake_key"], ordering=None, partition=None)
    hudi.write(spark.createDataFrame(old).withColumn("_hoodie_is_deleted", F.lit(False)), path, opts, meta)
    assert round_(user("c", 8, None, ("bj", 2), 17)) == "incremental"  # a new minimum; the maximum not retracted
    assert state() == [("bj", 2, 1, 6, None), ("sh", 1, None, 9, None)] and len(recomputed) == 2


def test_selection_and_failed_model_skips_descendants(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    (tmp_path / "layers" / "dws" / "city_orders.sql").write_text("select city, count(*) as n from dwd.orders_enriched group by city")
    (tmp_path / "layers" / "dws" / "broken.sql").write_text("select id, no_such_column from ods.users")
    _seed(lp, spark)
    res = {r.model: r for r in build(spark, lp.project, ["+dws.city_orders", "dws.broken"], [], incremental=False)}
    assert set(res) == {"dwd.orders_enriched", "dws.city_orders", "dws.broken"}
    assert res["dws.broken"].mode == "failed" and "no_such_column" in res["dws.broken"].reason
    assert res["dws.city_orders"].mode == "full"
    (tmp_path / "layers" / "dwd" / "orders_enriched.sql").write_text("select o.id, o.amount, u.city, u.nope from ods.orders o join ods.users u on o.uid = u.id")
    res = {r.model: r for r in build(spark, lp.project, ["dwd.orders_enriched+"], [], incremental=True)}
    assert res["dwd.orders_enriched"].mode == "failed"
    assert res["dws.city_orders"].mode == "skipped" and "upstream dwd.orders_enriched failed" in res["dws.city_orders"].reason


def test_crash_before_model_commit_then_rerun(tmp_path_factory: Any, spark: Any) -> None:
    clean = _project(tmp_path_factory.mktemp("clean"))
    crashed = _project(tmp_path_factory.mktemp("crashed"))
    for lp in (clean, crashed):
        _seed(lp, spark)
        build(spark, lp.project, [], [], incremental=True)
        lp.write_cdc([envelope("u", "shop.users", {"id": 1, "city": "sh", "score": 5}, {"id": 1, "city": "gz", "score": 50}, pos=20)])
        lp.ingest(spark)
    build(spark, clean.project, [], [], incremental=True)
    for failpoint in ("before_model_commit:2", "after_model_commit:1"):
        proc = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(crashed.root), "build", "--incremental"],
                              env={**os.environ, "LAKE_FAILPOINT": failpoint}, capture_output=True, text=True, timeout=300)
        assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    res = build(spark, crashed.project, [], [], incremental=True)
    assert not [r for r in res if r.mode == "failed"]
    for model in ("dws.users_by_city", "dwd.orders_enriched", "dwd.vip"):
        assert _rows(spark, crashed, model) == _rows(spark, clean, model), model


def test_checkpoint_cleaned_past_rebuilds_and_no_row_builds_advance_it(tmp_path: Path, spark: Any) -> None:
    """The upstream's cleaner keeps 2 commits, archival 6-8: a checkpoint 4 commits behind is
    still on the timeline but its change read would hit cleaned files. The build rebuilds fully
    and says why instead of failing at every build. A model whose filter drops every changed
    row still moves its checkpoint (an empty commit), so it does not fall behind that far."""
    small = 'hudi: {hoodie.clean.commits.retained: "2", hoodie.keep.min.commits: "6", hoodie.keep.max.commits: "8"}\n'
    lp = LakeProject(tmp_path, ODS, lake_extra=small).add_models({
        "dwd/vip.sql": "select id, city from ods.users where score >= 10",
        "dwd/rich.sql": "select id, city from ods.users where score >= 1000",
    })
    users = lp.layout.table("ods.users")
    _seed(lp, spark)
    assert {r.model: r.mode for r in build(spark, lp.project, [], [], incremental=True)} == {"dwd.vip": "full", "dwd.rich": "full"}
    pos = 100

    def update(score: int) -> None:
        nonlocal pos
        pos += 1
        lp.write_cdc([envelope("u", "shop.users", {"id": 1, "city": "sh", "score": 5}, {"id": 1, "city": "sh", "score": score}, pos=pos)])
        lp.ingest(spark)

    # No row of dwd.rich changes, but its checkpoint moves to the upstream's latest commit.
    update(6)
    res = {r.model: r for r in build(spark, lp.project, ["dwd.rich"], [], incremental=True)}
    assert (res["dwd.rich"].mode, res["dwd.rich"].rows_written, res["dwd.rich"].rows_deleted) == ("incremental", 0, 0)
    latest = hudi.completed_instants(spark, users)[-1].completed
    assert json.loads(hudi.last_commit_metadata(spark, lp.layout.table("dwd.rich"))[1]["ckpt"]) == {"ods.users": latest}
    assert [r.mode for r in build(spark, lp.project, ["dwd.rich"], [], incremental=True)] == ["noop"]
    # Four upstream commits without a build: the cleaner (2 commits) passes both checkpoints,
    # archival (6-8) does not: they are still on the timeline.
    for score in (7, 8, 30, 9):
        update(score)
    vip_ckpt = json.loads(hudi.last_commit_metadata(spark, lp.layout.table("dwd.vip"))[1]["ckpt"])["ods.users"]
    assert vip_ckpt in {i.completed for i in hudi.completed_instants(spark, users)}
    planned = {p.model.name: p for p, _ in plan(spark, lp.project, [], [], incremental=True)}
    for name in ("dwd.vip", "dwd.rich"):
        assert planned[name].mode == "full", planned[name].reason
        assert "is older than what the cleaner kept (earliest retained commit" in planned[name].reason, planned[name].reason
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert {m: r.mode for m, r in res.items()} == {"dwd.vip": "full", "dwd.rich": "full"}, {m: r.reason for m, r in res.items()}
    assert _rows(spark, lp, "dwd.vip") == [(2, "bj")]  # user 1 scores 9 now; user 2 scores 12
    assert _rows(spark, lp, "dwd.rich") == []
    # What the empty commit costs (a commit of no rows with the checkpoint in its metadata).
    rich = lp.layout.table("dwd.rich")
    _inst, meta = hudi.last_commit_metadata(spark, rich)
    empty = hudi.read(spark, rich).limit(0).drop(*hudi.HOODIE_META_COLUMNS)
    opts = hudi.write_options(name="dwd_rich", key=["_lake_key"], ordering=None, partition=None, extra=lp.project.config.hudi)
    for _ in range(3):
        t0 = time.time()
        hudi.write(empty, rich, opts, meta)
        print(f"empty model commit: {time.time() - t0:.2f} s")


def test_duplicate_keys_fail_the_model(tmp_path: Path, spark: Any) -> None:
    """A declared `key:` the query does not make unique: Hudi's insert (first write) would store
    both rows, later upserts keep one. Every write (first, incremental, full) refuses with the
    key, the counts, sample keys and the fix; the table is left as it was. A model without a key
    keeps one row per distinct row (set semantics) from its first write on."""
    lp = _project(tmp_path).add_models({
        "dwd/user_orders.sql": "select u.id, u.city, o.amount from ods.users u join ods.orders o on o.uid = u.id",
        "dwd/user_orders.yaml": "key: [id]\n",
        "dws/cities.sql": "select city from ods.users",
    })
    path = lp.layout.table("dwd.user_orders")
    lp.write_cdc([envelope("c", "shop.orders", None, {"id": 12, "uid": 1, "amount": 3}, pos=6)])
    _seed(lp, spark)  # user 1 has orders 10 and 12

    def fails() -> str:
        res = {r.model: r for r in build(spark, lp.project, ["dwd.user_orders"], [], incremental=True)}
        r = res["dwd.user_orders"]
        assert r.mode == "failed", (r.mode, r.reason)
        return r.error or ""

    err = fails()
    assert "dwd.user_orders: 1 value(s) of its key (id) occur in more than one row (2 rows)" in err, err
    assert "e.g. id=1;" in err and "key:` in layers/dwd/user_orders.yaml" in err, err
    assert not hudi.table_exists(path)
    # Unique again: the first build commits; then a second order of user 2 arrives (incremental).
    lp.write_cdc([envelope("d", "shop.orders", {"id": 12, "uid": 1, "amount": 3}, None, pos=20)])
    lp.ingest(spark)
    assert [r.mode for r in build(spark, lp.project, ["dwd.user_orders"], [], incremental=True)] == ["full"]
    before = hudi.completed_instants(spark, path)
    lp.write_cdc([envelope("c", "shop.orders", None, {"id": 13, "uid": 2, "amount": 4}, pos=21),
                  envelope("c", "shop.orders", None, {"id": 14, "uid": 1, "amount": 5}, pos=22)])
    lp.ingest(spark)
    err = fails()
    assert "2 value(s) of its key (id) occur in more than one row (4 rows)" in err and "e.g. id=1; id=2;" in err, err
    res = {r.model: r for r in build(spark, lp.project, ["dwd.user_orders"], [], incremental=False)}
    assert res["dwd.user_orders"].mode == "failed" and "2 value(s) of its key" in (res["dwd.user_orders"].error or "")
    assert hudi.completed_instants(spark, path) == before
    assert _rows(spark, lp, "dwd.user_orders") == [(1, "sh", 7), (2, "bj", 9)]
    # No key: one row per distinct row, first write included (users 1 and 3 are both in sh).
    assert [r.mode for r in build(spark, lp.project, ["dws.cities"], [], incremental=True)] == ["full"]
    assert _rows(spark, lp, "dws.cities") == [("bj",), ("sh",)]
    assert hudi.read(spark, lp.layout.table("dws.cities")).count() == 2
