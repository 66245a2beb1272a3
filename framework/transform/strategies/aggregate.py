"""Aggregate models (GROUP BY of one upstream with SUM/COUNT/AVG/MIN/MAX): signed deltas of the
change (-before, +after) merged into hidden state columns per group.

State columns per aggregate `i` (see `Aggregate.state`): `_lake_s<i>` sum, `_lake_n<i>` count of
non-NULL values, `_lake_m<i>` the MIN/MAX and `_lake_c<i>` how many rows hold it (NULL: unknown,
after a full build; counts a full build left in place read as unknown too: holders.py);
`_lake_rows` counts the group's rows. A MIN/MAX merges from the change while a row still holds
the extreme; a group whose last holder (or one of an unknown number) was retracted is
recomputed from the upstream for those groups only. Count 0 deletes the group;
HAVING hides it (`_deleted`: the commit moves it to the model's hidden-groups table, hidden.py)
without losing its state.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.table.columns import lake_key
from framework.table.held import Held
from framework.transform import aggstate, hidden, holders
from framework.transform.commit import Written
from framework.transform.context import BuildContext
from framework.transform.plan import ModelPlan
from framework.transform.query import view_name
from framework.transform.strategy import Aggregate, Analysis


def full_rows(ctx: BuildContext, p: ModelPlan) -> DataFrame:
    """Every group's visible columns and state, from the upstream snapshot (a full build)."""
    u = p.analysis.upstreams[0]
    return finalize(ctx, p, state_query(ctx, p, ctx.snapshots(p)[u]))


def _grouped(ctx: BuildContext, a: Analysis, rows: DataFrame, measures: list[str], broadcast_join: DataFrame | None = None) -> DataFrame:
    """The model's WHERE and GROUP BY over `rows`, computing `measures` per group.
    `broadcast_join`: per-group values (`_lake_w<j>` = the j-th GROUP BY value, NULL-safe)
    joined to every row first, broadcast; measures name them `__lake_b.<column>`."""
    v = view_name("grouped")
    rows.createOrReplaceTempView(v)
    cols = [f"{e} AS `{alias}`" for e, alias in a.group_by] + measures
    where = f" WHERE {a.where_sql}" if a.where_sql else ""
    groups = ", ".join(e for e, _ in a.group_by)
    if broadcast_join is None:
        return ctx.spark.sql(f"SELECT {', '.join(cols)} FROM {v}{where} GROUP BY {groups}")
    b = view_name("b")
    broadcast_join.createOrReplaceTempView(b)
    on = " AND ".join(f"({e}) <=> __lake_b._lake_w{j}" for j, (e, _) in enumerate(a.group_by))
    return ctx.spark.sql(f"SELECT /*+ BROADCAST(__lake_b) */ {', '.join(cols)} FROM {v} JOIN {b} AS __lake_b ON {on}{where} GROUP BY {groups}")

def state_query(ctx: BuildContext, p: ModelPlan, upstream: DataFrame, holders: bool = False) -> DataFrame:
    """Full aggregate state: row count and, per aggregate, its sum/count/extreme; per MIN/MAX
    also how many rows hold the extreme (`_lake_c`, NULL when unknown), so a retraction
    recomputes a group only when its last holder goes. Spark has no aggregate for "count at
    the minimum": counting takes a second pass (the extremes per group, then every state
    column over the rows joined to their group's extremes), which doubled a full build of a
    MIN/MAX model at 10 M rows. So full builds leave the counts unknown, and `holders=True`
    (the recompute of a few groups) counts them; incremental merges keep them from there."""
    a = p.analysis
    measures = ["count(*) AS _lake_rows"] + [e for g in a.aggregates for e in _state_exprs(g)]
    ext = [g for g in a.aggregates if g.func in ("min", "max")]
    if not holders:
        return _grouped(ctx, a, upstream, measures + [f"CAST(NULL AS BIGINT) AS _lake_c{g.index}" for g in ext])
    extremes = _grouped(ctx, a, upstream, [f"{g.func}({g.arg_sql}) AS _lake_m{g.index}" for g in ext])
    extremes = extremes.select(*[F.col(f"`{alias}`").alias(f"_lake_w{j}") for j, (_, alias) in enumerate(a.group_by)],
                               *[f"_lake_m{g.index}" for g in ext])
    held = [f"count(CASE WHEN ({g.arg_sql}) = __lake_b._lake_m{g.index} THEN 1 END) AS _lake_c{g.index}" for g in ext]
    # Broadcast the extremes: they are one row per recomputed group, and those groups are
    # broadcast already (`_rows_of_groups`). Left to itself Spark sort-merge joined the
    # upstream rows to them (first incremental build after a full one, every group
    # recomputed, 10 M rows: 44.5 s; with the hint 37.1 s).
    return _grouped(ctx, a, upstream, measures + held, broadcast_join=extremes)

def build(ctx: BuildContext, p: ModelPlan) -> Written:
    a = p.analysis
    u = a.upstreams[0]
    ch = ctx.change(u, list(ctx.key_of(u) or ()), p)
    signed = ch.before.withColumn("_lake_sign", F.lit(-1)).unionByName(ch.after.withColumn("_lake_sign", F.lit(1)), allowMissingColumns=True)
    ext = [g for g in a.aggregates if g.func in ("min", "max")]
    if ext:
        # Per group of the change: the extreme of the inserted and of the retracted values, to
        # count how many rows hold each (window over the change only; it is small).
        v = view_name("signed")
        signed.createOrReplaceTempView(v)
        part = ", ".join(expr for expr, _ in a.group_by)
        win = [f"{g.func}(CASE WHEN _lake_sign {s} 0 THEN ({g.arg_sql}) END) OVER (PARTITION BY {part}) AS _lake_{w}{g.index}"
               for g in ext for s, w in ((">", "wi"), ("<", "wr"))]
        where = f" WHERE {a.where_sql}" if a.where_sql else ""
        signed = ctx.spark.sql(f"SELECT *, {', '.join(win)} FROM {v}{where}")
    delta = _grouped(ctx, a, signed, ["sum(_lake_sign) AS _lake_rows"] + [e for g in a.aggregates for e in _delta_exprs(g)])
    key = list(a.key or ())
    # The delta (one row per changed group) feeds the merge, the old-state lookup and the
    # write's scope. Spark would re-read and re-decode the change for each use (exchange
    # reuse is off, see session.py): keep it.
    held = Held()
    try:
        return _merge(ctx, p, held(delta.withColumn("_lake_key", lake_key(key))))
    finally:
        held.release()

def _merge(ctx: BuildContext, p: ModelPlan, delta: DataFrame) -> Written:
    """Merge the delta into the changed groups' stored state; recompute from the upstream the
    groups whose MIN/MAX lost its last holder; write the result."""
    a = p.analysis
    u = a.upstreams[0]
    key = list(a.key or ())
    target = ctx.reader.raw(p.model.name)
    held_back = hidden.stored(ctx.spark, ctx.reader.layout, p.model.name, p.hidden)
    if held_back is not None:  # the groups HAVING or a `drop` check hides (framework/transform/hidden.py)
        target = target.unionByName(held_back, allowMissingColumns=True)
    # Tables written before the holder counts existed: unknown, like after a full build. Counts a
    # full build left in place (written at or before its commit) are unknown too (holders.py).
    target = target.select("*", *[F.lit(None).cast("bigint").alias(c) for g in a.aggregates for c in g.state if c not in target.columns])
    target = holders.forget_stale(target, p.counts)
    old = target.join(delta.select("_lake_key"), "_lake_key", "left_semi")
    upstream = ctx.reader.snapshot(u, p.end[u])  # typed state columns, and the rows of recomputed groups
    state_types = {f.name: f.dataType.simpleString() for f in state_query(ctx, p, upstream).schema.fields}
    d, o = delta.alias("d"), old.alias("o")
    j = d.join(o, F.col("d._lake_key") == F.col("o._lake_key"), "full_outer")
    merged = [F.coalesce(F.col("d._lake_key"), F.col("o._lake_key")).alias("_lake_key")]
    merged += [F.coalesce(F.col(f"d.`{k}`"), F.col(f"o.`{k}`")).alias(k) for k in key]
    merged.append((_old("_lake_rows") + _new("_lake_rows")).cast("bigint").alias("_lake_rows"))
    recompute: Column = F.lit(False)
    for g in a.aggregates:
        cols, redo = _merged_state(g, state_types)
        merged += cols
        recompute = recompute | redo
    # Never NULL: a NULL flag would drop the group from both the kept and the recomputed rows.
    merged.append(F.coalesce(recompute, F.lit(False)).alias("_lake_recompute"))
    hold = Held()
    state = hold(j.select(*merged))
    try:
        redo_rows = state.where("_lake_recompute AND _lake_rows > 0").select("_lake_key", *[f"`{k}`" for k in key])
        if not redo_rows.isEmpty():
            fresh = state_query(ctx, p, _rows_of_groups(a, key, upstream, redo_rows), holders=True)
            fresh = fresh.withColumn("_lake_key", lake_key(key)).join(redo_rows.select("_lake_key"), "_lake_key", "left_semi")
            keep = state.where("NOT (_lake_recompute AND _lake_rows > 0)").drop("_lake_recompute")
            state_all = keep.unionByName(fresh.select(*keep.columns))
        else:
            state_all = state.drop("_lake_recompute")
        return ctx.write(p, finalize(ctx, p, state_all), scope=delta.select("_lake_key"))
    finally:
        hold.release()


def _old(c: str) -> Column:
    return F.coalesce(F.col(f"o.{c}"), F.lit(0))


def _new(c: str) -> Column:
    return F.coalesce(F.col(f"d.{c}"), F.lit(0))


def _merged_state(g: Aggregate, state_types: dict[str, str]) -> tuple[list[Column], Column]:
    """The merged state columns of one aggregate (old state `o`, delta `d`) and whether its
    group must be recomputed from the upstream."""
    i = g.index
    if g.func == "count_star":
        return [], F.lit(False)
    cols = [(_old(f"_lake_n{i}") + _new(f"_lake_n{i}")).cast("bigint").alias(f"_lake_n{i}")]
    if g.func in ("sum", "avg"):
        s = _old(f"_lake_s{i}") + _new(f"_lake_s{i}")
        return cols + [s.cast(state_types[f"_lake_s{i}"]).alias(f"_lake_s{i}")], F.lit(False)
    if g.func not in ("min", "max"):
        return cols, F.lit(False)
    # The new extreme is the better of the old one and the inserted one; it stands if some row
    # still holds it: old holders + inserted holders - retracted holders. (Retracted values
    # beyond the old extreme cannot exist, so only retractions at the new extreme count.) No
    # holder left -> recompute the group from upstream. Unknown old holders (NULL: a full build)
    # -> recompute only if the change retracts a value at the extreme, as if it were the last.
    n = _old(f"_lake_n{i}") + _new(f"_lake_n{i}")
    om, dm, dr = F.col(f"o._lake_m{i}"), F.col(f"d._lake_m{i}"), F.col(f"d._lake_r{i}")
    # When every old value was retracted, the inserted ones are all there is.
    replaced = (_old(f"_lake_n{i}") - _new(f"_lake_rn{i}")) <= 0
    best = F.when(replaced, dm).otherwise((F.least if g.func == "min" else F.greatest)(om, dm))
    held = F.when(replaced, F.col(f"d._lake_mc{i}")).otherwise(
        F.when(om == best, F.col(f"o._lake_c{i}")).otherwise(0) + F.when(dm == best, F.col(f"d._lake_mc{i}")).otherwise(0)
        - F.when(dr == best, F.col(f"d._lake_rc{i}")).otherwise(0))
    hit = F.coalesce(dr == best, F.lit(False))
    beyond = ~replaced & F.coalesce((dr < best) if g.func == "min" else (dr > best), F.lit(False))  # a wrong stored state
    cols.append(F.when(n > 0, best).cast(state_types[f"_lake_m{i}"]).alias(f"_lake_m{i}"))
    cols.append(F.when(n > 0, held).otherwise(0).cast("bigint").alias(f"_lake_c{i}"))
    lost = F.coalesce(held <= 0, hit)  # no holder left; or one of an unknown number (NULL) retracted
    return cols, (n > 0) & (best.isNull() | beyond | lost)



def _rows_of_groups(a: Analysis, key: list[str], upstream: DataFrame, groups: DataFrame) -> DataFrame:
    """The upstream rows of the given groups (their key columns), filtered before aggregating
    so a MIN/MAX recompute shuffles only those groups' rows, not the whole upstream. The
    filter compares the typed GROUP BY values NULL-safely against a broadcast of the groups
    (building a JSON key per upstream row cost more than the aggregation it saved)."""
    exprs = dict((alias, e) for e, alias in a.group_by)
    if not all(k in exprs for k in key):
        return upstream
    mine = [f"_lake_g{i}" for i in range(len(key))]
    theirs = [f"_lake_w{i}" for i in range(len(key))]
    rows = upstream.select("*", *[F.expr(exprs[k]).alias(c) for k, c in zip(key, mine, strict=True)])
    wanted = F.broadcast(groups.select(*[F.col(f"`{k}`").alias(c) for k, c in zip(key, theirs, strict=True)]))
    on = [F.col(g).eqNullSafe(F.col(w)) for g, w in zip(mine, theirs, strict=True)]
    return rows.join(wanted, on, "left_semi").drop(*mine)


def finalize(ctx: BuildContext, p: ModelPlan, state: DataFrame) -> DataFrame:
    """Visible columns (typed as the plain query types them) + state + `_deleted` (HAVING hides
    the group: the commit keeps it in the hidden-groups table, not the model's)."""
    a = p.analysis
    types = _output_types(ctx, p)
    state_cols = [c for c in state.columns if c.startswith("_lake_") and c not in (aggstate.KEY, "_lake_recompute")]
    sdtypes = dict(state.dtypes)
    # AVGs divide as Spark's Average does for their sum's type: computed first, read by name.
    averages = [f"{g.columns.average_sql(sdtypes[g.columns.sum])} AS {g.columns.avg}" for g in a.aggregates if g.func == "avg"]
    v = view_name("fin")
    state.createOrReplaceTempView(v)
    exprs = [f"CAST({e} AS {types[alias]}) AS `{alias}`" for alias, e in a.finalize.items()]
    having = f"NOT coalesce({a.having_sql}, false)" if a.having_sql else "false"
    source = f"(SELECT *, {', '.join(averages)} FROM {v})" if averages else v
    sql = f"SELECT {', '.join(exprs)}, {', '.join(state_cols)}, ({having}) AS _deleted FROM {source}"
    return ctx.spark.sql(sql)


def _output_types(ctx: BuildContext, p: ModelPlan) -> dict[str, str]:
    empty = {u: ctx.reader.snapshot(u, p.end[u]).limit(0) for u in p.model.upstreams}
    return {f.name: f.dataType.simpleString() for f in ctx.query(p.model, empty).schema.fields}



def _state_exprs(g: Aggregate) -> list[str]:
    """The stored state of `g` over a group's rows (holder counts apart: `state_query`)."""
    c, x = g.columns, g.arg_sql
    if g.func == "count_star":
        return []
    if g.func == "count":
        return [f"count({x}) AS {c.count}"]
    if g.func in ("sum", "avg"):
        return [f"sum({x}) AS {c.sum}", f"count({x}) AS {c.count}"]
    return [f"{g.func}({x}) AS {c.extreme}", f"count({x}) AS {c.count}"]


def _delta_exprs(g: Aggregate) -> list[str]:
    i, x = g.index, g.arg_sql
    if g.func == "count_star":
        return []
    n = f"sum(CASE WHEN ({x}) IS NOT NULL THEN _lake_sign ELSE 0 END) AS _lake_n{i}"
    if g.func == "count":
        return [n]
    if g.func in ("sum", "avg"):
        return [f"sum(CASE WHEN _lake_sign > 0 THEN ({x}) ELSE -({x}) END) AS _lake_s{i}", n]
    return [f"{g.func}(CASE WHEN _lake_sign > 0 THEN ({x}) END) AS _lake_m{i}", f"{g.func}(CASE WHEN _lake_sign < 0 THEN ({x}) END) AS _lake_r{i}", n,
            f"count(CASE WHEN _lake_sign > 0 AND ({x}) = _lake_wi{i} THEN 1 END) AS _lake_mc{i}",
            f"count(CASE WHEN _lake_sign < 0 AND ({x}) = _lake_wr{i} THEN 1 END) AS _lake_rc{i}",
            f"count(CASE WHEN _lake_sign < 0 THEN ({x}) END) AS _lake_rn{i}"]
