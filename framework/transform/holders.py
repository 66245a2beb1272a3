"""Which MIN/MAX holder counts (`_lake_c<i>`, strategies/aggregate.py) an aggregate build may trust.

A full build (or a recompute) computes every group in one pass and leaves the counts unknown
(NULL). Writing those NULLs over known counts would rewrite every group an incremental build had
recomputed (14-17 % of the rows in BENCHMARKS.md's aggregate), a change no reader can see but
every downstream CDC reader would read. So the full build ignores the counts when it compares its
rows with the table and writes only rows whose other values differ; the counts it leaves in
place may be stale (the upstream changed since they were counted: one of two holders of a
minimum deleted leaves the minimum, and the row, as they were). Its commit records `META`:
`THIS`, "counts of rows written at or before this commit are unknown"; planning resolves it to
an instant (`threshold`) and every later commit of the model carries that instant forward, so it
survives any number of incremental builds. The aggregate strategy reads the counts of rows whose
`_hoodie_commit_time` is at or before it as NULL, in the model's table and in its hidden-groups
table alike: both take their instants from one clock, the full build's hidden-groups commit
precedes its model commit, and every later build's commits follow it. (Compaction of a
merge-on-read table keeps each row's commit time.) A table whose commits record no `META` (older
versions, whose full builds wrote every count as NULL) trusts every stored count, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from framework.table.hudi import Instant
from framework.transform.aggstate import is_holder_count

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

META = "counts_unknown"  # the model commit's extra metadata key: counts written at or before this instant are unknown
THIS = "this"  # ... the commit that records it (a full build: its own instant is not known before it commits)


def is_count(column: str) -> bool:
    """A holder-count state column."""
    return is_holder_count(column)


def threshold(meta: Mapping[str, str], instants: Sequence[Instant]) -> str | None:
    """The instant at or before which stored counts are unknown, from the model table's last
    commit's lake metadata and its completed commits; None: every count may be trusted. `THIS`
    resolves to the latest commit's instant: the full build's own or, on a merge-on-read table, a
    compaction after it (which writes no row of its own)."""
    value = meta.get(META)
    if value != THIS:
        return value
    return max((i.requested for i in instants), default=None)


def forget_stale(rows: DataFrame, before: str | None) -> DataFrame:
    """`rows` of a model or hidden-groups table read with Hudi's columns, their holder counts NULL
    where written at or before `before` (nothing changes when None)."""
    from pyspark.sql import functions as F

    if before is None:
        return rows
    stale = F.col("_hoodie_commit_time") <= F.lit(before)
    return rows.select(*[F.when(stale, F.lit(None)).otherwise(F.col(c)).cast("bigint").alias(c) if is_count(c) else F.col(f"`{c}`")
                         for c in rows.columns])
