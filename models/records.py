"""Records that cross a boundary: run summaries printed, stored and returned as JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from models.reconcile import TableReconcile
from models.verify import ModelVerify


class CheckOutcome(BaseModel):
    """One quality check's verdict, compact (the full result is in the quality store)."""

    name: str
    severity: str
    success: bool
    failing: int | None = None
    total: int | None = None


class TableBatchResult(BaseModel):
    """What one micro-batch did to one ODS table."""

    table: str
    events: int = 0
    upserts: int = 0
    deletes: int = 0
    dead_letter: int = 0
    truncated: int = 0
    replayed: int = 0  # events not newer than their key's tombstone (a replay of a deleted key): dropped
    tombstones_expired: int = 0  # tombstones removed by this batch: older than ods.tombstone_retention_days
    expired_refused: int = 0  # replayed events (dead-letter replay) older than an expired tombstone: dead-lettered again
    before_bootstrap: int = 0
    quarantined: int = 0  # rows a `drop` check sent to _quarantine.ods_<name>
    checks: list[CheckOutcome] = Field(default_factory=list)
    status: Literal["ok", "already_committed", "dead_letter", "blocked", "pending"] = "pending"
    reason: str | None = None
    event_ts_min: datetime | None = None  # source event time (Debezium source.ts_ms) range
    event_ts_max: datetime | None = None


class BatchResult(BaseModel):
    batch_id: int
    started_at: datetime
    finished_at: datetime | None = None
    events: int = 0
    tombstones: int = 0
    control: int = 0  # Debezium schema changes, heartbeats, transaction metadata: no row, skipped
    dead_letter: int = 0
    dead_reasons: dict[str, int] = Field(default_factory=dict)
    tables: dict[str, TableBatchResult] = Field(default_factory=dict)


class IngestSummary(BaseModel):
    """A whole `lake ingest` run."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None = None
    status: Literal["ok", "failed", "running"] = "running"
    error: str | None = None
    batches: list[BatchResult] = Field(default_factory=list)

    def totals(self) -> dict[str, TableBatchResult]:
        out: dict[str, TableBatchResult] = {}
        for b in self.batches:
            for name, t in b.tables.items():
                acc = out.setdefault(name, TableBatchResult(table=t.table, status="ok"))
                acc.events += t.events
                acc.upserts += t.upserts
                acc.deletes += t.deletes
                acc.dead_letter += t.dead_letter
                acc.truncated += t.truncated
                acc.replayed += t.replayed
                acc.tombstones_expired += t.tombstones_expired
                acc.expired_refused += t.expired_refused
                acc.before_bootstrap += t.before_bootstrap
                acc.quarantined += t.quarantined
                acc.checks = t.checks or acc.checks
                for attr, pick in (("event_ts_min", min), ("event_ts_max", max)):
                    vals = [v for v in (getattr(acc, attr), getattr(t, attr)) if v is not None]
                    setattr(acc, attr, pick(vals) if vals else None)
                if t.status in ("dead_letter", "blocked"):
                    acc.status, acc.reason = t.status, t.reason
        return out

    @property
    def events(self) -> int:
        return sum(b.events for b in self.batches)

    @property
    def dead_letter(self) -> int:
        return sum(b.dead_letter for b in self.batches)

    @property
    def tombstones(self) -> int:
        return sum(b.tombstones for b in self.batches)

    @property
    def control(self) -> int:
        return sum(b.control for b in self.batches)

    @property
    def tombstones_expired(self) -> int:
        return sum(t.tombstones_expired for b in self.batches for t in b.tables.values())

    def dead_reasons(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.batches:
            for k, v in b.dead_reasons.items():
                out[k] = out.get(k, 0) + v
        return out


BUILT_MODES = ("full", "incremental", "recompute", "restate")  # ModelResult.mode values that ran a build


class ModelResult(BaseModel):
    """What building one model did (printed, returned as JSON, stored in run history)."""

    model: str
    strategy: str
    mode: str  # full | incremental | recompute | restate | noop | failed | skipped
    reason: str
    rows_written: int = 0
    rows_deleted: int = 0
    rows_quarantined: int = 0  # rows a `drop` check sent to _quarantine.<layer>_<name>
    checks: list[CheckOutcome] = Field(default_factory=list)
    upstream: dict[str, str] = Field(default_factory=dict)  # upstream -> completion time consumed
    # Rows each upstream's commits since the model's checkpoint inserted, updated or deleted (Hudi's
    # write statistics over the commits consumed); builds without a checkpoint have none.
    upstream_changed: dict[str, int] = Field(default_factory=dict)
    # Upstream rows the build read: every live row of each upstream for a full build or a
    # recompute, the changed rows for an incremental one; None: not recorded (failed, skipped).
    rows_read: int | None = None
    seconds: float = 0.0
    error: str | None = None
    committed_at: datetime | None = None  # when the model's Hudi commit had completed


class Freshness(BaseModel):
    """Source event time -> model commit, for the events one `lake run` cycle ingested."""

    events: int
    oldest_event_lag_s: float  # commit time minus the oldest source event time of the cycle
    newest_event_lag_s: float  # commit time minus the newest one


class SourceFreshness(BaseModel):
    """How old an ODS table's newest ingested source event is, against its `freshness:`."""

    table: str
    status: Literal["ok", "warn", "error", "none"]  # none: the table declares no freshness
    # source.ts_ms: the newest source event time ingested (recorded in the table's commits);
    # last commit: no commit records one (a bootstrap load, a table written before lake recorded
    # them), so the age of the last commit; nothing: no commit yet.
    measured_from: Literal["source.ts_ms", "last commit", "nothing"]
    age_s: float | None = None
    newest_event_at: datetime | None = None
    last_commit_at: datetime | None = None
    warn_after_s: float | None = None
    error_after_s: float | None = None
    checked_at: datetime


class Delivery(BaseModel):
    """One message lake tried to send for a run (an alert, an OpenLineage event) that failed, or
    an alert that went out: the run goes on either way, and its record says so."""

    channel: Literal["alert", "lineage"]
    target: str  # which target (secrets shown as ${VAR})
    what: str  # e.g. "build_failed dws.sales", "COMPLETE ingest"
    ok: bool
    error: str | None = None
    at: datetime


class Incident(BaseModel):
    """A problem alerted once and kept open until a run shows it fixed (framework/observe/alerts.py)."""

    key: str  # "<event> <subject>", e.g. "build_failed dws.sales"
    event: str  # build_failed | ingest_failed | gate_blocked | freshness | dead_letter | lock_lost
    subject: str  # the table, model or lock concerned
    reason: str
    fix: str
    run_id: str  # the run that opened it
    opened_at: datetime
    delivered: list[str] = Field(default_factory=list)  # targets the alert reached (others are retried)


class RunRecord(BaseModel):
    """One `lake ingest`, `lake build`, `lake verify`, ... run, stored under <warehouse>/_lake/runs/."""

    run_id: str
    command: str
    args: list[str] = Field(default_factory=list)
    started_at: datetime
    finished_at: datetime | None = None
    # "crashed": the record says running but its process is gone (killed, OOM, power loss).
    status: Literal["ok", "failed", "running", "crashed"] = "running"
    error: str | None = None
    pid: int | None = None
    host: str | None = None
    target: str | None = None  # the lake.yaml `targets:` entry the run used (--target / LAKE_TARGET)
    ingest: IngestSummary | None = None
    models: list[ModelResult] = Field(default_factory=list)
    freshness: dict[str, Freshness] = Field(default_factory=dict)  # per model built by `lake run`
    sources: dict[str, SourceFreshness] = Field(default_factory=dict)  # ODS tables with `freshness:` (run, check)
    error_type: str | None = None  # the error's class, e.g. QualityGateError, LockLostError
    fix: str | None = None  # what the error says to do about it
    # Per model built: per upstream, the commits completed after the checkpoint the model's table holds.
    checkpoint_lag: dict[str, dict[str, int]] = Field(default_factory=dict)
    deliveries: list[Delivery] = Field(default_factory=list)  # alerts sent, alerts and lineage events that failed
    verified: list[ModelVerify] = Field(default_factory=list)  # `lake verify`: each model compared with a full build
    reconciled: list[TableReconcile] = Field(default_factory=list)  # `lake reconcile`: each ODS table compared with its database


class LockHolder(BaseModel):
    """The process holding a project lock, as written into the lock file (framework/runtime/lock.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    host: str
    command: str
    since: datetime
    # An S3 lease only (framework/runtime/lease.py): how long the holder's lease lasts after each
    # renewal (contenders judge expiry by it, not by their own setting), the token of this holding
    # (a holder recognises its own object by it) and how often it has been renewed.
    lease_seconds: int | None = None
    token: str | None = None
    renewals: int | None = None


class RebuildRecord(BaseModel):
    """The last time a table was written anew (`lake ingest --rebuild`, or a type change Hudi takes
    only by rewriting the table), `<warehouse>/_lake/rebuilds/<layer>_<name>.json`: models whose
    checkpoint of it is older rebuild fully, saying why (framework/transform/plan.py)."""

    table: str
    first: str  # completion time of the new table's first commit
    reason: str
    at: datetime


class RebuildResult(BaseModel):
    """What `lake ingest --rebuild` did to one ODS table."""

    table: str
    reason: str
    dump_rows: int | None = None  # rows bulk-loaded from the dump (--path), if any
    position: str | None = None  # the dump's hand-off position
    events: int = 0  # CDC events written from the replay (upserts and deletes)
    dead_letter: int = 0  # events of the table the replay sent to the dead letter
    rows: int = 0  # the table's rows afterwards
    rows_before: int | None = None  # the table's rows before (None: there was no readable table)
    given_up: int = 0  # rows (or, the table gone, Kafka events) the source no longer held: lost by --accept-loss
    ingest: IngestSummary | None = None  # the replay's run


class DeadLetterSample(BaseModel):
    loc: str
    raw: str | None  # the message's first 200 characters


class DeadLetterGroup(BaseModel):
    """Dead-lettered events of one source table and reason (`lake dead-letter list`)."""

    source_table: str | None  # as routed (`<db>.<table>`); None: no source block
    table: str | None  # the ODS table declared for it now, if any
    reason: str
    pending: int  # not replayed yet
    replayed: int  # put back through ingest by `lake dead-letter replay`
    samples: list[DeadLetterSample] = Field(default_factory=list)


class ReplayResult(BaseModel):
    """One `lake dead-letter replay` (or the resumption of one a crash interrupted)."""

    replay_id: str
    resumed: bool = False
    selected: int = 0  # pending events it put back through ingest
    replayed: int = 0  # ... marked replayed (taken, or dropped as older than what the table holds)
    failed_again: int = 0  # ... dead-lettered again (their reason updated, still pending)
    refused_expired: dict[str, int] = Field(default_factory=dict)  # ODS table -> of those, refused: older than an expired tombstone
    refused_samples: list[str] = Field(default_factory=list)  # locations of a few refused events
    allow_expired: bool = False  # --allow-expired-tombstones: nothing refused
    batch: BatchResult | None = None


class PurgeResult(BaseModel):
    """`lake dead-letter purge`: the selected events by kind, and how many went."""

    replayed: int = 0  # selected events a replay already put back (marked replayed)
    pending: int = 0  # selected events never replayed: purged only with --include-pending
    include_pending: bool = False
    purged: int = 0  # deleted (0 in a dry run)

    @property
    def would_purge(self) -> int:
        return self.replayed + (self.pending if self.include_pending else 0)


class CompactResult(BaseModel):
    """What `lake compact` did to one merge-on-read table."""

    table: str
    status: Literal["compacted", "nothing", "absent"]  # absent: not written yet
    instant: str | None = None  # the compaction's completion instant
    seconds: float | None = None
