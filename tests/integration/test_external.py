"""External tables through the CLI (in-process, the session's Spark): a Parquet folder and a Hudi
table, both written with plain Spark (not lake), declared under `layers/external/` and read by
two SQL models. A build equals plain Spark's answer over the same files; a changed external
recomputes exactly its readers, saying which external changed; an unchanged one leaves them
`noop`; a declared column the table does not have fails the reader with file, column and fix.

Oracle: the models' SQL run by plain Spark over `spark.read.parquet` and `spark.read.format("hudi")`
of the same paths, with no lake code in between."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from click.testing import CliRunner

from framework.cli.main import main
from tests.helpers import LakeProject

pytestmark = pytest.mark.spark

PRICES_YAML = """\
description: list prices, written by the pricing team's job
path: ext/prices
format: parquet
columns:
  sku: string
  price: "decimal(10,2)"
"""
PRODUCTS_YAML = """\
path: ext/products
key: [sku]
tags: [catalogue]
columns: {sku: string, category: string}
"""
BY_CATEGORY = """\
SELECT p.category, count(*) AS skus, sum(x.price) AS total
FROM external.products p JOIN external.prices x ON p.sku = x.sku
GROUP BY p.category
"""
NAMES = "SELECT sku, upper(name) AS name FROM external.products\n"
# Plain Hudi options (no lake helper): a non-partitioned copy-on-write table keyed by sku.
HUDI = {"hoodie.table.name": "products", "hoodie.datasource.write.recordkey.field": "sku",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"}


def lake(root: Path, *args: str) -> Any:
    return CliRunner().invoke(main, ["--project", str(root), *args], catch_exceptions=False, env={"COLUMNS": "200"})


def _write_prices(spark: Any, root: Path, rows: list[tuple[str, str]]) -> None:
    df = spark.createDataFrame(rows, "sku string, price string").selectExpr("sku", "CAST(price AS DECIMAL(10,2)) AS price")
    df.coalesce(1).write.mode("overwrite").parquet(str(root / "ext" / "prices"))


def _write_products(spark: Any, root: Path, rows: list[tuple[str, str, str, int]]) -> None:
    df = spark.createDataFrame(rows, "sku string, name string, category string, ts bigint")
    df.write.format("hudi").options(**HUDI).mode("append").save(str(root / "ext" / "products"))


def _oracle(spark: Any, root: Path, sql: str) -> Any:
    spark.read.parquet(str(root / "ext" / "prices")).createOrReplaceTempView("oracle_prices")
    products = spark.read.format("hudi").load(str(root / "ext" / "products"))
    products.select("sku", "name", "category").createOrReplaceTempView("oracle_products")
    return spark.sql(sql.replace("external.products", "oracle_products").replace("external.prices", "oracle_prices"))


def _assert_models_equal_oracle(spark: Any, root: Path) -> None:
    for name, sql in (("dws/by_category", BY_CATEGORY), ("dwd/names", NAMES)):
        actual = spark.read.format("hudi").load(str(root / "warehouse" / name))
        expected = _oracle(spark, root, sql)
        assert_df_equality(actual.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def _build(root: Path, *args: str) -> dict[str, dict[str, Any]]:
    out = lake(root, "build", "--incremental", "--json", *args)
    assert out.exit_code == 0, out.output
    return {r["model"]: r for r in json.loads(out.stdout)}


def test_models_read_external_tables_and_rebuild_only_when_one_changes(tmp_path: Path, spark: Any) -> None:
    _write_prices(spark, tmp_path, [("a", "1.50"), ("b", "2.25"), ("c", "10.00")])
    _write_products(spark, tmp_path, [("a", "apple", "fruit", 1), ("b", "bean", "veg", 1), ("c", "cherry", "fruit", 1)])
    lp = LakeProject(tmp_path, "tables: []\n")
    lp.add_models({"external/prices.yaml": PRICES_YAML, "external/products.yaml": PRODUCTS_YAML,
                   "dws/by_category.sql": BY_CATEGORY, "dwd/names.sql": NAMES})

    dag = json.loads(lake(tmp_path, "dag", "--format", "json").stdout)
    kinds = {n["name"]: n["kind"] for n in dag["nodes"]}
    assert kinds["external.prices"] == kinds["external.products"] == "external"
    assert ["external.prices", "dws.by_category"] in dag["edges"]

    first = _build(tmp_path)
    assert set(first) == {"dws.by_category", "dwd.names"}  # externals are read, never built
    assert {r["mode"] for r in first.values()} == {"full"}
    _assert_models_equal_oracle(spark, tmp_path)

    # The Parquet folder changes (rewritten by its job): its one reader is recomputed, the other is not.
    _write_prices(spark, tmp_path, [("a", "1.75"), ("b", "2.25"), ("c", "10.00"), ("d", "3.00")])
    _write_products(spark, tmp_path, [("d", "date", "fruit", 1)])  # and the Hudi table gains a row: both read it
    text = lake(tmp_path, "plan", "--incremental").output
    assert "external.prices: external table, read and never built (parquet files" in " ".join(text.split())
    second = _build(tmp_path)
    assert second["dws.by_category"]["mode"] == "recompute"
    assert "external table external.prices changed (version files:" in second["dws.by_category"]["reason"]
    assert second["dwd.names"]["mode"] == "recompute" and "external table external.products changed" in second["dwd.names"]["reason"]
    _assert_models_equal_oracle(spark, tmp_path)

    # Only the Hudi table changes (an update): selectors reach its readers through it.
    _write_products(spark, tmp_path, [("b", "broad bean", "legume", 2)])
    third = _build(tmp_path, "external.products+")
    assert set(third) == {"dws.by_category", "dwd.names"}
    assert all("external.products changed" in r["reason"] for r in third.values()), third
    _assert_models_equal_oracle(spark, tmp_path)
    assert set(_build(tmp_path, "tag:catalogue+")) == {"dws.by_category", "dwd.names"}  # (nothing changed: noop)

    fourth = _build(tmp_path)  # nothing changed: nothing read, nothing written
    assert {r["mode"] for r in fourth.values()} == {"noop"}
    assert [r["model"] for r in json.loads(lake(tmp_path, "plan", "external.prices+", "--json").stdout)] == ["dws.by_category"]

    # A declared column the table does not have fails its readers, naming file, column and fix.
    (tmp_path / "layers" / "external" / "prices.yaml").write_text(PRICES_YAML.replace("  price:", "  list_price:"))
    _write_prices(spark, tmp_path, [("a", "1.00")])
    out = lake(tmp_path, "build", "dws.by_category", "--json")
    assert out.exit_code == 1 and "Traceback" not in out.output
    (failed,) = json.loads(out.stdout)
    assert failed["mode"] == "failed"
    assert "layers/external/prices.yaml: column 'list_price' of external.prices is not in parquet files" in failed["error"]
    assert "remove 'list_price' from `columns:` in layers/external/prices.yaml" in failed["error"]
