"""External tables without Spark: their YAML (every bad declaration a config error naming file,
field and fix), their place in the graph and selectors, their version (a Hudi timeline, a Parquet
listing, none for a catalog table), the columns check, and how a version decides a reader's plan.
Oracles: the files each test writes, and the plans the module docstring of
framework/transform/external.py promises."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from framework.errors import ConfigError, LakeError
from framework.project.config import load_project
from framework.project.externals import ExternalTable
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table.hudi import Instant
from framework.transform import external
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models
from framework.transform.plan import (
    BuildLimits,
    ModelPlan,
    PlanError,
    State,
    TargetState,
    UpstreamState,
    make_plan,
    plan_model,
)
from framework.transform.state import read_state
from framework.transform.strategy import Analysis
from models.commit_meta import ModelCheckpoint
from models.external_config import ExternalConfig
from tests.helpers import small_project


def _project(root: Path, files: dict[str, str]) -> Path:
    return small_project(root, {"ods/t.yaml": "tables:\n  - {source: db.orders, key: [id]}\n", **files})


def _issues(root: Path) -> str:
    with pytest.raises(ConfigError) as e:
        load_project(root)
    return "\n".join(str(i) for i in e.value.issues)


def test_bad_declarations_name_file_field_and_fix(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "external/both.yaml": "path: x\ntable: db.t\n",
        "external/neither.yaml": "description: nothing to read\n",
        "external/fmt.yaml": "table: db.t\nformat: parquet\n",
        "external/typed.yaml": "path: x\ncolumns: {a: number}\n",
        "external/typo.yaml": "pth: x\n",
        "external/name.yaml": "table: 'db.t; drop'\n",
        "external/keyed.yaml": "path: x\nkey: [id]\ncolumns: {a: int}\n",
        "external/form.yaml": "path: x\nformat: delta\n",
        "external/bad-name.yaml": "path: x\n",
    })
    found = _issues(root)
    for expected in [
        "layers/external/both.yaml:1: (root): declares both `path:` and `table:`\n  fix: declare exactly one",
        "layers/external/neither.yaml:1: (root): declares neither `path:` nor `table:`",
        "layers/external/fmt.yaml:1: (root): `format: parquet` goes with `path:`, not `table:`\n  fix: remove `format:`",
        "layers/external/typed.yaml:2: columns.a.type: 'number' is not a type lake checks\n  fix: use one of string, boolean",
        "layers/external/typo.yaml:1: pth: unknown key\n  fix: did you mean `path`?",
        "layers/external/name.yaml:1: table: 'db.t; drop' is not a catalog table name\n  fix: write `database.table`",
        "layers/external/keyed.yaml:1: (root): key column 'id' is not in `columns:`\n  fix: add it to `columns:`",
        "layers/external/form.yaml:2: format: Input should be 'hudi' or 'parquet'",
        "layers/external/bad-name.yaml: (file): external.bad-name is not a name of letters, digits and underscores",
    ]:
        assert expected in found, found


def test_a_declaration_resolves_its_path_against_the_project(tmp_path: Path) -> None:
    root = _project(tmp_path, {"external/rates.yaml": "path: data/rates\nformat: parquet\ncolumns: {day: date, rate: {type: 'DECIMAL(18, 8)'}}\n",
                               "external/fx.yaml": "table: finance.fx\n",
                               "external/remote.yaml": "path: s3a://bucket/rates/\n"})
    ext = load_project(root).externals
    assert str(ext["external.rates"].location) == str(root.resolve() / "data" / "rates")
    assert ext["external.rates"].kind == "parquet" and ext["external.rates"].config.columns["rate"].type == "decimal(18, 8)"
    assert (ext["external.fx"].kind, ext["external.fx"].location, ext["external.fx"].where) == ("catalog", None, "catalog table finance.fx")
    assert (ext["external.remote"].kind, str(ext["external.remote"].location)) == ("hudi", "s3a://bucket/rates")


def test_externals_are_graph_sources_that_selectors_reach_and_builds_skip(tmp_path: Path) -> None:
    root = _project(tmp_path, {"external/rates.yaml": "path: r\ntags: [fx]\n",
                               "dwd/priced.sql": "select o.id, o.amount * r.rate as eur from ods.orders o join external.rates r on o.cur = r.cur",
                               "dws/total.sql": "select sum(eur) as eur from dwd.priced",
                               "dws/orders.sql": "select count(*) as n from ods.orders"})
    project = load_project(root)
    models = load_models(project)
    g = build_graph(project, models)
    assert g.nodes["external.rates"]["kind"] == "external" and models["dwd.priced"].upstreams == ("ods.orders", "external.rates")
    assert select(g, models, ["external.rates+"], project=project) == ["dwd.priced", "dws.total"]
    assert select(g, models, ["external.rates"], project=project) == []  # read, never built
    assert select(g, models, ["tag:fx+"], project=project) == ["dwd.priced", "dws.total"]
    assert select(g, models, ["path:layers/external/rates.yaml+1"], project=project) == ["dwd.priced"]
    assert select(g, models, ["layer:external+"], project=project, nodes=True)[0] == "external.rates"
    with pytest.raises(LakeError, match="no external table named external.rate"):
        select(g, models, ["external.rate+"], project=project)
    (root / "layers" / "dwd" / "priced.sql").write_text("select * from external.rate")
    with pytest.raises(ConfigError, match="unknown table external.rate"):
        load_models(load_project(root))


def _ext(tmp_path: Path, **cfg: object) -> ExternalTable:
    c = ExternalConfig.model_validate(cfg)
    return ExternalTable("external.x", "layers/external/x.yaml", c, Location.parse(c.path, tmp_path) if c.path else None)


def test_a_hudi_version_is_its_latest_completed_commit_read_from_the_timeline(tmp_path: Path) -> None:
    ext = _ext(tmp_path, path="t")
    with pytest.raises(LakeError, match="reads .*/t, which does not exist") as e:
        external.version(ext)
    assert "add `format: parquet`" in str(e.value)
    (tmp_path / "t" / ".hoodie" / "timeline").mkdir(parents=True)
    (tmp_path / "t" / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    with pytest.raises(LakeError, match="has no completed commit yet"):
        external.version(ext)
    tl = tmp_path / "t" / ".hoodie" / "timeline"
    for f in ("100_105.commit", "110_130.deltacommit", "120_125.commit", "140.commit.requested", "150_160.clean"):
        (tl / f).write_text("")
    assert external.version(ext) == "130"  # the latest completion among data commits, not a clean
    legacy = _ext(tmp_path, path="old")  # a Hudi 0.x table: .hoodie/<instant>.<action>
    (tmp_path / "old" / ".hoodie").mkdir(parents=True)
    (tmp_path / "old" / ".hoodie" / "hoodie.properties").write_text("")
    for f in ("20240101000000.commit", "20240102000000.commit", "20240103000000.commit.inflight"):
        (tmp_path / "old" / ".hoodie" / f).write_text("")
    assert external.version(legacy) == "20240102000000"


def test_a_parquet_version_changes_with_the_data_files_only(tmp_path: Path) -> None:
    ext = _ext(tmp_path, path="p", format="parquet")
    d = tmp_path / "p"
    (d / "day=1").mkdir(parents=True)
    with pytest.raises(LakeError, match="holds no Parquet file"):
        external.version(ext)
    (d / "day=1" / "part-0.parquet").write_bytes(b"abc")
    v1 = external.version(ext)
    assert v1.startswith("files:") and external.version(ext) == v1
    for ignored in ("_SUCCESS", ".part-0.parquet.crc", "_temporary/x.parquet"):
        (d / ignored).parent.mkdir(parents=True, exist_ok=True)
        (d / ignored).write_bytes(b"x")
    assert external.version(ext) == v1
    os.utime(d / "day=1" / "part-0.parquet", (1, 1))  # rewritten in place: same name and size, new time
    v2 = external.version(ext)
    assert v2 != v1
    (d / "day=2").mkdir()
    (d / "day=2" / "part-0.parquet").write_bytes(b"d")
    assert external.version(ext) not in (v1, v2)


def test_a_catalog_table_has_no_version_and_counts_as_changed(tmp_path: Path) -> None:
    ext = _ext(tmp_path, table="db.t")
    assert external.version(ext) == external.UNVERSIONED
    assert "catalog table" in (external.change("external.x", external.UNVERSIONED, external.UNVERSIONED) or "")
    assert external.change("external.x", "1", "1") is None
    assert external.change("external.x", "1", "2") == "external table external.x changed (version 1 → 2)"


def test_declared_columns_are_checked_against_the_table_read(tmp_path: Path) -> None:
    ext = _ext(tmp_path, path="p", columns={"id": "integer", "Rate": "decimal(10, 2)"})
    assert external.column_problem(ext, {"id": "int", "rate": "decimal(10,2)", "extra": "string"}) is None
    problem, fix = external.column_problem(ext, {"id": "bigint", "rate": "decimal(10,2)"}) or ("", "")
    assert problem == f"layers/external/x.yaml: column 'id' of external.x is bigint in hudi table {tmp_path}/p, declared integer"
    assert fix.startswith("declare `id: bigint` in layers/external/x.yaml")
    problem, fix = external.column_problem(ext, {"id": "int"}) or ("", "")
    assert "column 'Rate' of external.x is not in" in problem and "(it has id)" in problem
    assert fix == "remove 'Rate' from `columns:` in layers/external/x.yaml, or correct its name"


def _reader(tmp_path: Path, strict: bool = False) -> tuple[object, Analysis]:
    files = {"external/rates.yaml": "path: r\n",
             "dwd/priced.sql": "select o.id, o.amount * r.rate as eur from ods.orders o join external.rates r on o.cur = r.cur"}
    if strict:
        files["dwd/priced.yaml"] = "key: [id]\nincremental: strict\n"
    models = load_models(load_project(_project(tmp_path, files)))
    m = models["dwd.priced"]
    return m, Analysis("rescan", "a join", m.upstreams, ("id",))


def _plan(m: object, a: Analysis, recorded: dict[str, str] | None, version: str, orders: tuple[str, ...] = ("5",),
          lenient: bool = False) -> ModelPlan:
    target = TargetState(checkpoint=recorded, fingerprint=m.fingerprint,  # type: ignore[attr-defined]
                         recorded=ModelCheckpoint(checkpoint=recorded) if recorded else None)
    state = State(upstreams={"ods.orders": UpstreamState(tuple(Instant(t, t, "commit") for t in orders))},
                  targets={"dwd.priced": target}, externals={"external.rates": version})
    if lenient:
        return make_plan([(m, a)], state, True, BuildLimits(0), lenient=True)[0]  # type: ignore[list-item]
    return plan_model(m, a, state, True, BuildLimits(0))  # type: ignore[arg-type]


def test_a_reader_is_recomputed_when_an_external_version_changes_and_noop_when_not(tmp_path: Path) -> None:
    m, a = _reader(tmp_path)
    first = _plan(m, a, None, "v1")
    assert (first.mode, first.end) == ("full", {"ods.orders": "5", "external.rates": "v1"})  # the checkpoint records v1
    same = _plan(m, a, {"ods.orders": "5", "external.rates": "v1"}, "v1")
    assert (same.mode, same.pending) == ("noop", {"ods.orders": 0, "external.rates": 0})
    moved = _plan(m, a, {"ods.orders": "5", "external.rates": "v1"}, "v2")
    assert moved.mode == "recompute" and moved.begin["external.rates"] == "v1"
    assert moved.reason.startswith("external table external.rates changed (version v1 → v2): an external table has no change feed")
    unknown = _plan(m, a, {"ods.orders": "5"}, "v1")  # a checkpoint from before the model read it
    assert unknown.mode == "recompute" and unknown.reason.startswith("no checkpoint for external table external.rates")
    catalog = _plan(m, a, {"ods.orders": "5", "external.rates": external.UNVERSIONED}, external.UNVERSIONED)
    assert catalog.mode == "recompute" and "catalog table" in catalog.reason
    # An unchanged external leaves the model to its strategy for its other upstreams' changes,
    # reading the external as of the same version before and after.
    other = _plan(m, a, {"ods.orders": "5", "external.rates": "v1"}, "v1", orders=("5", "6"))
    assert other.mode == "incremental" and other.pending == {"ods.orders": 1, "external.rates": 0}
    assert other.begin["external.rates"] == other.end["external.rates"] == "v1"
    # `lake plan` on a project whose ODS table has no data yet waits for it, not for the external.
    waiting = _plan(m, a, None, "v1", orders=(), lenient=True)
    assert waiting.reason == "full build; waits for ods.orders (no data yet)" and waiting.end == {"external.rates": "v1"}


def test_a_strict_reader_is_refused_when_an_external_forces_a_full_read(tmp_path: Path) -> None:
    m, a = _reader(tmp_path, strict=True)
    assert _plan(m, a, None, "v1").refused is None  # a first build has nothing to keep
    assert _plan(m, a, {"ods.orders": "5", "external.rates": "v1"}, "v1", orders=("5", "6")).refused is None
    refused = _plan(m, a, {"ods.orders": "5", "external.rates": "v1"}, "v2").refused or ""
    assert refused.startswith("dwd.priced is `incremental: strict` and this build would fall back to a recompute of every row: "
                              "external table external.rates changed (version v1 → v2)")


def test_an_external_table_with_nothing_to_read_is_waited_for_by_plan_and_fails_its_reader(tmp_path: Path) -> None:
    m, a = _reader(tmp_path)
    project = load_project(tmp_path)  # layers/external/rates.yaml reads `r`, which is not there
    state = read_state(None, Layout(project.warehouse), m.upstreams, [m.name], externals=project.externals)  # type: ignore[attr-defined]
    why, fix = state.absent["external.rates"]
    assert why.endswith("/r, which does not exist") and "add `format: parquet`" in fix
    waiting = make_plan([(m, a)], state, True, BuildLimits(0), lenient=True)[0]  # type: ignore[list-item]
    assert waiting.reason == "full build; waits for ods.orders, external.rates (no data yet)"
    with pytest.raises(PlanError, match="external.rates reads .*/r, which does not exist"):
        plan_model(m, a, replace(state, upstreams={"ods.orders": UpstreamState((Instant("5", "5", "commit"),))}), True, BuildLimits(0))  # type: ignore[arg-type]


def test_column_lineage_ends_at_an_external_tables_columns(tmp_path: Path) -> None:
    from framework.transform.lineage import Tracer

    _reader(tmp_path)
    project = load_project(tmp_path)
    node = Tracer.for_project(project, load_models(project)).trace("dwd.priced.eur")
    leaves = {(s.table, s.column, s.kind) for s in node.sources}
    assert ("external.rates", "rate", "external") in leaves and ("ods.orders", "amount", "ods") in leaves
