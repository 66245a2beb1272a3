"""`lake report`'s static HTML: GE Data Docs plus one lake page per run (checks, severities,
failing counts, samples, links into Data Docs). Plain string templating, no server, no Spark."""

from __future__ import annotations

import html
import os
from pathlib import Path

from framework.paths import Layout
from framework.quality import docs, store
from models.quality_result import CheckResult, ModelQuality

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f4f4f4}
.pass{color:#17702e}.fail{color:#b00020;font-weight:600}.warn{color:#9a6700;font-weight:600}code{font-size:90%}
pre{margin:0;font-size:85%}"""


def _status(r: CheckResult) -> str:
    if r.success:
        return '<span class="pass">pass</span>'
    if r.severity == "error":
        return '<span class="fail">FAIL (blocks)</span>'
    if r.severity == "drop":
        return '<span class="warn">rows dropped</span>'
    return '<span class="warn">warn</span>'


def _samples(r: CheckResult) -> str:
    if r.success or not r.samples:
        return ""
    from framework.quality.gate import render_samples

    return f"<pre>{html.escape(render_samples(r.samples))}</pre>"


def _model_section(record: ModelQuality, pages: dict[tuple[str, str], Path], page_dir: Path) -> str:
    links = " ".join(
        f'<a href="{html.escape(os.path.relpath(path, page_dir))}">GE Data Docs: {html.escape(suite)}</a>'
        for (model, suite), path in sorted(pages.items()) if model == record.model
    )
    verdict = '<span class="fail">blocked</span>' if record.blocked else '<span class="pass">committed</span>'
    rows = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td><code>{html.escape(r.expectation)}</code></td><td>{r.kind} / {r.on}</td>"
        f"<td>{r.severity}</td><td>{_status(r)}</td><td>{html.escape(r.summary())}</td><td>{_samples(r)}</td></tr>"
        for r in record.results
    )
    return (
        f"<h2>{html.escape(record.model)} — {verdict}</h2><p>{len(record.results)} check(s) in {record.seconds:.2f}s. {links}</p>"
        "<table><tr><th>check</th><th>expectation</th><th>kind / on</th><th>severity</th><th>status</th><th>result</th><th>samples</th></tr>"
        f"{rows}</table>"
    )


def render_run_page(run_id: str, records: list[ModelQuality], pages: dict[tuple[str, str], Path], page_dir: Path, docs_index: Path) -> str:
    """The HTML of one run's page; links are relative to `page_dir`."""
    blocked = [r.model for r in records if r.blocked]
    head = f"{len(records)} model(s) checked; " + (f"blocked: {', '.join(blocked)}" if blocked else "none blocked")
    body = "".join(_model_section(r, pages, page_dir) for r in records) or "<p>No checks ran in this run.</p>"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>lake quality — run {html.escape(run_id)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>Quality checks — run {html.escape(run_id)}</h1><p>{html.escape(head)}</p>"
        f"{body}<p><a href='{html.escape(os.path.relpath(docs_index, page_dir))}'>All GE Data Docs</a></p></body></html>"
    )


def write_report(layout: Layout, run_ids: list[str] | None = None) -> Path:
    """Build Data Docs for every stored run (or `run_ids`) and a lake page per run under
    `<warehouse>/_lake/docs/runs/`; returns the page of the last run."""
    ids = run_ids if run_ids is not None else store.runs(layout)
    by_run = {rid: store.load_run(layout, rid) for rid in ids}
    pages = docs.build_data_docs(layout, [rec for recs in by_run.values() for rec in recs])
    page_dir = layout.docs / "runs"
    page_dir.mkdir(parents=True, exist_ok=True)
    last = page_dir / "index.html"
    for rid, recs in by_run.items():
        mine = {k: p for k, p in pages.items() if p.parts[-3] == rid}
        last = page_dir / f"{rid}.html"
        last.write_text(render_run_page(rid, recs, mine, page_dir, docs.site_dir(layout) / "index.html"), encoding="utf-8")
    return last
