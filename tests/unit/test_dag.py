"""Model discovery, dependencies, cycles, unknown names and selectors (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.errors import ConfigError, LakeError
from framework.project.config import load_project
from framework.transform.dag import build_graph, render, select
from framework.transform.loader import load_models, sql_tables


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "lake.yaml").write_text("name: t\n")
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "t.yaml").write_text(
        "tables:\n  - {source: db.user, key: [id]}\n  - {source: db.user_order, key: [id]}\n  - {source: db.product, key: [pid]}\n"
    )
    for rel, text in files.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


FILES = {
    "dwd/order_detail.sql": "select o.id, u.name, p.pname from ods.user_order o join ods.user u on o.uid = u.id join ods.product p on o.pid = p.pid",
    "dwd/order_detail.yaml": "key: [id]\ntags: [finance]\n",
    "dws/product_sales.sql": "with d as (select * from dwd.order_detail) select pname, count(*) as n from d group by pname",
    "dws/product_sales.yaml": "tags: [finance]\n",
    "dws/user_agg.sql": "select count(1) as num, device_model from ods.user group by device_model",
    "dwd/user_profile.py": "def model(ctx):\n    return ctx.read('ods.user')\n",
    "dwd/user_profile.yaml": "depends_on: [ods.user]\nkey: [id]\n",
}


def test_dependencies_from_sql_and_yaml(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, FILES))
    models = load_models(p)
    assert models["dwd.order_detail"].upstreams == ("ods.user_order", "ods.user", "ods.product")
    assert models["dws.product_sales"].upstreams == ("dwd.order_detail",)  # the CTE name is not a table
    assert models["dwd.user_profile"].upstreams == ("ods.user",)
    assert sql_tables("select * from ods.a x join (select * from ods.b) y on x.i = y.i") == ["ods.a", "ods.b"]


def test_selectors(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, FILES))
    models = load_models(p)
    g = build_graph(p, models)
    assert select(g, models, ["dws.user_agg"]) == ["dws.user_agg"]
    assert select(g, models, ["+dws.product_sales"]) == ["dwd.order_detail", "dws.product_sales"]
    assert select(g, models, ["dwd.order_detail+"]) == ["dwd.order_detail", "dws.product_sales"]
    assert set(select(g, models, ["layer:dws"])) == {"dws.product_sales", "dws.user_agg"}
    assert select(g, models, ["tag:finance"]) == ["dwd.order_detail", "dws.product_sales"]
    assert set(select(g, models, ["tag:finance", "dws.user_agg"])) == {"dwd.order_detail", "dws.product_sales", "dws.user_agg"}
    assert select(g, models, ["tag:finance"], exclude=["dws.product_sales"]) == ["dwd.order_detail"]
    assert len(select(g, models, [])) == 4
    with pytest.raises(LakeError, match="did you mean dws.user_agg"):
        select(g, models, ["dws.user_ag"])
    assert "dwd_order_detail --> dws_product_sales" in render(g, "mermaid")
    assert '"dwd.order_detail" -> "dws.product_sales";' in render(g, "dot")


def test_cycle_names_models_and_files(tmp_path: Path) -> None:
    files = {"dwd/a.sql": "select id from dwd.b", "dwd/b.sql": "select id from dwd.a"}
    p = load_project(_project(tmp_path, files))
    with pytest.raises(ConfigError) as e:
        build_graph(p, load_models(p))
    text = str(e.value)
    assert "cycle: dwd.a → dwd.b → dwd.a" in text or "cycle: dwd.b → dwd.a → dwd.b" in text
    assert "layers/dwd/a.sql" in text and "layers/dwd/b.sql" in text


def test_unknown_table_did_you_mean(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, {"dws/x.sql": "select count(*) as n, uid from ods.user_ordr group by uid"}))
    with pytest.raises(ConfigError, match="(?s)unknown table ods.user_ordr.*did you mean ods.user_order"):
        load_models(p)


def test_python_model_needs_depends_on_and_sql_must_parse(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path, {"dwd/p.py": "def model(ctx): ...\n", "dwd/q.sql": "select from where"}))
    with pytest.raises(ConfigError) as e:
        load_models(p)
    text = str(e.value)
    assert "depends_on" in text and "layers/dwd/q.sql" in text


def test_fingerprint_covers_sql_and_yaml(tmp_path: Path) -> None:
    root = _project(tmp_path, FILES)
    before = load_models(load_project(root))["dws.user_agg"].fingerprint
    (root / "layers" / "dws" / "user_agg.yaml").write_text("partition_by: device_model\n")
    after_yaml = load_models(load_project(root))["dws.user_agg"].fingerprint
    (root / "layers" / "dws" / "user_agg.sql").write_text("select count(*) as num, device_model from ods.user group by device_model")
    after_sql = load_models(load_project(root))["dws.user_agg"].fingerprint
    assert len({before, after_yaml, after_sql}) == 3
    # How the model is built is not what it computes: no full rebuild for this key.
    (root / "layers" / "dws" / "user_agg.yaml").write_text("partition_by: device_model\nrecompute_below_mib: 0\n")
    assert load_models(load_project(root))["dws.user_agg"].fingerprint == after_sql


def test_serving_first_puts_the_longest_chain_to_dws_first(tmp_path: Path) -> None:
    from framework.transform.runner import serving_first

    p = load_project(_project(tmp_path, FILES))
    models = load_models(p)
    g = build_graph(p, models)
    order = select(g, models, [])
    queue = serving_first(g, models, order)
    assert sorted(queue) == sorted(order)
    # order_detail -> product_sales is the longest chain to DWS; user_profile feeds no DWS model.
    assert queue[0] == "dwd.order_detail" and queue[-1] == "dwd.user_profile"
    assert set(queue[1:3]) == {"dws.product_sales", "dws.user_agg"}
    # Every model still comes after its upstreams.
    for i, n in enumerate(queue):
        assert all(u not in queue[i:] for u in models[n].upstreams)
    # Without DWS in the selection the dependency order is kept.
    only_dwd = select(g, models, ["layer:dwd"])
    assert serving_first(g, models, only_dwd) == only_dwd


def test_a_models_history_is_a_node_its_readers_follow(tmp_path: Path) -> None:
    from framework.transform.analysis import Analyses, declared_keys
    from framework.transform.runner import serving_first

    files = {**FILES, "dwd/order_detail.yaml": "key: [id]\nhistory: true\n",
             "dws/detail_versions.sql": "select id, count(*) as n from dwd.order_detail_history group by id"}
    p = load_project(_project(tmp_path, files))
    models = load_models(p)
    g = build_graph(p, models)
    assert g.nodes["dwd.order_detail_history"]["kind"] == "history"
    assert list(g.predecessors("dwd.order_detail_history")) == ["dwd.order_detail"]
    assert "dwd.order_detail_history  [history]" in render(g, "text")
    order = serving_first(g, models, select(g, models, ["dwd.order_detail+"]))
    assert order.index("dwd.order_detail") < order.index("dws.detail_versions"), order
    assert Analyses(models, declared_keys(p)).key_of("dwd.order_detail_history") == ("id", "_seq")
    # Its name is taken: a model of that name is an error, as is reading it with history off.
    (tmp_path / "layers" / "dwd" / "order_detail_history.sql").write_text("select 1 as id\n")
    with pytest.raises(ConfigError, match="the history of dwd.order_detail, is also a model"):
        load_models(p)
    (tmp_path / "layers" / "dwd" / "order_detail_history.sql").unlink()
    (tmp_path / "layers" / "dwd" / "order_detail.yaml").write_text("key: [id]\n")
    with pytest.raises(ConfigError, match="unknown table dwd.order_detail_history"):
        load_models(load_project(tmp_path))
