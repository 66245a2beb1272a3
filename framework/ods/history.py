"""History tables (`history: true`, SCD type 2, the 拉链表): beside `ods.<name>`, the Hudi table
`ods.<name>_history` holds one row per version of each key: the row's columns, `_seq` (the source
position of the event that made the version), `_valid_from`, `_valid_to` (NULL while current),
`_is_current` and `_ended_by_delete`. Validity is source time: the table's first `ordering:`
column when it is a date or timestamp, else the event's `source.ts_ms` (`_event_ts`).

Deletes are kept as rows too, `_deleted` true (filtered by every lake reader, as an ODS table's
soft deletes were), so an event that arrives late still finds its place: each batch reads the
history of the keys it touches, adds its events (the ODS batch's, including those older than a
delete, which the ODS table drops), orders every event of a key by `_seq` and derives each
version's end from the event after it. So out-of-order events splice in at their source
position, a replay adds nothing (the same event: same key and `_seq`; the same event delivered
again under another arrival: the same values and time as the version before it), a delete then a
re-insert are two lives, and a truncate closes every open version (the ODS batch turns it into a
delete of every stored key at the truncate's position). A batch rewrites only its keys' rows.

Written before the ODS table's commit, like tombstones: a crash in between leaves history the
rerun recomputes to the same rows (the result depends only on the set of events), and a rerun
after the ODS commit skips the table (prepare.py), whose history is already written.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import LakeTable, ProjectDefaults
from models.commit_meta import CommitRecord
from models.config import OdsTable

VALIDITY = ("_valid_from", "_valid_to", "_is_current", "_ended_by_delete")
_EVENT = ["_seq", "_deleted", "_op", "_source"]  # what each history row keeps of its event besides the columns


def table(layout: Layout, defaults: ProjectDefaults, t: OdsTable) -> LakeTable:
    return kinds.history(layout, defaults, t)


def events(out: DataFrame) -> DataFrame:
    """The events of an ODS batch's sequenced rows (prepare.py) as history takes them: every one,
    also those older than a delete (`_lake_replayed`), and an event a truncate later in the batch
    cancelled (`_lake_truncated` 1: the ODS table gets a delete at the truncate's position) once
    more at its own position, as the version it was."""
    cancelled = out.where(F.col("_lake_truncated") == 1).withColumn("_seq", F.col("_lake_orig_seq")).withColumn(
        "_op", F.col("_lake_orig_op")).withColumn("_deleted", F.col("_lake_orig_op") == "d").withColumn("_event_ts", F.col("_lake_orig_ts"))
    return out.unionByName(cancelled).select(*[c for c in out.columns if not c.startswith("_lake_") and c != "_unavail"])


def valid_from(t: OdsTable, target: dict[str, str]) -> Column:
    """When a version starts: the first `ordering:` column if it is a date or timestamp, else the
    event's source time."""
    first = t.ordering[0] if t.ordering else None
    if first and target.get(first, "").split("(")[0] in ("date", "timestamp", "timestamp_ntz"):
        return F.coalesce(F.col(f"`{first}`").cast("timestamp"), F.col("_event_ts"))
    return F.col("_event_ts")


def ods_events(t: OdsTable, events: DataFrame, target: dict[str, str]) -> DataFrame:
    """An ODS batch's events (`events`) as `write` takes them: the columns of `target`, the event's
    own columns and when its version starts."""
    return events.select(*[F.col(f"`{c}`") for c in target], *_EVENT, valid_from(t, target).alias("_valid_from"))


def write(spark: SparkSession, h: LakeTable, key: list[str], new: DataFrame, mark: CommitRecord | None) -> int:
    """Splice `new` (events: data columns, `_seq`, `_deleted`, `_valid_from`, maybe `_op` and
    `_source`) into the history `h` of their keys (`key`) and commit the rows that change, with
    `mark`; returns the rows written."""
    keys = [F.col(f"`{k}`") for k in key]
    stored = None
    if h.committed():
        mine = new.select(*keys).distinct()
        stored = h.read(spark).join(mine, key, "left_semi")
        stored = stored.select(*[c for c in stored.columns if not c.startswith("_hoodie_")])
    old = stored.select(*[c for c in stored.columns if c not in VALIDITY[1:]]) if stored is not None else None
    both = new if old is None else old.unionByName(new, allowMissingColumns=True)
    rows = versions(both.dropDuplicates([*key, "_seq"]), key, [c for c in both.columns if c not in (*_EVENT, "_valid_from")])
    out = (rows if stored is None else _changed(rows, stored)).withColumn("_hoodie_is_deleted", F.lit(False))
    if stored is not None:  # a row a re-delivered event's earlier copy replaces (see `versions`)
        gone = stored.join(rows.select(*keys, "_seq"), [*key, "_seq"], "left_anti")
        out = out.unionByName(gone.withColumn("_hoodie_is_deleted", F.lit(True)), allowMissingColumns=True)
    out = out.persist()
    try:
        n = out.count()
        if n:
            h.commit(out, mark)  # failpoints before/after_history_commit
        return n
    finally:
        out.unpersist()


def versions(events: DataFrame, key: list[str], data: list[str]) -> DataFrame:
    """Every event of each key in source order, with the validity its neighbours give it. A
    version equal in every column, `_deleted` and `_valid_from` to the one before it is the same
    event delivered again (under another arrival, so another `_seq`): left out."""
    by = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy("_seq")
    same = [F.lag(F.col(f"`{c}`")).over(by).eqNullSafe(F.col(f"`{c}`")) for c in [*data, "_deleted", "_valid_from"]]
    repeated = F.lag("_seq").over(by).isNotNull() & reduce(lambda a, b: a & b, same)
    kept = events.withColumn("_lake_again", repeated).where(~F.col("_lake_again")).drop("_lake_again")
    nxt = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy("_seq")
    after_from, after_deleted, after = F.lead("_valid_from").over(nxt), F.lead("_deleted").over(nxt), F.lead("_seq").over(nxt)
    version = ~F.col("_deleted")
    return kept.select(
        *[F.col(f"`{c}`") for c in kept.columns if c not in VALIDITY],
        F.col("_valid_from"),
        F.when(version, after_from).alias("_valid_to"),
        (version & after.isNull()).alias("_is_current"),
        (version & F.coalesce(after_deleted, F.lit(False))).alias("_ended_by_delete"),
    )


def _changed(rows: DataFrame, stored: DataFrame) -> DataFrame:
    """The rows of `rows` the history does not hold exactly (a new version, or one whose end moved)."""
    cols = [c for c in rows.columns if c in stored.columns]
    if len(cols) != len(rows.columns):  # a new column: every row of these keys is written in the new shape
        return rows
    same = [F.col(f"r.`{c}`").eqNullSafe(F.col(f"s.`{c}`")) for c in cols]
    return rows.alias("r").join(stored.alias("s"), same, "left_anti")
