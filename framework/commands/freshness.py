"""`lake freshness`: the age of each selected ODS table's newest ingested source event against
its `freshness:` (framework/quality/freshness.py). Reads the tables' timelines only: no Spark on a local
warehouse, nothing written."""

from __future__ import annotations

from framework.errors import LakeError
from framework.project.config import Project
from framework.quality import freshness
from framework.transform.dag import build_graph, select
from framework.transform.loader import load_models
from framework.transform.state import recorded
from models.records import SourceFreshness


def selected_tables(project: Project, selectors: list[str]) -> list[str]:
    """The ODS tables the selectors choose (`ods.t`, `layer:ods`, `path:layers/ods/x.yaml`, ...);
    every ODS table without selectors."""
    if not selectors:
        return [t.qualified_name for t in project.ods_tables]
    models = load_models(project)
    g = build_graph(project, models)
    ods = {t.qualified_name for t in project.ods_tables}
    return [n for n in select(g, models, selectors, project=project, recorded=recorded(project), nodes=True) if n in ods]


def run_freshness(*, project: Project, selectors: list[str]) -> list[SourceFreshness]:
    """Each selected ODS table's freshness (status `none` for tables without a policy)."""
    from framework.table.session import ensure_storage

    names = set(selected_tables(project, selectors))
    tables = [t for t in project.ods_tables if t.qualified_name in names]
    if not tables:
        raise LakeError("the selection holds no ODS table", fix="name ODS tables (ods.orders), `layer:ods`, or give no selector for all")
    ensure_storage(project)
    return freshness.measure(project, tables)
