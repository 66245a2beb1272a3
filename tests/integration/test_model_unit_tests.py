"""`lake test` and the unit tests `lake build` runs first, through the CLI: passing tests (YAML,
inline CSV, CSV files), a failing one with its diff table, an incremental test that catches a
model whose incremental build is wrong, the build gate, --skip-tests and tests not rerun while unchanged, and a fresh process that
passes with no warehouse at all. One Spark session and one project serve the `lake test` tests.

The oracle is the expected rows written by hand in each test's YAML (worked out from the given
rows, not from lake)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from tests.helpers import LakeProject, envelope

ODS = "tables:\n  - {source: shop.user, key: [id], columns: {score: 'decimal(10,2)'}}\n"

USER_AGG_SQL = "select device_model, count(*) as num, sum(score) as total, min(id) as first_id from ods.user group by device_model"
USER_AGG_TESTS = """
tests:
  - name: counts
    given:
      - input: ods.user
        rows:
          - {id: 1, device_model: a, score: 1.5}
          - {id: 2, device_model: a}
          - {id: 3, device_model: b, score: 2}
    expect:
      rows:
        - {device_model: a, num: 2, total: 1.5}
        - {device_model: b, num: 1, total: 2}
  - name: counts_csv
    given:
      - input: ods.user
        format: csv
        rows: |
          id,device_model,score
          1,a,1.5
          2,a,
          3,b,2
    expect:
      format: csv
      rows: |
        device_model,num,total
        a,2,1.50
        b,1,2
  - name: from_files
    given:
      - {input: ods.user, file: fixtures/users.csv}
    expect: {file: fixtures/user_agg.csv}
  - name: moves
    given:
      - input: ods.user
        rows:
          - {id: 1, device_model: a, score: 1.5}
          - {id: 2, device_model: a, score: 1}
          - {id: 3, device_model: b, score: 2}
    changes:
      - {op: update, input: ods.user, row: {id: 1, device_model: b}}   # a's MIN(id) holder leaves a
      - {op: delete, input: ods.user, row: {id: 3}}
      - {op: insert, input: ods.user, row: {id: 4, device_model: c, score: 7}}
      - {op: update, input: ods.user, row: {id: 2, score: 4}}
    expect:
      rows:
        - {device_model: a, num: 1, total: 4, first_id: 2}
        - {device_model: b, num: 1, total: 1.5, first_id: 1}
        - {device_model: c, num: 1, total: 7, first_id: 4}
"""
BIG = {
    "dwd/big.sql": "select id, device_model, score from ods.user where score >= 2",
    "dwd/big.yaml": """
        tests:
          - name: wrong
            given:
              - input: ods.user
                rows:
                  - {id: 1, device_model: a, score: 1}
                  - {id: 2, device_model: b, score: 2}
                  - {id: 3, device_model: c, score: 5}
                  - {id: 5, device_model: e, score: 3}
            expect:
              rows:
                - {id: 2, device_model: b, score: 2}
                - {id: 3, device_model: x, score: 5}
                - {id: 4, device_model: d, score: 9}
        """,
    "dws/big_count.sql": "select device_model, count(*) as n from dwd.big group by device_model",
    "dws/big_count.yaml": """
        tests:
          - name: counted
            given: [{input: dwd.big, rows: [{id: 1, device_model: a}, {id: 2, device_model: a}]}]
            expect: {rows: [{device_model: a, n: 2}]}
        """,
}
# A Python model whose rows depend on rows a change does not touch (every row carries the number
# of users): lake's rescan recomputes only the keys the changed rows reach, so its incremental
# build leaves the other rows stale. Only an incremental test can catch that.
RANKED = {
    "dwd/ranked.py": """
        from pyspark.sql import Window
        from pyspark.sql import functions as F


        def model(ctx):
            users = ctx.read("ods.user")
            return users.select("id", "device_model", F.count(F.lit(1)).over(Window.partitionBy()).alias("users"))
        """,
    "dwd/ranked.yaml": """
        key: [id]
        depends_on: [ods.user]
        tests:
          - name: users_counted
            given: [{input: ods.user, rows: [{id: 1, device_model: a}, {id: 2, device_model: b}]}]
            changes: [{op: insert, input: ods.user, row: {id: 3, device_model: c}}]
            expect: {rows: [{id: 1, users: 3}, {id: 2, users: 3}, {id: 3, users: 3}]}
        """,
}


def _project(root: Path, models: dict[str, str]) -> LakeProject:
    lp = LakeProject(root, ODS)
    lp.add_models({rel: textwrap.dedent(text).lstrip("\n") for rel, text in models.items()})
    return lp


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> LakeProject:
    lp = _project(tmp_path_factory.mktemp("unit-tests"), {"dws/user_agg.sql": USER_AGG_SQL, "dws/user_agg.yaml": USER_AGG_TESTS, **BIG, **RANKED})
    fixtures = lp.root / "layers" / "dws" / "fixtures"
    fixtures.mkdir()
    (fixtures / "users.csv").write_text("id,device_model,score\n1,a,1.25\n2,b,\n3,b,0.75\n")
    (fixtures / "user_agg.csv").write_text("device_model,num,total,first_id\na,1,1.25,1\nb,2,0.75,2\n")
    return lp


def lake(lp: LakeProject, *args: str) -> Any:
    return CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False, env={"COLUMNS": "100"})


def test_passing_tests_from_yaml_csv_and_files_and_an_incremental_one(proj: LakeProject, spark: Any) -> None:
    out = lake(proj, "test", "dws.user_agg", "--json")
    assert out.exit_code == 0, out.output
    results = json.loads(out.stdout)
    assert [(r["test"], r["status"], r["incremental"]) for r in results] == [
        ("counts", "pass", False), ("counts_csv", "pass", False), ("from_files", "pass", False), ("moves", "pass", True)]
    moves = results[3]
    # Both checks ran: the model over the final rows, and lake's aggregate strategy over the events.
    assert moves["mode"] == "aggregate" and moves["full"]["matches"] and moves["changes"]["matches"]
    assert moves["full"]["columns"] == ["device_model", "num", "total", "first_id"]
    assert not (proj.root / "warehouse").exists()  # nothing read from or written to the warehouse


def test_a_failing_test_prints_its_rows_marked_and_exits_1(proj: LakeProject, spark: Any) -> None:
    out = lake(proj, "test", "dwd.big", "dws.big_count")
    assert out.exit_code == 1, out.output
    text = out.output
    assert "FAIL dwd.big: wrong  (layers/dwd/big.yaml:2)" in text and "PASS dws.big_count: counted" in text
    assert "full rebuild: 1 missing row, 1 extra row, 1 changed row (order ignored)" in text
    table = [line for line in text.splitlines() if line.startswith(("┃", "│"))]
    assert table == [
        "┃            ┃ id ┃ device_model ┃ score ┃",
        "│            │ 2  │ b            │ 2.00  │",
        "│ ~ expected │ 3  │ x            │ 5.00  │",
        "│ ~ actual   │ 3  │ c            │ 5.00  │",
        "│ - missing  │ 4  │ d            │ 9.00  │",
        "│ + extra    │ 5  │ e            │ 3.00  │",
    ]
    assert "unit tests: 1 passed, 1 failed" in text


def test_an_incremental_test_catches_a_model_whose_incremental_build_is_wrong(proj: LakeProject, spark: Any) -> None:
    out = lake(proj, "test", "dwd.ranked", "--json")
    assert out.exit_code == 1, out.output
    (r,) = json.loads(out.stdout)
    assert r["status"] == "fail" and r["mode"] == "rescan"
    assert r["message"].startswith("full rebuild matches, incremental differs")
    assert r["full"]["matches"] and not r["changes"]["matches"]
    # The rows the change did not reach kept the old count.
    assert [(line["mark"], line["values"]) for line in r["changes"]["lines"]] == [
        ("expected", ["1", "3"]), ("actual", ["1", "2"]), ("expected", ["2", "3"]), ("actual", ["2", "2"]), ("ok", ["3", "3"])]


def test_build_runs_the_unit_tests_first_and_skip_tests_opts_out(tmp_path: Path, spark: Any) -> None:
    user_count = {"dws/user_count.sql": "select device_model, count(*) as n from ods.user group by device_model",
                  "dws/user_count.yaml": "tests:\n  - {name: one, given: [{input: ods.user, rows: [{id: 1, device_model: a}]}], expect: {rows: [{device_model: a, n: 1}]}}\n"}
    lp = _project(tmp_path, {**BIG, **user_count})
    lp.write_cdc([envelope("c", "shop.user", None, {"id": i, "device_model": m, "score": s}, pos=i) for i, m, s in ((1, "a", 1), (2, "b", 3))])
    lp.ingest(spark)
    out = lake(lp, "build")
    assert out.exit_code == 1, out.output
    assert "FAIL dwd.big: wrong" in out.output and "│ ~ expected │" in out.output  # the diff, as `lake test` prints it
    assert "unit tests: 2 passed, 1 failed" in out.output
    assert "dwd.big: unit test failed: wrong" in out.output and "dws.big_count: upstream dwd.big failed" in out.output
    assert not (lp.root / "warehouse" / "dwd" / "big").exists() and (lp.root / "warehouse" / "dws" / "user_count").is_dir()
    # Again: the two tests that passed are unchanged and not rerun; the failing one runs again.
    out = lake(lp, "build")
    assert "unit tests: 2 passed (2 unchanged since they passed, not rerun), 1 failed" in out.output, out.output
    assert "PASS dws.user_count: one  unchanged since it passed, not rerun" in out.output and "FAIL dwd.big: wrong" in out.output
    # A changed model runs its tests again, and so does --rerun-tests.
    (lp.root / "layers" / "dws" / "user_count.sql").write_text("select device_model, count(1) as n from ods.user group by device_model")
    for args in ((), ("--rerun-tests",)):
        out = lake(lp, "build", "dws.user_count", *args)
        assert out.exit_code == 0 and "unit tests: 1 passed" in out.output and "unchanged" not in out.output, out.output
    out = lake(lp, "build", "--skip-tests", "--json")
    assert out.exit_code == 0, out.output
    assert {r["model"]: r["mode"] for r in json.loads(out.stdout)} == {"dwd.big": "full", "dws.big_count": "full", "dws.user_count": "full"}


def test_a_fresh_process_without_a_warehouse_runs_the_tests(tmp_path: Path) -> None:
    """`lake test` in its own process (its own local Spark), as `lake build` runs it for a
    cluster session: the results come back as JSON; no warehouse comes into being."""
    from framework.commands.test import build_cases, run_in_child
    from framework.transform.runner import selection

    lp = _project(tmp_path, BIG)
    project = lp.project
    results = run_in_child(project, build_cases(project, selection(project, [])))
    assert [(r.model, r.test, r.status) for r in results] == [("dwd.big", "wrong", "fail"), ("dws.big_count", "counted", "pass")]
    assert results[0].full is not None and results[0].full.changed == 1
    assert not (tmp_path / "warehouse").exists()
