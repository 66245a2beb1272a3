"""The groups an aggregate model hides, kept out of its table: `_lake/hidden/<layer>_<name>`.

An engine that reads a model's table by path (hudi-rs, Trino, a Spark session without lake) must
see exactly the model's rows. A group HAVING or a `drop` check hides is not one of them, yet its
running state (`_lake_*`) is what the next incremental build adds to. So the model's table holds
the visible groups only, and this companion Hudi table (COW, no CDC, same columns, `_deleted`
true) holds the hidden ones: a group that becomes hidden is hard-deleted from the model's table
(downstream models read a delete) and upserted here; one that becomes visible again moves back
(downstream: an insert). A group is in exactly one of the two.

Two tables do not commit atomically. The companion commits first; the model's commit that follows
records the companion instant it goes with (`hidden` in its extra metadata, next to the
checkpoint; `-`: no companion). The state is read as of that instant, so a companion commit whose
model commit never happened (a crash, a failed write) is never read; the next companion commit
puts back, in the same commit, the groups such orphans changed that the build does not decide
anew. A model commit without `hidden` was written before this table existed: its hidden groups
are `_deleted` rows of the model's table, and planning rebuilds it once (plan.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.held import Held
from framework.table.lake_table import LakeTable
from framework.transform import holders

META = "hidden"  # the model commit's extra metadata key: the companion instant it pairs with
NONE = "-"  # ... when the model has no companion table


def stored(spark: SparkSession, layout: Layout, name: str, instant: str | None) -> DataFrame | None:
    """The hidden groups that go with the model's table: the companion as of `instant` (the
    completion time the model's last commit records), or None when there are none."""
    path = layout.hidden(name)
    if not instant or instant == NONE or not hudi.table_exists(path):
        return None
    return spark.read.format("hudi").option("as.of.instant", instant).load(str(path))


def write(spark: SparkSession, table: LakeTable, rows: DataFrame, scope: DataFrame | None, gone: DataFrame | None,
          instant: str | None, counts: str | None = None) -> str:
    """Commit one build's hidden groups and return the companion instant the model's commit must
    record: the new commit's; when nothing differs, the latest one (NONE: no companion table).

    After the commit the companion holds `rows` (full rows, `_lake_key`), no other group inside
    `scope` (`_lake_key`s; None: every group) or `gone`, and every group outside them as it was
    at `instant` (restoring what orphan commits after it changed; `counts`: the model's
    holders.threshold, so a restored row's stale holder counts are not rewritten as new ones).
    Without a scope (a full build) holder counts do not make a row differ (holders.py)."""
    rows = rows.drop("_hoodie_is_deleted")
    if not table.committed():  # none, or a creation a kill interrupted (LakeTable.commit removes it)
        if rows.isEmpty():
            return NONE
        return table.commit(rows.withColumn("_hoodie_is_deleted", F.lit(False))).completed  # an insert: kinds.hidden
    latest = _data(table.read(spark))
    decided = rows.select("_lake_key").unionByName((latest if scope is None else scope).select("_lake_key"))
    if gone is not None:
        decided = decided.unionByName(gone.select("_lake_key"))
    wanted = rows
    last = table.instants()[-1].completed
    if last != instant and scope is not None:
        # Commits after `instant` are orphans: the keys they changed that this build does not
        # decide are put back as they were at `instant`. (Without a scope it decides them all.)
        base = table.read(spark, instant) if instant and instant != NONE else None
        undecided = _changed_since(base, table.read(spark)).join(decided, "_lake_key", "left_anti")
        decided = decided.unionByName(undecided)
        if base is not None:
            wanted = wanted.unionByName(_data(holders.forget_stale(base, counts)).join(undecided, "_lake_key", "left_semi"), allowMissingColumns=True)
    # Deletes carry the stored row: a delete record needs the key, and the stored values satisfy
    # every required column of the table's schema.
    deletes = latest.join(decided, "_lake_key", "left_semi").join(wanted.select("_lake_key"), "_lake_key", "left_anti")
    held = Held()
    try:
        final = held(_differing(wanted, latest, counted=scope is not None).withColumn("_hoodie_is_deleted", F.lit(False))
                     .unionByName(deletes.withColumn("_hoodie_is_deleted", F.lit(True)), allowMissingColumns=True))
        if final.isEmpty():
            return last
        return table.commit(final).completed
    finally:
        held.release()


def _data(table: DataFrame) -> DataFrame:
    """A companion read without Hudi's columns."""
    return table.select(*[f"`{c}`" for c in table.columns if not c.startswith("_hoodie_")])


def _changed_since(base: DataFrame | None, now: DataFrame) -> DataFrame:
    """The `_lake_key`s whose row differs between two reads of the companion (by the commit that
    wrote it, or present in one only)."""
    if base is None:
        return now.select("_lake_key")
    b = base.select("_lake_key", F.col("_hoodie_commit_time").alias("_lake_b"))
    n = now.select("_lake_key", F.col("_hoodie_commit_time").alias("_lake_n"))
    return b.join(n, "_lake_key", "full_outer").where("NOT (_lake_b <=> _lake_n)").select("_lake_key")


def _differing(rows: DataFrame, table: DataFrame, counted: bool = True) -> DataFrame:
    """`rows` the table does not hold exactly (NULL-safe, every column; holder counts only when
    `counted`); all of them when the columns differ (the model changed) or one is a map (not
    comparable)."""
    avro = {"tinyint": "int", "smallint": "int"}  # Avro has no 8/16-bit ints: Hudi stores them as int
    mine = {c: avro.get(t, t) for c, t in rows.dtypes}
    if mine != {c: avro.get(t, t) for c, t in table.dtypes} or any("map<" in t for t in mine.values()):
        return rows
    same = [F.col(f"_r.`{c}`").eqNullSafe(F.col(f"_t.`{c}`")) for c in rows.columns if counted or not holders.is_count(c)]
    return rows.alias("_r").join(table.alias("_t"), same, "left_anti")

