"""`lake report`'s static HTML and JSON: GE Data Docs plus one lake page per run (the run record's
models and ODS tables with strategy, rows and duration; every check with severity, pass/fail,
failing counts and samples, linking into Data Docs). Plain string templating, no server, no Spark.

The report goes to `<project>/out/report/` (git-ignored, beside the project's other generated
output), not into the warehouse: it is derived, rebuilt by every `lake report`, and must not be
mistaken for data.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from framework.project.config import Project
from framework.quality import docs, store
from framework.runtime import history
from framework.runtime.paths import Layout
from models.quality_result import CheckResult, ModelQuality
from models.records import RunRecord
from models.verify import VERIFY_MODES

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f4f4f4}
.pass{color:#17702e}.fail{color:#b00020;font-weight:600}.warn{color:#9a6700;font-weight:600}code{font-size:90%}
pre{margin:0;font-size:85%}td.n{text-align:right}.chart-box{margin:.5em 0 1em}.empty{color:#777}"""


def report_dir(project: Project) -> Path:
    """Where `lake report` writes: `<project>/out/report/`."""
    return project.root / "out" / "report"


def run_page(project: Project, run_id: str) -> Path:
    """The page `lake report` writes for `run_id` (named in quality gate errors)."""
    return report_dir(project) / "runs" / f"{run_id}.html"


def _status(r: CheckResult) -> str:
    if r.success:
        return '<span class="pass">pass</span>'
    if r.severity == "error":
        return '<span class="fail">FAIL (blocks)</span>'
    if r.severity == "drop":
        return '<span class="warn">fail: rows dropped</span>'
    return '<span class="warn">fail (warn)</span>'


def _samples(r: CheckResult) -> str:
    if r.success or not r.samples:
        return ""
    from framework.quality.checks import render_samples

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


def _cells(values: list[object]) -> str:
    return "".join(f'<td class="n">{v}</td>' if isinstance(v, int | float) else f"<td>{html.escape(str(v))}</td>" for v in values)


def _run_section(run: RunRecord) -> str:
    secs = f"{(run.finished_at - run.started_at).total_seconds():.1f}s" if run.finished_at else "still running"
    status = f'<span class="{"pass" if run.status == "ok" else "fail"}">{run.status}</span>'
    parts = [f"<p><code>lake {html.escape(' '.join(run.args) or run.command)}</code> — {status}, started "
             f"{run.started_at:%Y-%m-%d %H:%M:%S} UTC, {secs}</p>"]
    if run.error:
        parts.append(f"<pre>{html.escape(run.error)}</pre>")
    if run.ingest is not None and run.ingest.batches:
        rows = "".join(
            f"<tr>{_cells([t.table, t.events, t.upserts, t.deletes, t.quarantined, t.dead_letter, t.status + (': ' + t.reason if t.reason else '')])}</tr>"
            for _, t in sorted(run.ingest.totals().items())
        )
        parts.append("<h2>ODS tables</h2><table><tr><th>table</th><th>events</th><th>upserts</th><th>deletes</th>"
                     f"<th>quarantined</th><th>dead letter</th><th>status</th></tr>{rows}</table>")
    built = [m for m in run.models if m.mode not in VERIFY_MODES]  # a verified model has its own table below
    if built:
        def fresh(model: str) -> str:
            f = run.freshness.get(model)
            return f"{f.newest_event_lag_s:.1f} to {f.oldest_event_lag_s:.1f}" if f else ""

        rows = "".join(
            f"<tr>{_cells([m.model, m.mode, m.strategy, m.rows_written, m.rows_deleted, m.rows_quarantined, round(m.seconds, 1), fresh(m.model)])}"
            f"<td>{_check_summary(m.checks)}</td><td>{html.escape(m.reason)}</td></tr>"
            for m in built
        )
        parts.append("<h2>Models</h2><table><tr><th>model</th><th>mode</th><th>strategy</th><th>written</th><th>deleted</th>"
                     f"<th>quarantined</th><th>seconds</th><th>freshness s (event → commit)</th><th>checks</th><th>reason</th></tr>{rows}</table>")
    if run.verified:
        parts.append(_verify_section(run))
    return "".join(parts)


def _verify_section(run: RunRecord) -> str:
    """`lake verify`'s results: per model, the table against a full build as of its checkpoint, and
    a few differing keys with both rows."""
    rows, samples = [], []
    for v in run.verified:
        cls = {"equal": "pass", "differs": "fail", "failed": "fail"}.get(v.status, "warn")
        cols = ", ".join(f"{c} ({n})" for c, n in sorted(v.columns.items()))
        status = f'<span class="{cls}">{v.status}</span>' + (" · repaired" if v.repaired else "")
        sampled = "-" if v.status == "skipped" else f"{v.sampled:.2%} of keys" if v.sampled is not None else "all keys"
        rows.append(f"<tr><td>{html.escape(v.model)}</td><td>{status}</td>"
                    f"{_cells([sampled, v.table_rows, v.full_rows, v.missing, v.extra, v.changed, cols, round(v.seconds, 1), v.reason])}</tr>")
        for s in v.samples:
            samples.append(f"<tr>{_cells([v.model, json.dumps(s.key, default=str), json.dumps(s.table, default=str), json.dumps(s.full, default=str)])}</tr>")
    out = ("<h2>Verified against a full build</h2><table><tr><th>model</th><th>status</th><th>compared</th><th>table rows</th>"
           "<th>full-build rows</th><th>missing</th><th>extra</th><th>changed</th><th>columns that differ (keys)</th><th>seconds</th>"
           f"<th>reason</th></tr>{''.join(rows)}</table>")
    if samples:
        out += ("<h3>Sample keys that differ</h3><table><tr><th>model</th><th>key</th><th>table row</th><th>full-build row</th></tr>"
                f"{''.join(samples)}</table>")
    return out


def _check_summary(checks: list[Any]) -> str:
    if not checks:
        return ""
    failed = [c for c in checks if not c.success]
    if not failed:
        return f'<span class="pass">{len(checks)} pass</span>'
    return f'<span class="fail">{len(failed)} of {len(checks)} fail</span>'


def render_run_page(run_id: str, records: list[ModelQuality], pages: dict[tuple[str, str], Path], page_dir: Path,
                    docs_index: Path, run: RunRecord | None = None) -> str:
    """The HTML of one run's page; links are relative to `page_dir`."""
    blocked = [r.model for r in records if r.blocked]
    head = f"{len(records)} model(s) checked; " + (f"blocked: {', '.join(blocked)}" if blocked else "none blocked")
    body = "".join(_model_section(r, pages, page_dir) for r in records) or "<p>No checks ran in this run.</p>"
    title = f"run {run_id}" + (f" ({run.command})" if run else "")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>lake — {html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><p><a href='index.html'>All runs</a></p><h1>{html.escape(title)}</h1>"
        f"{_run_section(run) if run else ''}<h2>Quality checks</h2><p>{html.escape(head)}</p>"
        f"{body}<p><a href='{html.escape(os.path.relpath(docs_index, page_dir))}'>All GE Data Docs</a></p></body></html>"
    )


def render_index(run_ids: list[str], runs: dict[str, RunRecord], quality: dict[str, list[ModelQuality]], overview: str = "") -> str:
    """Every run, newest first (what it did, its status and failed checks), under `overview`
    (HTML: the DAG and charts across these runs)."""
    rows = []
    for rid in reversed(run_ids):
        run = runs.get(rid)
        failed = [f"{q.model}: {r.name}" for q in quality.get(rid, []) for r in q.results if not r.success]
        status = run.status if run else "-"
        took = f"{(run.finished_at - run.started_at).total_seconds():.1f}" if run and run.finished_at else "-"
        rows.append(
            f"<tr><td><a href='{html.escape(rid)}.html'>{html.escape(rid)}</a></td><td>{html.escape(run.command if run else '-')}</td>"
            f"<td class='{'pass' if status == 'ok' else 'fail'}'>{status}</td><td class='n'>{took}</td>"
            f"<td>{html.escape(run_summary(run)) if run else ''}</td><td class='n'>{len(quality.get(rid, []))}</td>"
            f"<td class='{'warn' if failed else ''}'>{html.escape('; '.join(failed))}</td></tr>"
        )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>lake runs</title><style>{_STYLE}</style></head><body>"
        f"<h1>Runs</h1><p>{len(run_ids)} run(s) · <a href='../gx/index.html'>GE Data Docs</a></p>"
        f"{overview}"
        "<h2>Every run</h2><table><tr><th>run</th><th>command</th><th>status</th><th>seconds</th><th>summary</th><th>models checked</th>"
        f"<th>failed checks</th></tr>{''.join(rows)}</table></body></html>"
    )


def run_summary(run: RunRecord) -> str:
    """One line about what a run did: events ingested, models built by mode, rows written."""
    parts = []
    if run.ingest is not None:
        parts.append(f"{run.ingest.events} events in {len(run.ingest.batches)} micro-batch(es)"
                     + (f", {run.ingest.dead_letter} dead-lettered" if run.ingest.dead_letter else ""))
    if run.models:
        modes: dict[str, int] = {}
        for m in run.models:
            modes[m.mode] = modes.get(m.mode, 0) + 1
        rows = sum(m.rows_written for m in run.models)
        parts.append(", ".join(f"{n} {k}" for k, n in sorted(modes.items())) + f"; {rows} rows written")
    if run.verified:
        tally: dict[str, int] = {}
        for v in run.verified:
            tally[v.status] = tally.get(v.status, 0) + 1
        parts.append("verified: " + ", ".join(f"{n} {k}" for k, n in sorted(tally.items())))
    if run.freshness:
        worst = max(f.oldest_event_lag_s for f in run.freshness.values())
        parts.append(f"freshness ≤ {worst:.0f} s")
    return "; ".join(parts)


def _select(layout: Layout, run_ids: list[str] | None, last: int) -> tuple[list[str], dict[str, RunRecord]]:
    records = {r.run_id: r for r in history.runs(layout)}
    if run_ids is None:
        ids = sorted(set(records) | set(store.runs(layout)))[-last:]
    else:
        ids = [history.get(layout, rid).run_id if rid not in store.runs(layout) else rid for rid in run_ids]
    return ids, {rid: records[rid] for rid in ids if rid in records}


def write_report(layout: Layout, out: Path, run_ids: list[str] | None = None, last: int = 20,
                 overview: Callable[[list[RunRecord]], str] | None = None) -> Path:
    """Build Data Docs and a lake page per run (the last `last` runs, or `run_ids`) under `out`,
    plus `out/runs/index.html` listing them (`overview` of those runs on top: HTML); returns the
    page of the newest run (the index if none)."""
    ids, runs = _select(layout, run_ids, last)
    by_run = {rid: store.load_run(layout, rid) for rid in ids}
    pages = docs.build_data_docs(out, [rec for recs in by_run.values() for rec in recs])
    page_dir = out / "runs"
    page_dir.mkdir(parents=True, exist_ok=True)
    index = page_dir / "index.html"
    shown = [runs[r] for r in ids if r in runs]
    index.write_text(render_index(ids, runs, by_run, overview(shown) if overview else ""), encoding="utf-8")
    last_page = index
    for rid, recs in by_run.items():
        mine = {k: p for k, p in pages.items() if p.parts[-3] == rid}
        last_page = page_dir / f"{rid}.html"
        last_page.write_text(render_run_page(rid, recs, mine, page_dir, docs.site_dir(out) / "index.html", runs.get(rid)), encoding="utf-8")
    return last_page


def report_json(layout: Layout, run_ids: list[str] | None = None, last: int = 20) -> list[dict[str, Any]]:
    """Per run: its run record and its stored check results (without GE's raw JSON)."""
    ids, runs = _select(layout, run_ids, last)
    return [
        {
            "run_id": rid,
            "run": runs[rid].model_dump(mode="json") if rid in runs else None,
            "quality": [q.model_dump(mode="json", exclude={"ge_results"}) for q in store.load_run(layout, rid)],
        }
        for rid in ids
    ]
