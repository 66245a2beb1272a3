"""Prometheus metrics of the runs a long-running lake process makes (`lake run --continuous`) or
starts (`lake schedule`), written with the official client (`prometheus_client`): served on
`metrics.port` and/or written to `metrics.textfile` for node_exporter's textfile collector.

Every value comes from the finished run records (models/records.py), so a scheduler that runs
its steps as child processes gets the same metrics from the records they hand back."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram

from models.records import BUILT_MODES, RunRecord

prometheus_client.disable_created_metrics()  # no `_created` series beside every counter: noise for dashboards
_SECONDS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    """The registry and its metrics; `observe(record)` after each finished run."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.runs = Counter("lake_runs", "Runs finished, by command and status.", ["command", "status"], registry=r)
        self.last_run = Gauge("lake_last_run_timestamp_seconds", "When the last run of each command and status finished.",
                              ["command", "status"], registry=r)
        self.events = Counter("lake_ods_events", "CDC events ingested, per ODS table.", ["table"], registry=r)
        self.rows = Counter("lake_ods_rows", "Rows written to each ODS table, by operation (upsert, delete).", ["table", "op"], registry=r)
        self.dead = Counter("lake_dead_letter_events", "Events sent to the dead letter, per ODS table ((unrouted): no table).",
                            ["table"], registry=r)
        self.ods_lag = Gauge("lake_ods_lag_seconds", "Source commit time (Debezium source.ts_ms) to the ODS commit, for the newest and "
                             "the oldest event of the last micro-batch that wrote the table.", ["table", "event"], registry=r)
        self.model_lag = Gauge("lake_model_lag_seconds", "Source commit time to the model's commit, for the newest and the oldest event "
                               "the last `lake run` cycle brought to it.", ["model", "event"], registry=r)
        self.freshness = Gauge("lake_source_freshness_seconds", "Age of the newest source event ingested into each ODS table "
                               "with `freshness:`.", ["table"], registry=r)
        self.freshness_status = Enum("lake_source_freshness_status", "Freshness verdict of each ODS table with `freshness:`.",
                                     ["table"], states=["ok", "warn", "error", "none"], registry=r)
        self.batch_seconds = Histogram("lake_ods_batch_seconds", "Micro-batch duration.", buckets=_SECONDS, registry=r)
        self.build_seconds = Histogram("lake_model_build_seconds", "Model build duration.", ["model"], buckets=_SECONDS, registry=r)
        self.model_rows = Counter("lake_model_rows_written", "Rows written to each model's table.", ["model"], registry=r)
        self.gate = Counter("lake_gate_failures", "Commits a quality gate blocked (error checks failed), per table or model.",
                            ["table"], registry=r)
        self.checks = Counter("lake_check_failures", "Failing quality checks, per table or model and severity.", ["table", "severity"],
                              registry=r)
        self.ckpt_lag = Gauge("lake_checkpoint_lag_commits", "Upstream commits a model's checkpoint has not consumed yet.",
                              ["model", "upstream"], registry=r)
        self.schedule_runs = Counter("lake_schedule_runs", "Runs `lake schedule` started or did not, by schedule and result "
                                     "(ok, failed, skipped: the previous still going, missed, caught_up).", ["schedule", "result"], registry=r)
        self._lock = threading.Lock()

    def observe(self, rec: RunRecord) -> None:
        with self._lock:
            self.runs.labels(rec.command, rec.status).inc()
            if rec.finished_at is not None:
                self.last_run.labels(rec.command, rec.status).set(rec.finished_at.timestamp())
            self._ingest(rec)
            for r in rec.models:
                if r.mode in BUILT_MODES:
                    self.build_seconds.labels(r.model).observe(r.seconds)
                    self.model_rows.labels(r.model).inc(r.rows_written)
                self._checks(r.model, r.checks, blocked=r.mode == "failed")
            for model, f in rec.freshness.items():
                self.model_lag.labels(model, "newest").set(f.newest_event_lag_s)
                self.model_lag.labels(model, "oldest").set(f.oldest_event_lag_s)
            for table, s in rec.sources.items():
                if s.age_s is not None:
                    self.freshness.labels(table).set(s.age_s)
                self.freshness_status.labels(table).state(s.status)
            for model, ups in rec.checkpoint_lag.items():
                for up, n in ups.items():
                    self.ckpt_lag.labels(model, up).set(n)

    def _ingest(self, rec: RunRecord) -> None:
        if rec.ingest is None:
            return
        routed = 0
        for b in rec.ingest.batches:
            if b.finished_at is not None:
                self.batch_seconds.observe((b.finished_at - b.started_at).total_seconds())
            for t in b.tables.values():
                name = t.table  # the qualified name (ods.users); the batch keys its tables by their short name
                self.events.labels(name).inc(t.events)
                self.rows.labels(name, "upsert").inc(t.upserts)
                self.rows.labels(name, "delete").inc(t.deletes)
                if t.dead_letter:
                    self.dead.labels(name).inc(t.dead_letter)
                routed += t.dead_letter
                self._checks(name, t.checks, blocked=t.status == "blocked")
                if b.finished_at is not None and t.status == "ok" and t.event_ts_max and t.event_ts_min:
                    self.ods_lag.labels(name, "newest").set((b.finished_at - t.event_ts_max).total_seconds())
                    self.ods_lag.labels(name, "oldest").set((b.finished_at - t.event_ts_min).total_seconds())
        if rec.ingest.dead_letter > routed:
            self.dead.labels("(unrouted)").inc(rec.ingest.dead_letter - routed)

    def _checks(self, table: str, checks: list[Any], blocked: bool) -> None:
        failing = [c for c in checks if not c.success]
        for c in failing:
            self.checks.labels(table, c.severity).inc()
        if blocked and any(c.severity == "error" for c in failing):
            self.gate.labels(table).inc()

    def write_textfile(self, path: Path) -> None:
        """Rewrite the node_exporter textfile (written aside, then renamed: never read half-written)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        prometheus_client.write_to_textfile(str(path), self.registry)

    def serve(self, host: str, port: int) -> tuple[Any, int]:
        """Serve /metrics in a daemon thread; the server (`shutdown()` it) and its port."""
        server, _thread = prometheus_client.start_http_server(port, addr=host, registry=self.registry)
        return server, int(server.server_port)
