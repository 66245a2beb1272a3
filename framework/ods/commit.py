"""The last steps of an ODS micro-batch: the dead letter, then per prepared table: gate it, write
its tombstones, upsert it (deletes as Hudi deletes), recording the batch in the same Hudi commit
(stream id, batch id, key, binlog high-water mark).

Exactly once: a batch replayed after a crash skips the tables that already committed it
(prepare.py checks each table's state first), and the dead letter skips a batch it has.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.errors import QualityGateError
from framework.ods import rewrite, tombstones
from framework.ods.context import BatchContext, TableState
from framework.ods.prepare import Prepared
from framework.quality.ods_gate import check_table
from framework.runtime.faults import failpoint, pausepoint
from framework.runtime.lock import LockHeldError, hold, table_lock
from framework.table.kinds import DEAD_LETTER_KEY as _KEY
from models.commit_meta import BatchMark, OdsCommit

DEAD_LETTER_KEY = list(_KEY)
DEAD_LETTER_WAIT_SECONDS = 300  # another stream's dead-letter write takes seconds


def commit_table(ctx: BatchContext, p: Prepared, st: TableState, batch_id: int, cache: list[DataFrame], blocked: list[QualityGateError]) -> None:
    """Gate and upsert one prepared table; an `error` check adds its error to `blocked` instead."""
    t, tr = p.table, p.result
    if p.rows is None:
        return
    status: Literal["ok", "dead_letter"] = "dead_letter" if tr.status == "dead_letter" else "ok"
    if tr.upserts + tr.deletes + p.migrated == 0:
        tr.status = status
        return
    commit = p.rows
    if t.checks:
        gate = check_table(ctx.spark, ctx.project, t, p.rows, ctx.run_id, cache)
        tr.checks, tr.quarantined = gate.result.checks, gate.result.quarantined
        if gate.error is not None:
            tr.status, tr.reason = "blocked", f"quality gate: {', '.join(gate.error.failed)} failed"
            blocked.append(gate.error)
            return
        commit = gate.rows
        tr.upserts -= gate.result.quarantined
    table = ctx.table(t)
    if p.rewrite:  # a widening Hudi cannot make in place: the table is rewritten in the new types first
        rewrite.rewrite(ctx, t, st, p.rewrite)
    # Tombstones first: a crash before the table's commit leaves tombstones its rerun tolerates
    # (framework/ods/tombstones.py); the other order would lose them.
    tr.tombstones_expired = tombstones.write(ctx, t, commit, batch_id)
    failpoint("after_tombstone_commit")
    # The newest source.ts_ms of the batch's events is what `lake freshness` measures from.
    mark = OdsCommit(stream=ctx.stream_id, batch=batch_id, key=list(t.key), tombstones=True, high_water=p.high_water,
                     event_ts_max=round(tr.event_ts_max.timestamp() * 1000) if tr.event_ts_max is not None else None)
    # Deletes are Hudi deletes: the table holds live rows only, for every reader; `_deleted` stays
    # a column (false) so tables written before tombstones and readers that filter on it still work.
    rows = commit.withColumn("_hoodie_is_deleted", F.col("_deleted")).withColumn("_deleted", F.lit(False))
    table.commit(rows, mark)  # failpoints before_table_commit / after_table_commit
    st.columns = dict(p.target)
    st.key = list(t.key)
    st.last_stream, st.last_batch = ctx.stream_id, batch_id
    st.high_water = p.high_water
    st.migrated = True
    tr.status = status


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
