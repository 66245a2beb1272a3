"""Gather what `lake docs` shows about every table of the project graph (ODS tables and their
histories, external tables, seeds, models and their histories), without Spark for a local
warehouse: declarations from the YAML, CSV and model files, column types from the newest Parquet
footer of each Hudi table, column lineage from the sqlglot tracer, strategies from the analysis the
build uses, and the latest build and quality results from run history."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timezone

import networkx as nx

from framework.errors import LakeError
from framework.project.config import Project
from framework.project.externals import ExternalTable
from framework.quality import store
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.transform.analysis import Analyses, declared_keys
from framework.transform.dag import build_graph
from framework.transform.lineage import LineageNode, Tracer, warehouse_schema
from framework.transform.loader import Model
from models.config import OdsTable
from models.docs import CheckDoc, ColumnDoc, DocsCatalog, LastBuild, TableDoc
from models.records import BUILT_MODES, RunRecord

# ModelResult.mode -> the DAG's colour key (framework/site/svg.py STATUS_COLOURS).
_STATUS = {**dict.fromkeys(BUILT_MODES, "built"), "noop": "unchanged", "failed": "failed", "skipped": "skipped"}


@dataclass(frozen=True)
class _Facts:
    """What every table's page is made from."""

    project: Project
    models: dict[str, Model]
    graph: nx.DiGraph
    layout: Layout
    builds: dict[str, LastBuild]
    quality: dict[str, tuple[str, list[CheckDoc]]]


# The order of the pages: sources first, then the layers that read them.
_LAYER_ORDER = {layer: i for i, layer in enumerate(("ods", "external", "seed", "dwd", "dws"))}


def collect(project: Project, models: dict[str, Model], runs: list[RunRecord] | None = None) -> DocsCatalog:
    """Everything the docs site shows, one page per node of the project graph (also written as
    catalog.json)."""
    layout = Layout(project.warehouse)
    graph = build_graph(project, models)
    runs = history.runs(layout) if runs is None else runs
    facts = _Facts(project, models, graph, layout, last_builds(runs), _latest_quality(layout))
    tracer = Tracer.for_project(project, models)
    analyses = Analyses(models, declared_keys(project))
    keyless = {t.qualified_name for t in project.ods_tables if not t.key}
    tables: list[TableDoc] = []
    for name in sorted(graph, key=lambda n: (_LAYER_ORDER.get(graph.nodes[n]["layer"], 9), n)):
        kind = graph.nodes[name]["kind"]
        if kind == "ods":
            tables.append(_ods_doc(facts, name))
        elif kind == "external":
            tables.append(_external_doc(facts, project.externals[name]))
        elif kind == "history":
            tables.append(_history_doc(facts, name, next(m for m in models.values() if m.history_name == name).name))
        elif kind == "seed":
            tables.append(_seed_doc(facts, models[name]))
        else:
            known = not (nx.ancestors(graph, name) & keyless)
            tables.append(_model_doc(facts, models[name], analyses if known else None, tracer))
    return DocsCatalog(project=project.config.name, generated_at=datetime.now(timezone.utc), warehouse=str(project.warehouse),
                       tables=tables, status={t.name: _state(t) for t in tables})


def _state(t: TableDoc) -> str:
    """A table's colour in the DAG (framework/site/svg.py STATUS_COLOURS)."""
    if t.kind in ("ods", "external"):
        return t.kind
    if t.kind == "history" and t.layer == "ods":
        return "ods"
    return _STATUS.get(t.last_build.mode, "not built yet") if t.last_build else "not built yet"


def dag_status(project: Project, models: dict[str, Model], runs: list[RunRecord]) -> dict[str, str]:
    """Each table's state in its last run (the DAG's colours), from run history alone."""
    builds = last_builds(runs)
    ods = {n for t in project.ods_tables for n in t.readable()}
    built = {m: _STATUS.get(b.mode, "not built yet") for m, b in builds.items() if m in models}
    histories = {m.history_name: built[m.name] for m in models.values() if m.history_name and m.name in built}
    return {**dict.fromkeys(ods, "ods"), **dict.fromkeys(project.externals, "external"), **built, **histories}


def last_builds(runs: list[RunRecord]) -> dict[str, LastBuild]:
    """The newest build of each model and the newest ingest into each ODS table."""
    out: dict[str, LastBuild] = {}
    for run in sorted(runs, key=lambda r: r.started_at):
        for m in run.models:
            if m.mode in (*BUILT_MODES, "noop", "failed", "skipped"):
                fresh = run.freshness.get(m.model)
                out[m.model] = LastBuild(run_id=run.run_id, at=m.committed_at or run.started_at, mode=m.mode, strategy=m.strategy,
                                         reason=m.reason, rows_written=m.rows_written, rows_deleted=m.rows_deleted, seconds=m.seconds,
                                         freshness_s=fresh.newest_event_lag_s if fresh else None)
        if run.ingest is not None:
            for t in run.ingest.totals().values():
                name = t.table if t.table.startswith("ods.") else f"ods.{t.table}"
                out[name] = LastBuild(run_id=run.run_id, at=run.finished_at or run.started_at, mode="ingest", reason=t.reason,
                                      rows_written=t.upserts, rows_deleted=t.deletes)
    return out


def _latest_quality(layout: Layout) -> dict[str, tuple[str, list[CheckDoc]]]:
    """Per table: the newest run that checked it, and its checks."""
    out: dict[str, tuple[str, list[CheckDoc]]] = {}
    for rid in store.runs(layout):
        for q in store.load_run(layout, rid):
            out[q.model] = (rid, [CheckDoc(name=r.name, severity=r.severity, success=r.success, summary=r.summary()) for r in q.results])
    return out


def _columns(layout: Layout, name: str, described: dict[str, str], lineage: dict[str, list[str]] | None = None) -> list[ColumnDoc]:
    """Columns in the table's order (declared ones not yet written come after, without a type)."""
    schema = warehouse_schema(layout.table(name)) or []
    seen = {c for c, _ in schema}
    cols = [ColumnDoc(name=c, type=t, description=described.get(c), sources=(lineage or {}).get(c, [])) for c, t in schema]
    cols += [ColumnDoc(name=c, description=d, sources=(lineage or {}).get(c, [])) for c, d in described.items() if c not in seen]
    return cols


def _ods_doc(f: _Facts, name: str) -> TableDoc:
    """An ODS table, or the history an ODS table keeps (`history: true`)."""
    t = next(t for t in f.project.ods_tables if name in t.readable())
    if name != t.qualified_name:
        return _ods_history_doc(f, name, t)
    run_id, checks = f.quality.get(name, (None, []))
    return TableDoc(name=name, layer="ods", kind="ods", file=_declared_in(f.project, name), description=t.description, owner=t.owner,
                    tags=list(t.tags), source=t.source, key=list(t.key), downstreams=sorted(f.graph.successors(name)),
                    columns=_columns(f.layout, name, t.column_descriptions), last_build=f.builds.get(name), checks=checks,
                    checks_run_id=run_id, strategy=f"CDC upsert ({t.type.upper()})",
                    strategy_reason="Debezium events applied in source-position order; deletes remove the row")


_HISTORY_COLUMNS = {"_seq": "orders the versions (the source position of an ODS event, the commit of a model's build)",
                    "_valid_from": "when this version became current", "_valid_to": "when a later version or a delete ended it (NULL: current)",
                    "_is_current": "whether this is the row's current version", "_ended_by_delete": "whether a delete ended it"}


def _ods_history_doc(f: _Facts, name: str, t: OdsTable) -> TableDoc:
    base = t.qualified_name
    return TableDoc(name=name, layer="ods", kind="history", file=_declared_in(f.project, base), owner=t.owner, tags=list(t.tags),
                    description=f"Every version of each row of {base} (SCD type 2).", upstreams=[base], key=[*t.key, "_seq"],
                    downstreams=sorted(f.graph.successors(name)), last_build=f.builds.get(base),
                    columns=_columns(f.layout, name, {**t.column_descriptions, **_HISTORY_COLUMNS}),
                    strategy="history", strategy_reason=f"written by each ingest into {base} (`history: true`)")


def _external_doc(f: _Facts, e: ExternalTable) -> TableDoc:
    """A table lake reads and never writes: what it reads, the columns it requires, its readers."""
    c = e.config
    declared = [ColumnDoc(name=n, type=col.type, description=col.description) for n, col in c.columns.items()]
    found = warehouse_schema(e.location) if e.location is not None and e.location.is_local and e.kind == "hudi" else None
    if found:
        types = dict(found)
        described = {n: col.description for n, col in c.columns.items()}
        declared = [ColumnDoc(name=n, type=t, description=described.get(n)) for n, t in found]
        declared += [ColumnDoc(name=n, type=col.type, description=col.description) for n, col in c.columns.items() if n not in types]
    return TableDoc(name=e.name, layer="external", kind="external", file=e.rel, description=c.description, owner=c.owner, tags=list(c.tags),
                    source=e.where, key=list(c.key or []), downstreams=sorted(f.graph.successors(e.name)), columns=declared,
                    strategy="external", strategy_reason=f"read from the {e.where}; lake never writes it")


def _seed_doc(f: _Facts, m: Model) -> TableDoc:
    """A seed: the CSV file it is loaded from, its typed columns, its readers."""
    assert m.seed is not None
    described = dict(m.config.columns)
    cols = [ColumnDoc(name=n, type=t, description=described.get(n)) for n, t in m.seed.columns]
    run_id, checks = f.quality.get(m.name, (None, []))
    return TableDoc(name=m.name, layer=m.layer, kind="seed", file=m.rel, description=m.config.description, owner=m.config.owner,
                    tags=list(m.config.tags), key=list(m.config.key or []), downstreams=sorted(f.graph.successors(m.name)), columns=cols,
                    last_build=f.builds.get(m.name), checks=checks, checks_run_id=run_id, strategy="seed",
                    strategy_reason=f"{len(m.seed.rows)} rows of {m.rel}, loaded by `lake build` (again when the file changes)")


def _history_doc(f: _Facts, name: str, of: str) -> TableDoc:
    """The history a model keeps (`history: true`): every version of each of its rows."""
    m = f.models[of]
    return TableDoc(name=name, layer=m.layer, kind="history", file=m.rel, description=f"Every version of each row of {of} across its builds (SCD type 2).",
                    owner=m.config.owner, tags=list(m.config.tags), upstreams=[of], downstreams=sorted(f.graph.successors(name)),
                    columns=_columns(f.layout, name, {**dict(m.config.columns), **_HISTORY_COLUMNS}), last_build=f.builds.get(of),
                    strategy="history", strategy_reason=f"written after each build of {of} (`history: true`)")


def _declared_in(project: Project, name: str) -> str | None:
    """The `layers/ods/*.yaml` file declaring an ODS table."""
    import yaml

    for path in sorted((project.root / "layers" / "ods").glob("*.y*ml")):
        with contextlib.suppress(OSError, yaml.YAMLError):
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            for t in doc.get("tables", []) if isinstance(doc, dict) else []:
                if isinstance(t, dict) and f"ods.{t.get('name') or str(t.get('source', '')).rsplit('.', 1)[-1].lower()}" == name:
                    return str(path.relative_to(project.root))
    return None


def _model_doc(f: _Facts, m: Model, analyses: Analyses | None, tracer: Tracer) -> TableDoc:
    strategy, reason = _strategy(m, analyses, f.builds.get(m.name))
    run_id, checks = f.quality.get(m.name, (None, []))
    lineage: dict[str, list[str]] = {}
    for col in tracer.columns(m.name) or ():
        with contextlib.suppress(LakeError, ValueError, KeyError):
            lineage[col] = sorted(x for x in _value_sources(tracer.trace(f"{m.name}.{col}")) if x.startswith("ods."))
    source = m.sql if m.sql is not None else m.path.read_text(encoding="utf-8")
    return TableDoc(name=m.name, layer=m.layer, kind=m.kind, file=m.rel, description=m.config.description, owner=m.config.owner,
                    tags=list(m.config.tags), source=source, key=list(m.config.key or []), strategy=strategy, strategy_reason=reason,
                    upstreams=sorted(f.graph.predecessors(m.name)), downstreams=sorted(f.graph.successors(m.name)),
                    columns=_columns(f.layout, m.name, dict(m.config.columns), lineage), last_build=f.builds.get(m.name),
                    checks=checks, checks_run_id=run_id)


def _value_sources(node: LineageNode) -> set[str]:
    """The columns a value is computed from (GROUP BY keys that only place it are left out)."""
    if not node.sources:
        return {node.name}
    return set().union(*(_value_sources(s) for s in node.sources))


def _strategy(m: Model, analyses: Analyses | None, last: LastBuild | None) -> tuple[str | None, str | None]:
    """The strategy the build would pick, found without Spark; when it needs a key only the
    warehouse knows (`analyses` None: an ODS table upstream declared without `key:`), the one the
    last build used."""
    try:
        if analyses is None:
            raise KeyError(m.name)
        a = analyses.of(m)
        return a.strategy, a.reason
    except (LakeError, KeyError, ValueError):
        if last is not None and last.strategy:
            return last.strategy, (last.reason or "") + " (as of the last build)"
        return None, "decided at the first build (needs the key of an ODS table declared without `key:`)"
