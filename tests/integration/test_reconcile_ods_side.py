"""The ODS side of `lake reconcile` (framework/reconcile/ods.py) in Spark over a real ODS table,
in `make test` (the chains against MariaDB and PostgreSQL are nightly: test_reconcile.py).

The other side is tests/unit/test_reconcile.py's `PySide`: the source table held in Python,
checksummed by the canonical rules (framework/reconcile/canonical.py) that the SQL dialects
follow. So this proves that Spark's texts and hashes of an ingested table are the canonical ones
(equal tables compare equal by checksum alone), that the bisection finds exactly the keys broken
on purpose (changed, missing, extra, one beyond the ODS table's bounds), and that each level of it
costs ODS one Spark job, not one per range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.reconcile.bisect import bisect
from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.compare import compare_rows
from framework.reconcile.ods import OdsSide
from framework.reconcile.rows import Key
from framework.reconcile.sql import Ranged
from framework.reconcile.table import ods_table
from tests.helpers import LakeProject, UsersSource
from tests.unit.test_reconcile import PySide

COLS = [ColumnSpec("id", "id", "int", spark_type="bigint"), ColumnSpec("city", "city", "string"),
        ColumnSpec("score", "score", "int", spark_type="int")]
N = 3000


def test_spark_checksums_equal_the_canonical_ones_and_the_bisection_finds_exactly_the_broken_keys(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path / "p", "tables:\n  - {source: shop.users, key: [id]}\n")
    src = UsersSource()
    lp.write_cdc([src.put(i, f"c{i % 37}" if i % 11 else "", i * 7 % 1000) for i in range(1, N + 1)])
    lp.ingest(spark)
    source: dict[Key, tuple[str | None, ...]] = {(str(i),): (str(i), city, str(score)) for i, (city, score) in src.users.items()}
    ods = OdsSide(spark, ods_table(lp.project, lp.project.ods_table("users")), Ranged((COLS[0],)), COLS, 6)
    try:
        f = bisect(PySide(source), ods, 1, N + 1, segments=8, fetch_below=4)
        assert (f.source_rows, f.ods_rows, f.ranges, f.leaves) == (N, N, 1, 0)  # equal at the first checksum

        broken = dict(source)
        changed: list[Key] = [(str(i),) for i in range(5, N, 397)]
        for k in changed:
            broken[k] = (k[0], "moved", broken[k][2])
        extra: list[Key] = [("1234",), ("2999",)]  # in ODS, gone from the source
        for k in extra:
            del broken[k]
        missing: list[Key] = [("4500",)]  # in the source only, beyond ODS's last key
        broken[missing[0]] = ("4500", "new", "1")
        spark.sparkContext.setJobGroup("reconcile-ods-side", "the bisection's ODS side")
        try:
            f = bisect(PySide(broken), ods, 1, 4501, segments=8, fetch_below=4)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        found = {(d.key, d.kind) for d in compare_rows(COLS, f.source, f.ods, float_digits=6, placeholder="?")}
        assert found == {*((k, "changed") for k in changed), *((k, "extra") for k in extra), *((k, "missing") for k in missing)}
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup("reconcile-ods-side")
        assert len(jobs) * 3 < f.ranges, (len(jobs), f.ranges)  # one job per level, not one per range
    finally:
        ods.close()
