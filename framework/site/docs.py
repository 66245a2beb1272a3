"""`lake docs generate`: a static site about the warehouse in `<project>/out/docs/`.

One self-contained `index.html` (inline CSS, inline SVG, a few lines of inline JavaScript for the
filter box; no CDN, opens from a file offline) plus `catalog.json`, the same facts for tools.
Every table gets a section: description, owner and tags, columns with types, descriptions and the
ODS columns they come from, the SQL or Python source, the strategy and why, the latest build and
the latest quality results with a link into the GE Data Docs of `lake report`.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

import networkx as nx

from framework.site.svg import dag_svg
from models.docs import DocsCatalog, LastBuild, TableDoc

_STYLE = """body{font-family:system-ui,sans-serif;margin:0;color:#222;display:flex}
nav{width:240px;min-width:240px;height:100vh;overflow:auto;position:sticky;top:0;background:#f7f7f7;border-right:1px solid #ddd;padding:1em}
nav input{width:100%;box-sizing:border-box;padding:.3em;margin-bottom:.6em}nav h3{margin:.8em 0 .2em;font-size:.8em;color:#666;text-transform:uppercase}
nav a{display:block;padding:.1em 0;text-decoration:none;color:#1f4e8c;font-size:.92em}main{padding:1em 2em;max-width:1100px;overflow:auto}
section{border-top:1px solid #ddd;padding:.6em 0 1em}table{border-collapse:collapse;margin:.4em 0 1em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;font-size:.92em}th{background:#f4f4f4}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:.85em;border-radius:4px}.tag{background:#e8eef8;border-radius:3px;padding:0 .4em;margin-right:.3em;font-size:.85em}
.meta{color:#555}.pass{color:#17702e}.fail{color:#b00020;font-weight:600}.warn{color:#9a6700;font-weight:600}.empty{color:#777}"""

_FILTER = """document.getElementById('q').addEventListener('input',function(e){var q=e.target.value.toLowerCase();
document.querySelectorAll('[data-table]').forEach(function(el){el.style.display=el.getAttribute('data-table').indexOf(q)<0?'none':''});});"""


def anchor(name: str) -> str:
    return "t-" + name


def write_docs(catalog: DocsCatalog, graph: nx.DiGraph, out: Path, report_dir: Path) -> Path:
    """Write `out/index.html` and `out/catalog.json`; returns the page."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "catalog.json").write_text(catalog.model_dump_json(indent=2), encoding="utf-8")
    gx = report_dir / "gx" / "index.html"
    runs = report_dir / "runs" / "index.html"
    links = {"gx": os.path.relpath(gx, out) if gx.exists() else None, "runs": os.path.relpath(runs, out) if runs.exists() else None}
    page = out / "index.html"
    page.write_text(render(catalog, graph, links), encoding="utf-8")
    return page


def render(catalog: DocsCatalog, graph: nx.DiGraph, links: dict[str, str | None]) -> str:
    by_layer: dict[str, list[TableDoc]] = {}
    for t in catalog.tables:
        by_layer.setdefault(t.layer, []).append(t)
    nav = "".join(f"<h3>{escape(layer)}</h3>" + "".join(f'<a href="#{escape(anchor(t.name))}" data-table="{escape(t.name)}">{escape(t.name)}</a>'
                                                         for t in tables) for layer, tables in by_layer.items())
    dag = dag_svg(graph, catalog.status, {t.name: "#" + anchor(t.name) for t in catalog.tables})
    runs_page = links.get("runs")
    report = (f' · <a href="{escape(runs_page)}">run report</a>' if runs_page else
              " · no run report yet (<code>lake report</code> writes it)")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(catalog.project)} — lake docs</title><style>{_STYLE}</style></head>"
        f"<body><nav><input id='q' placeholder='filter tables' aria-label='filter tables'>{nav}</nav><main>"
        f"<h1>{escape(catalog.project)}</h1><p class='meta'>{len(catalog.tables)} tables · warehouse <code>{escape(catalog.warehouse)}</code> · "
        f"generated {catalog.generated_at:%Y-%m-%d %H:%M:%S} UTC{report}</p>"
        f"<h2>Lineage</h2><p class='meta'>Coloured by each table's state in its last run; click a table.</p>{dag}"
        + "".join(_table(t, links.get("gx")) for t in catalog.tables)
        + f"</main><script>{_FILTER}</script></body></html>"
    )


def _refs(names: list[str]) -> str:
    return ", ".join(f'<a href="#{escape(anchor(n))}">{escape(n)}</a>' for n in names) or "none"


# What each kind of table is, as its page says it; and the label of its `source` text.
_KIND = {"ods": "ODS table", "external": "External table", "seed": "Seed", "sql": "SQL model", "python": "Python model",
         "history": "History table"}
_SOURCE = {"ods": "Source table", "external": "Reads", "sql": "SQL", "python": "Python"}
_BUILT = ("sql", "python", "seed", "history")  # kinds lake writes, and so shows the last run of


def _table(t: TableDoc, gx: str | None) -> str:
    tags = "".join(f'<span class="tag">{escape(x)}</span>' for x in t.tags)
    meta = [f"<b>{escape(_KIND[t.kind])}</b>"]
    if t.file:
        meta.append(f"<code>{escape(t.file)}</code>")
    if t.owner:
        meta.append(f"owner {escape(t.owner)}")
    if t.key:
        meta.append("key " + escape(", ".join(t.key)))
    parts = [f'<section id="{escape(anchor(t.name))}" data-table="{escape(t.name)}" data-kind="{escape(t.kind)}"><h2>{escape(t.name)} {tags}</h2>',
             f"<p class='meta'>{' · '.join(meta)}</p>",
             f"<p>{escape(t.description)}</p>" if t.description else "<p class='empty'>No description (add <code>description:</code> to its YAML).</p>"]
    if t.strategy:
        parts.append(f"<p><b>Strategy</b> {escape(t.strategy)}: {escape(t.strategy_reason or '')}</p>")
    if t.kind in ("sql", "python", "history"):
        parts.append(f"<p><b>Reads</b> {_refs(t.upstreams)}</p>")
    parts.append(f"<p><b>Read by</b> {_refs(t.downstreams)}</p>")
    if t.kind in ("ods", *_BUILT):
        parts.append(_last_build(t.last_build))
    parts.append(_columns(t))
    parts.append(_checks(t, gx))
    if t.source is not None:
        label = _SOURCE.get(t.kind, "Source")
        parts.append(f"<details{' open' if t.kind in ('sql', 'external') else ''}><summary>{label}</summary><pre><code>{escape(t.source)}</code></pre></details>")
    return "".join(parts) + "</section>"


def _last_build(b: LastBuild | None) -> str:
    if b is None:
        return "<p class='empty'>Not built yet.</p>"
    what = "ingested" if b.mode == "ingest" else f"{b.mode} build"
    rows = f"{b.rows_written} rows written, {b.rows_deleted} deleted"
    extra = f", {b.seconds:.1f} s" if b.seconds else ""
    fresh = f", freshness {b.freshness_s:.0f} s (source event → commit)" if b.freshness_s is not None else ""
    cls = "fail" if b.mode in ("failed", "skipped") else ""
    return (f"<p><b>Last run</b> <span class='{cls}'>{escape(what)}</span> at {b.at:%Y-%m-%d %H:%M:%S} UTC (run <code>{escape(b.run_id)}</code>): "
            f"{rows}{extra}{fresh}" + (f" — {escape(b.reason)}" if b.reason and b.mode != "ingest" else "") + "</p>")


def _columns(t: TableDoc) -> str:
    if not t.columns:
        if t.kind == "external":
            return "<p class='empty'>No columns declared (add <code>columns:</code> to its YAML to have builds check them).</p>"
        return "<p class='empty'>Columns unknown until the table is first written.</p>"
    lineage = t.kind in ("sql", "python")
    head = "<tr><th>column</th><th>type</th><th>description</th>" + ("<th>from</th>" if lineage else "") + "</tr>"
    rows = "".join(
        f"<tr><td><code>{escape(c.name)}</code></td><td>{escape(c.type or '')}</td><td>{escape(c.description or '')}</td>"
        + (f"<td>{', '.join(escape(s) for s in c.sources)}</td>" if lineage else "") + "</tr>"
        for c in t.columns
    )
    return f"<table class='columns'>{head}{rows}</table>"


def _checks(t: TableDoc, gx: str | None) -> str:
    if not t.checks:
        return ""
    rows = "".join(
        f"<tr><td>{escape(c.name)}</td><td>{escape(c.severity)}</td><td class='{'pass' if c.success else ('fail' if c.severity == 'error' else 'warn')}'>"
        f"{'pass' if c.success else 'fail'}</td><td>{escape(c.summary)}</td></tr>"
        for c in t.checks
    )
    link = f' · <a href="{escape(gx)}">GE Data Docs</a>' if gx else ""
    return (f"<p><b>Quality</b> (run <code>{escape(t.checks_run_id or '')}</code>){link}</p>"
            f"<table><tr><th>check</th><th>severity</th><th>result</th><th>detail</th></tr>{rows}</table>")
