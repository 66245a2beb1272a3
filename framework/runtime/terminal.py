"""Terminal output: per-batch progress lines, run summary tables, query results.

Names, reasons, errors and values come from CDC events, YAML and queries, and rich parses `[...]`
in printed strings (table cells and titles included) as markup: a column named `[/]` raised
MarkupError inside an ingest micro-batch, which then replayed forever. So such text is printed
with `markup=False` or as `Text` (styled whole), never spliced into a markup string. (Escaping
with rich's `escape` is not enough mid-sentence: it doubles a trailing backslash there.)"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from models.records import BUILT_MODES, BatchResult, IngestSummary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def batch_printer(console: Console) -> Callable[[BatchResult], None]:
    def show(b: BatchResult) -> None:
        took = (b.finished_at - b.started_at).total_seconds() if b.finished_at else 0.0
        tables = ", ".join(f"{t.table} +{t.upserts}/-{t.deletes}" for t in b.tables.values() if t.status == "ok")
        extra = f", dead letter {b.dead_letter}" if b.dead_letter else ""
        _line(console, f"batch {b.batch_id}: {b.events} events in {took:.1f}s{extra}" + (f" → {tables}" if tables else ""))
        for t in b.tables.values():
            if t.status == "dead_letter":
                _line(console, f"  {t.table}: {t.dead_letter} events to the dead letter: {t.reason}", "yellow")
            elif t.status == "blocked":
                _line(console, f"  {t.table}: not committed, {t.reason}", "red")
            if t.quarantined:
                _line(console, f"  {t.table}: {t.quarantined} event(s) quarantined (lake sql 'select * from _quarantine.ods_{t.table.split('.')[-1]}')", "yellow")

    return show


def _line(console: Console, text: str, style: str = "") -> None:
    """Print text that may hold untrusted pieces: no markup, no highlighting, one style."""
    console.print(text, style=style or None, markup=False, highlight=False)


def print_ingest_summary(console: Console, s: IngestSummary) -> None:
    totals = s.totals()
    table = Table(title=Text(f"ingest {s.run_id}: {len(s.batches)} micro-batch(es), {s.events} events"), title_justify="left")
    for col in ("table", "events", "upserts", "deletes", "quarantined", "dead letter", "checks", "status"):
        table.add_column(col, justify="right" if col not in ("table", "checks", "status") else "left")
    for name in sorted(totals):
        t = totals[name]
        status = t.status if not t.reason else f"{t.status}: {t.reason}"
        table.add_row(Text(t.table), str(t.events), str(t.upserts), str(t.deletes), str(t.quarantined), str(t.dead_letter),
                      Text(check_summary(t.checks)), Text(status))
    console.print(table)
    if s.tombstones:
        console.print(f"tombstones skipped: {s.tombstones}")
    if s.tombstones_expired:
        per = ", ".join(f"{t.table}: {t.tombstones_expired}" for _, t in sorted(totals.items()) if t.tombstones_expired)
        _line(console, f"deleted keys forgotten: {s.tombstones_expired} tombstone(s) older than ods.tombstone_retention_days removed "
                       f"({per}); a dead-letter replay refuses older events of keys lake no longer knows")
    if s.control:
        console.print(f"Debezium control messages skipped (schema changes, heartbeats, transaction metadata): {s.control}")
    if s.dead_letter:
        console.print(f"[yellow]dead letter: {s.dead_letter} event(s)[/] (query: lake sql 'select loc, reason from _lake.dead_letter')")
        for reason, n in sorted(s.dead_reasons().items(), key=lambda kv: -kv[1]):
            _line(console, f"  {n:>6}  {reason}")
    if not s.batches:
        console.print("nothing new to ingest")


def json_value(v: Any) -> Any:
    """JSON form of a Spark value: ISO-8601 UTC timestamps, decimals as strings."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return v.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if hasattr(v, "asDict"):
        return {k: json_value(x) for k, x in v.asDict().items()}
    return v


def rows_as_json(df: DataFrame) -> str:
    return json.dumps([{k: json_value(v) for k, v in r.asDict().items()} for r in df.collect()], ensure_ascii=False)


def print_rows(console: Console, df: DataFrame, fmt: str, limit: int) -> None:
    if fmt == "json":
        print(rows_as_json(df))
        return
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(df.columns)
        for r in df.toLocalIterator():
            w.writerow(["" if v is None else (json_value(v) if not isinstance(v, str) else v) for v in r])
        print(buf.getvalue(), end="")
        return
    rows = df.limit(limit + 1).collect()
    t = Table(show_lines=False)
    for c in df.columns:
        t.add_column(Text(c))
    for r in rows[:limit]:
        t.add_row(*[Text("NULL" if v is None else str(json_value(v))) for v in r])
    console.print(t)
    console.print(f"{min(len(rows), limit)} row(s)" + (" (truncated; use --limit)" if len(rows) > limit else ""))


def model_printer(console: Console) -> Callable[[Any], None]:
    def show(r: Any) -> None:
        colour = {"failed": "red", "skipped": "yellow", "noop": "dim"}.get(r.mode, "green")
        extra = f", {r.rows_quarantined} quarantined" if r.rows_quarantined else ""
        failed = [c.name for c in r.checks if not c.success]
        extra += f", failed checks: {', '.join(failed)}" if failed else ""
        rest = f": {r.mode} ({r.strategy}) {r.rows_written} written, {r.rows_deleted} deleted{extra} in {r.seconds:.1f}s — {r.reason}"
        console.print(Text.assemble((r.model, colour), rest), highlight=False)

    return show


def print_build_summary(console: Console, results: list[Any]) -> None:
    t = Table(title=f"build: {len(results)} model(s)", title_justify="left")
    for col in ("model", "mode", "strategy", "written", "deleted", "quarantined", "checks", "seconds"):
        t.add_column(col, justify="right" if col in ("written", "deleted", "quarantined", "seconds") else "left", no_wrap=True)
    for r in results:
        t.add_row(Text(r.model), Text(r.mode), Text(r.strategy), str(r.rows_written), str(r.rows_deleted), str(r.rows_quarantined),
                  Text(check_summary(r.checks)), f"{r.seconds:.1f}")
    console.print(t)
    for r in results:
        _line(console, f"  {r.model}: {r.reason}")


def check_summary(checks: list[Any]) -> str:
    """`3 pass`, `1 of 3 fail`, or empty without checks."""
    if not checks:
        return ""
    failed = sum(1 for c in checks if not c.success)
    return f"{failed} of {len(checks)} fail" if failed else f"{len(checks)} pass"


def print_checks(console: Console, records: list[Any]) -> None:
    """`lake check`: one row per check of every model and table evaluated."""
    t = Table(title=f"check: {len(records)} model(s)/table(s)", title_justify="left")
    for col in ("model", "check", "severity", "status", "result"):
        t.add_column(col, no_wrap=col != "result")
    for rec in records:
        for r in rec.results:
            status = "[green]pass[/]" if r.success else ("[red]FAIL[/]" if r.severity == "error" else "[yellow]fail[/]")
            t.add_row(Text(rec.model), Text(r.name), Text(r.severity), status, Text(r.summary()))
    console.print(t)


def print_plan(console: Console, plans: list[Any], externals: Mapping[str, str] | None = None) -> None:
    """The plan's table, each model's reason, and the external tables the models read (`externals`:
    name -> what it reads), which lake never builds: the version each build would read."""
    t = Table(title="plan (nothing is written)", title_justify="left")
    for col in ("model", "mode", "strategy", "pending commits", "changed rows"):
        t.add_column(col, no_wrap=col in ("model", "mode", "strategy"))
    for p, changed in plans:
        pending = ", ".join(f"{u}: {n}" for u, n in p.pending.items() if n) or "-"
        rows = ", ".join(f"{u}: {n}" for u, n in changed.items()) or "-"
        mode = f"{p.mode}: refused" if getattr(p, "refused", None) else p.mode
        t.add_row(Text(p.model.name), Text(mode), Text(p.analysis.strategy), Text(pending), Text(rows))
    console.print(t)
    for p, _ in plans:
        refused = getattr(p, "refused", None)
        # A strict model's refusal (framework/transform/strict.py) says the command that allows it.
        _line(console, f"  {p.model.name}: " + (f"REFUSED: {refused}; lake build {p.model.name} --allow-full allows it once"
                                                 if refused else p.reason))
    read = {u: v for p, _ in plans for u, v in p.end.items() if externals and u in externals}
    for u, v in sorted(read.items()):
        _line(console, f"  {u}: external table, read and never built ({externals[u] if externals else ''}; version {v})")


def print_runs(console: Console, records: list[Any]) -> None:
    t = Table(title=f"last {len(records)} run(s)", title_justify="left")
    for col in ("run", "command", "status", "started (UTC)", "seconds", "summary"):
        t.add_column(col, no_wrap=col != "summary")
    for r in records:
        secs = f"{(r.finished_at - r.started_at).total_seconds():.1f}" if r.finished_at else "-"
        if r.ingest is not None:
            summary = f"{r.ingest.events} events, {len(r.ingest.batches)} batch(es), dead letter {r.ingest.dead_letter}"
        elif r.models:
            summary = _models_summary(r.models)
        else:
            summary = (r.error or "")[:80]
        command = f"{r.command} ({r.target})" if getattr(r, "target", None) else r.command  # lake.yaml's target
        t.add_row(Text(r.run_id), Text(command), Text(r.status), r.started_at.strftime("%Y-%m-%d %H:%M:%S"), secs, Text(summary))
    console.print(t)


def _models_summary(results: list[Any]) -> str:
    """`2 incremental, 1 noop; read 1,204 rows (upstream changed 12)`: modes, then the upstream rows
    the builds read and the upstream rows changed since their checkpoints."""
    modes: dict[str, int] = {}
    for m in results:
        modes[m.mode] = modes.get(m.mode, 0) + 1
    out = ", ".join(f"{n} {k}" for k, n in sorted(modes.items()))
    read = [m.rows_read for m in results if m.rows_read is not None]
    changed = [n for m in results for n in m.upstream_changed.values()]
    if read:
        out += f"; read {sum(read):,} rows" + (f" (upstream changed {sum(changed):,})" if changed else "")
    return out


def cycle_printer(console: Console) -> Callable[[Any], None]:
    """One line per `lake run` cycle: events ingested, models built, freshness."""

    def show(rec: Any) -> None:
        events = rec.ingest.events if rec.ingest else 0
        built = [m for m in rec.models if m.mode in BUILT_MODES]
        fresh = ", ".join(f"{k} {v.oldest_event_lag_s:.1f}s" for k, v in sorted(rec.freshness.items()))
        stale = ", ".join(f"{k} {v.status}" for k, v in sorted(rec.sources.items()) if v.status in ("warn", "error"))
        colour = "red" if rec.status == "failed" else "green"
        line = Text.assemble((f"run {rec.run_id}", colour), f": {events} events, {len(built)} model(s) built",
                             f"; freshness (oldest event → commit) {fresh}" if fresh else "",
                             f"; stale sources (freshness:) {stale}" if stale else "")
        if rec.error:
            line.append("; ").append(rec.error, "red")
        console.print(line, highlight=False)

    return show


class ModelProgress:
    """A live progress bar over the models of a build (on a terminal; nothing elsewhere), with
    each model's result line printed above it as it finishes."""

    def __init__(self, console: Console, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.printer = model_printer(console)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=True)
        self.task = self.progress.add_task("building", total=total)

    def __enter__(self) -> ModelProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def on_start(self, name: str) -> None:
        self.progress.update(self.task, description=f"building {name}")

    def on_result(self, r: Any) -> None:
        self.printer(r)
        self.progress.advance(self.task)


class IngestProgress:
    """A spinner while ingesting, with batches and events so far; batch lines printed above it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.printer = batch_printer(console)
        self.status = console.status("ingesting: waiting for the first micro-batch")
        self.batches = self.events = 0

    def __enter__(self) -> IngestProgress:
        self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.status.stop()

    def on_batch(self, b: BatchResult) -> None:
        self.printer(b)
        self.batches += 1
        self.events += b.events
        self.status.update(f"ingesting: {self.batches} micro-batch(es), {self.events} events so far")
