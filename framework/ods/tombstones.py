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
ingested) are removed with the next tombstone write, counted in the batch's result
(`tombstones_expired`). An event older than a delete whose tombstone expired would re-insert the
deleted key, so the greatest `_seq` ever expired, the table's expiry horizon, is kept beside the
tombstone table (`<name>.expired.json`, written before the commit that removes them: a crash in
between leaves a horizon too far, never too short). Each tombstone commit records a lower bound
of the `_deleted_at` it keeps (`TombstoneMark.oldest`): while that is inside the retention the
next write does not read the tombstone table to expire entries, so a batch costs what its own
deletes cost, not what the table holds. A dead-letter replay refuses (dead-letters
again, with the reason and the fix) each event older than the horizon whose key is neither live
in the table nor tombstoned: lake no longer knows whether a delete of it came later. Only
replays are checked: a normal ingest reads new events.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.ods.context import BatchContext
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.columns import live
from models.commit_meta import TombstoneMark
from models.config import OdsTable

# The commit metadata key every ODS commit carries once its table keeps tombstones (no soft deletes
# left to move: see `soft_deleted`).
MARKER = "ods_tombstones"
# How the reason of a replayed event refused for an expired tombstone begins (`--reason` finds it).
REFUSED = "replay refused, tombstone expired"


def mark_replayed(ctx: BatchContext, t: OdsTable, out: DataFrame, migrating: bool, horizon: str | None = None) -> DataFrame:
    """`out` with `_lake_replayed`: the event is older than its key's tombstone (or a live event at
    its position). Only the batch's keys are looked up: the batch joins the tombstones' key and
    `_seq` columns (a scan of a table as small as the deletes kept, no bigger than the lookup
    Hudi's SIMPLE index already does on the ODS table). `migrating`: the soft deletes `out` moves
    (`soft_deleted`) count as tombstones too. With the table's expiry `horizon` (a replay's
    batch), also `_lake_at_risk`: an event older than it whose key has no tombstone
    (`refuse_expired` looks the key up in the table)."""
    table = ctx.tombstones(t)
    exists = table.committed()
    if not t.key or not (exists or migrating):
        out = out.withColumn("_lake_replayed", F.lit(False))
        if horizon is None:
            return out
        return out.withColumn("_lake_at_risk", _older(horizon))
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
    joined = joined.withColumn("_lake_replayed", replayed)
    if horizon is not None:
        joined = joined.withColumn("_lake_at_risk", tomb_seq.isNull() & _older(horizon))
    return joined.drop("_lake_tomb", *[f"_lake_t{i}" for i in range(len(t.key))])


def _older(horizon: str) -> Column:
    """An event (not a delete: deleting a key again is harmless) older than the expiry horizon."""
    return (F.col("_seq") < F.lit(horizon)) & ~F.col("_deleted") & (F.col("_lake_truncated") == 0)


def refuse_expired(ctx: BatchContext, t: OdsTable, out: DataFrame) -> DataFrame:
    """The locations (`loc`) of the events `mark_replayed` put at risk whose key has no live row
    in the table either: replaying them could re-insert a key deleted after them."""
    risky = out.where(F.col("_lake_at_risk"))
    table = ctx.table(t)
    if table.committed():
        stored = table.read(ctx.spark)
        keys = stored.where(live(stored)).select(*[F.col(f"`{k}`").alias(f"_lake_l{i}") for i, k in enumerate(t.key)])
        on = reduce(lambda a, b: a & b, [F.col(f"`{k}`").eqNullSafe(F.col(f"_lake_l{i}")) for i, k in enumerate(t.key)])
        risky = risky.join(keys, on, "left_anti")
    return risky.select(F.col("_source").alias("loc"))


def refused_reason(ctx: BatchContext, t: OdsTable) -> str:
    days = ctx.project.config.ods.tombstone_retention_days
    q = t.qualified_name
    return (f"{REFUSED}: this event is older than a delete of {q} whose tombstone expired "
            f"(ods.tombstone_retention_days: {days:g}), and its key is neither in {q} nor in its tombstones, so it may "
            "have been deleted after this event; replaying it could re-insert a deleted row. Fix: check the row in the "
            f"source; if it exists, lake dead-letter replay --table {q} --allow-expired-tombstones; if not, lake "
            f"dead-letter purge --table {q} --reason 'tombstone expired' --include-pending --yes")


def horizon_file(layout: Layout, qualified: str) -> Location:
    """Where the table's expiry horizon is kept: beside its tombstone table."""
    tomb = layout.tombstones(qualified)
    return tomb.parent / f"{tomb.name}.expired.json"


def expired_horizon(layout: Layout, qualified: str) -> str | None:
    """The greatest `_seq` of the table's expired tombstones (None: none expired)."""
    f = horizon_file(layout, qualified)
    if not layout.fs.exists(f):
        return None
    return str(json.loads(layout.fs.read_text(f))["seq"])


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


def write(ctx: BatchContext, t: OdsTable, rows: DataFrame, batch_id: int) -> int:
    """Upsert a tombstone for every key whose last event in `rows` (what the ODS commit writes) is
    a delete, and remove tombstones older than the retention; before the ODS commit. Returns how
    many expired."""
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
    kept_from: datetime | None = None  # a lower bound of the `_deleted_at` of the tombstones kept
    first = not table.committed()  # one row per key, none deleted: a bulk insert
    if not first:
        cutoff = datetime.now(timezone.utc) - timedelta(days=ctx.project.config.ods.tombstone_retention_days)
        last_commit = table.last_commit()
        mark = TombstoneMark.from_meta(last_commit.lake) if last_commit is not None else None
        if mark is not None and mark.oldest is not None and mark.oldest >= cutoff:
            kept_from = mark.oldest  # no tombstone is old enough to expire: the table is not read
        else:
            old = table.read(ctx.spark)
            expired = old.where(F.col("_deleted_at") < F.lit(cutoff)).select(*keys, "_seq", "_deleted_at").join(
                new.select(*keys), list(t.key), "left_anti")
            out = new.unionByName(expired.withColumn("_hoodie_is_deleted", F.lit(True)))
            kept_from = _micros(old.where(F.col("_deleted_at") >= F.lit(cutoff)).agg(F.min(_deleted_micros())).collect()[0][0])
    counts = {r["gone"]: (r["n"], r["seq"], _micros(r["oldest"])) for r in out.groupBy(F.col("_hoodie_is_deleted").alias("gone"))
              .agg(F.count(F.lit(1)).alias("n"), F.max("_seq").alias("seq"), F.min(_deleted_micros()).alias("oldest")).collect()}
    if not counts:
        return 0
    n_expired, newest, _ = counts.get(True, (0, None, None))
    if newest is not None:
        _raise_horizon(ctx.layout, t.qualified_name, newest)
    oldest = min((d for d in (kept_from, counts.get(False, (0, None, None))[2]) if d is not None), default=None)
    # A table whose creation a kill interrupted (no completed commit) is removed first (LakeTable.settle).
    if first:  # as many files as an upsert would write
        out = out.coalesce(hudi.insert_files(int(counts.get(False, (0, None, None))[0])))
    table.commit(out, TombstoneMark(stream=ctx.stream_id, batch=batch_id, oldest=oldest), operation="bulk_insert" if first else None)
    return int(n_expired)


# `_deleted_at` as microseconds since the epoch: a Python datetime collected from Spark is in the
# driver's local time zone, the epoch is not.
def _deleted_micros() -> Column:
    return F.expr("unix_micros(_deleted_at)")


def _micros(us: int | None) -> datetime | None:
    return None if us is None else datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=us)


def _raise_horizon(layout: Layout, qualified: str, seq: str) -> None:
    """Keep the greatest expired `_seq`; written before the commit that removes the tombstones."""
    before = expired_horizon(layout, qualified)
    if before is None or seq > before:
        layout.fs.write_text(horizon_file(layout, qualified), json.dumps({"seq": seq, "at": datetime.now(timezone.utc).isoformat()}))
