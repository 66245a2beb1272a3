"""Column lineage through SQL models down to ODS, from the demo models and small fixtures (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.errors import LakeError
from framework.project.config import load_project
from framework.transform.lineage import LineageNode, Tracer, output_columns
from framework.transform.lineage_render import render_json, render_text
from framework.transform.loader import load_models

REPO = Path(__file__).resolve().parents[2]


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "lake.yaml").write_text("name: t\n")
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "t.yaml").write_text(
        "tables:\n  - {source: db.user, key: [id]}\n  - {source: db.user_order, key: [id]}\n"
        "  - {source: db.product, key: [pid]}\n"
    )
    for rel, text in files.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _tracer(root: Path) -> Tracer:
    project = load_project(root)
    return Tracer.for_project(project, load_models(project))


def _ingested(root: Path, table: str, columns: list[str]) -> None:
    """A Parquet base file with the columns an ODS table has after `lake ingest` (plus Hudi's)."""
    d = root / "warehouse" / "ods" / table
    (d / ".hoodie").mkdir(parents=True)
    (d / "year_month=2024-01").mkdir()
    names = ["_hoodie_commit_time", "_hoodie_record_key", *columns, "_deleted", "_lake_key"]
    pq.write_table(pa.table({n: pa.array([], pa.string()) for n in names}), d / "year_month=2024-01" / "f1.parquet")


def _names(nodes: tuple[LineageNode, ...]) -> list[str]:
    return [n.name for n in nodes]


def test_demo_dws_column_resolves_through_dwd_to_ods() -> None:
    t = _tracer(REPO)
    revenue = t.trace("dws.product_sales.revenue")
    assert revenue.expression == "SUM(order_detail.amount)"
    (amount,) = revenue.sources
    assert amount.name == "dwd.order_detail.amount" and amount.expression == "o.onum * p.pprice"
    assert _names(amount.sources) == ["ods.product.pprice", "ods.user_order.onum"]
    assert _names(revenue.grouped_by) == ["dwd.order_detail.pid"]
    assert revenue.leaves() == {"ods.product.pprice", "ods.user_order.onum", "ods.user_order.pid"}


def test_demo_count_depends_on_its_group_keys_only() -> None:
    t = _tracer(REPO)
    num = t.trace("dws.user_agg.num")
    assert num.sources == () and num.expression == "COUNT(1)"
    assert _names(num.grouped_by) == ["ods.user.device_model"]
    orders = t.trace("dws.customer_orders.order_count")
    assert _names(orders.sources) == ["ods.sales_order_all.order_id"]
    assert _names(orders.grouped_by) == ["ods.customer.cust_id", "ods.customer.name", "ods.customer.mktsegment"]
    # A group key itself is a plain column of the join, not an aggregate: no group keys of its own.
    assert t.trace("dws.customer_orders.name").grouped_by == ()


def test_demo_python_model_is_not_traceable() -> None:
    node = _tracer(REPO).trace("dwd.user_profile.brand")
    assert node.kind == "python" and node.sources == ()
    assert node.note is not None and "not traceable" in node.note and "ods.user" in node.note


def test_join_aliases_and_aggregate_expression(tmp_path: Path) -> None:
    t = _tracer(_project(tmp_path, {"dws/spend.sql": (
        "select u.name as who, sum(o.onum * p.pprice) as spend, count(distinct o.pid) as products "
        "from ods.user_order as o join ods.user u on o.uid = u.id join ods.product p on p.pid = o.pid "
        "group by u.name")}))
    spend = t.trace("dws.spend.spend")
    assert spend.expression == "SUM(o.onum * p.pprice)"
    assert _names(spend.sources) == ["ods.product.pprice", "ods.user_order.onum"]
    assert _names(spend.grouped_by) == ["ods.user.name"]
    assert _names(t.trace("dws.spend.who").sources) == ["ods.user.name"]
    assert _names(t.trace("dws.spend.products").sources) == ["ods.user_order.pid"]


def test_ctes_subqueries_and_model_chain(tmp_path: Path) -> None:
    t = _tracer(_project(tmp_path, {
        "dwd/lines.sql": "select o.id, o.uid, o.onum * p.pprice as amount from ods.user_order o join ods.product p on o.pid = p.pid",
        "dws/per_user.sql": (
            "with big as (select uid, amount * 2 as doubled from dwd.lines where amount > 10), "
            "named as (select b.uid, b.doubled, u.name from big b join ods.user u on b.uid = u.id) "
            "select x.name, x.total from (select name, sum(doubled) as total from named group by name) x"),
    }))
    total = t.trace("dws.per_user.total")
    (doubled,) = total.sources
    assert doubled.name == "dwd.lines.amount" and doubled.expression == "o.onum * p.pprice"
    assert total.leaves() == {"ods.product.pprice", "ods.user_order.onum"}
    # The GROUP BY sits in a subquery, so group keys are not attributed (top-level SELECT only).
    assert total.grouped_by == ()
    assert _names(t.trace("dws.per_user.name").sources) == ["ods.user.name"]


def test_group_by_ordinal_and_output_alias(tmp_path: Path) -> None:
    t = _tracer(_project(tmp_path, {
        "dws/by_ordinal.sql": "select upper(device_model) as dm, count(*) as n from ods.user group by 1",
        "dws/by_alias.sql": "select substr(u.email, 5) as domain, max(u.age) as oldest from ods.user u group by domain",
    }))
    n = t.trace("dws.by_ordinal.n")
    assert _names(n.grouped_by) == ["ods.user.device_model"]
    oldest = t.trace("dws.by_alias.oldest")
    assert _names(oldest.sources) == ["ods.user.age"] and _names(oldest.grouped_by) == ["ods.user.email"]


def test_star_without_schema_is_said_and_expanded_once_ingested(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "dwd/users.sql": "select * from ods.user where id > 0",
        "dws/by_device.sql": "select device_model, count(*) as n from dwd.users group by device_model",
    })
    node = _tracer(root).trace("dws.by_device.n")
    (key,) = node.grouped_by
    assert key.name == "dwd.users.device_model"
    assert key.note is not None and "SELECT * of ods.user" in key.note and "unknown" in key.note
    with pytest.raises(LakeError, match=r"(?s)SELECT \* of ods.user \(not ingested yet\).*lake ingest"):
        _tracer(root).trace("dwd.users.device_model")

    _ingested(root, "user", ["id", "name", "device_model"])
    t = _tracer(root)
    assert t.columns("ods.user") == ("id", "name", "device_model")  # Hudi and lake columns hidden
    assert t.columns("dwd.users") == ("id", "name", "device_model")
    assert t.trace("dws.by_device.n").leaves() == {"ods.user.device_model"}
    with pytest.raises(LakeError, match="did you mean dwd.users.device_model"):
        t.trace("dwd.users.device_mdl")


def test_unqualified_join_column_needs_schemas(tmp_path: Path) -> None:
    root = _project(tmp_path, {"dwd/x.sql": "select o.id, name from ods.user_order o join ods.user u on o.uid = u.id"})
    node = _tracer(root).trace("dwd.x.name")
    assert node.sources == ()
    assert node.note is not None and "could come from any of ods.user_order, ods.user" in node.note
    _ingested(root, "user", ["id", "name"])
    _ingested(root, "user_order", ["id", "uid"])
    assert _names(_tracer(root).trace("dwd.x.name").sources) == ["ods.user.name"]


def test_unknown_model_and_column_suggest_names() -> None:
    t = _tracer(REPO)
    with pytest.raises(LakeError, match="did you mean dws.user_agg") as e:
        t.trace("dws.user_ag.num")
    assert e.value.fix is not None
    with pytest.raises(LakeError, match=r"has no column 'nm'") as e:
        t.trace("dws.user_agg.nm")
    assert e.value.fix is not None and "did you mean dws.user_agg.num" in e.value.fix
    with pytest.raises(LakeError, match="not <layer>.<model>.<column>"):
        t.trace("user_agg")


def test_output_columns_from_sql() -> None:
    assert output_columns("select a as x, b.c, count(*) as n from ods.t b group by 1, 2", {}) == ("x", "c", "n")
    assert output_columns("select * from ods.t", {}) is None
    assert output_columns("select * from ods.t", {"ods": {"t": {"k": "unknown"}}}) == ("k",)


def test_renderers_and_cli(tmp_path: Path) -> None:
    node = _tracer(REPO).trace("dws.product_sales.revenue")
    assert render_text(node).splitlines() == [
        "dws.product_sales.revenue = SUM(order_detail.amount)",
        "├── dwd.order_detail.amount = o.onum * p.pprice",
        "│   ├── ods.product.pprice",
        "│   └── ods.user_order.onum",
        "└── group by dwd.order_detail.pid = o.pid",
        "    └── ods.user_order.pid",
    ]
    assert json.loads(render_json(node))["sources"][0]["column"] == "dwd.order_detail.amount"
    runner = CliRunner()
    out = runner.invoke(main, ["--project", str(REPO), "lineage", "dws.user_agg.num", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["grouped_by"][0]["column"] == "ods.user.device_model"
    out = runner.invoke(main, ["--project", str(REPO), "lineage", "dws.user_agg.num"])
    assert out.exit_code == 0 and "group by ods.user.device_model" in out.output
    bad = runner.invoke(main, ["--project", str(REPO), "lineage", "dws.usr_agg.num"])
    assert bad.exit_code == 1
