"""Gather what `lake docs` shows about every ODS table and model, without Spark for a local
warehouse: declarations from the YAML and model files, column types from the newest Parquet footer
of each Hudi table, column lineage from the sqlglot tracer, strategies from the analysis the build
uses, and the latest build and quality results from run history."""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone

import networkx as nx

from framework.errors import LakeError
from framework.project.config import Project
from framework.quality import store
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.transform.analysis import Analyses, declared_keys
from framework.transform.dag import build_graph
from framework.transform.lineage import LineageNode, Tracer, warehouse_schema
from framework.transform.loader import Model
from models.docs import CheckDoc, ColumnDoc, DocsCatalog, LastBuild, TableDoc
from models.records import BUILT_MODES, RunRecord

# ModelResult.mode -> the DAG's colour key (framework/site/svg.py STATUS_COLOURS).
_STATUS = {**dict.fromkeys(BUILT_MODES, "built"), "noop": "unchanged", "failed": "failed", "skipped": "skipped"}


def collect(project: Project, models: dict[str, Model], runs: list[RunRecord] | None = None) -> DocsCatalog:
    """Everything the docs site shows, as one record (also written as catalog.json)."""
    layout = Layout(project.warehouse)
    graph = build_graph(project, models)
    runs = history.runs(layout) if runs is None else runs
    builds = last_builds(runs)
    quality = _latest_quality(layout)
    tracer = Tracer.for_project(project, models)
    tables = [_ods_doc(project, n, graph, layout, builds, quality) for n in sorted(t.qualified_name for t in project.ods_tables)]
    analyses = Analyses(models, declared_keys(project))
    keyless = {t.qualified_name for t in project.ods_tables if not t.key}
    layer_order = {layer: i for i, layer in enumerate(("dwd", "dws"))}
    for name in sorted(models, key=lambda n: (layer_order.get(models[n].layer, 9), n)):
        if name in models:
            known = not (nx.ancestors(graph, name) & keyless)
            tables.append(_model_doc(models[name], graph, layout, builds, quality, analyses if known else None, tracer))
    status = {t.name: ("ods" if t.layer == "ods" else _STATUS.get(t.last_build.mode, "not built yet") if t.last_build else "not built yet")
              for t in tables}
    return DocsCatalog(project=project.config.name, generated_at=datetime.now(timezone.utc), warehouse=str(project.warehouse),
                       tables=tables, status=status)


def dag_status(project: Project, models: dict[str, Model], runs: list[RunRecord]) -> dict[str, str]:
    """Each table's state in its last run (the DAG's colours), from run history alone."""
    builds = last_builds(runs)
    ods = {t.qualified_name for t in project.ods_tables}
    return {**dict.fromkeys(ods, "ods"), **{m: _STATUS.get(b.mode, "not built yet") for m, b in builds.items() if m in models}}


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


def _ods_doc(project: Project, name: str, graph: nx.DiGraph, layout: Layout, builds: dict[str, LastBuild],
             quality: dict[str, tuple[str, list[CheckDoc]]]) -> TableDoc:
    t = project.ods_table(name)
    run_id, checks = quality.get(name, (None, []))
    return TableDoc(name=name, layer="ods", kind="ods", file=_declared_in(project, name), description=t.description, owner=t.owner,
                    tags=list(t.tags), source=t.source, key=list(t.key), downstreams=sorted(graph.successors(name)),
                    columns=_columns(layout, name, t.column_descriptions), last_build=builds.get(name), checks=checks,
                    checks_run_id=run_id, strategy=f"CDC upsert ({t.type.upper()})",
                    strategy_reason="Debezium events applied in source-position order; deletes remove the row")


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


def _model_doc(m: Model, graph: nx.DiGraph, layout: Layout, builds: dict[str, LastBuild],
               quality: dict[str, tuple[str, list[CheckDoc]]], analyses: Analyses | None, tracer: Tracer) -> TableDoc:
    strategy, reason = _strategy(m, analyses, builds.get(m.name))
    run_id, checks = quality.get(m.name, (None, []))
    lineage: dict[str, list[str]] = {}
    for col in tracer.columns(m.name) or ():
        with contextlib.suppress(LakeError, ValueError, KeyError):
            lineage[col] = sorted(x for x in _value_sources(tracer.trace(f"{m.name}.{col}")) if x.startswith("ods."))
    source = m.sql if m.sql is not None else m.path.read_text(encoding="utf-8")
    return TableDoc(name=m.name, layer=m.layer, kind=m.kind, file=m.rel, description=m.config.description, owner=m.config.owner,
                    tags=list(m.config.tags), source=source, key=list(m.config.key or []), strategy=strategy, strategy_reason=reason,
                    upstreams=sorted(graph.predecessors(m.name)), downstreams=sorted(graph.successors(m.name)),
                    columns=_columns(layout, m.name, dict(m.config.columns), lineage), last_build=builds.get(m.name),
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
