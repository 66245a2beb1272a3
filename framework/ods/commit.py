"""The last steps of an ODS micro-batch: the dead letter, then the gate of every prepared table
(one at a time), then per table, several tables at once: write its tombstones, upsert it (deletes
as Hudi deletes), recording the batch in the same Hudi commit (stream id, batch id, key, binlog
high-water mark).

Exactly once: a batch replayed after a crash skips the tables that already committed it
(prepare.py checks each table's state first), and the dead letter skips a batch it has.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from framework.errors import QualityGateError
from framework.ods import history, rewrite, tombstones
from framework.ods.context import BatchContext, TableState
from framework.ods.prepare import Prepared
from framework.quality.ods_gate import check_table
from framework.runtime.faults import failpoint, pausepoint
from framework.runtime.lock import LockHeldError, hold, table_lock
from framework.table import hudi
from framework.table.kinds import DEAD_LETTER_KEY as _KEY
from models.commit_meta import BatchMark, OdsCommit

log = logging.getLogger(__name__)
DEAD_LETTER_KEY = list(_KEY)
DEAD_LETTER_WAIT_SECONDS = 300  # another stream's dead-letter write takes seconds


def gate_table(ctx: BatchContext, p: Prepared, cache: list[DataFrame], blocked: list[QualityGateError]) -> DataFrame | None:
    """The rows of one prepared table to commit, after its checks (None: nothing to commit, or
    an `error` check failed, then its error is added to `blocked`). Gates run one table at a time
    (Great Expectations' context is not shared between threads)."""
    t, tr = p.table, p.result
    if p.rows is None:
        return None
    if tr.upserts + tr.deletes + p.migrated == 0:
        tr.status = "dead_letter" if tr.status == "dead_letter" else "ok"
        # A history still takes events the table drops (older than a delete): an empty commit
        # records the batch after it.
        return p.rows if p.events is not None and tr.replayed else None
    if not t.checks:
        return p.rows
    gate = check_table(ctx.spark, ctx.project, t, p.rows, ctx.run_id, cache)
    tr.checks, tr.quarantined = gate.result.checks, gate.result.quarantined
    if gate.error is not None:
        tr.status, tr.reason = "blocked", f"quality gate: {', '.join(gate.error.failed)} failed"
        blocked.append(gate.error)
        return None
    tr.upserts -= gate.result.quarantined
    return gate.rows


def write_table(ctx: BatchContext, p: Prepared, st: TableState, commit: DataFrame, batch_id: int) -> None:
    """Write one gated table: its rewrite in wider types if any, its tombstones, then its upsert
    with Hudi deletes, recording the batch in the same commit. Touches this table's files and `st`
    only, so tables are written concurrently (:func:`write_tables`)."""
    t, tr = p.table, p.result
    status: Literal["ok", "dead_letter"] = "dead_letter" if tr.status == "dead_letter" else "ok"
    table = ctx.table(t)
    if p.rewrite:  # a widening Hudi cannot make in place: the table is rewritten in the new types first
        rewrite.rewrite(ctx, t, st, p.rewrite)
    # Tombstones first: a crash before the table's commit leaves tombstones its rerun tolerates
    # (framework/ods/tombstones.py); the other order would lose them.
    tr.tombstones_expired = tombstones.write(ctx, t, commit, batch_id)
    failpoint("after_tombstone_commit", t.qualified_name)
    if p.events is not None:  # its history, in the same order (framework/ods/history.py); failpoint after_history_commit
        history.write(ctx.spark, history.table(ctx.layout, ctx.defaults, t), t.key, history.ods_events(t, p.events, p.target),
                      BatchMark(stream=ctx.stream_id, batch=batch_id))
    # The newest source.ts_ms of the batch's events is what `lake freshness` measures from.
    mark = OdsCommit(stream=ctx.stream_id, batch=batch_id, key=list(t.key), tombstones=True, high_water=p.high_water,
                     event_ts_max=round(tr.event_ts_max.timestamp() * 1000) if tr.event_ts_max is not None else None)
    # Deletes are Hudi deletes: the table holds live rows only, for every reader; `_deleted` stays
    # a column (false) so tables written before tombstones and readers that filter on it still work.
    rows = commit.withColumn("_hoodie_is_deleted", F.col("_deleted")).withColumn("_deleted", F.lit(False))
    # A merge-on-read table's first commit stays an upsert (a delta commit): a bulk insert there is
    # a `commit`, which lake reads as a compaction carrying no metadata (timeline.last_commit).
    if table.committed() or t.type == "mor":
        table.commit(rows, mark)  # failpoints before_table_commit / after_table_commit
    else:
        partition = t.partition_by.derived_name if t.partition_by else None
        table.commit(first_load(rows, t.key, partition, tr.upserts), mark, operation="bulk_insert")
    st.columns = dict(p.target)
    st.key = list(t.key)
    st.last_stream, st.last_batch = ctx.stream_id, batch_id
    st.high_water = p.high_water
    st.migrated = True
    tr.status = status


def first_load(rows: DataFrame, key: list[str], partition: str | None, upserts: int) -> DataFrame:
    """The rows of a table's first commit, which Hudi bulk-inserts: no index to look up, no file to
    merge with. What an upsert's precombine on `_seq` keeps, done here: the last event of each
    key, and none for a key whose last event is a delete (its tombstone is written all the same);
    in as many Spark partitions as files an upsert would write (`upserts`: at most that many rows).
    A partitioned table's rows are shuffled by Hudi itself (PARTITION_SORT, LakeTable.options):
    each table partition in one task, written one after another. The table's lock (`lake ingest` holds it) keeps another
    writer from a first load of its own."""
    last = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy(F.col("_seq").desc())
    out = (rows.withColumn("_lake_last", F.row_number().over(last)).where("_lake_last = 1 AND NOT _hoodie_is_deleted")
           .drop("_lake_last"))
    return out if partition else out.coalesce(hudi.insert_files(upserts))


def write_tables(ctx: BatchContext, work: list[tuple[Prepared, TableState, DataFrame]], batch_id: int) -> None:
    """Write the gated tables, up to `ods.commit_threads` at once: a table's Hudi commits wait on
    the driver (timeline, listings, many small jobs) while another's tasks run. Every table is
    attempted even when another fails; the first failure is raised afterwards, so the micro-batch
    fails with the others committed and the streaming checkpoint unmoved (their replay is
    recognised, batch.py).

    With a Hive catalog the first table is written alone: its sync creates the database, which
    concurrent syncs would race to create."""
    threads = ctx.threads(len(work))
    first = 1 if ctx.project.config.catalog.kind == "hive" and threads > 1 else 0
    errors: list[tuple[str, BaseException]] = []
    for p, st, rows in work[:first]:
        try:
            write_table(ctx, p, st, rows, batch_id)
        except Exception as failed:  # noqa: BLE001 - raised below, after the other tables
            errors.append((p.table.qualified_name, failed))
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lake-ods-commit") as pool:
        futures = {pool.submit(write_table, ctx, p, st, rows, batch_id): p.table.qualified_name for p, st, rows in work[first:]}
        for f in as_completed(futures):
            e = f.exception()
            if e is not None:
                errors.append((futures[f], e))
    if errors:
        for name, e in errors[1:]:
            log.error("micro-batch %s: the commit of %s failed too: %s", batch_id, name, e)
        raise errors[0][1]


def write_dead_letter(ctx: BatchContext, parsed: DataFrame, extra: list[DataFrame], batch_id: int) -> None:
    """Upsert the batch's bad messages (parse errors, and each table's `extra`) into
    `_lake.dead_letter`, keyed by location so a replay does not duplicate them.

    Every stream shares it: concurrent ingests of disjoint `--tables` each write it, so its lock,
    held for this write only, keeps two Hudi writers off it at once (in Hudi's single-writer mode
    one rolls back the other's in-flight commit). A replay is recognised by any commit of this
    stream with this batch or a later one: other streams' commits may have come in between."""
    dead = parsed.where(F.col("status") == "dead")
    for e in extra:
        dead = dead.unionByName(e.select(*parsed.columns))
    path = ctx.layout.dead_letter
    # An Avro message is kept as JsonConverter's JSON with its schema block: a replay reads it as such.
    raw = F.col("value")
    if "msg_schema" in parsed.columns:
        wrapped = F.concat(F.lit('{"schema":'), F.col("msg_schema"), F.lit(',"payload":'), F.col("value"), F.lit("}"))
        raw = F.when(F.col("msg_schema").isNotNull(), wrapped).otherwise(raw)
    out = dead.select(
        F.col("loc"),
        raw.alias("raw"),
        F.col("reason"),
        F.when(F.col("tbl") != "", F.col("tbl")).alias("source_table"),
        F.col("origin"),
        F.col("arrival").alias("_seq"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.current_timestamp().alias("dead_at"),
    )
    table = ctx.dead_letter
    pausepoint("before_dead_letter_lock")
    try:
        with hold(ctx.layout.locks, [table_lock("_lake.dead_letter")], timeout=DEAD_LETTER_WAIT_SECONDS,
                  command=f"lake ingest (dead letter of micro-batch {batch_id})",
                  settings=ctx.project.config.locks, spark_conf=ctx.project.config.spark.conf):
            if any(m is not None and m.stream == ctx.stream_id and m.batch >= batch_id
                   for m in (BatchMark.from_meta(c.lake) for c in table.commits())):
                return
            table.commit(out, BatchMark(stream=ctx.stream_id, batch=batch_id))
    except LockHeldError as e:
        raise LockHeldError(
            f"micro-batch {batch_id} cannot write the dead letter {path}: {e.message}",
            fix="another ingest is writing it; if that process hangs, stop it (its lock is released when it "
            "exits), then rerun: the tables that committed this micro-batch recognise its replay",
        ) from e
