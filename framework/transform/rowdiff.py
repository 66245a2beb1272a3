"""Two versions of a model's rows compared by key (`lake verify`): the table's and a full
build's. Counts of missing, extra and changed keys, the columns that differ, a few sample keys
with both rows; optionally on a hash-sample of the keys only.

Rows match on the model's key (its `_lake_key` rule: the key values as a JSON array of text,
framework/table/columns.py), computed on both sides from the visible columns, never read from the
table's bookkeeping. Values compare NULL-safe; floating-point columns with a relative tolerance
(an incremental merge adds in another order than a full build), maps by their JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.runtime.terminal import json_value
from framework.table.columns import lake_key
from models.verify import KeySample

BUCKETS = 1_000_000  # a sample keeps the keys whose hash falls below fraction * BUCKETS
FLOAT_TOLERANCE = 1e-9  # relative
_STORED = {"tinyint": "int", "smallint": "int"}  # Avro has no 8/16-bit ints: Hudi stores them as int


@dataclass
class RowDiff:
    """What the comparison found (row counts after sampling)."""

    table_rows: int = 0
    full_rows: int = 0
    missing: int = 0  # in the full build only
    extra: int = 0  # in the table only
    changed: int = 0
    columns: dict[str, int] = field(default_factory=dict)  # column -> changed keys where it differs
    schema: list[str] = field(default_factory=list)
    samples: list[KeySample] = field(default_factory=list)


def in_sample(df: DataFrame, key: list[str], fraction: float) -> DataFrame:
    """The rows of `df` whose key hashes into the first `fraction` of the buckets: the same keys
    of any DataFrame with those key columns (xxhash64 of the key's `_lake_key` text)."""
    bucket = F.pmod(F.xxhash64(lake_key(key)), F.lit(BUCKETS))
    return df.where(bucket < F.lit(int(round(fraction * BUCKETS))))


def schema_notes(table: DataFrame, full: DataFrame) -> tuple[list[str], list[str]]:
    """The columns both have (compared), and what differs in name or type, said."""
    tt = {c: _STORED.get(t, t) for c, t in table.dtypes}
    ft = {c: _STORED.get(t, t) for c, t in full.dtypes}
    notes = [f"column {c} ({ft[c]}) is in a full build, not in the table" for c in ft if c not in tt]
    notes += [f"column {c} ({tt[c]}) is in the table, not in a full build" for c in tt if c not in ft]
    notes += [f"column {c} is {tt[c]} in the table, {ft[c]} in a full build" for c in tt if c in ft and tt[c] != ft[c]]
    return [c for c in tt if c in ft], notes


def diff(table: DataFrame, full: DataFrame, key: list[str], samples: int = 5) -> RowDiff:
    """Compare `table` with `full` (visible columns, live rows) by `key`."""
    shared, notes = schema_notes(table, full)
    types = dict(table.dtypes)
    t = table.select(lake_key(key).alias("_k"), F.struct(*[F.col(f"`{c}`") for c in table.columns]).alias("_r"))
    f = full.select(lake_key(key).alias("_k"), F.struct(*[_typed(full, c, types.get(c)) for c in full.columns]).alias("_r"))
    if set(key) == set(full.columns):  # no key: a row is its values (set semantics, as the commit keeps them)
        f = f.dropDuplicates(["_k"])
    j = t.alias("t").join(f.alias("f"), F.col("t._k") == F.col("f._k"), "full_outer")
    differs = [~_same(F.col(f"t._r.`{c}`"), F.col(f"f._r.`{c}`"), types[c]) for c in shared]
    changed = F.lit(False)
    for d in differs:
        changed = changed | d
    kind = (F.when(F.col("t._k").isNull(), "missing").when(F.col("f._k").isNull(), "extra")
            .when(changed, "changed").otherwise("equal"))
    tagged = j.select(F.coalesce(F.col("t._k"), F.col("f._k")).alias("_k"), F.col("t._r").alias("_t"), F.col("f._r").alias("_f"),
                      *[d.cast("int").alias(f"_d{i}") for i, d in enumerate(differs)], kind.alias("_diff")).persist()
    try:
        sums = [F.sum(f"_d{i}").alias(f"_d{i}") for i in range(len(shared))]
        counts = {r["_diff"]: r for r in tagged.groupBy("_diff").agg(F.count(F.lit(1)).alias("n"), *sums).collect()}
        n = {k: int(counts[k]["n"]) if k in counts else 0 for k in ("equal", "missing", "extra", "changed")}
        out = RowDiff(table_rows=n["equal"] + n["changed"] + n["extra"], full_rows=n["equal"] + n["changed"] + n["missing"],
                      missing=n["missing"], extra=n["extra"], changed=n["changed"], schema=notes)
        if "changed" in counts:
            out.columns = {c: int(counts["changed"][f"_d{i}"]) for i, c in enumerate(shared) if counts["changed"][f"_d{i}"]}
        if samples:
            rows = tagged.where("_diff <> 'equal'").orderBy("_diff", "_k").select("_t", "_f").limit(samples).collect()
            out.samples = [_sample(r["_t"], r["_f"], key) for r in rows]
        return out
    finally:
        tagged.unpersist()


def _typed(full: DataFrame, c: str, table_type: str | None) -> Column:
    """A full build's column typed as the table stores it (when the table has it)."""
    col = F.col(f"`{c}`")
    mine = dict(full.dtypes)[c]
    if table_type is None or _STORED.get(mine, mine) == table_type or table_type == mine:
        return col
    return col.cast(table_type).alias(c)


def _same(a: Column, b: Column, sql_type: str) -> Column:
    """NULL-safe equality; floats within FLOAT_TOLERANCE (relative); maps by their JSON text."""
    if sql_type.startswith("map<") or "map<" in sql_type:
        return F.to_json(F.struct(a.alias("v"))).eqNullSafe(F.to_json(F.struct(b.alias("v"))))
    if sql_type in ("float", "double"):
        close = F.abs(a - b) <= F.lit(FLOAT_TOLERANCE) * F.greatest(F.abs(a), F.abs(b))
        return a.eqNullSafe(b) | F.coalesce(close, F.lit(False))
    return a.eqNullSafe(b)


def _sample(t: object, f: object, key: list[str]) -> KeySample:
    """One differing key with the table's row and the full build's (JSON values)."""
    table = {k: json_value(v) for k, v in t.asDict().items()} if t is not None else None  # type: ignore[attr-defined]
    full = {k: json_value(v) for k, v in f.asDict().items()} if f is not None else None  # type: ignore[attr-defined]
    either = table if table is not None else full
    assert either is not None
    return KeySample(key={k: either.get(k) for k in key}, table=table, full=full)
