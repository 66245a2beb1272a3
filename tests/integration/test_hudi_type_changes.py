"""What Hudi 1.2.0 itself takes on write when a column's type changes, with lake's write options
(docs/concepts/ods.md "Schema changes"): the facts framework/project/types.py's `in_place` rests on, checked
against plain Hudi writes so a Hudi upgrade that changes them fails here first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from framework.table import hudi


def _rows(spark: Any, rows: list[tuple[int, str, str]], typ: str) -> Any:
    df = spark.createDataFrame([(i, v, s, False) for i, v, s in rows], "id int, v string, _seq string, _hoodie_is_deleted boolean")
    return df.withColumn("v", F.col("v").cast(typ))


def _table(spark: Any, path: Path, table_type: str, old: str, values: list[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    opts = {**hudi.write_options(name="t", key=["id"], ordering="_seq", partition=None, table_type=table_type), **(extra or {})}
    hudi.write(_rows(spark, [(i, v, f"{i:03d}") for i, v in enumerate(values, 1)], old), path, opts, {})
    hudi.write(_rows(spark, [(1, values[0], "100")], old), path, opts, {})  # an update logged in the old type
    return opts


def _cdc(spark: Any, path: Path) -> list[Any]:
    end = hudi.completed_instants(spark, path)[-1].completed
    df = (spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental").option("hoodie.datasource.query.incremental.format", "cdc")
          .option("hoodie.datasource.read.begin.instanttime", "000").option("hoodie.datasource.read.end.instanttime", end).load(str(path)))
    return [json.loads(r.after)["v"] for r in df.where("op = 'u'").orderBy("ts_ms").collect()]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_widenings_hudi_takes_in_place(tmp_path: Path, spark: Any, table_type: str) -> None:
    cases = [("decimal(10,2)", "decimal(12,2)", ["12345678.91", "-3.25"], "9999999999.99"),
             ("decimal(10,2)", "decimal(12,4)", ["12345678.91", "-3.25"], "1.2345"),
             ("int", "bigint", ["7", "-3"], str(2**40)), ("float", "double", ["1.5", "-0.25"], "1e300"), ("int", "double", ["7", "-3"], "0.5")]
    for n, (old, new, values, wide) in enumerate(cases):
        path = tmp_path / f"t{n}"
        opts = _table(spark, path, table_type, old, values)
        hudi.write(_rows(spark, [(3, wide, "200")], new), path, opts, {})
        snap = hudi.read(spark, path)
        assert dict(snap.dtypes)["v"] == new
        got = {r.id: r.v for r in snap.collect()}
        want = spark.createDataFrame([(values[0],), (values[1],), (wide,)], "v string").select(F.col("v").cast(new)).collect()
        assert [got[1], got[2], got[3]] == [r.v for r in want], (old, new)
        if table_type == "cow" and new == "decimal(12,4)":
            # CDC images of the update logged before the widening come rescaled to the new type.
            signed = [b - 256 if b > 127 else b for b in (123456789100).to_bytes(6, "big", signed=True)]
            assert _cdc(spark, path)[0] == signed, _cdc(spark, path)


def test_date_to_timestamp_is_refused_in_every_mode(tmp_path: Path, spark: Any) -> None:
    modes = [{}, {"hoodie.datasource.write.operation": "insert_overwrite_table"}, {"hoodie.datasource.write.operation": "bulk_insert"},
             {"hoodie.schema.on.read.enable": "true"}, {"hoodie.avro.schema.validate": "false"}]
    for n, extra in enumerate(modes):
        path = tmp_path / f"d{n}"
        opts = _table(spark, path, "cow", "date", ["2024-01-05", "2024-02-29"], extra if "schema" in str(extra) else None)
        with pytest.raises(Exception, match="Cannot update column 'v' from type 'date' to incompatible type 'timestamp'"):
            hudi.write(_rows(spark, [(3, "2024-03-01 10:11:12", "200")], "timestamp"), path, {**opts, **extra}, {})
    path = tmp_path / "scale"
    opts = _table(spark, path, "cow", "decimal(10,2)", ["1.25", "2.50"])
    with pytest.raises(Exception, match="incompatible type 'decimal_fixed\\(11, 4\\)"):
        hudi.write(_rows(spark, [(3, "1.2345", "200")], "decimal(11,4)"), path, opts, {})


def test_reconcile_schema_corrupts_what_it_takes(tmp_path: Path, spark: Any) -> None:
    """Why lake never sets `hoodie.datasource.write.reconcile.schema`."""
    path = tmp_path / "r"
    opts = _table(spark, path, "cow", "date", ["2024-01-05", "2024-02-29"])
    hudi.write(_rows(spark, [(3, "2024-03-01 10:11:12", "200")], "timestamp"), path, {**opts, "hoodie.datasource.write.reconcile.schema": "true"}, {})
    kept = hudi.read(spark, path).where("id = 2").select(F.date_format("v", "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("v")).first()
    assert kept is not None and kept.v == "1970-01-01 00:00:00.019782"  # 2024-02-29 is day 19782: read as microseconds
