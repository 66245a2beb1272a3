"""`--restate START..END` without Spark: the range as written, and the refusals before Spark
starts (not a range; no selected model is partitioned; a bound not of the column's type)."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest
from pyspark.sql import types as T

from framework.cli.build import restate_range
from framework.errors import LakeError
from framework.transform.runner import selection
from framework.transform.strategies.restate import bound
from models.restatement import RestateRange
from tests.helpers import LakeProject


def test_ranges_as_written() -> None:
    assert RestateRange.parse("2026-11-01..2026-11-07") == RestateRange(start="2026-11-01", end="2026-11-07")
    assert RestateRange.parse(" 2026-11 ") == RestateRange(start="2026-11", end="2026-11")  # one partition
    for bad in ("..2026-11-07", "2026-11-01..", "a..b..c"):
        with pytest.raises(ValueError, match="not a range"):
            RestateRange.parse(bad)


def test_bounds_take_the_partition_columns_type() -> None:
    assert bound("2026-11-01", T.DateType(), "dws.x", "day") == date(2026, 11, 1)
    assert bound("2026-11-01 10:00:00", T.TimestampType(), "dws.x", "at") == datetime(2026, 11, 1, 10)
    assert bound("202611", T.IntegerType(), "dws.x", "ym") == 202611
    assert bound("2026-11", T.StringType(), "dws.x", "month") == "2026-11"
    with pytest.raises(LakeError, match="'2026-11' is not a DATE, the type of dws.x's partition column day"):
        bound("2026-11", T.DateType(), "dws.x", "day")
    with pytest.raises(LakeError, match="a range needs a date"):
        bound("1.5", T.DoubleType(), "dws.x", "ratio")


def test_refused_before_spark_starts(tmp_path: Path) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.orders, key: [id]}\n").add_models({
        "dws/daily.sql": "select day, count(*) as n from ods.orders group by day", "dws/daily.yaml": "partition_by: day\n",
        "dws/all.sql": "select count(*) as n, 1 as k from ods.orders"})
    assert restate_range("2026-11-01..2026-11-02", selection(lp.project, ["dws.daily"])) == RestateRange(start="2026-11-01", end="2026-11-02")
    with pytest.raises(LakeError, match="none of the selected models has `partition_by`") as e:
        restate_range("2026-11-01..2026-11-02", selection(lp.project, ["dws.all"]))
    assert "lake build MODEL" in (e.value.fix or "")
    with pytest.raises(LakeError, match="is not a range"):
        restate_range("..", selection(lp.project, ["dws.daily"]))
