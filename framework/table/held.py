"""DataFrames computed once and kept, as leaves of the plans that use them.

A build derives one DataFrame from another many times (the change, the delta, the merged state,
the rows to write, the deletes, the diff against the table). `persist()` keeps the data but not
the plan short: every later operation on a derived DataFrame analyses the whole lineage again,
and Hudi's analysis rules and Spark's relation de-duplication walk all of it each time, while
every adaptive re-plan prints it into the query's description. For an aggregate model's build
of one changed row that was most of its 12 s (JFR samples); with the kept DataFrames as leaves
(Spark's local checkpoint), 4.6 s (BENCHMARKS.md).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame


class Held:
    """Local checkpoints taken for one step, freed together by `release()`."""

    def __init__(self) -> None:
        self._rdds: list[Any] = []

    def __call__(self, df: DataFrame) -> DataFrame:
        """`df` computed now into executor storage (memory, spilling to disk), as a DataFrame
        whose plan is a leaf. Valid until `release()`."""
        out = df.localCheckpoint(eager=True)
        rdd = _checkpointed_rdd(out)
        if rdd is not None:
            self._rdds.append(rdd)
        return out

    def release(self) -> None:
        """Drop the kept data (else Spark's context cleaner drops it when the JVM collects it)."""
        for rdd in self._rdds:
            rdd.unpersist(False)
        self._rdds.clear()


def is_held(df: DataFrame) -> bool:
    """`df` is kept already (cached, or a local checkpoint): reading it again computes nothing."""
    return df.is_cached or _checkpointed_rdd(df) is not None


def _checkpointed_rdd(df: DataFrame) -> Any:
    """The checkpointed RDD a DataFrame's plan consists of, or None."""
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD" and plan.rdd().isCheckpointed():
        return plan.rdd()
    return None
