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


def test_decimal_and_float_texts_are_plain_at_every_scale(spark: Any) -> None:
    """Spark's decimal texts equal the canonical ones (Python's plain `f` format at the column's
    scale) on both of text()'s paths: the cast up to 6 decimals, format_number beyond, around
    the edges where Java prints scientific notation (0E-10, 1E-7) and with many digits."""
    from decimal import Decimal, localcontext

    from pyspark.sql import types as T

    from framework.reconcile.ods import text

    values = ["0", "-0.05", "0.01", "123456.789", "-99999999.5", "0.0000001", "1E-10", "12345678901234567890.0123456789"]
    for precision, scale in ((12, 2), (12, 4), (20, 6), (38, 7), (38, 10)):
        typ = T.DecimalType(precision, scale)
        q = Decimal(1).scaleb(-scale)
        with localcontext() as ctx:
            ctx.prec = 80
            fits = [Decimal(v).quantize(q) for v in values if abs(Decimal(v)) < Decimal(10) ** (precision - scale) - 1]
        df = spark.createDataFrame([(i, v) for i, v in enumerate(fits)], T.StructType([T.StructField("i", T.IntegerType()), T.StructField("d", typ)]))
        c = ColumnSpec("d", "d", "decimal", scale, f"decimal({precision},{scale})")
        got = {r["i"]: r["t"] for r in df.select("i", text(c, 6).alias("t")).collect()}
        assert got == {i: f"{v:f}" for i, v in enumerate(fits)}, (precision, scale, got)
    floats = spark.createDataFrame([(0, 0.1), (1, -2.5e-7), (2, 123456.1234565), (3, 1e20)], "i int, f double")
    got = {r["i"]: r["t"] for r in floats.select("i", text(ColumnSpec("f", "f", "float"), 6).alias("t")).collect()}
    assert got == {0: "0.100000", 1: "0.000000", 2: "123456.123457", 3: "100000000000000000000.000000"}, got
