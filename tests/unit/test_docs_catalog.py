"""`lake docs generate` has a page for every node of the project graph, whatever its kind: ODS
tables and their histories, external tables, seeds, SQL models and their histories (no Spark: an
empty warehouse). Oracles: the YAML and CSV files each test writes, and `lake init`'s scaffold."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from framework.cli.main import main
from framework.demo.seed import inventory_sample
from framework.project.config import load_project
from framework.project.scaffold import scaffold
from framework.site.catalog import collect, dag_status
from framework.site.docs import render
from framework.transform.dag import build_graph
from framework.transform.loader import load_models
from tests.helpers import small_project

FILES = {
    "ods/t.yaml": """
        tables:
          - {source: db.orders, key: [id], history: true, description: Orders as the shop has them.}
    """,
    "external/fx.yaml": """
        description: Exchange rates, written by the treasury job.
        owner: treasury
        path: fx
        key: [currency]
        columns:
          currency: {type: string, description: ISO 4217 code}
          rate: "decimal(18,8)"
    """,
    "seed/regions.csv": "code,name\nn,North\ns,South\n",
    "seed/regions.yaml": """
        description: Sales regions.
        key: [code]
        columns:
          code: {type: string, description: one letter}
    """,
    "dws/orders_fx.sql": "select o.id, o.region, f.rate, r.name from ods.orders o join external.fx f on o.currency = f.currency "
                         "join seed.regions r on o.region = r.code",
    "dws/orders_fx.yaml": "key: [id]\nhistory: true\n",
    "dws/order_versions.sql": "select id, _valid_from from ods.orders_history",
}


def _project(root: Path) -> Path:
    return small_project(root, FILES)


def test_every_node_kind_has_a_page_saying_what_it_is(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path))
    models = load_models(project)
    graph = build_graph(project, models)
    catalog = collect(project, models, runs=[])
    tables = {t.name: t for t in catalog.tables}
    assert set(tables) == set(graph)  # every node, none twice
    assert {n: t.kind for n, t in tables.items()} == {
        "ods.orders": "ods", "ods.orders_history": "history", "external.fx": "external", "seed.regions": "seed",
        "dws.orders_fx": "sql", "dws.orders_fx_history": "history", "dws.order_versions": "sql"}
    fx = tables["external.fx"]
    assert (fx.file, fx.description, fx.owner, fx.key) == ("layers/external/fx.yaml", "Exchange rates, written by the treasury job.", "treasury", ["currency"])
    assert [(c.name, c.type, c.description) for c in fx.columns] == [("currency", "string", "ISO 4217 code"), ("rate", "decimal(18,8)", None)]
    assert fx.source is not None and fx.source.startswith("hudi table ") and fx.source.endswith("/fx")
    assert fx.downstreams == ["dws.orders_fx"]
    seed = tables["seed.regions"]
    assert (seed.file, seed.layer, seed.description, seed.key) == ("layers/seed/regions.csv", "seed", "Sales regions.", ["code"])
    assert [(c.name, c.type, c.description) for c in seed.columns] == [("code", "string", "one letter"), ("name", "string", None)]
    assert seed.downstreams == ["dws.orders_fx"] and seed.strategy_reason is not None and "2 rows of layers/seed/regions.csv" in seed.strategy_reason
    ods_history, model_history = tables["ods.orders_history"], tables["dws.orders_fx_history"]
    assert (ods_history.layer, ods_history.upstreams, ods_history.downstreams) == ("ods", ["ods.orders"], ["dws.order_versions"])
    assert ods_history.key == ["id", "_seq"] and ods_history.file == "layers/ods/t.yaml"
    assert (model_history.layer, model_history.upstreams, model_history.file) == ("dws", ["dws.orders_fx"], "layers/dws/orders_fx.sql")
    assert {"_valid_from", "_valid_to", "_is_current"} <= {c.name for c in model_history.columns}
    assert catalog.status["external.fx"] == "external" and catalog.status["ods.orders_history"] == "ods"
    assert dag_status(project, models, [])["external.fx"] == "external"
    html = render(catalog, graph, {})
    for name, label in (("external.fx", "External table"), ("seed.regions", "Seed"), ("dws.orders_fx_history", "History table")):
        section = html[html.index(f'id="t-{name}"'):]
        section = section[:section.index("</section>")]
        assert f"<b>{label}</b>" in section and 'href="#t-' in section, name  # what it is, and a link to a reader or what it reads
    fx_page = html[html.index('id="t-external.fx"'):]
    assert "<code>currency</code>" in fx_page[:fx_page.index("</section>")] and "Not built yet" not in fx_page[:fx_page.index("</section>")]


def test_docs_generate_on_a_new_project(tmp_path: Path) -> None:
    """What `lake init` makes (a seed among the tables) documents without an error."""
    scaffold(tmp_path, "shop", cdc_sample=inventory_sample())
    out = CliRunner().invoke(main, ["--project", str(tmp_path), "docs", "generate", "--open"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    catalog = json.loads((Path(out.stdout.strip()).parent / "catalog.json").read_text())
    seed = next(t for t in catalog["tables"] if t["name"] == "seed.email_domains")
    assert seed["kind"] == "seed" and [c["name"] for c in seed["columns"]] == ["domain", "kind"]
