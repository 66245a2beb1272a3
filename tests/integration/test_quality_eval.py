"""The quality gate on real Spark DataFrames with Great Expectations: severities, row vs table
level, drop splits, custom SQL, uniqueness over the resulting table, stored results and report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.project.checks import parse_checks
from framework.quality import store
from framework.quality.checks import FAILED_CHECKS, MODEL, RUN_ID, evaluate
from framework.quality.report import write_report
from framework.runtime.paths import Layout
from models.quality import CheckSpec

pytestmark = pytest.mark.spark

SCHEMA = "id int, device_model string, onum int, amount double, status string"
ROWS = [
    (1, "pixel", 5, 10.0, "paid"),
    (2, None, 0, -1.0, "paid"),
    (3, "iphone", 7, 3.0, "lost"),
    (4, "nokia", None, 2.0, None),
]


def _checks(*items: dict[str, Any]) -> list[CheckSpec]:
    specs, issues = parse_checks(list(items))
    assert not issues, issues
    return specs


@pytest.fixture(scope="module")
def rows(spark: Any) -> Any:
    df = spark.createDataFrame(ROWS, SCHEMA).cache()
    df.count()
    yield df
    df.unpersist()


def test_error_blocks_and_names_check_count_samples_and_report(spark: Any, rows: Any) -> None:
    out = evaluate(spark, "dwd.orders", _checks({"not_null": ["device_model"]}), rows, run_id="r1", key=["id"])
    (r,) = out.results
    assert (r.success, r.failing, r.total) == (False, 1, 4)
    assert r.samples == [{"id": 2, "device_model": None}]
    assert out.blocked and out.quarantined is None
    err = out.error("wh/_lake/docs/runs/r1.html")
    text = str(err)
    assert "not_null(device_model)" in text and "1 of 4 rows fail" in text
    assert "NULL" in text and "wh/_lake/docs/runs/r1.html" in text and "nothing was committed" in text
    assert err.failed == ["not_null(device_model)"] and "severity: warn" in (err.fix or "")
    with pytest.raises(type(err)):
        out.raise_if_blocked()


def test_warn_reports_without_blocking(spark: Any, rows: Any) -> None:
    out = evaluate(spark, "dwd.orders", _checks({"not_null": ["device_model"], "severity": "warn"}, {"not_null": ["id"]}), rows, run_id="r1")
    assert not out.blocked
    assert [w.name for w in out.warnings] == ["not_null(device_model)"]
    assert out.results[1].success and out.results[1].failing == 0
    assert out.kept is rows


def test_drop_splits_failing_rows_with_every_failed_check(spark: Any, rows: Any) -> None:
    checks = _checks(
        {"between": {"column": "onum", "min_value": 1}, "severity": "drop"},
        {"sql": "select * from {{ this }} where amount < 0", "name": "no_negative_amounts", "severity": "drop"},
        {"accepted_values": {"column": "status", "values": ["paid", "new"]}, "severity": "drop"},
        {"not_null": ["id"], "severity": "drop"},
    )
    out = evaluate(spark, "dwd.orders", checks, rows, run_id="run-7", key=["id"])
    assert not out.blocked
    assert [(r.name, r.failing) for r in out.results] == [("between(onum)", 1), ("no_negative_amounts", 1), ("accepted_values(status)", 1), ("not_null(id)", 0)]
    assert sorted(r.id for r in out.kept.collect()) == [1, 4]
    assert out.kept.columns == rows.columns
    assert out.quarantined is not None
    q = {r.id: r for r in out.quarantined.collect()}
    assert set(q) == {2, 3}
    assert q[2][FAILED_CHECKS] == ["between(onum)", "no_negative_amounts"]
    assert q[3][FAILED_CHECKS] == ["accepted_values(status)"]
    assert {q[2][RUN_ID], q[2][MODEL]} == {"run-7", "dwd.orders"}


@pytest.mark.parametrize("check", [
    {"between": {"column": "onum", "min_value": 1, "max_value": 6, "strict_max": True}},
    {"expect_column_values_to_be_null": {"column": "status"}},
    {"expect_column_values_to_not_be_in_set": {"column": "status", "value_set": ["lost"]}},
    {"expect_column_values_to_match_regex": {"column": "device_model", "regex": "^(pix|nok)"}},
    {"expect_column_values_to_not_match_regex": {"column": "device_model", "regex": "o"}},
    {"expect_column_value_lengths_to_be_between": {"column": "device_model", "min_value": 5, "max_value": 5}},
    {"expect_column_value_lengths_to_equal": {"column": "device_model", "value": 5}},
])
def test_drop_predicate_rejects_exactly_what_ge_counts(spark: Any, rows: Any, check: dict[str, Any]) -> None:
    out = evaluate(spark, "dwd.orders", _checks({**check, "severity": "drop"}), rows, run_id="r1")
    (r,) = out.results
    assert r.failing and r.failing > 0, "the case must fail some rows to be a test"
    assert out.quarantined is not None and out.quarantined.count() == r.failing
    assert out.kept.count() == len(ROWS) - r.failing


def test_uniqueness_is_judged_on_the_resulting_table(spark: Any, rows: Any) -> None:
    """The batch is unique by itself; the table it lands in already holds id 3."""
    existing = spark.createDataFrame([(3, "old", 1, 1.0, "paid"), (9, "old", 1, 1.0, "paid")], SCHEMA)
    checks = _checks({"unique": ["id"]}, {"row_count": {"min_value": 1}})
    alone = evaluate(spark, "dwd.orders", checks, rows, run_id="r1", key=["id"])
    assert not alone.blocked
    merged = evaluate(spark, "dwd.orders", checks, rows, existing.unionByName(rows), run_id="r1", key=["id"])
    unique, count = merged.results
    assert (unique.success, unique.failing, unique.total, unique.on) == (False, 2, 6, "table")
    assert unique.samples == [{"id": 3}, {"id": 3}]
    assert count.success and count.observed == 6
    assert merged.blocked


def test_resulting_table_is_computed_from_the_rows_kept(spark: Any, rows: Any) -> None:
    """A row dropped by a drop check never reaches the table, so it cannot break uniqueness."""
    existing = spark.createDataFrame([(2, "old", 1, 1.0, "paid")], SCHEMA)
    seen: list[int] = []

    def table(kept: Any) -> Any:
        seen.append(kept.count())
        return existing.unionByName(kept)

    checks = _checks({"not_null": ["device_model"], "severity": "drop"}, {"unique": ["id"]})
    out = evaluate(spark, "dwd.orders", checks, rows, table, run_id="r1", key=["id"])
    assert seen == [3]
    assert not out.blocked and out.results[1].total == 4


def test_custom_sql_on_rows_and_on_table(spark: Any, rows: Any) -> None:
    table = rows.unionByName(spark.createDataFrame([(5, "x", 1, -9.0, "paid")], SCHEMA))
    checks = _checks(
        {"sql": "select * from {{ this }} where amount < 0", "name": "neg_rows", "severity": "warn"},
        {"sql": "select status, count(*) n from {{ this }} group by status having count(*) > 2", "name": "status_skew", "on": "table"},
    )
    out = evaluate(spark, "dwd.orders", checks, rows, table, run_id="r1")
    neg, skew = out.results
    assert (neg.on, neg.success, neg.failing) == ("rows", False, 1)
    assert neg.samples == [{"id": 2, "device_model": None, "onum": 0, "amount": -1.0, "status": "paid"}]
    assert (skew.on, skew.success, skew.failing, skew.samples) == ("table", False, 1, [{"status": "paid", "n": 3}])
    assert out.blocked and [w.name for w in out.warnings] == ["neg_rows"]


def test_a_missing_column_is_a_failed_check_not_a_crash(spark: Any, rows: Any) -> None:
    out = evaluate(spark, "dwd.orders", _checks({"not_null": ["no_such_column"]}), rows, run_id="r1")
    (r,) = out.results
    assert not r.success and r.error and "no_such_column" in r.error
    assert out.blocked and "could not run" in str(out.error())


def test_results_are_stored_and_reported_with_data_docs(spark: Any, rows: Any, tmp_path: Path) -> None:
    layout = Layout(tmp_path / "wh")
    checks = _checks({"not_null": ["device_model"], "severity": "warn"}, {"unique": ["id"]})
    out = evaluate(spark, "dwd.orders", checks, rows, run_id="20250101T000000-abc123", key=["id"])
    path = store.save(layout, out.record)
    assert path == layout.quality("20250101T000000-abc123") / "dwd.orders.json"
    (again,) = store.load_run(layout, "20250101T000000-abc123")
    assert again.results == out.record.results and len(again.ge_results) == 2
    page = write_report(layout, tmp_path / "report")
    assert page == tmp_path / "report" / "runs" / "20250101T000000-abc123.html"
    text = page.read_text()
    assert "not_null(device_model)" in text and "1 of 4 rows fail" in text and "committed" in text
    links = [part.split('"')[1] for part in text.split("<a href=")[1:] if part.startswith('"')]
    assert len(links) == 2
    for link in links:
        html_page = (page.parent / link).resolve()
        assert html_page.exists(), link
        assert "values must be unique" in html_page.read_text() or "values must never be null" in html_page.read_text()
    assert (tmp_path / "report" / "gx" / "index.html").exists()
