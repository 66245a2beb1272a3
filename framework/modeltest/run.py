"""Running unit tests on a SparkSession: `lake test`'s own (local[1], one shuffle partition) or
the one `lake build` already has, when that is local too (the tests never touch the warehouse).

Each test runs the model's SQL or Python over its final rows, in memory. An incremental test
also builds the model for real over its change events (incremental.py); both results must equal
the expected rows, and a test that fails only incrementally says so.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pyspark.sql import SparkSession

from framework.errors import LakeError
from framework.modeltest.cases import Case
from framework.modeltest.compare import compare, frame
from framework.modeltest.incremental import build_incrementally
from framework.project.config import Project
from framework.transform.loader import Model
from framework.transform.query import run_query
from models.unit_test import Comparison, UnitTestResult


def run_cases(spark: SparkSession, project: Project, models: Mapping[str, Model], cases: Sequence[Case],
              on_result: Callable[[UnitTestResult], None] | None = None) -> list[UnitTestResult]:
    """Run `cases` one by one; incremental ones in a temporary folder removed at the end."""
    out = []
    with _one_partition(spark), tempfile.TemporaryDirectory(prefix="lake-test-") as tmp:
        for n, case in enumerate(cases):
            r = run_case(spark, project, models, case, Path(tmp) / f"t{n}")
            out.append(r)
            if on_result:
                on_result(r)
    return out


def run_case(spark: SparkSession, project: Project, models: Mapping[str, Model], case: Case, folder: Path) -> UnitTestResult:
    t0 = time.time()
    res = UnitTestResult(model=case.model.name, test=case.name, file=case.file, line=case.line, status="error", incremental=case.incremental)
    try:
        inputs = {u: frame(spark, i.columns, case.final[u]) for u, i in case.inputs.items()}
        res.full = _compared(spark, run_query(spark, case.model, inputs), case, case.ordered)
        if case.incremental:
            built, res.mode = build_incrementally(spark, project, dict(models), case, folder)
            res.changes = _compared(spark, built, case, False)
    except LakeError as e:
        res.message = str(e)
    except Exception as e:  # noqa: BLE001 - Spark's errors (a column that does not resolve, a failing UDF) end the test, not the run
        res.message = _spark_message(e)
    else:
        res.status, res.message = _verdict(res.full, res.changes)
    res.seconds = round(time.time() - t0, 3)
    return res


def _compared(spark: SparkSession, df: object, case: Case, ordered: bool) -> Comparison:
    from pyspark.sql import DataFrame

    if not isinstance(df, DataFrame):
        raise LakeError(f"{case.model.rel} returned {type(df).__name__}, not a DataFrame", fix="return the model's DataFrame from `model(ctx)`")
    return compare(spark, df, case.expect, case.expect_columns, case.key, ordered)


def _verdict(full: Comparison | None, changes: Comparison | None) -> tuple[Literal["pass", "fail"], str | None]:
    assert full is not None
    if full.matches and (changes is None or changes.matches):
        return "pass", None
    if full.matches:
        return "fail", "full rebuild matches, incremental differs: building the changes incrementally does not give what a full rebuild gives"
    if changes is None:
        return "fail", None
    if changes.matches:
        return "fail", "full rebuild differs, incremental matches"
    return "fail", "full rebuild differs, and so does the incremental build"


def _spark_message(e: Exception) -> str:
    """The first line of a Spark error, with what a test can do about an unresolved column."""
    text = str(e).strip()
    first = next((line for line in text.splitlines() if line.strip()), type(e).__name__)
    if "UNRESOLVED_COLUMN" in text or "cannot be resolved" in text:
        return (f"{first}\n  fix: give the column in the rows of the upstream it belongs to (columns a test does not give are "
                "NULL only when lake can tell which upstream the model reads them from), or qualify it in the SQL")
    return f"{type(e).__name__}: {first}"


@contextlib.contextmanager
def _one_partition(spark: SparkSession) -> Iterator[None]:
    """One shuffle partition while the tests run (a few rows; a build's session has more)."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key) or "200"
    spark.conf.set(key, "1")
    try:
        yield
    finally:
        spark.conf.set(key, before)
