"""Tombstones of an ODS table: the keys it deleted and the source position (`_seq`) of each delete.

An ODS table removes a deleted row (a Hudi hard delete), so every reader of the table by path
(Spark without lake, Trino, hudi-rs) sees exactly the live rows. Once Hudi has removed a key, its
ordering value is gone too, and a late or replayed older event of that key would insert it again
(HUDI_NOTES §4.4). The tombstone table, `_lake/tombstones/<layer>_<name>` (one row per deleted
key: key columns, `_seq`, `_deleted_at`), keeps what the table no longer can: before a batch is
written, each event of a key with a tombstone is dropped (counted as `replayed`) unless it is newer
than the delete; a newer event re-creates the key. A re-created key keeps its tombstone: it is
older than the live row, so it drops only events the row would win against anyway, and keeping
it spares a delete per re-created key (the next delete of the key replaces it: greatest `_seq`).

Order of the two writes: tombstones first, then the ODS commit that records the batch. A crash
between them leaves tombstones of a batch the table has not taken; the rerun reads them, and its
own deletes, at exactly their tombstone's position, pass (a delete applied again changes nothing),
so the rerun commits what one run would have. The other order would lose tombstones: the rerun
skips a table that has the batch.

Tombstones older than `ods.tombstone_retention_days` (by `_deleted_at`, when the delete was
ingested) are removed with the next tombstone write; a replay of events older than that can
re-insert a deleted key.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.ods.context import BatchContext
from models.commit_meta import BatchMark
from models.config import OdsTable

# The commit metadata key every ODS commit carries once its table keeps tombstones (no soft deletes
# left to move: see `soft_deleted`).
MARKER = "ods_tombstones"


def mark_replayed(ctx: BatchContext, t: OdsTable, out: DataFrame, migrating: bool) -> DataFrame:
    """`out` with `_lake_replayed`: the event is older than its key's tombstone (or a live event at
    its position). Only the batch's keys are looked up: the batch joins the tombstones' key and
    `_seq` columns (a scan of a table as small as the deletes kept, no bigger than the lookup
    Hudi's SIMPLE index already does on the ODS table). `migrating`: the soft deletes `out` moves
    (`soft_deleted`) count as tombstones too."""
    table = ctx.tombstones(t)
    exists = table.committed()
    if not t.key or not (exists or migrating):
        return out.withColumn("_lake_replayed", F.lit(False))
    keys = [F.col(f"`{k}`").alias(f"_lake_t{i}") for i, k in enumerate(t.key)]
    parts = [out.where(F.col("_lake_truncated") == 3).select(*keys, "_seq")] if migrating else []
    parts += [table.read(ctx.spark).select(*keys, "_seq")] if exists else []
    tomb = reduce(DataFrame.unionByName, parts).groupBy(*[f"_lake_t{i}" for i in range(len(t.key))]).agg(F.max("_seq").alias("_lake_tomb"))
    on = reduce(lambda a, b: a & b, [F.col(f"`{k}`").eqNullSafe(F.col(f"_lake_t{i}")) for i, k in enumerate(t.key)])
    joined = out.join(tomb, on, "left")
    tomb_seq, seq = F.col("_lake_tomb"), F.col("_seq")
    # A delete at the tombstone's own position is that delete again (a replay, or the rerun of a
    # batch whose tombstones committed before a crash): it passes, applying it again is harmless.
    replayed = tomb_seq.isNotNull() & ((seq < tomb_seq) | ((seq == tomb_seq) & ~F.col("_deleted")))
    return joined.withColumn("_lake_replayed", replayed).drop("_lake_tomb", *[f"_lake_t{i}" for i in range(len(t.key))])


def soft_deleted(ctx: BatchContext, t: OdsTable, target: dict[str, str]) -> DataFrame | None:
    """The soft-deleted rows (`_deleted`) of a table written before tombstones, as deletes at
    their own position: the first batch after the upgrade moves them into the tombstone table and
    removes them (None: the table has no `_deleted` column)."""
    stored = ctx.table(t).read(ctx.spark)
    if "_deleted" not in stored.columns:
        return None
    gone = stored.where(F.col("_deleted"))
    return gone.select(
        *[F.col(f"`{c}`") if c in gone.columns else F.lit(None).cast(target[c]).alias(c) for c in target],
        F.col("_op"), F.col("_event_ts"), F.col("_seq"), F.col("_ingested_at"), F.lit(True).alias("_deleted"),
        F.col("_source"), F.lit(3).alias("_lake_truncated"),
    )


def write(ctx: BatchContext, t: OdsTable, rows: DataFrame, batch_id: int) -> None:
    """Upsert a tombstone for every key whose last event in `rows` (what the ODS commit writes) is
    a delete, and remove tombstones older than the retention; before the ODS commit."""
    table = ctx.tombstones(t)
    keys = [F.col(f"`{k}`") for k in t.key]
    # The last event per key from the key, `_seq` and the two columns a tombstone needs only: a
    # shuffle of a few narrow columns, not (as a window over the rows was) of every whole row.
    last = rows.groupBy(*keys).agg(
        F.max_by(F.struct(F.col("_deleted"), F.col("_ingested_at")), F.col("_seq")).alias("_lake_last"),
        F.max("_seq").alias("_seq"))
    new = last.where(F.col("_lake_last._deleted")).select(
        *keys, F.col("_seq"), F.col("_lake_last._ingested_at").alias("_deleted_at"), F.lit(False).alias("_hoodie_is_deleted"))
    out = new
    if table.committed():
        days = ctx.project.config.ods.tombstone_retention_days
        old = table.read(ctx.spark)
        cutoff = datetime.now(timezone.utc) - timedelta(days=days)
        expired = old.where(F.col("_deleted_at") < F.lit(cutoff)).select(*keys, "_seq", "_deleted_at").join(
            new.select(*keys), list(t.key), "left_anti")
        out = new.unionByName(expired.withColumn("_hoodie_is_deleted", F.lit(True)))
    if out.isEmpty():
        return
    # A table whose creation a kill interrupted (no completed commit) is removed first (LakeTable.settle).
    table.commit(out, BatchMark(stream=ctx.stream_id, batch=batch_id))
