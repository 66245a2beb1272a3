"""Rescan models (joins, DISTINCT, subqueries, Python models with a key): find the output keys
(or, without a key, the `partition_by` partitions) the changed upstream rows can reach by running
the model on the changed rows — before-images against the old snapshots of the other inputs,
after-images against the new — and recompute and replace only those."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.table.columns import lake_key, visible_columns
from framework.table.held import Held
from framework.transform.commit import Written
from framework.transform.context import BuildContext
from framework.transform.plan import ModelPlan


def build(ctx: BuildContext, p: ModelPlan) -> Written:
    m, a = p.model, p.analysis
    key = list(a.key or ())
    # Key-scoped: recompute the output keys the changes reach. Partition-scoped (no key, but
    # `partition_by`): recompute the output partitions they reach and replace them.
    part = m.config.partition_by if not key else None
    scope_col = f"`{part}`" if part else "_lake_key"
    scope_of: Callable[[DataFrame], DataFrame] = (
        (lambda df: df.select(F.col(scope_col))) if part else (lambda df: df.select(lake_key(key).alias("_lake_key"))))
    old = ctx.snapshots(p, "begin")
    new = ctx.snapshots(p, "end")
    affected: DataFrame | None = None
    for u, n in p.pending.items():
        if not n:
            continue
        ch = ctx.change(u, list(ctx.key_of(u) or visible_columns(new[u])), p)
        for image, others in ((ch.before, old), (ch.after, new)):
            out = scope_of(ctx.query(m, {**others, u: image}))
            affected = out if affected is None else affected.union(out)
    assert affected is not None
    held = Held()
    scope = held(affected.distinct())
    try:
        rows = ctx.query(m, new)
        if part:
            rows = rows.join(scope, part, "left_semi")
        else:
            rows = rows.withColumn("_lake_key", lake_key(key)).join(scope, "_lake_key", "left_semi").drop("_lake_key")
        return ctx.write(p, rows, scope=scope, scope_col=part or "_lake_key")
    finally:
        held.release()
