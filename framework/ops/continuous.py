"""`lake run`: ingest, then build incrementally the models the ingested tables reach; with
`--continuous`, repeat every trigger interval until SIGTERM / Ctrl-C.

Each cycle is one run record (command `run`) with the ingest summary, the model results and the
freshness of every model built: how long after the source events (Debezium `source.ts_ms`) of
the cycle the model's commit completed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import networkx as nx
from pyspark.sql import SparkSession

from framework.observe.observer import Observer
from framework.ods.ingest import run_ingest
from framework.project.config import Project
from framework.quality import freshness as source_freshness
from framework.quality.ods_gate import BatchBlocked
from framework.runtime import history
from framework.runtime.faults import failpoint
from framework.runtime.history import settle_models
from framework.runtime.paths import Layout
from framework.runtime.signals import on_stop_signals, stopping
from framework.transform.runner import Selection, behind, build, selection
from models.records import Freshness, IngestSummary, ModelResult, RunRecord


def affected(g: nx.DiGraph, chosen: list[str], changed_tables: set[str]) -> list[str]:
    """The chosen models downstream of the changed tables (ODS tables, or models and seeds that
    build in this cycle), in dependency order."""
    reach: set[str] = set()
    for t in changed_tables:
        if t in g:
            reach |= nx.descendants(g, t)
    return [m for m in chosen if m in reach]


def freshness(summary: IngestSummary, g: nx.DiGraph, results: list[ModelResult]) -> dict[str, Freshness]:
    """Per model committed this cycle: commit time minus the source event times that fed it."""
    totals = summary.totals()
    out: dict[str, Freshness] = {}
    for r in results:
        if r.committed_at is None:
            continue
        feeding = [t for name, t in totals.items() if t.table in g and r.model in nx.descendants(g, t.table) and t.event_ts_min]
        if not feeding:
            continue
        oldest = min(t.event_ts_min for t in feeding if t.event_ts_min)
        newest = max(t.event_ts_max for t in feeding if t.event_ts_max)
        out[r.model] = Freshness(
            events=sum(t.upserts + t.deletes for t in feeding),
            oldest_event_lag_s=round((r.committed_at - oldest).total_seconds(), 3),
            newest_event_lag_s=round((r.committed_at - newest).total_seconds(), 3),
        )
    return out


def run_cycle(spark: SparkSession, project: Project, selectors: list[str], exclude: list[str], args: list[str],
              on_result: Callable[[ModelResult], None] | None = None, loaded: Selection | None = None,
              observer: Observer | None = None) -> RunRecord:
    """One ingest + incremental build of the affected models; stored as a run record, observed
    (alerts, lineage, metrics: framework/observe/). `loaded`: the models and the selection,
    already loaded (else from `selectors` and `exclude`)."""
    sel = loaded or selection(project, selectors, exclude)
    g, chosen = sel.graph, sel.chosen
    obs = observer or Observer(project)
    with history.recorded(Layout(project.warehouse), "run", args, project.target, start=obs.started, finish=obs.finish) as rec:
        try:
            summary = run_ingest(spark, project, run_id=rec.run_id)
        except BatchBlocked as e:
            rec.ingest = e.summary
            raise
        rec.ingest = summary
        # dbt's source freshness after each ingest, for the ODS tables that declare a policy.
        rec.sources = {f.table: f for f in source_freshness.measure(project, source_freshness.declared(project))}
        failpoint("after_run_ingest")
        changed = {t.table for t in summary.totals().values() if t.upserts + t.deletes + t.truncated > 0}
        todo = affected(g, chosen, changed)
        # And models left behind by an earlier run (killed between its ingest and its builds, or
        # a model that failed): this cycle's events do not reach them, their checkpoints lag.
        late = behind(spark, project, sel, [c for c in chosen if c not in todo])
        # Their readers too: a changed seed or model commits in this cycle, so what reads it has a
        # change to take now, not one cycle later.
        todo += [m for m in late + affected(g, chosen, set(late)) if m not in todo]
        todo = [m for m in chosen if m in todo]  # dependency order
        if todo:
            settle_models(rec, build(spark, project, todo, [], incremental=True, on_start=obs.on_start(rec),
                                     on_result=obs.on_result(rec, on_result), run_id=rec.run_id, loaded=sel), list_skipped=True)
        rec.freshness = freshness(summary, g, rec.models)
    return rec


def run_continuous(spark: SparkSession, project: Project, selectors: list[str], exclude: list[str], args: list[str],
                   trigger_seconds: int, on_cycle: Callable[[RunRecord], None] | None = None,
                   on_result: Callable[[ModelResult], None] | None = None,
                   stop_event: threading.Event | None = None, max_cycles: int | None = None, loaded: Selection | None = None,
                   observer: Observer | None = None) -> list[RunRecord]:
    """Cycles every `trigger_seconds` (measured start to start) until stopped; a stop request
    lets the cycle in flight finish. A failing model does not stop the loop (its record says so);
    an ingest error does (it is raised)."""
    stop = stop_event or threading.Event()
    observer = observer or Observer(project)  # one lineage client, and the metrics, for every cycle
    records: list[RunRecord] = []
    with on_stop_signals(stopping(stop)):
        while not stop.is_set():
            started = time.monotonic()
            rec = run_cycle(spark, project, selectors, exclude, args, on_result, loaded, observer)
            records.append(rec)
            if on_cycle:
                on_cycle(rec)
            if max_cycles is not None and len(records) >= max_cycles:
                break
            stop.wait(max(0.0, trigger_seconds - (time.monotonic() - started)))
    return records
