"""A table whose `ordering:` or `partition_by.column` does not fit its events dead-letters that
table's events with the reason (file, field, fix); the other tables of the micro-batch commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.ods import decode as D
from models.config import NOT_TIME_TYPES, ORDERING_TYPES
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.users, key: [id], ordering: [modified]}
  - {source: shop.orders, key: [id], partition_by: {column: created}}
  - {source: shop.items, key: [id], ordering: [updated]}
  - {source: shop.ok, key: [id]}
"""


def test_table_config_problems_dead_letter_only_that_table(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, TABLES)
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1, "name": "ann"}, pos=1),                     # no `modified`
        envelope("c", "shop.orders", None, {"id": 2, "amount": 5}, pos=2),                       # no `created`
        envelope("c", "shop.items", None, {"id": 3, "updated": "2024-01-01T00:00:00Z"}, pos=3),  # text: STRING
        envelope("c", "shop.ok", None, {"id": 4}, pos=4),
    ], name="b.json")
    s = lp.ingest(spark)
    assert lp.rows(spark, "ok", ["id"]) == [{"id": 4}]
    f = "layers/ods/tables.yaml"
    assert {d["loc"]: d["reason"] for d in lp.dead_letters(spark)} == {
        "cdc/b.json:1": f"{f}: ods.users `ordering:` names column 'modified', which the events of shop.users do not "
                        "have (columns: id, name); fix: name a timestamp, date or integer column they carry, or remove it",
        "cdc/b.json:2": f"{f}: ods.orders `partition_by.column` 'created' is not a column of the events of shop.orders "
                        "(columns: amount, id); fix: name a timestamp, date or text date column they carry",
        "cdc/b.json:3": f"{f}: ods.items `ordering:` column 'updated' has type STRING; fix: order by a timestamp, date or "
                        "integer column, or declare its type if the values are one (e.g. `columns: {updated: timestamp}`)",
    }
    totals = s.totals()
    assert {t: (r.status, r.dead_letter) for t, r in totals.items()} == {
        "users": ("dead_letter", 1), "orders": ("dead_letter", 1), "items": ("dead_letter", 1), "ok": ("ok", 0)}


def test_check_types_agree_with_spark(spark: Any) -> None:
    """tablecheck's type sets are the ones ordering_prefix and the partition cast accept."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import AnalysisException

    for typ in ("timestamp", "date", "tinyint", "smallint", "int", "bigint", "string", "double", "float",
                "decimal(10,2)", "boolean", "binary"):
        try:
            D.ordering_prefix(F.lit(None).cast(typ), typ)
            ordered = True
        except ValueError:
            ordered = False
        assert ordered == (typ in ORDERING_TYPES), typ
        try:
            spark.range(1).select(F.lit(None).cast(typ).cast("timestamp")).collect()
            castable = True
        except AnalysisException:
            castable = False
        assert castable == (typ not in NOT_TIME_TYPES), typ
