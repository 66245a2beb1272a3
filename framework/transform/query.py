"""Evaluating a model's query over given upstream DataFrames: SQL models with their table names
pointed at temp views, Python models through `model(ctx)`."""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from framework.errors import LakeError
from framework.transform import seed
from framework.transform.loader import Model

_views = itertools.count()


def view_name(prefix: str) -> str:
    """A temp view name no other view of this process has."""
    return f"__lake_{prefix}_{next(_views)}"


class ModelContext:
    """What a Python model receives: `ctx.read("ods.user_order")` returns its upstream."""

    def __init__(self, spark: SparkSession, tables: dict[str, DataFrame]) -> None:
        self.spark = spark
        self._tables = tables

    def read(self, name: str) -> DataFrame:
        if name not in self._tables:
            raise LakeError(f"the Python model read {name}, which it does not declare", fix=f"add {name} to `depends_on` in its YAML")
        return self._tables[name]


def run_query(spark: SparkSession, m: Model, inputs: dict[str, DataFrame]) -> DataFrame:
    """The model's output over the given upstream DataFrames."""
    if m.kind == "python":
        return python_model(m)(ModelContext(spark, inputs))
    if m.kind == "seed":
        return seed.frame(spark, m)
    assert m.sql is not None
    names = {}
    for u, df in inputs.items():
        v = view_name(u.replace(".", "_"))
        df.createOrReplaceTempView(v)
        names[u] = v
    return spark.sql(rewrite_tables(m.sql, names))


def python_model(m: Model) -> Any:
    """The `model(ctx)` (or `<stem>(ctx)`) function of a Python model file."""
    spec = importlib.util.spec_from_file_location(f"lake_model_{m.layer}_{m.stem}", m.path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fns = [getattr(mod, n) for n in ("model", m.stem) if callable(getattr(mod, n, None))]
    if not fns:
        raise LakeError(f"{m.rel} defines no function `model(ctx)`", fix="define `def model(ctx): return ctx.read('ods.x')...`")
    return fns[0]


def rewrite_tables(sql: str, names: dict[str, str]) -> str:
    """Point `ods.user`-style references at temp views, keeping how the SQL refers to them."""
    tree = sqlglot.parse_one(sql, read="spark")

    def swap(node: Any) -> Any:
        if isinstance(node, exp.Table) and node.db:
            full = f"{node.db}.{node.name}".lower()
            if full in names:
                alias = node.alias or node.name
                return exp.alias_(exp.to_table(names[full]), alias, table=True)
        return node

    out: Any = tree.transform(swap)
    return str(out.sql(dialect="spark"))
