"""Unchanged TOASTed values: PostgreSQL does not log a large value (`text`, `jsonb`, `bytea`, ...)
that an UPDATE left alone, so Debezium's PostgreSQL connector writes a placeholder instead of it
(`__debezium_unavailable_value`, its `unavailable.value.placeholder`; in `bytea` columns the
placeholder's bytes). Written as data, every large value an update did not touch would be
overwritten with that text. lake keeps the value the key had before instead.

Hudi's `PostgresDebeziumAvroPayload` does the same when it merges an incoming record with the
stored one (string and bytes fields equal to the placeholder take the stored value). Within a
micro-batch lake goes further, in source order (position, then arrival) per key:

- an update's placeholder takes the last real value of the column before it: an earlier event of
  the batch (an insert, an update that set it) or else the stored row; several updates in a row
  all reach back to the same value; a delete in between ends the chain (the key's next insert
  carries every value);
- a primary-key change is a delete of the old key and a create of the new one at the same source
  position; the create's placeholders take the old key's value at that delete (`_lake_pair`),
  through as many key changes in a row as the batch has;
- a placeholder with no earlier value anywhere (the table never saw the row) cannot be filled:
  the event goes to the dead letter with that reason instead of storing the placeholder.

Only batches whose events carry a placeholder pay for this (parse.summarize counts them): one
window over the table's events of the batch, and a read of the stored rows of their keys.
"""

from __future__ import annotations

import base64
import json
from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
FILLABLE = ("string", "binary")


def forms(placeholder: str) -> list[str]:
    """The JSON texts a placeholder takes in a row image: the text (string, JSON columns), its
    bytes in base64 (`bytea`, binary.handling.mode=bytes) and an array of it (array columns)."""
    return [placeholder, base64.b64encode(placeholder.encode()).decode(), json.dumps([placeholder])]


def is_placeholder(text: Column, placeholder: str) -> Column:
    return text.isin(forms(placeholder))


def unavailable_columns(img: Column, target: dict[str, str], placeholder: str) -> Column:
    """The names of the columns whose value in the row image `img` is the placeholder (an empty array: none)."""
    names = [F.when(is_placeholder(img.getItem(c), placeholder), F.lit(c)) for c, typ in target.items() if typ in FILLABLE]
    return F.array_compact(F.array(*names)) if names else F.array().cast("array<string>")


def fill(out: DataFrame, key: list[str], target: dict[str, str], stored: DataFrame | None) -> DataFrame:
    """`out` (the table's rows of a batch, with `_unavail`, `_lake_pos` and `_lake_pair`) with
    each placeholder replaced by the key's value before it; `_unavail` keeps the columns that
    found none (module docstring). `stored`: the table as stored (None: not created yet)."""
    cols = [c for c, typ in target.items() if typ in FILLABLE]
    if not cols or not key:
        return out
    needs = F.size(F.col("_unavail")) > 0
    rows = out.withColumn("_lake_stored", F.lit(False))
    if stored is not None:
        wanted = out.where(needs).select(*[F.col(f"`{k}`") for k in key]).distinct()
        old = _rekeys(out, key).select(*[F.col(f"_lake_o{i}").alias(k) for i, k in enumerate(key)])
        have = stored.select(*[F.col(f"`{c}`") for c in dict.fromkeys([*key, *cols]) if c in stored.columns])
        have = have.join(wanted.unionByName(old).distinct(), key, "left_semi")
        rows = rows.unionByName(_as_rows(have, out), allowMissingColumns=False)
    depth = _chain_depth(rows, key)  # a key changed twice in the batch needs two steps
    rows = _carry(rows, key, cols)
    for _ in range(depth):
        rows = _from_old_key(rows, key, cols)
        rows = _carry(rows, key, cols)
    return rows.where(~F.col("_lake_stored")).drop("_lake_stored", *[f"_lake_prev_{i}" for i in range(len(cols))])


def _as_rows(have: DataFrame, like: DataFrame) -> DataFrame:
    """Stored rows as rows of `like`'s shape that sort before every event of their key."""
    exprs = []
    for f in like.schema.fields:
        if f.name in have.columns:
            exprs.append(F.col(f"`{f.name}`").cast(f.dataType).alias(f.name))
        elif f.name == "_unavail":
            exprs.append(F.array().cast("array<string>").alias(f.name))
        elif f.name == "_lake_pos":
            exprs.append(F.lit("").alias(f.name))
        elif f.name == "_deleted":
            exprs.append(F.lit(False).alias(f.name))
        else:
            exprs.append(F.lit(None).cast(f.dataType).alias(f.name))
    return have.select(*exprs).withColumn("_lake_stored", F.lit(True))


def _carry(rows: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """Each placeholder takes the last real value of its column before it, by source order per
    key; `_lake_prev_<i>` keeps that value (a struct, so a real NULL counts) for every row."""
    before = Window.partitionBy(*[F.col(f"`{k}`") for k in key]).orderBy("_lake_pos").rowsBetween(Window.unboundedPreceding, -1)
    out = rows
    for i, c in enumerate(cols):
        gone = F.array_contains(F.col("_unavail"), c)
        real = ~F.col("_deleted") & ~gone
        out = out.withColumn(f"_lake_prev_{i}", F.last(F.when(real, F.struct(F.col(f"`{c}`").alias("v"))), ignorenulls=True).over(before))
        out = out.withColumn(c, F.when(gone & F.col(f"_lake_prev_{i}").isNotNull(), F.col(f"_lake_prev_{i}.v")).otherwise(F.col(f"`{c}`")))
    still = [F.when(F.array_contains(F.col("_unavail"), c) & F.col(f"_lake_prev_{i}").isNull(), F.lit(c)) for i, c in enumerate(cols)]
    return out.withColumn("_unavail", F.array_compact(F.array(*still)))


def _rekeys(rows: DataFrame, key: list[str]) -> DataFrame:
    """The deletes that are half of a primary-key change: `_lake_pair` (their source position),
    the old key as `_lake_o<i>`, and their `_lake_prev_<i>` when present."""
    prev = [c for c in rows.columns if c.startswith("_lake_prev_")]
    return rows.where((F.col("_op") == "d") & ~F.col("_lake_stored") if "_lake_stored" in rows.columns else F.col("_op") == "d").select(
        F.col("_lake_pair"), *[F.col(f"`{k}`").alias(f"_lake_o{i}") for i, k in enumerate(key)], *[F.col(p).alias("_lake_d" + p[5:]) for p in prev])


def _chain_depth(rows: DataFrame, key: list[str]) -> int:
    """The longest chain of key changes (old key -> new key whose create holds a placeholder) in
    the batch: how many times the old keys' values must be handed on (read before any filling,
    so the batch's own events are all it looks at)."""
    dels = _rekeys(rows, key).withColumnRenamed("_lake_pair", "_lake_dpair")
    creates = rows.where(F.col("_op").isin("c", "u") & (F.size(F.col("_unavail")) > 0) & ~F.col("_lake_stored"))
    pairs = creates.join(dels, F.col("_lake_pair") == F.col("_lake_dpair")).select(
        F.struct(*[F.col(f"_lake_o{i}") for i in range(len(key))]).alias("old"), F.struct(*[F.col(f"`{k}`") for k in key]).alias("new")).collect()
    step = {tuple(r["old"]): tuple(r["new"]) for r in pairs if tuple(r["old"]) != tuple(r["new"])}
    longest = 0
    for start in step:
        n, k = 0, start
        while k in step and n < len(step):  # a key changed back and forth ends at len(step)
            n, k = n + 1, step[k]
        longest = max(longest, n)
    return longest


def _from_old_key(rows: DataFrame, key: list[str], cols: list[str]) -> DataFrame:
    """A create at the same source position as a delete of another key (a primary-key change)
    takes the old key's values for its placeholders."""
    dels = _rekeys(rows, key)
    creates = (F.col("_op").isin("c", "u")) & (F.size(F.col("_unavail")) > 0)
    joined = rows.join(dels.withColumnRenamed("_lake_pair", "_lake_dpair"), creates & (F.col("_lake_pair") == F.col("_lake_dpair")), "left")
    other = reduce(lambda a, b: a | b, [~F.col(f"`{k}`").eqNullSafe(F.col(f"_lake_o{i}")) for i, k in enumerate(key)])
    paired = F.col("_lake_dpair").isNotNull() & other
    out = joined
    for i, c in enumerate(cols):
        take = paired & F.array_contains(F.col("_unavail"), c) & F.col(f"_lake_d_prev_{i}").isNotNull()
        out = out.withColumn(c, F.when(take, F.col(f"_lake_d_prev_{i}.v")).otherwise(F.col(f"`{c}`")))
        out = out.withColumn("_unavail", F.when(take, F.array_remove(F.col("_unavail"), c)).otherwise(F.col("_unavail")))
    drop = ["_lake_dpair", *[f"_lake_o{i}" for i in range(len(key))], *[f"_lake_d_prev_{i}" for i in range(len(cols))]]
    return out.drop(*drop)
