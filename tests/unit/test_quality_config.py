"""Checks declared in YAML parse into CheckSpecs, or fail with file, line, field and fix (no Spark)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.errors import ConfigError, ConfigIssue
from framework.project.checks import DROPPABLE, gx_query, parse_checks
from framework.project.config import load_model, load_project
from models.config import ModelConfig
from models.quality import CheckSpec


def _model(tmp_path: Path, text: str) -> tuple[ModelConfig | None, list[ConfigIssue]]:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(text))
    return load_model(path, ModelConfig, "layers/dws/m.yaml")


def _specs(tmp_path: Path, text: str) -> list[CheckSpec]:
    cfg, issues = _model(tmp_path, text)
    assert not issues, [str(i) for i in issues]
    assert cfg is not None
    return cfg.checks


def test_ge_long_names_keep_ge_arguments_and_lake_severity(tmp_path: Path) -> None:
    a, b, c = _specs(tmp_path, """
        checks:
          - expect_column_values_to_not_be_null: {column: device_model}
            severity: error
          - expect_column_values_to_be_between: {column: onum, min_value: 1}
            severity: drop
          - expect_column_values_to_be_unique: {column: id}
        """)
    assert (a.expectation, a.kwargs, a.severity, a.kind, a.on) == ("expect_column_values_to_not_be_null", {"column": "device_model"}, "error", "row", "rows")
    assert (b.severity, b.kind, b.kwargs) == ("drop", "row", {"column": "onum", "min_value": 1})
    assert (c.severity, c.kind, c.on) == ("error", "table", "table")
    assert a.name == "expect_column_values_to_not_be_null(device_model)"


def test_shorthands_expand_to_ge_expectations(tmp_path: Path) -> None:
    specs = _specs(tmp_path, """
        checks:
          - not_null: [a, b]
            severity: warn
          - unique: [id]
          - unique: [order_id, line_no]
          - between: {column: amount, min_value: 0, max_value: 100}
          - accepted_values: {column: status, values: [new, paid]}
          - row_count: {min_value: 1}
        """)
    got = [(s.name, s.expectation, s.kwargs, s.kind, s.severity) for s in specs]
    assert got == [
        ("not_null(a)", "expect_column_values_to_not_be_null", {"column": "a"}, "row", "warn"),
        ("not_null(b)", "expect_column_values_to_not_be_null", {"column": "b"}, "row", "warn"),
        ("unique(id)", "expect_column_values_to_be_unique", {"column": "id"}, "table", "error"),
        ("unique(order_id, line_no)", "expect_compound_columns_to_be_unique", {"column_list": ["order_id", "line_no"]}, "table", "error"),
        ("between(amount)", "expect_column_values_to_be_between", {"column": "amount", "min_value": 0, "max_value": 100}, "row", "error"),
        ("accepted_values(status)", "expect_column_values_to_be_in_set", {"column": "status", "value_set": ["new", "paid"]}, "row", "error"),
        ("row_count", "expect_table_row_count_to_be_between", {"min_value": 1}, "table", "error"),
    ]


def test_custom_sql_check_becomes_ge_unexpected_rows_query(tmp_path: Path) -> None:
    (s,) = _specs(tmp_path, """
        checks:
          - sql: "select * from {{ this }} where amount < 0 and tags = map('a', 1)"
            name: no_negative_amounts
            severity: drop
        """)
    assert (s.kind, s.on, s.name, s.expectation) == ("sql", "rows", "no_negative_amounts", "unexpected_rows_expectation")
    assert s.kwargs["unexpected_rows_query"] == "select * from {batch} where amount < 0 and tags = map('a', 1)"
    assert s.query_on("v") == "select * from v where amount < 0 and tags = map('a', 1)"
    assert gx_query("select '{x}' from {{this}}") == "select '{{x}}' from {batch}"


def test_classification_row_vs_table() -> None:
    specs, issues = parse_checks([
        {"expect_column_max_to_be_between": {"column": "x", "max_value": 3}},
        {"expect_column_pair_values_a_to_be_greater_than_b": {"column_A": "a", "column_B": "b"}},
        {"expect_table_row_count_to_equal": {"value": 3}},
        {"expect_column_values_to_match_regex": {"column": "x", "regex": "^a"}},
    ])
    assert not issues
    assert [s.kind for s in specs] == ["table", "row", "table", "row"]


def test_unknown_expectation_suggests_the_ge_name_with_line(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, """
        key: [id]
        checks:
          - not_null: [id]
          - expect_column_values_to_not_be_nul: {column: device_model}
        """)
    (i,) = issues
    assert (i.file, i.line, i.field) == ("layers/dws/m.yaml", 5, "checks[1].expect_column_values_to_not_be_nul")
    assert "unknown expectation" in i.problem
    assert "did you mean `expect_column_values_to_not_be_null`" in i.fix


def test_unknown_shorthand_suggests(tmp_path: Path) -> None:
    _, (i,) = _model(tmp_path, "checks:\n  - uniqe: [id]\n")
    assert i.field == "checks[0].uniqe" and "did you mean `unique`" in i.fix


def test_unknown_and_missing_argument_name_the_field(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, """
        checks:
          - expect_column_values_to_be_between: {colum: onum, min_value: 1}
          - accepted_values: {column: s}
        """)
    by_field = {i.field: i for i in issues}
    unknown = by_field["checks[0].expect_column_values_to_be_between.colum"]
    assert unknown.line == 3 and "did you mean `column`?" in unknown.fix
    assert "needs the argument `column`" in by_field["checks[0].expect_column_values_to_be_between.column"].problem
    missing = by_field["checks[1].accepted_values.values"]
    assert "add `values: ...`" in missing.fix


def test_bad_argument_value_is_checked_by_ge_itself(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, "checks:\n  - between: {column: x, min_value: abc}\n")
    (i,) = issues
    assert i.field == "checks[0].between.min_value" and "invalid `min_value`" in i.problem


def test_drop_on_table_level_check_is_an_error(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, """
        checks:
          - unique: [id]
            severity: drop
        """)
    (i,) = issues
    assert (i.field, i.line) == ("checks[0].severity", 4)
    assert "judges the whole table" in i.problem and "error" in i.fix and "warn" in i.fix


def test_drop_on_unsupported_row_check_lists_the_supported(tmp_path: Path) -> None:
    _, (i,) = _model(tmp_path, """
        checks:
          - expect_column_values_to_be_json_parseable: {column: payload}
            severity: drop
        """)
    assert "drop is not supported" in i.problem
    assert all(name in i.fix for name in DROPPABLE) and "sql" in i.fix


def test_drop_with_mostly_is_an_error(tmp_path: Path) -> None:
    _, (i,) = _model(tmp_path, "checks:\n  - between: {column: x, min_value: 1, mostly: 0.9}\n    severity: drop\n")
    assert i.field == "checks[0].between.mostly"


def test_bad_severity_names_the_choices(tmp_path: Path) -> None:
    _, (i,) = _model(tmp_path, "checks:\n  - not_null: [a]\n    severity: fatal\n")
    assert i.field == "checks[0].severity" and "'fatal' is not one of error, warn, drop" in i.problem
    assert "quarantines failing rows" in i.fix


def test_sql_check_needs_name_this_and_valid_sql(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, """
        checks:
          - sql: "select * from orders"
          - sql: "select * from {{ this }} where"
            name: broken
        """)
    fields = {(i.field, i.problem.split(" ")[0]) for i in issues}
    assert ("checks[0].name", "a") in fields
    assert any(i.field == "checks[0].sql" and "{{ this }}" in i.problem for i in issues)
    assert any(i.field == "checks[1].sql" and "not valid Spark SQL" in i.problem for i in issues)


def test_severity_inside_ge_arguments_is_pointed_outside(tmp_path: Path) -> None:
    _, (i,) = _model(tmp_path, "checks:\n  - expect_column_values_to_be_unique: {column: id, severity: warn}\n")
    assert "beside the expectation" in i.fix


def test_two_expectations_in_one_item_and_duplicate_names(tmp_path: Path) -> None:
    _, issues = _model(tmp_path, """
        checks:
          - not_null: [a]
            unique: [a]
          - not_null: [b]
          - not_null: [b]
        """)
    problems = " | ".join(i.problem for i in issues)
    assert "one expectation per list item" in problems
    assert "two checks are named 'not_null(b)'" in problems


def test_ods_table_checks_flow_through_load_project(tmp_path: Path) -> None:
    (tmp_path / "lake.yaml").write_text("name: demo\n")
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "a.yaml").write_text(textwrap.dedent("""
        tables:
          - source: db.orders
            key: [id]
            checks:
              - not_null: [id]
              - expect_column_values_to_be_betwen: {column: onum, min_value: 1}
        """))
    with pytest.raises(ConfigError) as e:
        load_project(tmp_path)
    (i,) = e.value.issues
    assert (i.file, i.line, i.field) == ("layers/ods/a.yaml", 7, "tables[0].checks[1].expect_column_values_to_be_betwen")
    assert "did you mean `expect_column_values_to_be_between`" in str(e.value)


def test_no_checks_keeps_the_model_dump_unchanged(tmp_path: Path) -> None:
    """Model fingerprints hash the config dump; models without checks must keep theirs."""
    cfg, _ = _model(tmp_path, "key: [id]\n")
    assert cfg is not None and cfg.model_dump(mode="json")["checks"] == []


def test_every_droppable_expectation_has_a_spark_predicate() -> None:
    from framework.quality.predicates import PREDICATES

    assert set(PREDICATES) == set(DROPPABLE)
