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
