"""`lake diff MODEL --env NAME`: a model's table in an environment against production's: the
schema diff and the row diff by record key (lake's `_lake_key`, the model's key), counts and
samples. Rows compare on the visible columns both tables have, NULL-safe."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.envs.layout import EnvLayout
from framework.errors import LakeError
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.columns import live, visible_columns


class ColumnChange(BaseModel):
    name: str
    production: str | None  # type in production; None: only in the environment
    environment: str | None


class ModelDiff(BaseModel):
    model: str
    env: str
    columns: list[ColumnChange] = Field(default_factory=list)
    production_rows: int
    environment_rows: int
    added: int  # keys only in the environment
    removed: int  # keys only in production
    changed: int  # same key, a shared column differs
    unchanged: int
    samples: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)  # added / removed / changed
    notes: list[str] = Field(default_factory=list)


def _live(spark: SparkSession, path: Any) -> DataFrame:
    df = spark.read.format("hudi").load(str(path))
    return df.where(live(df)).select("_lake_key", *visible_columns(df))


def _types(df: DataFrame) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in df.schema.fields if f.name != "_lake_key"}


def diff_model(spark: SparkSession, env: EnvLayout, model: str, samples: int = 5) -> ModelDiff:
    """The environment's table of `model` against production's current one."""
    if model not in env.owned:
        raise LakeError(f"{model} was not built in environment {env.state.name}",
                        fix=f"build it there first: lake build --env {env.state.name} {model}"
                        + (f" (built there: {', '.join(env.state.models)})" if env.state.models else ""))
    prod_path, env_path = env.production.table(model), env.table(model)
    if not hudi.table_exists(env_path):
        raise LakeError(f"{model} has no table in environment {env.state.name} yet: no build of it there has succeeded",
                        fix=f"build it there: lake build --env {env.state.name} {model} (its summary says why it failed, if it does)")
    if not hudi.table_exists(prod_path):
        raise LakeError(f"{model} has no production table to compare with", fix=f"production builds it with `lake build {model}` (or `lake env promote {env.state.name}`)")
    prod, mine = _live(spark, prod_path), _live(spark, env_path)
    pt, et = _types(prod), _types(mine)
    columns = [ColumnChange(name=c, production=pt.get(c), environment=et.get(c)) for c in dict.fromkeys([*pt, *et]) if pt.get(c) != et.get(c)]
    shared = [c for c in pt if c in et and pt[c] == et[c]]
    p, e = prod.alias("p"), mine.alias("e")
    joined = p.join(e, F.col("p._lake_key") == F.col("e._lake_key"), "full_outer")
    same = F.lit(True)
    for c in shared:
        same = same & F.col(f"p.`{c}`").eqNullSafe(F.col(f"e.`{c}`"))
    kind = (F.when(F.col("p._lake_key").isNull(), "added").when(F.col("e._lake_key").isNull(), "removed")
            .when(same, "unchanged").otherwise("changed"))
    tagged = joined.withColumn("_diff", kind).persist()
    try:
        counts = {r["_diff"]: r["count"] for r in tagged.groupBy("_diff").count().collect()}
        out = ModelDiff(model=model, env=env.state.name, columns=columns, production_rows=counts.get("removed", 0) + counts.get("changed", 0) + counts.get("unchanged", 0),
                        environment_rows=counts.get("added", 0) + counts.get("changed", 0) + counts.get("unchanged", 0),
                        added=counts.get("added", 0), removed=counts.get("removed", 0), changed=counts.get("changed", 0),
                        unchanged=counts.get("unchanged", 0), notes=_moved(spark, env))
        for which, side, cols in (("added", "e", list(et)), ("removed", "p", list(pt))):
            rows = tagged.where(F.col("_diff") == which).select(*[F.col(f"{side}.`{c}`").alias(c) for c in cols]).limit(samples).collect()
            out.samples[which] = [r.asDict() for r in rows]
        both = [*[F.col(f"p.`{c}`").alias(f"production.{c}") for c in pt], *[F.col(f"e.`{c}`").alias(f"environment.{c}") for c in et]]
        out.samples["changed"] = [r.asDict() for r in tagged.where(F.col("_diff") == "changed").select(*both).limit(samples).collect()]
        return out
    finally:
        tagged.unpersist()


def _moved(spark: SparkSession, env: EnvLayout) -> list[str]:
    """Production tables the environment reads whose production moved past the pin: rows may
    differ for that reason too, not only for the code."""
    notes = []
    for table, pin in sorted(env.state.pins.items()):
        newer = [i for i in hudi.completed_instants(spark, Layout(env.production.root).table(table)) if i.completed > pin]
        if newer:
            notes.append(f"production's {table} has {len(newer)} commit(s) after the environment's pin ({pin}); "
                         "the environment reads it as of the pin, production's tables may include them")
    return notes
