"""`lake dead-letter list|replay|purge`: the dead letter (`_lake.dead_letter`, keyed by the event's
location) after a fix — a config change, a table declared, lake upgraded to take a widening.

Replay puts pending events back through the ODS micro-batch path (framework/ods/batch.py), the
one every ingest takes: their raw message, their location and their original arrival order, so
the source position decides as it did the first time (an older event does not overwrite a newer
row, a deleted key's tombstone drops what precedes the delete). Afterwards each event is marked
(`replayed_at`, `replay_id`) unless it went to the dead letter again (its reason updated, still
pending). The marks are Hudi upserts ordered on `_seq`: a replay's arrival is the stored `_seq`
followed by `r`, so what the replay writes wins over the stored row.

Crash safety: a journal (`_lake/dead_letter_replay.json`: replay id, the dead letter's instant the
selection was read at, the filters) is written before anything else and removed after the marks.
A rerun finds it and finishes that replay first: the same events (the selection read again at
that instant), the same stream id and batch, so tables that committed it skip it (exactly once,
batch.py) and the dead letter is not written twice (the batch writes it before any table, so
the events a skipped table would dead-letter again are in it); then the marks. The replay lock
(`dead-letter-replay`) is held from the journal's check to its removal: one replay or purge at a
time per warehouse.

Purge deletes replayed events; pending ones (never put back) only when asked (`include_pending`).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from framework.ods.batch import OdsBatchWriter
from framework.ods.commit import DEAD_LETTER_WAIT_SECONDS
from framework.ods.tombstones import REFUSED
from framework.project.config import Project
from framework.runtime.faults import failpoint
from framework.runtime.lock import LockHeldError, hold, replay_lock, table_lock
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import ProjectDefaults
from models.config import OdsTable
from models.records import DeadLetterGroup, DeadLetterSample, PurgeResult, ReplayResult

Locker = Callable[[list[str]], contextlib.AbstractContextManager[Any]]
MARKS = {"replayed_at": "timestamp", "replay_id": "string"}


def _journal(layout: Layout) -> Any:
    return layout.lake / "dead_letter_replay.json"


def _read(spark: SparkSession, layout: Layout, as_of: str | None = None) -> DataFrame | None:
    """The dead letter's rows (with the mark columns, NULL in rows written before them), or None."""
    table = kinds.dead_letter(layout, ProjectDefaults())
    if not table.committed():
        return None
    df = table.read(spark, as_of)
    df = df.select(*[c for c in df.columns if not c.startswith("_hoodie_")])
    return df.select("*", *[F.lit(None).cast(t).alias(c) for c, t in MARKS.items() if c not in df.columns])


def _where(table: OdsTable | None, reason: str | None, pending: bool) -> Column:
    cond: Column = F.col("replayed_at").isNull() if pending else F.lit(True)
    if table is not None:
        cond = cond & (F.col("source_table") == table.source)
    if reason:
        cond = cond & F.lower(F.coalesce(F.col("reason"), F.lit(""))).contains(reason.lower())
    return cond


def groups(spark: SparkSession, project: Project, table: OdsTable | None, reason: str | None, samples: int = 3) -> list[DeadLetterGroup]:
    """Counts by source table and reason (pending and replayed), with a few samples each."""
    df = _read(spark, Layout(project.warehouse))
    if df is None:
        return []
    ods = {t.source: t.qualified_name for t in project.ods_tables}
    sel = df.where(_where(table, reason, pending=False))
    rows = (sel.groupBy("source_table", "reason")
            .agg(F.sum(F.col("replayed_at").isNull().cast("int")).alias("pending"), F.sum(F.col("replayed_at").isNotNull().cast("int")).alias("replayed"))
            .orderBy(F.col("pending").desc(), "source_table", "reason").collect())
    w = Window.partitionBy("source_table", "reason").orderBy("loc")
    shown: dict[tuple[Any, Any], list[DeadLetterSample]] = {}
    for r in sel.withColumn("_n", F.row_number().over(w)).where(F.col("_n") <= samples).orderBy("loc").collect():
        shown.setdefault((r["source_table"], r["reason"]), []).append(DeadLetterSample(loc=r["loc"], raw=(r["raw"] or "")[:200]))
    return [DeadLetterGroup(source_table=r["source_table"], table=ods.get(r["source_table"]), reason=r["reason"] or "", pending=r["pending"],
                            replayed=r["replayed"], samples=shown.get((r["source_table"], r["reason"]), [])) for r in rows]


@contextlib.contextmanager
def _exclusive(lock: Locker, what: str) -> Iterator[None]:
    """Hold the replay lock (runtime/lock.py: flock, or the S3 lease) for the whole of `what`: the
    journal is one file, so a second replay would resume the first one's journal, and the first
    one's cleanup would delete the second's."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(lock([replay_lock()]))
        except LockHeldError as e:
            raise LockHeldError(f"{what} waits for another `lake dead-letter replay` or `purge` on this warehouse: {e.message}",
                                fix=e.fix) from e
        yield


def replay(spark: SparkSession, project: Project, table: OdsTable | None, reason: str | None, lock: Locker,
           run_id: str | None = None, allow_expired: bool = False) -> list[ReplayResult]:
    """Finish a replay a crash interrupted, then replay the pending events the filters select;
    under the replay lock from start to end. Events older than a delete whose tombstone expired
    are refused (dead-lettered again, framework/ods/tombstones.py) unless `allow_expired`."""
    layout = Layout(project.warehouse)
    fs = layout.fs
    out = []
    with _exclusive(lock, "lake dead-letter replay"):
        if fs.exists(_journal(layout)):
            out.append(_run(spark, project, json.loads(fs.read_text(_journal(layout))), lock, run_id, resumed=True))
        instants = kinds.dead_letter(layout, ProjectDefaults.of(project)).instants()
        if instants:
            j = {"id": uuid.uuid4().hex[:12], "as_of": instants[-1].completed, "source": table.source if table else None, "reason": reason,
                 "allow_expired": allow_expired, "started": datetime.now(timezone.utc).isoformat()}
            fs.write_text(_journal(layout), json.dumps(j))
            failpoint("after_replay_journal")
            out.append(_run(spark, project, j, lock, run_id))
    return out


def _run(spark: SparkSession, project: Project, j: dict[str, Any], lock: Locker, run_id: str | None, resumed: bool = False) -> ReplayResult:
    layout = Layout(project.warehouse)
    res = ReplayResult(replay_id=j["id"], resumed=resumed, allow_expired=bool(j.get("allow_expired")))
    df = _read(spark, layout, j["as_of"])
    table = next((t for t in project.ods_tables if t.source == j["source"]), None) if j["source"] else None
    if df is None or (j["source"] and table is None):
        layout.fs.delete(_journal(layout))
        return res
    sel = df.where(_where(table, j["reason"], pending=True)).persist()
    try:
        res.selected = sel.count()
        if res.selected:
            sources = {r["source_table"] for r in sel.select("source_table").distinct().collect()}
            names = [table_lock(t.qualified_name) for t in project.ods_tables if t.source in sources]
            with lock(names):
                msgs = sel.select(F.col("raw").alias("value"), "loc", F.concat(F.col("_seq"), F.lit("r")).alias("arrival"), "origin")
                writer = OdsBatchWriter(spark, project, f"dead-letter-replay-{j['id']}", run_id=run_id, replay_guard=not res.allow_expired)
                res.batch = writer.process(msgs, 0)
                failpoint("after_replay_ingest")
                res.replayed, res.failed_again = _mark(spark, project, sel, j["id"])
                _refused(spark, layout, sel, res)
        layout.fs.delete(_journal(layout))
        return res
    finally:
        sel.unpersist()


def _refused(spark: SparkSession, layout: Layout, sel: DataFrame, res: ReplayResult) -> None:
    """Which of the replay's events were refused as older than an expired tombstone: counts per
    table from the batch, a few locations from the dead letter (their rows carry the reason)."""
    assert res.batch is not None
    res.refused_expired = {t.table: t.expired_refused for t in res.batch.tables.values() if t.expired_refused}
    if not res.refused_expired:
        return
    now = _read(spark, layout)
    assert now is not None
    gone = now.where(F.col("replayed_at").isNull() & F.col("reason").startswith(REFUSED)).join(sel.select("loc"), "loc")
    res.refused_samples = [r["loc"] for r in gone.select("loc").orderBy("loc").limit(10).collect()]


def _mark(spark: SparkSession, project: Project, sel: DataFrame, replay_id: str) -> tuple[int, int]:
    """Mark the replayed events of `sel`, but those this replay dead-lettered again (their row's
    `_seq` is the replay's arrival and carries no mark); (marked, dead-lettered again)."""
    layout = Layout(project.warehouse)
    now = _read(spark, layout)
    assert now is not None
    again = sel.alias("s").join(now.alias("n"), "loc").where(
        (F.col("n._seq") == F.concat(F.col("s._seq"), F.lit("r"))) & F.col("n.replayed_at").isNull()).select("loc")
    done = sel.join(again, "loc", "left_anti")
    marked = done.select(*[F.col(c) for c in sel.columns if c not in MARKS and c != "_seq"], F.concat(F.col("_seq"), F.lit("r")).alias("_seq"),
                         F.current_timestamp().alias("replayed_at"), F.lit(replay_id).alias("replay_id"))
    n = done.count()
    if n:
        _write(spark, project, marked, f"lake dead-letter replay (marks of {replay_id})")
    return n, sel.count() - n


def purge(spark: SparkSession, project: Project, table: OdsTable | None, reason: str | None, apply: bool, lock: Locker,
          include_pending: bool = False) -> PurgeResult:
    """Delete the replayed events the filters select (and the pending ones with `include_pending`:
    they were never put back, so purging them loses them). With `apply` False, only count."""
    layout = Layout(project.warehouse)
    res = PurgeResult(include_pending=include_pending)
    with _exclusive(lock, "lake dead-letter purge"):
        instants = kinds.dead_letter(layout, ProjectDefaults.of(project)).instants()
        # Read as of one instant: what is counted is what goes, whatever an ingest adds meanwhile.
        df = _read(spark, layout, instants[-1].completed) if instants else None
        if df is None:
            return res
        sel = df.where(_where(table, reason, pending=False))
        for r in sel.groupBy(F.col("replayed_at").isNull().alias("pending")).count().collect():
            if r["pending"]:
                res.pending = r["count"]
            else:
                res.replayed = r["count"]
        if res.would_purge and apply:
            gone = sel if include_pending else sel.where(F.col("replayed_at").isNotNull())
            # A delete is ordered on `_seq` too: after every value the row can hold.
            gone = gone.withColumn("_seq", F.concat(F.col("_seq"), F.lit("~"))).withColumn("_hoodie_is_deleted", F.lit(True))
            _write(spark, project, gone, "lake dead-letter purge")
            res.purged = res.would_purge
    return res


def _write(spark: SparkSession, project: Project, rows: DataFrame, command: str) -> None:
    """Upsert into the dead letter, under its lock (ingests write it too, framework/ods/commit.py)."""
    layout = Layout(project.warehouse)
    cfg = project.config
    with hold(layout.locks, [table_lock("_lake.dead_letter")], timeout=DEAD_LETTER_WAIT_SECONDS, command=command,
              settings=cfg.locks, spark_conf=cfg.spark.conf):
        kinds.dead_letter(layout, ProjectDefaults.of(project)).commit(rows)
