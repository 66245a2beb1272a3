"""Quality gates on real builds and ingests: each severity on a DWS model and an ODS table, a
blocked commit leaves data and checkpoint untouched and the next run after the fix succeeds,
quarantine contents, descendants skipped while siblings build, `lake check`, `lake report`."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.quality import store
from framework.quality.ods_gate import BatchBlocked
from framework.table import hudi
from framework.table.catalog import register_ods
from framework.transform.loader import load_models
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

ODS = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id]}
"""
MODELS = {
    "dws/users_by_city.sql": "select city, count(*) as n, sum(score) as score from ods.users group by city",
    "dws/city_rank.sql": "select city, n from dws.users_by_city where n > 1",
    "dwd/vip.sql": "select id, city from ods.users where score >= 10",
}
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _project(root: Path, ods: str = ODS) -> LakeProject:
    return LakeProject(root, ods).add_models(MODELS)


def _user(op: str, uid: int, city: str | None, score: int, pos: int, before: dict[str, Any] | None = None) -> dict[str, Any]:
    return envelope(op, "shop.users", before, {"id": uid, "city": city, "score": score}, pos=pos)


def _checks(lp: LakeProject, model_yaml: str) -> None:
    (lp.root / "layers" / "dws" / "users_by_city.yaml").write_text(model_yaml)


def _rows(spark: Any, lp: LakeProject, model: str) -> list[tuple[Any, ...]]:
    from framework.transform.reader import TableReader

    return sorted(tuple(r) for r in TableReader(spark, lp.layout).snapshot(model).collect())


def _state(spark: Any, lp: LakeProject, model: str) -> tuple[Any, ...]:
    path = lp.layout.table(model)
    return (hudi.completed_instants(spark, path), hudi.last_commit_metadata(spark, path)[1], _rows(spark, lp, model))


def test_editing_checks_keeps_the_model_fingerprint(tmp_path: Path) -> None:
    lp = _project(tmp_path)
    before = load_models(lp.project)["dws.users_by_city"].fingerprint
    _checks(lp, "checks:\n  - not_null: [city]\n")
    assert load_models(lp.project)["dws.users_by_city"].fingerprint == before
    _checks(lp, "checks:\n  - not_null: [city]\nkey: [city]\n")
    assert load_models(lp.project)["dws.users_by_city"].fingerprint != before  # the rest still counts


def test_model_error_blocks_commit_skips_descendants_builds_siblings_then_fix_succeeds(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 12, 2), _user("c", 3, "sh", 3, 3)])
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=True)
    _checks(lp, "checks:\n  - not_null: [city]\n  - unique: [city]\n")
    lp.write_cdc([_user("c", 4, None, 11, 4)])
    lp.ingest(spark)
    before = _state(spark, lp, "dws.users_by_city")
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True, run_id="run-a1")}
    failed = res["dws.users_by_city"]
    assert failed.mode == "failed"
    assert "not_null(city)" in failed.reason and "1 of 1 rows fail" in failed.reason
    assert "NULL" in failed.reason  # a sample row
    assert str(lp.root / "out" / "report" / "runs" / "run-a1.html") in failed.reason
    assert [(c.name, c.success, c.failing) for c in failed.checks] == [("not_null(city)", False, 1), ("unique(city)", True, 0)]
    assert res["dws.city_rank"].mode == "skipped" and "upstream dws.users_by_city failed" in res["dws.city_rank"].reason
    assert res["dwd.vip"].mode == "incremental" and res["dwd.vip"].rows_written == 1  # a sibling branch goes on
    assert _state(spark, lp, "dws.users_by_city") == before  # no commit, same rows, same checkpoint
    (stored,) = store.load_run(lp.layout, "run-a1")
    assert stored.model == "dws.users_by_city" and stored.blocked
    # Fixed upstream: the same pending commits plus the fix are consumed incrementally.
    lp.write_cdc([_user("u", 4, "gz", 11, 5, before={"id": 4, "city": None, "score": 11})])
    lp.ingest(spark)
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert res["dws.users_by_city"].mode == "incremental" and all(c.success for c in res["dws.users_by_city"].checks)
    assert res["dws.city_rank"].mode in ("full", "incremental")
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12), ("gz", 1, 11), ("sh", 2, 8)]


def test_model_drop_quarantines_warn_commits_and_table_checks_see_the_resulting_table(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    _checks(lp, "checks:\n  - between: {column: score, min_value: 0}\n    severity: drop\n"
                "  - row_count: {max_value: 2}\n    severity: warn\n")
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 12, 2), _user("c", 3, "gz", -4, 3)])
    lp.ingest(spark)
    res = {r.model: r for r in build(spark, lp.project, ["dws.users_by_city"], [], incremental=True, run_id="run-b1")}
    r = res["dws.users_by_city"]
    assert (r.mode, r.rows_quarantined) == ("full", 1)
    assert [(c.name, c.severity, c.success, c.failing) for c in r.checks] == [("between(score)", "drop", False, 1), ("row_count", "warn", True, None)]
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12), ("sh", 1, 5)]
    register_ods(spark, lp.layout)
    q = spark.sql("select city, n, score, _lake_failed_checks, _lake_run_id, _lake_model from _quarantine.dws_users_by_city").collect()
    assert [tuple(x) for x in q] == [("gz", 1, -4, ["between(score)"], "run-b1", "dws.users_by_city")]
    # An incremental batch of one new group: the table-level check judges the 3 rows that result.
    lp.write_cdc([_user("c", 5, "hz", 1, 4)])
    lp.ingest(spark)
    r = build(spark, lp.project, ["dws.users_by_city"], [], incremental=True, run_id="run-b2")[0]
    assert r.mode == "incremental" and r.rows_quarantined == 0
    (count,) = [c for c in store.load_run(lp.layout, "run-b2")[0].results if c.name == "row_count"]
    assert (count.success, count.observed) == (False, 3)  # warned, and committed:
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12), ("hz", 1, 1), ("sh", 1, 5)]
    # The quarantined group kept its aggregate state (hidden): fixing the row brings it back right.
    lp.write_cdc([_user("u", 3, "gz", 10, 5, before={"id": 3, "city": "gz", "score": -4}), _user("c", 6, "gz", 2, 6)])
    lp.ingest(spark)
    r = build(spark, lp.project, ["dws.users_by_city"], [], incremental=True)[0]
    assert r.mode == "incremental" and r.rows_quarantined == 0
    assert _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12), ("gz", 2, 12), ("hz", 1, 1), ("sh", 1, 5)]
    full = build(spark, lp.project, ["dws.users_by_city"], [], incremental=False)[0]
    assert full.mode == "full" and _rows(spark, lp, "dws.users_by_city") == [("bj", 1, 12), ("gz", 2, 12), ("hz", 1, 1), ("sh", 1, 5)]


ODS_CHECKED = """
tables:
  - source: shop.users
    key: [id]
    checks:
      - not_null: [city]
        severity: {severity}
      - between: {{column: score, min_value: 0}}
        severity: drop
  - {{source: shop.orders, key: [id]}}
"""


def test_ods_error_blocks_one_table_others_commit_and_the_batch_is_replayed(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path, ODS_CHECKED.format(severity="error"))
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, None, 7, 2), "{oops",
                  envelope("c", "shop.orders", None, {"id": 10, "uid": 1}, pos=3)])
    with pytest.raises(BatchBlocked) as info:
        lp.ingest(spark, run_id="run-c1")
    err = info.value
    assert "ods.users" in err.message and "not_null(city)" in err.message and "1 of 2 rows fail" in err.message
    assert "retried by the next run" in err.message and err.summary is not None
    (batch,) = err.summary.batches
    assert batch.tables["users"].status == "blocked" and batch.tables["orders"].status == "ok"
    assert not hudi.table_exists(lp.layout.table("ods.users"))  # nothing of the blocked table
    assert lp.rows(spark, "orders", ["id"]) == [{"id": 10}]
    orders_commits = hudi.completed_instants(spark, lp.layout.table("ods.orders"))
    assert len(lp.dead_letters(spark)) == 1
    # Still blocked on a plain rerun: the same events come back (they were not lost).
    with pytest.raises(BatchBlocked):
        lp.ingest(spark)
    # Relax the check: the replayed batch commits users; orders and the dead letter skip the replay.
    (lp.root / "layers" / "ods" / "tables.yaml").write_text(ODS_CHECKED.format(severity="warn"))
    s = lp.ingest(spark, run_id="run-c3")
    users = s.batches[0].tables["users"]
    assert users.status == "ok" and [(c.name, c.success) for c in users.checks] == [("not_null(city)", False), ("between(score)", True)]
    assert s.batches[0].tables["orders"].status == "already_committed"
    assert lp.rows(spark, "users", ["id", "city"]) == [{"id": 1, "city": "sh"}, {"id": 2, "city": None}]
    assert hudi.completed_instants(spark, lp.layout.table("ods.orders")) == orders_commits
    assert len(lp.dead_letters(spark)) == 1


def test_ods_drop_quarantines_events_and_keeps_the_keys_previous_state(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path, ODS_CHECKED.format(severity="warn"))
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 7, 2)])
    lp.ingest(spark)
    lp.write_cdc([_user("u", 1, "sh", -1, 3, before={"id": 1, "city": "sh", "score": 5}), _user("c", 3, "gz", -9, 4), _user("c", 4, "hz", 1, 5)])
    s = lp.ingest(spark, run_id="run-d1")
    users = s.totals()["users"]
    assert (users.status, users.quarantined, users.upserts) == ("ok", 2, 1)
    assert lp.rows(spark, "users", ["id", "score"]) == [{"id": 1, "score": 5}, {"id": 2, "score": 7}, {"id": 4, "score": 1}]
    register_ods(spark, lp.layout)
    q = spark.sql("select id, score, _op, _source, _lake_failed_checks, _lake_run_id from _quarantine.ods_users order by id").collect()
    assert [(x.id, x.score, x._op, x._lake_failed_checks, x._lake_run_id) for x in q] == [
        (1, -1, "u", ["between(score)"], "run-d1"), (3, -9, "c", ["between(score)"], "run-d1")]
    assert all(x._source.startswith("cdc/") for x in q)  # where the event came from


def _cli(lp: LakeProject, *args: str) -> Any:
    return CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False)


def test_lake_check_and_report_html_json_and_in_chromium(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 12, 2)])
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=True)
    _checks(lp, "checks:\n  - row_count: {min_value: 1}\n")
    assert _cli(lp, "check", "dws.users_by_city").exit_code == 0
    _checks(lp, "checks:\n  - accepted_values: {column: city, values: [sh]}\n    name: only_shanghai\n")
    out = _cli(lp, "check", "dws.users_by_city", "--format", "json")
    assert out.exit_code == 1, out.output
    checked = json.loads(out.stdout)
    (res,) = checked["results"]
    assert (res["model"], res["results"][0]["name"], res["results"][0]["failing"], res["results"][0]["total"]) == ("dws.users_by_city", "only_shanghai", 1, 2)
    run_id = checked["run_id"]
    page = Path(_cli(lp, "report", "--open", "--run", run_id).stdout.strip())
    assert page == lp.root / "out" / "report" / "runs" / f"{run_id}.html"
    text = page.read_text()
    assert "only_shanghai" in text and "FAIL (blocks)" in text and "1 of 2 rows fail" in text and "check" in text
    assert (lp.root / "out" / "report" / "gx" / "index.html").exists()
    report = json.loads(_cli(lp, "report", "--format", "json").stdout)
    by_id = {r["run_id"]: r for r in report}
    assert by_id[run_id]["run"]["command"] == "check" and by_id[run_id]["run"]["status"] == "failed"
    assert by_id[run_id]["quality"][0]["results"][0]["success"] is False
    _render_in_chromium(page, "only_shanghai")


def _render_in_chromium(page: Path, check: str) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (make install installs Debian's chromium package when run as root)")
    ARTIFACTS.mkdir(exist_ok=True)
    base = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=" + str(page.parent / ".chromium")]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
    assert check in dom and 'class="fail"' in dom and "FAIL (blocks)" in dom
    subprocess.run([*base, f"--screenshot={ARTIFACTS / 'report.png'}", "--window-size=1280,900", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert (ARTIFACTS / "report.png").stat().st_size > 0


# Row values that run code if a page puts them into its HTML raw: each marks the page if it runs.
SCRIPT = "<script>document.title='pwned';document.documentElement.setAttribute('data-pwned','script')</script>"
IMG = "<img src=x onerror=\"document.title='pwned';document.documentElement.setAttribute('data-pwned','img')\">"


def test_report_pages_show_markup_in_row_values_as_text_in_chromium(tmp_path: Path, spark: Any) -> None:
    lp = _project(tmp_path)
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, SCRIPT, 12, 2), _user("c", 3, IMG, 3, 3)])
    lp.ingest(spark)
    _checks(lp, "checks:\n  - accepted_values: {column: city, values: [sh]}\n    name: only_shanghai\n    severity: warn\n")
    (res,) = build(spark, lp.project, ["dws.users_by_city"], [], incremental=False)
    assert res.mode == "full" and [(c.name, c.failing) for c in res.checks] == [("only_shanghai", 2)]
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(lp.root), "report", "--open"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    run_page = Path(r.stdout.strip())
    (ge_page,) = (lp.root / "out" / "report" / "gx" / "validations").rglob("*.html")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("needs chromium (make install installs Debian's chromium package when run as root)")
    for page in (ge_page, run_page):
        dom = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                              "--user-data-dir=" + str(tmp_path / ".chromium"), "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        assert "only_shanghai" in dom or "city" in dom, dom[:2000]  # the page rendered
        assert "data-pwned=" not in dom and "<title>pwned</title>" not in dom, f"{page.name}: injected markup ran"
        for value in (SCRIPT, IMG):  # shown as text: the DOM serialises it with < and > escaped
            assert value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom, f"{page.name}: {value} not shown"


def test_a_retyped_model_blocked_by_its_gate_keeps_its_table(tmp_path: Path, spark: Any) -> None:
    """Issue 27 item 3: a column DATE → TIMESTAMP makes the table be written anew; an `error` check
    that fails must leave the production table, its rows and its checkpoint as they were (the
    table was deleted before the gate ran). Then `lake plan` of the built project, no JVM."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    lp.add_models({"dwd/m.sql": "select id, cast('2024-01-01' as date) as d, score from ods.users", "dwd/m.yaml": "key: [id]\n"})
    lp.write_cdc([_user("c", 1, "sh", 5, 1), _user("c", 2, "bj", 12, 2)])
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=True)
    before = _state(spark, lp, "dwd.m")
    assert before[2] == [(1, datetime.date(2024, 1, 1), 5), (2, datetime.date(2024, 1, 1), 12)]
    lp.add_models({"dwd/m.sql": "select id, cast('2024-01-01' as timestamp) as d, score from ods.users",
                   "dwd/m.yaml": "key: [id]\nchecks:\n  - between: {column: score, min_value: 100}\n    severity: error\n"})
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "build", "--incremental"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "quality gate failed for dwd.m" in r.stdout + r.stderr, r.stdout + r.stderr
    assert hudi.table_exists(lp.layout.table("dwd.m"))
    assert _state(spark, lp, "dwd.m") == before  # the same commits, checkpoint and rows
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "JAVA_HOME": str(tmp_path / "no-java")}
    r = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "plan", "--incremental", "--json"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    (planned,) = json.loads(r.stdout)
    assert (planned["model"], planned["mode"]) == ("dwd.m", "full") and "model changed" in planned["reason"]
