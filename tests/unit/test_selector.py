"""dbt's selection grammar over a model graph, every form (no Spark): framework/transform/selector.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from framework.errors import LakeError
from framework.project.config import load_project
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models

# ods.user -> dwd.a -> dwd.b -> dws.c -> dws.d;  ods.order -> dwd.b;  ods.order -> dws.e;  dwd.a + dws.e -> dws.f
FILES = {
    "dwd/a.sql": "select id, name from ods.user",
    "dwd/a.yaml": "tags: [core]\n",
    "dwd/b.sql": "select o.id, a.name from dwd.a a join ods.order o on o.uid = a.id",
    "dwd/b.yaml": "key: [id]\ntags: [core, finance]\n",
    "dws/c.sql": "select name, count(*) as n from dwd.b group by name",
    "dws/c.yaml": "tags: [finance]\n",
    "dws/d.sql": "select count(*) as names from dws.c",
    "dws/d.yaml": "tags: [finance, daily]\n",
    "dws/e.sql": "select uid, count(*) as n from ods.order group by uid",
    "dws/e.yaml": "tags: [daily]\n",
    "dws/f.sql": "select a.id, e.n from dwd.a a join dws.e e on e.uid = a.id",
}


Sel = Callable[..., list[str]]


@pytest.fixture(scope="module")
def sel(tmp_path_factory: pytest.TempPathFactory) -> Sel:
    root = tmp_path_factory.mktemp("sel")
    (root / "lake.yaml").write_text("name: t\n")
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "shop.yaml").write_text("tables:\n  - {source: db.user, key: [id]}\n  - {source: db.order, key: [id]}\n")
    for rel, text in FILES.items():
        p = root / "layers" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    project = load_project(root)
    models = load_models(project)
    g = build_graph(project, models)
    fp = {n: (m.fingerprint, m.metadata_fingerprint) for n, m in models.items()}
    # The tables' last commits: a, f as built; b with other metadata (a description edit); c with
    # another query; d never built; e by a lake before the data/metadata split (old fingerprint).
    state = {"dwd.a": fp["dwd.a"], "dwd.b": (fp["dwd.b"][0], "0ther"), "dws.c": ("0ld", fp["dws.c"][1]),
             "dws.e": (models["dws.e"].legacy_fingerprint, None), "dws.f": fp["dws.f"]}

    def run(*selectors: str, exclude: tuple[str, ...] = (), nodes: bool = False) -> list[str]:
        """The selection, sorted by name (its dependency order is test_dag.py's)."""
        return sorted(select(g, models, list(selectors), list(exclude), project=project, recorded=state.get, nodes=nodes))

    return run


def test_plain_names_and_methods(sel: Sel) -> None:
    assert sel("dws.c") == ["dws.c"]
    assert sel("layer:dwd") == ["dwd.a", "dwd.b"]
    assert sel("tag:daily") == ["dws.d", "dws.e"]
    assert sel() == ["dwd.a", "dwd.b", "dws.c", "dws.d", "dws.e", "dws.f"]
    assert sel("layer:ods", nodes=True) == ["ods.order", "ods.user"]
    assert sel("ods.user") == []  # an ODS table is not a model to build ...
    assert sel("ods.user+1") == ["dwd.a"]  # ... but its descendants are


def test_comma_is_an_intersection_and_space_a_union(sel: Sel) -> None:
    assert sel("tag:finance,layer:dws") == ["dws.c", "dws.d"]
    assert sel("tag:finance,tag:daily") == ["dws.d"]
    assert sel("tag:finance,tag:nope") == []  # methods may meet nowhere: nothing selected, no error
    assert sel("+dws.c,tag:core") == ["dwd.a", "dwd.b"]
    assert sel("dws.e dwd.a") == ["dwd.a", "dws.e"]  # words of one argument
    assert sel("dws.e", "dwd.a") == ["dwd.a", "dws.e"]  # arguments
    assert sel("tag:core,layer:dwd  dws.e") == ["dwd.a", "dwd.b", "dws.e"]


def test_graph_operators_and_depths(sel: Sel) -> None:
    assert sel("+dws.c") == ["dwd.a", "dwd.b", "dws.c"]
    assert sel("1+dws.c") == ["dwd.b", "dws.c"]
    assert sel("2+dws.c") == ["dwd.a", "dwd.b", "dws.c"]
    assert sel("dwd.a+") == ["dwd.a", "dwd.b", "dws.c", "dws.d", "dws.f"]
    assert sel("dwd.a+1") == ["dwd.a", "dwd.b", "dws.f"]
    assert sel("dwd.a+2") == ["dwd.a", "dwd.b", "dws.c", "dws.f"]
    assert sel("1+dws.c+1") == ["dwd.b", "dws.c", "dws.d"]
    assert sel("+tag:daily") == ["dwd.a", "dwd.b", "dws.c", "dws.d", "dws.e"]
    assert sel("tag:core+1,layer:dws") == ["dws.c", "dws.f"]


def test_at_takes_descendants_and_everything_they_need(sel: Sel) -> None:
    assert sel("dws.e+") == ["dws.e", "dws.f"]
    assert sel("@dws.e") == ["dwd.a", "dws.e", "dws.f"]  # dws.f also reads dwd.a
    assert sel("@dws.c") == ["dwd.a", "dwd.b", "dws.c", "dws.d"]


def test_path_folder_file_and_yaml(sel: Sel) -> None:
    assert sel("path:layers/dws") == ["dws.c", "dws.d", "dws.e", "dws.f"]
    assert sel("path:layers/dws/") == sel("path:layers/dws") == sel("path:./layers/dws")
    assert sel("path:layers/dwd/b.sql") == ["dwd.b"]
    assert sel("path:layers/dwd/b.yaml") == ["dwd.b"]
    assert sel("path:layers") == sel()
    assert sel("path:layers/ods/shop.yaml", nodes=True) == ["ods.order", "ods.user"]
    assert sel("path:layers/ods/shop.yaml+1") == ["dwd.a", "dwd.b", "dws.e"]
    assert sel("path:layers/dwd+1,layer:dws") == ["dws.c", "dws.f"]
    with pytest.raises(LakeError, match="path:layers/dwx: no such file or folder") as e:
        sel("path:layers/dwx")
    assert "relative to the project root" in (e.value.fix or "")


def test_state_modified_and_new(sel: Sel) -> None:
    # b: metadata edited; c: query changed; d: no commit yet. e: an older lake's fingerprint of
    # the same query and YAML: unchanged.
    assert sel("state:modified") == ["dwd.b", "dws.c", "dws.d"]
    assert sel("state:new") == ["dws.d"]
    assert sel("state:modified,layer:dws") == ["dws.c", "dws.d"]
    assert sel("state:modified+") == ["dwd.b", "dws.c", "dws.d"]
    assert sel("state:modified", exclude=("state:new",)) == ["dwd.b", "dws.c"]


def test_exclude_takes_the_same_grammar(sel: Sel) -> None:
    assert sel("layer:dws", exclude=("tag:finance,tag:daily",)) == ["dws.c", "dws.e", "dws.f"]
    assert sel(exclude=("dwd.a+",)) == ["dws.e"]
    assert sel("+dws.d", exclude=("1+dws.c", "path:layers/dws/d.sql")) == ["dwd.a"]


def test_a_comma_of_names_points_to_the_old_meaning(sel: Sel) -> None:
    for text in ("dwd.a,dws.e", "+dws.c,dws.e"):
        with pytest.raises(LakeError, match="a comma means intersection") as e:
            sel(text)
        assert "used to read a comma as a union" in str(e.value)
        assert e.value.fix is not None and f"lake build {text.replace(',', ' ')}" in e.value.fix and "CHANGELOG" in e.value.fix
    assert sel("dwd.a,dwd.a") == ["dwd.a"]


@pytest.mark.parametrize(("text", "message", "fix"), [
    ("tags:finance", "unknown method `tags:`", "did you mean `tag:`?"),
    ("@+dws.c", "`@` and a leading `+` together", "drop the `+`"),
    ("tag:", "`tag:` needs a value", "tag:finance"),
    ("state:changed", "state:changed is not a state", "state:modified"),
    ("dws.cc", "no model named dws.cc", "did you mean dws.c?"),
    ("ods.usr", "no ODS table named ods.usr", "did you mean ods.user?"),
    ("dws.c+x", "cannot read", "dbt selector grammar"),
    ("a,,b", "cannot read ''", "dbt selector grammar"),
    ("  ", "empty selector", "name models"),
])
def test_errors_name_the_selector_and_the_fix(sel: Sel, text: str, message: str, fix: str) -> None:
    with pytest.raises(LakeError) as e:
        sel(text)
    assert message in str(e.value) and fix in (e.value.fix or ""), (str(e.value), e.value.fix)
