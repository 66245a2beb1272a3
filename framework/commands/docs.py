"""`lake docs generate` and `lake docs serve`: the static docs site of the warehouse."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from framework.project.config import Project
from framework.quality.report import report_dir
from framework.site.catalog import collect
from framework.site.docs import write_docs
from framework.site.server import site_server
from framework.transform.dag import build_graph
from framework.transform.loader import load_models
from models.records import RunRecord


def docs_dir(project: Project) -> Path:
    """Where `lake docs generate` writes: `<project>/out/docs/` (beside out/report/)."""
    return project.root / "out" / "docs"


def generate_docs(project: Project) -> Path:
    """Write the site; returns its index.html. Starts Spark only for a warehouse off the local disk
    (to read table schemas and run history there)."""
    from framework.table.session import ensure_storage

    ensure_storage(project)
    models = load_models(project)
    catalog = collect(project, models)
    return write_docs(catalog, build_graph(project, models), docs_dir(project), report_dir(project))


def report_overview(project: Project) -> Callable[[list[RunRecord]], str]:
    """The top of `lake report`'s run index: the DAG coloured by each table's last run (left out
    when the models do not load: the report still shows the runs; `lake build` names the
    problem), then charts across the runs shown."""
    from framework.site.charts import overview

    dag = _report_dag(project)
    return lambda runs: overview(dag, runs)


def _report_dag(project: Project) -> str:
    from framework.errors import ConfigError
    from framework.runtime import history
    from framework.runtime.paths import Layout
    from framework.site.catalog import dag_status
    from framework.site.svg import dag_svg

    try:
        models = load_models(project)
        graph = build_graph(project, models)
    except ConfigError:
        return ""
    return dag_svg(graph, dag_status(project, models, history.runs(Layout(project.warehouse))))


def serve_docs(project: Project, host: str, port: int, on_ready: Callable[[str], None], allow_hosts: Sequence[str] = ()) -> None:
    """Serve the docs site and the run report (they link to each other) until Ctrl-C; only
    those two folders, without listings or symbolic links, to this machine's host names
    (framework/site/server.py). `on_ready` gets the docs URL."""
    roots = {"docs": docs_dir(project), "report": report_dir(project)}
    with site_server(roots, host, port, allow_hosts) as server:
        on_ready(f"http://{host}:{server.server_address[1]}/docs/index.html")
        server.serve_forever()
