"""Seeds without Spark: typing CSV values (declared and inferred), every kind of bad input as a
config error naming file, line, field and fix, the content hash, and seeds in the model graph
(selection, planning by hash). Oracle for the typed rows: the values written in each test."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from framework.errors import ConfigError
from framework.project.config import load_project
from framework.project.seeds.load import read_seed
from framework.project.seeds.values import BadValue, infer, typed
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models
from framework.transform.plan import BuildLimits, State, TargetState, plan_model
from framework.transform.seed import analysis


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "lake.yaml").write_text("name: t\nwarehouse: wh\nspark: {master: 'local[1]'}\n")
    (root / "layers" / "ods" / "t.yaml").write_text("tables: []\n")
    for rel, text in files.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def _issues(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_models(load_project(root))
    return [str(i) for i in e.value.issues]


def test_inference_follows_dbt_spark() -> None:
    assert infer(["1", "-2", None]) == "bigint"
    assert infer(["1", "2.5", "1e3"]) == "double"
    assert infer(["true", "FALSE"]) == "boolean"
    assert infer(["2024-01-31", "1999-12-01"]) == "date"
    assert infer(["2024-01-31 10:00:00", "2024-01-31T10:00:00.123"]) == "timestamp"
    assert infer(["1", "x"]) == infer([None]) == infer(["2024-13-01"]) == "string"
    assert infer([str(2**63)]) == "double"  # past bigint


@pytest.mark.parametrize(("value", "typ", "text"), [
    ("42", "int", "42"), (" 7 ", "bigint", "7"), ("Y", "boolean", "true"), ("0", "boolean", "false"),
    ("1.500", "decimal(4,2)", "1.500"), ("-12.3", "decimal(4,2)", "-12.3"), ("2024-02-29", "date", "2024-02-29"),
    ("2024-02-29T01:02", "timestamp", "2024-02-29 01:02:00"), ("", "string", ""), (None, "int", None),
])
def test_values_come_back_as_the_text_spark_casts(value: str | None, typ: str, text: str | None) -> None:
    assert typed(value, typ) == text


@pytest.mark.parametrize(("value", "typ", "problem"), [
    ("1.5", "int", "'1.5' is not a whole number"), ("128", "tinyint", "does not fit in TINYINT"),
    ("123.4", "decimal(4,2)", "does not fit in DECIMAL(4,2)"), ("1.234", "decimal(4,2)", "does not fit"),
    ("2024-02-30", "date", "is not a date"), ("2024-01-01 10:00+02:00", "timestamp", "is not a timestamp"),
    ("maybe", "boolean", "is not a boolean"), ("1,5", "double", "is not a number"),
])
def test_bad_values_say_why(value: str, typ: str, problem: str) -> None:
    with pytest.raises(BadValue, match=problem.replace("(", r"\(").replace(")", r"\)")):
        typed(value, typ)


def test_a_seed_is_typed_by_its_yaml_and_its_values(tmp_path: Path) -> None:
    root = _project(tmp_path, {"seed/c.csv": "code,name,pop,eu\nDE,Germany,83.2,true\nFR,\"France, Rep.\",68,\n\n",
                               "seed/c.yaml": "key: [code]\ncolumns: {pop: 'decimal(6,1)', name: {description: the name}}\n"})
    seed, issues = read_seed(root, root / "layers" / "seed" / "c.csv")
    assert not issues and seed is not None
    assert seed.columns == (("code", "string"), ("name", "string"), ("pop", "decimal(6,1)"), ("eu", "boolean"))
    assert seed.rows == (("DE", "Germany", "83.2", "true"), ("FR", "France, Rep.", "68", None))
    # The hash follows the file and the YAML's data keys, not its descriptions.
    (root / "layers" / "seed" / "c.yaml").write_text("key: [code]\ncolumns: {pop: 'decimal(6,1)', name: {description: other}}\n")
    same, _ = read_seed(root, root / "layers" / "seed" / "c.csv")
    (root / "layers" / "seed" / "c.yaml").write_text("key: [code]\ncolumns: {pop: double}\n")
    retyped, _ = read_seed(root, root / "layers" / "seed" / "c.csv")
    assert same is not None and retyped is not None
    assert same.content_hash == seed.content_hash != retyped.content_hash


def test_bad_seeds_name_file_line_field_and_fix(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "seed/a.csv": "id,name\n1,x\n2\nx,y\n",
        "seed/b.csv": "id,name\n1,x\n1,y\n3,\n",
        "seed/b.yaml": "key: [id]\ncolumns: {nmae: string, id: {type: number}}\n",
        "seed/c.csv": "id,bad name,id\n",
        "seed/d.csv": "",
        "seed/e.csv": "a\n1\n1\n",
        "seed/f.csv": "k,v\n,1\n",
        "seed/f.yaml": "key: [k]\nkeys: [v]\n",
    })
    found = "\n".join(_issues(root))
    for expected in [
        "layers/seed/a.csv:3: (row): 1 field(s), the header has 2\n  fix: give the row one value per column (id, name)",
        "layers/seed/b.yaml:2: columns.id.type: 'number' is not a type a seed column can have\n  fix: use one of string, boolean",
        "layers/seed/c.csv:1: (header) column 2: 'bad name' is not a column name a table can have",
        "fix: rename it, e.g. to bad_name",
        "layers/seed/c.csv:1: (header) column 3: 'id' appears twice",
        "layers/seed/d.csv:1: (header): the file is empty",
        "layers/seed/e.csv:3: a: repeats the row (a seed without `key:` keeps one row per distinct row) of line 2",
        "layers/seed/f.yaml:2: keys: unknown key\n  fix: did you mean `key`?",
    ]:
        assert expected in found, found
    # a.csv's bad value is found once its shape is right; b.yaml's unknown column once its types are.
    (root / "layers" / "seed" / "a.csv").write_text("id,name\n1,x\nx,y\n")
    (root / "layers" / "seed" / "a.yaml").write_text("columns: {id: int}\n")
    (root / "layers" / "seed" / "b.yaml").write_text("key: [id]\ncolumns: {nmae: string}\n")
    (root / "layers" / "seed" / "f.yaml").write_text("key: [k]\n")
    found = "\n".join(_issues(root))
    for expected in [
        "layers/seed/a.csv:3: id: 'x' is not a whole number; the column is declared int in layers/seed/a.yaml\n"
        "  fix: write 42, or declare the column's type in layers/seed/a.yaml, e.g. `columns: {id: string}`",
        "layers/seed/b.yaml: columns.nmae: 'nmae' is not a column of layers/seed/b.csv\n  fix: did you mean 'name'? the header has: id, name",
        "layers/seed/f.csv:2: k: the key column k is empty",
    ]:
        assert expected in found, found


def test_seeds_are_graph_nodes_planned_by_their_hash(tmp_path: Path) -> None:
    root = _project(tmp_path, {"seed/tiers.csv": "id,tier\n1,gold\n", "seed/tiers.yaml": "key: [id]\ntags: [ref]\n",
                               "dwd/gold.sql": "select id from seed.tiers where tier = 'gold'",
                               "dws/n.sql": "select tier, count(*) as n from seed.tiers group by tier"})
    project = load_project(root)
    models = load_models(project)
    g = build_graph(project, models)
    assert select(g, models, ["seed.tiers+"]) == ["seed.tiers", "dwd.gold", "dws.n"]
    assert select(g, models, ["layer:seed"]) == select(g, models, ["tag:ref"]) == ["seed.tiers"]
    m = models["seed.tiers"]
    a = analysis(m)
    assert (a.strategy, a.key, m.rel) == ("full", ("id",), "layers/seed/tiers.csv")
    limits = BuildLimits(0)

    def plan(recorded: str | None, incremental: bool) -> tuple[str, str]:
        p = plan_model(m, a, State(targets={m.name: TargetState(fingerprint=recorded)}), incremental, limits)
        return p.mode, p.reason

    assert plan(None, True) == ("full", "first load of layers/seed/tiers.csv")
    assert plan(m.fingerprint, False) == ("noop", f"layers/seed/tiers.csv is unchanged (content hash {m.fingerprint})")
    mode, reason = plan("0123", True)
    assert mode == "full" and reason.startswith(f"layers/seed/tiers.csv changed (content hash 0123 → {m.fingerprint})")
    with pytest.raises(ConfigError, match="unknown table seed.tier"):
        (root / "layers" / "dwd" / "gold.sql").write_text("select id from seed.tier")
        load_models(load_project(root))
