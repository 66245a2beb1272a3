"""The net change of an upstream as the engine reads it (`TableReader.change`) is, per changed key,
the table's row at `begin` and its row at `end`: checked against Hudi time travel to both
instants, for every column type lake writes, whether the images come from the CDC logs alone
(`hudi.cdc_logged`) or from the incremental query."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.transform.reader import TableReader

SCHEMA = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("amount", T.DecimalType(12, 2)),
    T.StructField("big", T.DecimalType(30, 10)),
    T.StructField("at", T.TimestampType()),
    T.StructField("day", T.DateType()),
    T.StructField("ratio", T.DoubleType()),
    T.StructField("flag", T.BooleanType()),
    T.StructField("name", T.StringType()),
    T.StructField("blob", T.BinaryType()),
    T.StructField("n", T.IntegerType()),
    T.StructField("_deleted", T.BooleanType()),
])


def _row(i: int, v: int, deleted: bool = False) -> tuple:
    return (i, Decimal(f"{i * 10 + v}.{v:02d}"), Decimal(f"-{v}.0000000{i}{v}"), dt.datetime(2024, 1, i, 12, v, 7, 123456),
            dt.date(2024, 2, i), i / (v + 3), v % 2 == 0, f"n{i}-{v} 'q\" é" if v else None, bytes([i, v, 0, 255]), v, deleted)


def _write(spark: Any, path: Location, rows: list[tuple], extra: dict[str, str] | None = None, hard_delete: list[int] | None = None) -> str:
    opts = hudi.write_options(name="t", key=["id"], ordering=None, partition=None, extra=extra)
    df = spark.createDataFrame(rows, SCHEMA).withColumn("_hoodie_is_deleted", F.lit(False))
    if hard_delete:
        gone = spark.createDataFrame([_row(i, 0) for i in hard_delete], SCHEMA).withColumn("_hoodie_is_deleted", F.lit(True))
        df = df.unionByName(gone)
    hudi.write(df, path, opts, {})
    return hudi.completed_instants(spark, path)[-1].completed


def _at(reader: TableReader, as_of: str, keys: DataFrame) -> DataFrame:
    df = reader.raw("ods.t", as_of=as_of)
    return df.where("NOT _deleted").join(keys, ["id"], "left_semi").select(*[f.name for f in SCHEMA.fields if f.name != "_deleted"])


def _check(spark: Any, reader: TableReader, begin: str, end: str, logged: bool, keys: set[int]) -> None:
    assert hudi.cdc_logged(spark, reader.path("ods.t"), begin, end) is logged
    ch = reader.change("ods.t", ["id"], begin, end)
    assert {r["id"] for r in ch.keys.collect()} == keys
    for got, want in ((ch.before, _at(reader, begin, ch.keys)), (ch.after, _at(reader, end, ch.keys))):
        assert_df_equality(got.orderBy("id"), want.orderBy("id"), ignore_nullable=True)


def test_change_images_equal_time_travel(tmp_path: Path, spark: Any) -> None:
    reader = TableReader(spark, Layout(tmp_path))
    path = reader.path("ods.t")
    c1 = _write(spark, path, [_row(i, 1) for i in range(1, 6)])  # a new file group: inserts only
    # Updates, a soft delete, a hard delete, an insert packed into the existing file (merge handle).
    c2 = _write(spark, path, [_row(1, 2), _row(2, 0), _row(4, 2, deleted=True), _row(6, 2)], hard_delete=[3])
    # Again: key 1 changes twice in the range, 6 (inserted in the range) goes, 3 comes back.
    c3 = _write(spark, path, [_row(1, 3), _row(3, 3), _row(5, 3)], hard_delete=[6])
    _check(spark, reader, c1, c3, logged=True, keys={1, 2, 3, 4, 5, 6})
    _check(spark, reader, c2, c3, logged=True, keys={1, 3, 5, 6})
    # Inserts into a new file group (no small file to pack them into) in the middle of a range.
    c4 = _write(spark, path, [_row(7, 4), _row(8, 4)], extra={"hoodie.parquet.small.file.limit": "0"})
    c5 = _write(spark, path, [_row(2, 5), _row(7, 5)])
    _check(spark, reader, c2, c5, logged=False, keys={1, 2, 3, 5, 6, 7, 8})
    _check(spark, reader, c4, c5, logged=True, keys={2, 7})
