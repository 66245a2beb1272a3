"""The dependency graph (networkx), selection over it and its renderings.

Nodes are ODS tables, external tables (read, never built: framework/transform/external.py) and
models; an edge u → m means model m reads u. Selectors are dbt's
(framework/transform/selector.py): `tag:finance,layer:dws` (intersection), `+dws.user_agg`,
`dws.user_agg+1`, `@dws.user_agg`, `path:layers/dws`, `state:modified`; several are a union.
"""

from __future__ import annotations

import json

import networkx as nx

from framework.errors import ConfigError, ConfigIssue
from framework.project.config import Project
from framework.transform import selector
from framework.transform.loader import Model
from framework.transform.selector import LastResults, Recorded, Universe


def build_graph(project: Project, models: dict[str, Model]) -> nx.DiGraph:
    g: nx.DiGraph = nx.DiGraph()
    for t in project.ods_tables:
        for name in t.readable():  # the table, and its history (history: true)
            g.add_node(name, kind="ods", layer="ods")
    for e in project.externals.values():
        g.add_node(e.name, kind="external", layer="external", tags=tuple(e.config.tags), path=e.rel, source=e.where)
    for m in models.values():
        g.add_node(m.name, kind=m.kind, layer=m.layer, tags=tuple(m.config.tags), path=m.rel)
    for m in models.values():
        if m.history_name:  # written after the model by its build (framework/transform/model_history.py)
            g.add_node(m.history_name, kind="history", layer=m.layer, tags=tuple(m.config.tags), path=m.rel)
            g.add_edge(m.name, m.history_name)
    for m in models.values():
        for u in m.upstreams:
            g.add_edge(u, m.name)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return g
    names = [a for a, _ in cycle] + [cycle[0][0]]
    files = [models[n].rel for n in names[:-1] if n in models]
    raise ConfigError([ConfigIssue(files[0] if files else "layers/", None, "dependencies",
                                   f"cycle: {' → '.join(names)} (files: {', '.join(files)})",
                                   "remove one of these reads so the models form a DAG")])


def select(g: nx.DiGraph, models: dict[str, Model], selectors: tuple[str, ...] | list[str], exclude: tuple[str, ...] | list[str] = (),
           *, project: Project | None = None, recorded: Recorded | None = None, nodes: bool = False,
           results: LastResults | None = None) -> list[str]:
    """Models matched by the selectors (dbt's grammar, framework/transform/selector.py), in
    dependency order; with `nodes`, ODS tables too. `project` serves `path:`, `recorded` (the
    tables' last commits) `state:`."""
    if results is None and project is not None:
        from framework.transform.state import last_results

        results = last_results(project)
    u = Universe(g, models, project.root if project else None, project.ods_files if project else {}, recorded, results,
                 {n: e.rel for n, e in project.externals.items()} if project else {})
    return selector.select(u, selectors, exclude, nodes=nodes)


SOURCES = ("ods", "external")  # node kinds lake does not build from a query: the graph's sources


def render(g: nx.DiGraph, fmt: str, only: set[str] | None = None) -> str:
    nodes = [n for n in nx.lexicographical_topological_sort(g) if only is None or n in only]
    if fmt == "json":
        return json.dumps({"nodes": [{"name": n, **{k: v for k, v in g.nodes[n].items()}} for n in nodes],
                           "edges": [[a, b] for a, b in g.edges if a in nodes and b in nodes]}, indent=2, default=list)
    if fmt == "dot":
        lines = ["digraph lake {", "  rankdir=LR;"]
        for n in nodes:
            shape = {"ods": "cylinder", "external": "folder"}.get(g.nodes[n]["kind"], "box")
            lines.append(f'  "{n}" [shape={shape}];')
        lines += [f'  "{a}" -> "{b}";' for a, b in g.edges if a in nodes and b in nodes]
        return "\n".join(lines + ["}"])
    if fmt == "mermaid":
        ids = {n: n.replace(".", "_") for n in nodes}
        lines = ["graph LR"]
        for n in nodes:
            kind = g.nodes[n]["kind"]
            lines.append(f"  {ids[n]}[({n})]" if kind == "ods" else f"  {ids[n]}[/{n}/]" if kind == "external" else f"  {ids[n]}[{n}]")
        lines += [f"  {ids[a]} --> {ids[b]}" for a, b in g.edges if a in nodes and b in nodes]
        return "\n".join(lines)
    # tree: each model with its upstreams, indented (an external table with what it reads)
    lines = []
    for n in nodes:
        if g.nodes[n]["kind"] in SOURCES:
            continue
        lines.append(f"{n}  [{g.nodes[n]['kind']}]")
        preds = sorted(g.predecessors(n))
        for i, p in enumerate(preds):
            source = f"  ({g.nodes[p]['source']})" if g.nodes[p]["kind"] == "external" else ""
            lines.append(f"  {'└──' if i == len(preds) - 1 else '├──'} {p}{source}")
    return "\n".join(lines)
