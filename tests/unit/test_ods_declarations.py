"""Table YAML under layers/ods/: what a declaration may say, checked before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.project.config import load_project
from tests.helpers import ods_config_issues as _load


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


@pytest.mark.parametrize(("source", "suggested"), [
    ("inventory./tmp/escaped", "tmp_escaped"),   # would be the folder /tmp/escaped
    ("inv.Order Items", "order_items"),
    ("inv.it's", "it_s"),
    ("inv.sales.order-items", "order_items"),
    ("shop.2024_orders", "t_2024_orders"),
])
def test_derived_table_name_must_be_an_identifier(tmp_path: Path, source: str, suggested: str) -> None:
    (issue,) = _load(tmp_path, f"tables:\n  - source: \"{source}\"\n    key: [id]\n")
    assert (issue.file, issue.line, issue.field) == ("layers/ods/t.yaml", 2, "tables[0].name")
    assert "taken from `source:` is not letters, digits and underscores" in issue.problem
    assert f"`name: {suggested}`" in issue.fix
    # With a name, any source text is fine: it is only compared with the events' source block.
    assert _load(tmp_path, f"tables:\n  - source: \"{source}\"\n    name: {suggested}\n    key: [id]\n") == []


def test_layout_refuses_names_that_leave_the_warehouse(tmp_path: Path) -> None:
    from framework.errors import LakeError
    from framework.runtime.paths import Layout

    layout = Layout(tmp_path / "wh")
    assert layout.table("ods.users").local == tmp_path / "wh" / "ods" / "users"
    assert layout.quarantine("dwd.x").local == tmp_path / "wh" / "_quarantine" / "dwd_x"
    for bad in ("ods./tmp/escaped", "ods.../x", "../ods.x", "ods.a.b", "ods.it's", "ods.", "users", "ods.2x"):
        with pytest.raises(LakeError, match="not <layer>.<name>"):
            layout.table(bad)
        with pytest.raises(LakeError, match="not <layer>.<name>"):
            layout.quarantine(bad)


def test_model_file_names_must_be_identifiers(tmp_path: Path) -> None:
    from framework.transform.loader import load_models

    assert _load(tmp_path, "tables:\n  - {source: db.user, key: [id]}\n") == []
    (tmp_path / "layers" / "dwd").mkdir()
    (tmp_path / "layers" / "dwd" / "my-model.sql").write_text("select id from ods.user")
    (tmp_path / "layers" / "dwd" / "ok_model.sql").write_text("select id from ods.user")
    with pytest.raises(ConfigError) as e:
        load_models(load_project(tmp_path))
    (issue,) = e.value.issues
    assert (issue.file, issue.field) == ("layers/dwd/my-model.sql", "(file)")
    assert "dwd.my-model" in issue.problem and "rename" in issue.fix


def test_history_needs_a_key_and_its_own_name(tmp_path: Path) -> None:
    issues = _load(tmp_path, "tables:\n  - {source: shop.users, history: true}\n", lake="name: demo\nods: {source: {kind: kafka, topics: [x]}}\n")
    assert any(i.field == "tables[0].key" and "`history: true` without `key:`" in i.problem for i in issues), [str(i) for i in issues]
    (issue,) = _load(tmp_path, "tables:\n  - {source: shop.users, key: [id], history: true}\n  - {source: shop.users_history, key: [id]}\n")
    assert "ods.users_history, the history of ods.users, is also declared" in issue.problem
    assert _load(tmp_path, "tables:\n  - {source: shop.users, key: [id], history: true}\n") == []
    t = load_project(tmp_path).ods_tables[0]
    assert t.history_name == "ods.users_history" and t.readable() == {"ods.users": ("id",), "ods.users_history": ("id", "_seq")}
