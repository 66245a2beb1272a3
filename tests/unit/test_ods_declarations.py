"""Table YAML under layers/ods/: what a declaration may say, checked before Spark starts."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.config import load_project
from framework.errors import ConfigError, ConfigIssue


def _load(tmp_path: Path, tables: str, lake: str = "name: demo\n") -> list[ConfigIssue]:
    """The issues of a project with one table YAML (empty when it loads)."""
    (tmp_path / "lake.yaml").write_text(lake)
    (tmp_path / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (tmp_path / "layers" / "ods" / "t.yaml").write_text(textwrap.dedent(tables))
    try:
        load_project(tmp_path)
    except ConfigError as e:
        return e.issues
    return []


def test_source_with_schema(tmp_path: Path) -> None:
    assert _load(tmp_path, """
        tables:
          - {source: inv.customers, key: [id]}
          - {source: inv.sales.Customers, name: sales_customers, key: [id]}
          - {source: inv.hr.People, key: [id]}
        """) == []
    p = load_project(tmp_path)
    assert [(t.source, t.qualified_name) for t in p.ods_tables] == [
        ("inv.customers", "ods.customers"), ("inv.sales.Customers", "ods.sales_customers"), ("inv.hr.People", "ods.people")]


@pytest.mark.parametrize("source", ["inv.a.b.c", "inv..customers", ".customers", "inv.", "inv.sales.", "nodot"])
def test_source_needs_two_or_three_parts(tmp_path: Path, source: str) -> None:
    (issue,) = _load(tmp_path, f"tables:\n  - {{source: '{source}', name: t, key: [id]}}\n")
    assert (issue.file, issue.line, issue.field) == ("layers/ods/t.yaml", 2, "tables[0].source")
    assert "<db>.<schema>.<table>" in issue.problem


def test_same_default_name_from_two_schemas(tmp_path: Path) -> None:
    (issue,) = _load(tmp_path, "tables:\n  - {source: inv.customers, key: [id]}\n  - {source: inv.sales.customers, key: [id]}\n")
    assert issue.field == "tables[1].name" and "ods.customers is also declared" in issue.problem


def test_ordering_and_partition_columns_checked_against_declared_types(tmp_path: Path) -> None:
    issues = _load(tmp_path, """
        tables:
          - source: shop.orders
            key: [id]
            ordering: [updated, version, day]
            partition_by: {column: created}
            columns: {updated: string, version: INTEGER, day: date, created: binary}
          - {source: shop.items, key: [id], ordering: [price], columns: {price: 'decimal(10,2)'}}
          - {source: shop.users, key: [id], ordering: [seen], columns: {seen: timestamp}, partition_by: {column: seen}}
        """)
    got = {(i.field, i.problem) for i in issues}
    assert got == {
        ("tables[0].ordering", "column 'updated' is declared STRING in `columns:`; ordering needs a timestamp, date or integer column"),
        ("tables[0].partition_by.column", "column 'created' is declared BINARY in `columns:`, which has no time to partition by"),
        ("tables[1].ordering", "column 'price' is declared DECIMAL(10,2) in `columns:`; ordering needs a timestamp, date or integer column"),
    }
    assert all(i.file == "layers/ods/t.yaml" and i.fix for i in issues)


@pytest.mark.parametrize(("setting", "problem"), [
    ("ordering: [updated, updated]", "column 'updated' is listed twice"),
    ("ordering: ['']", "an empty column name"),
    ("ordering: [' ']", "an empty column name"),
    ("partition_by: {column: ''}", "an empty column name"),
])
def test_empty_or_repeated_columns(tmp_path: Path, setting: str, problem: str) -> None:
    (issue,) = _load(tmp_path, f"tables:\n  - source: shop.orders\n    key: [id]\n    {setting}\n")
    assert issue.line == 4 and issue.field.startswith(("tables[0].ordering", "tables[0].partition_by.column"))
    assert issue.problem == problem and issue.fix
