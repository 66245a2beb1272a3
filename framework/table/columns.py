"""Column conventions every lake table shares (models, ODS tables, quarantines).

Hudi adds `_hoodie_*` meta columns; lake keeps its bookkeeping in columns starting with `_lake_`
and in `_deleted` (ODS soft deletes; always false in model tables written since aggregate
groups hidden by HAVING or a `drop` check moved to `_lake/hidden/`, framework/transform/hidden.py).
Readers see the visible columns of live rows only. A model row's Hudi record key is `_lake_key`,
its key values as a JSON array.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

HIDDEN = ("_deleted", "_hoodie_is_deleted", "_lake_key")


def visible_columns(df: DataFrame) -> list[str]:
    return [c for c in df.columns if not c.startswith(("_hoodie_", "_lake_")) and c not in HIDDEN]


def live(df: DataFrame) -> Column:
    return ~F.col("_deleted") if "_deleted" in df.columns else F.lit(True)


def lake_key(cols: list[str]) -> Column:
    """The Hudi record key of a model row: its key values as a JSON array (NULL-safe)."""
    return F.to_json(F.array(*[F.col(f"`{c}`").cast("string") for c in cols]))
