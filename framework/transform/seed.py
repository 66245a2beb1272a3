"""Seeds as nodes of the model graph: `layers/seed/<name>.csv` is the model `seed.<name>`
(loaded by framework/transform/loader.py), which reads no table and whose rows are the file's
(typed by framework/project/seeds/).

A seed builds through the same Committer as every model: its first build inserts the rows; a
changed file (its content hash, the seed's data fingerprint, differs from the one the table's
last commit records) writes only the rows that differ and deletes the keys the file no longer
has, in one Hudi commit that logs its changes, so models reading the seed take the change
through their normal incremental path. An unchanged file is not read by Spark at all (`noop`).
A column whose type changes in a way Hudi cannot take in place writes the table anew, and its
readers rebuild in full, saying why (framework/runtime/rebuilds.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from framework.transform.strategy import Analysis

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.transform.loader import Model

REASON = "a seed: the file is its only upstream; a changed file writes only the rows that differ"


def analysis(m: Model) -> Analysis:
    """A seed's strategy: every row from the file (`full`), keyed by its `key:` if any."""
    return Analysis("full", REASON, (), tuple(m.config.key) if m.config.key else None)


def mode(m: Model, recorded: str | None) -> tuple[Literal["full", "noop"], str]:
    """Build or not, and why, by the content hash alone (`recorded`: the one the table's last
    commit records): a seed reads no table, so `--incremental` or not changes nothing."""
    if recorded is None:
        return "full", f"first load of {m.rel}"
    if recorded != m.fingerprint:
        return "full", f"{m.rel} changed (content hash {recorded} → {m.fingerprint}): only the rows that differ are written"
    return "noop", f"{m.rel} is unchanged (content hash {m.fingerprint})"


def frame(spark: SparkSession, m: Model) -> DataFrame:
    """The seed's rows as a DataFrame of its declared (or inferred) types. The values were checked
    when the file was read, so each cast is exact (lake's session time zone is UTC)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    assert m.seed is not None
    names = [n for n, _ in m.seed.columns]
    text = spark.createDataFrame(list(m.seed.rows), T.StructType([T.StructField(n, T.StringType()) for n in names]))
    return text.select(*[F.col(n).cast(t).alias(n) for n, t in m.seed.columns])
