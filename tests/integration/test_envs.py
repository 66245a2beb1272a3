"""Environments end to end through the CLI: build changed models into `--env dev` while
production stays untouched, production's later commits invisible to the environment (pinned),
`lake diff` against an oracle, `lake env promote` rebuilds production, `lake env drop` removes
only the environment. The oracle is the models' SQL evaluated in Python on the source rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.table import hudi
from framework.transform.reader import TableReader
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

pytestmark = pytest.mark.spark

ODS = "tables:\n  - {source: shop.users, key: [id]}\n"
BY_CITY = "select city, count(*) as n, sum(score) as total from ods.users group by city"
BY_CITY_NEW = "select city, count(*) as n, sum(score) as total, max(score) as best from ods.users group by city"
VIP = "select id, city, score from ods.users where score >= {t}"
MODELS = {"dws/by_city.sql": BY_CITY, "dwd/vip.sql": VIP.format(t=10),
          "dws/vip_by_city.sql": "select city, count(*) as vips from dwd.vip group by city"}
MODEL_NAMES = ("dws.by_city", "dwd.vip", "dws.vip_by_city")


def _cli(lp: LakeProject, *args: str) -> Any:
    out = CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out


def _oracle(users: dict[int, tuple[str, int]], vip_at: int, best: bool) -> dict[str, set[tuple[Any, ...]]]:
    """The three models' SQL, evaluated in Python on the source rows."""
    cities = sorted({c for c, _ in users.values()})
    by_city = {(c, sum(1 for x, _ in users.values() if x == c), sum(s for x, s in users.values() if x == c),
                *((max(s for x, s in users.values() if x == c),) if best else ())) for c in cities}
    vip = {(i, c, s) for i, (c, s) in users.items() if s >= vip_at}
    vips = {(c, sum(1 for _, x, _ in vip if x == c)) for c in {x for _, x, _ in vip}}
    return {"dws.by_city": by_city, "dwd.vip": vip, "dws.vip_by_city": vips}


def _rows(spark: Any, lp: LakeProject, path: Any) -> set[tuple[Any, ...]]:
    df = spark.read.format("hudi").load(str(path))
    cols = [c for c in df.columns if not c.startswith(("_hoodie_", "_lake_")) and c != "_deleted"]
    return {tuple(r) for r in df.where("NOT _deleted").select(*cols).collect()}


def _prod(spark: Any, lp: LakeProject) -> dict[str, tuple[Any, ...]]:
    """Every production model table: its commits and rows."""
    return {m: (tuple(hudi.completed_instants(spark, lp.layout.table(m))), _rows(spark, lp, lp.layout.table(m))) for m in MODEL_NAMES}


def _events(users: dict[int, tuple[str, int]], changes: dict[int, tuple[str, int]], pos: int) -> list[dict[str, Any]]:
    out = []
    for uid, (city, score) in changes.items():
        before = {"id": uid, "city": users[uid][0], "score": users[uid][1]} if uid in users else None
        out.append(envelope("u" if before else "c", "shop.users", before, {"id": uid, "city": city, "score": score}, pos=pos))
        pos += 1
        users[uid] = (city, score)
    return out


def test_build_in_an_environment_diff_promote_drop(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS).add_models(MODELS)
    users: dict[int, tuple[str, int]] = {}
    lp.write_cdc(_events(users, {1: ("sh", 5), 2: ("bj", 12), 3: ("sh", 8), 4: ("gz", 9)}, 1))
    _cli(lp, "ingest")
    _cli(lp, "build")
    pinned_users = dict(users)
    before = _prod(spark, lp)
    assert {m: rows for m, (_, rows) in before.items()} == _oracle(users, 10, best=False)

    # Change two models; build them (and the descendant) into `dev`.
    (lp.root / "layers" / "dws" / "by_city.sql").write_text(BY_CITY_NEW)
    (lp.root / "layers" / "dwd" / "vip.sql").write_text(VIP.format(t=8))
    _cli(lp, "build", "--env", "dev", "dwd.vip+", "dws.by_city")
    env = lp.root / "warehouse" / "_env" / "dev"
    expected = _oracle(pinned_users, 8, best=True)
    for m in MODEL_NAMES:
        layer, name = m.split(".")
        assert _rows(spark, lp, env / layer / name) == expected[m], m
    assert _prod(spark, lp) == before  # production not written

    # Production's ODS moves on; the environment still reads it as of the pin.
    lp.write_cdc(_events(users, {1: ("sh", 30), 5: ("bj", 11)}, 10))
    _cli(lp, "ingest")
    out = json.loads(_cli(lp, "build", "--env", "dev", "dwd.vip+", "dws.by_city", "--incremental", "--json").stdout)
    assert {r["model"]: r["mode"] for r in out} == dict.fromkeys(MODEL_NAMES, "noop")
    for m in MODEL_NAMES:
        layer, name = m.split(".")
        assert _rows(spark, lp, env / layer / name) == expected[m], m
    assert _prod(spark, lp) == before

    d = json.loads(_cli(lp, "diff", "dwd.vip", "--env", "dev", "--json").stdout)
    prod_vip, env_vip = before["dwd.vip"][1], expected["dwd.vip"]
    assert (d["added"], d["removed"], d["changed"], d["unchanged"]) == (len(env_vip - prod_vip), len(prod_vip - env_vip), 0, len(env_vip & prod_vip))
    assert {(r["id"], r["city"], r["score"]) for r in d["samples"]["added"]} == env_vip - prod_vip
    assert any("ods.users" in n and "after the environment's pin" in n for n in d["notes"])
    d = json.loads(_cli(lp, "diff", "dws.by_city", "--env", "dev", "--json").stdout)
    assert d["columns"] == [{"name": "best", "production": None, "environment": "bigint"}]
    assert (d["added"], d["removed"], d["changed"]) == (0, 0, 0)  # same keys, shared columns equal
    text = _cli(lp, "diff", "dwd.vip", "--env", "dev").stdout
    assert "added 2, removed 0, changed 0" in text.replace("\n", " ")
    assert "dev: models dwd.vip, dws.by_city, dws.vip_by_city" in _cli(lp, "env", "list").stdout

    # Promote: production rebuilds the changed models (and the descendant) on its current data.
    _cli(lp, "env", "promote", "dev")
    now = _oracle(users, 8, best=True)
    for m in MODEL_NAMES:
        assert _rows(spark, lp, lp.layout.table(m)) == now[m], m
    promoted = _prod(spark, lp)
    _cli(lp, "env", "drop", "dev")
    assert all(p.relative_to(env).parts[:2] == ("_lake", "locks") for p in env.rglob("*") if p.is_file())
    assert not (env / "_lake" / "env.json").exists() and _prod(spark, lp) == promoted  # only its empty lock files stay
    assert TableReader(spark, lp.layout).latest("dws.by_city") is not None


def test_a_pin_production_cleaned_is_moved_to_its_latest_commit_and_said(tmp_path: Path, spark: Any) -> None:
    """With `hoodie.clean.commits.retained: 1`, two production commits take the cleaner past the
    environment's pin, which can then no longer be read. A build of a changed model there moves
    the pin to production's latest commit, says so, and builds from there; a read racing the
    cleaner fails its model with a reason, and a diff of a model that has no table there is an
    error: each says what to do."""
    from framework.envs import layout as envs

    lp = LakeProject(tmp_path, ODS, lake_extra='hudi: {hoodie.clean.commits.retained: "1"}\n').add_models({"dwd/vip.sql": VIP.format(t=10)})
    users: dict[int, tuple[str, int]] = {}
    lp.write_cdc(_events(users, {1: ("sh", 5), 2: ("bj", 12)}, 1))
    lp.ingest(spark)
    _cli(lp, "build", "--env", "dev", "dwd.vip")
    pin = envs.load_state(lp.project.warehouse, "dev").pins["ods.users"]  # type: ignore[union-attr]
    for i in range(2):
        lp.write_cdc(_events(users, {1: ("sh", 20 + i), 3: ("gz", 30 + i)}, 10 + 2 * i))
        lp.ingest(spark)
    users_path = lp.layout.table("ods.users")
    kept, latest = hudi.earliest_retained(spark, users_path), hudi.completed_instants(spark, users_path)[-1].completed
    assert kept is not None and pin < kept  # production's cleaner has passed the pin
    # A build planned on the pin just before the cleaner passed it (the race the check cannot close):
    # the model fails with a reason that says what happened and to run it again.
    racing = envs.EnvLayout(lp.project.warehouse, envs.load_state(lp.project.warehouse, "dev"), {"dwd.vip"})  # type: ignore[arg-type]
    [failed] = build(spark, lp.project, ["dwd.vip"], [], False, layout=racing)
    assert failed.mode == "failed" and "cleaner removed the files of the instant this build reads" in failed.reason, failed

    (lp.root / "layers" / "dwd" / "vip.sql").write_text(VIP.format(t=8))  # a change to try in the environment
    out = " ".join(_cli(lp, "build", "--env", "dev", "dwd.vip", "--incremental").output.split())  # unwrapped
    assert f"production's ods.users was cleaned past the environment's pin {pin}" in out, out
    assert f"re-pinned to its latest commit {latest}" in out, out
    assert envs.load_state(lp.project.warehouse, "dev").pins == {"ods.users": latest}  # type: ignore[union-attr]
    assert _rows(spark, lp, lp.root / "warehouse" / "_env" / "dev" / "dwd" / "vip") == _oracle(users, 8, best=False)["dwd.vip"]

    # A change whose build in the environment fails leaves no table there: diff says so.
    lp.add_models({"dwd/other.sql": "select id, city from ods.users"})
    _cli(lp, "build", "dwd.other")
    (lp.root / "layers" / "dwd" / "other.sql").write_text("select id, no_such_column from ods.users")
    broken = CliRunner().invoke(main, ["--project", str(lp.root), "build", "--env", "dev", "dwd.other"])
    assert broken.exit_code == 1, broken.output
    d = CliRunner().invoke(main, ["--project", str(lp.root), "diff", "dwd.other", "--env", "dev"])
    assert d.exit_code == 1 and "dwd.other has no table in environment dev yet" in d.output and "Internal error" not in d.output, d.output
