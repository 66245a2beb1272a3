"""Row-wise models (select/filter/project of one upstream whose key is projected): upsert the
changed keys' new rows; delete keys whose row was deleted or no longer passes the filter."""

from __future__ import annotations

from pyspark.sql import functions as F

from framework.table.columns import lake_key
from framework.transform.commit import Written
from framework.transform.context import BuildContext
from framework.transform.plan import ModelPlan


def build(ctx: BuildContext, p: ModelPlan) -> Written:
    a = p.analysis
    u = a.upstreams[0]
    ukey = list(ctx.key_of(u) or ())
    ch = ctx.change(u, ukey, p)
    rows = ctx.query(p.model, {u: ch.after})
    scope = ch.keys.select(*[F.col(k).alias(a.key_map[k]) for k in ukey]).select(lake_key(list(a.key or ())).alias("_lake_key"))
    return ctx.write(p, rows, scope=scope)
