"""Restatement (`lake build MODEL --restate START..END`): the partitions of a partitioned model
whose `partition_by` value lies in the range are recomputed from the upstream snapshots its
checkpoint records, and replace what the table holds there: rows the query no longer returns in
those partitions are deleted, rows outside the range are left as built. The model is brought up
to date by its normal build first (framework/transform/evaluate.py), so the commit keeps its
checkpoint and the next incremental build goes on from it; models downstream read the change
like any other commit."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.errors import LakeError
from framework.table.columns import lake_key, visible_columns
from framework.table.held import Held
from framework.transform import hidden
from framework.transform.commit import Written
from framework.transform.context import BuildContext
from framework.transform.plan import ModelPlan
from framework.transform.strategies import full
from models.restatement import RestateRange


def bound(value: str, dtype: T.DataType, model: str, column: str) -> Any:
    """A range bound as a value of the partition column's type; LakeError naming the fix."""
    try:
        if isinstance(dtype, T.DateType):
            return date.fromisoformat(value)
        if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
            return datetime.fromisoformat(value)
        if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            return int(value)
        if isinstance(dtype, T.StringType):
            return value
    except ValueError:
        raise LakeError(f"--restate: {value!r} is not a {dtype.simpleString().upper()}, the type of {model}'s partition column {column}",
                        fix="write the range in the column's values, e.g. --restate 2026-11-01..2026-11-07 for a DATE") from None
    raise LakeError(f"--restate: {model}'s partition column {column} is {dtype.simpleString().upper()}; a range needs a date, "
                    "timestamp, integer or string column", fix=f"restate by rebuilding it in full: lake build {model}")


def inside(rows: DataFrame, window: RestateRange, model: str, column: str) -> Column:
    """Whether a row's partition value lies in the range (both ends included)."""
    dtype = rows.schema[column].dataType
    lo, hi = bound(window.start, dtype, model, column), bound(window.end, dtype, model, column)
    if lo > hi:
        raise LakeError(f"--restate {window}: the start is after the end", fix=f"write it as --restate {window.end}..{window.start}")
    return F.col(f"`{column}`").between(F.lit(lo), F.lit(hi))


def build(ctx: BuildContext, p: ModelPlan) -> Written:
    m, a = p.model, p.analysis
    part, window = m.config.partition_by, p.window
    assert part is not None and window is not None, "planned only for a partitioned model with a range"
    rows = full.rows(ctx, p)  # at p.end: the model's checkpoint
    if part not in rows.columns:
        raise LakeError(f"{m.name}: partition column {part} is not a column of its output", fix=f"fix `partition_by` in {m.stem}.yaml")
    cond = inside(rows, window, m.name, part)
    rows = rows.where(cond)
    key = list(a.key or ()) or visible_columns(rows)
    # The scope: every key of the range the table (or its hidden groups) holds or the query
    # returns now, so keys gone from those partitions are deleted and nothing outside is touched.
    scope = rows.select(lake_key(key).alias("_lake_key"))
    if ctx.committer.table(m).committed():
        scope = scope.union(ctx.reader.raw(m.name).where(cond).select("_lake_key"))
    kept = hidden.stored(ctx.spark, ctx.reader.layout, m.name, p.hidden)
    if kept is not None and part in kept.columns:
        scope = scope.union(kept.where(cond).select("_lake_key"))
    held = Held()
    try:
        return ctx.write(p, rows, scope=held(scope.distinct()))
    finally:
        held.release()
