"""What a strategy needs to build one model: the session, readers of its upstreams, the model's
query, upstream keys and the committer. One context serves every model of a build."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from framework.transform.commit import Committer, Written
from framework.transform.loader import Model
from framework.transform.plan import ModelPlan
from framework.transform.query import run_query
from framework.transform.reader import Change, TableReader


@dataclass
class BuildContext:
    spark: SparkSession
    reader: TableReader
    committer: Committer
    key_of: Callable[[str], tuple[str, ...] | None]  # the key of an upstream table or model

    def query(self, m: Model, inputs: dict[str, DataFrame]) -> DataFrame:
        """The model's output over these upstream DataFrames."""
        return run_query(self.spark, m, inputs)

    def snapshots(self, p: ModelPlan, which: str = "end") -> dict[str, DataFrame]:
        """Every upstream's live rows as of the plan's end (or its checkpoint, `begin`)."""
        at = p.end if which == "end" else p.begin
        return {u: self.reader.snapshot(u, at[u]) for u in p.model.upstreams}

    def change(self, u: str, key: list[str], p: ModelPlan) -> Change:
        """The net change of upstream `u` in the plan's range (lazy: each use reads it again;
        persisting it measured slower at 1 M rows, see BENCHMARKS.md)."""
        return self.reader.change(u, key, p.begin[u], p.end[u])

    def write(self, p: ModelPlan, rows: DataFrame, scope: DataFrame | None, scope_col: str = "_lake_key") -> Written:
        """Commit `rows` (see Committer.write)."""
        return self.committer.write(p, rows, scope, scope_col)
