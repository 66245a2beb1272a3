"""The quality gate: evaluate a model's checks on the data about to be committed.

Row-level checks (and `sql:` checks `on: rows`) judge the rows being written; table-level checks
(uniqueness, row counts, aggregates, `sql:` `on: table`) judge the table as it would be after the
commit, so an incremental batch cannot break uniqueness unnoticed. `drop` checks split the rows:
failing rows go to the quarantine DataFrame with the names of the checks they failed, and the
resulting table is computed from the rows kept. `error` failures block the commit; `warn` ones
are only reported.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from typing import TYPE_CHECKING, Any

from framework.errors import LakeError, QualityGateError
from framework.quality import gx_run
from framework.quality.predicates import failing
from models.quality import CheckSpec
from models.quality_result import CheckResult, ModelQuality
from models.records import CheckOutcome

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

FAILED_CHECKS = "_lake_failed_checks"
RUN_ID = "_lake_run_id"
MODEL = "_lake_model"


@dataclass
class GateResult:
    """What a gate (model build or ODS table batch) found, returned with what it lets through and
    copied into the run record: each check's outcome and how many rows it quarantined."""

    checks: list[CheckOutcome] = field(default_factory=list)
    quarantined: int = 0


@dataclass(frozen=True)
class QualityOutcome:
    """What the gate decided. `kept` is what to commit; `quarantined` (None without failing `drop`
    checks) holds the rejected rows plus `_lake_failed_checks`, `_lake_run_id` and `_lake_model`.
    Both are lazy: cache `rows` before calling :func:`evaluate` if they are expensive."""

    record: ModelQuality
    kept: DataFrame
    quarantined: DataFrame | None

    @property
    def blocked(self) -> bool:
        return self.record.blocked

    @property
    def results(self) -> list[CheckResult]:
        return self.record.results

    @property
    def warnings(self) -> list[CheckResult]:
        return self.record.warnings

    def error(self, report: str | None = None) -> QualityGateError:
        """The error to raise when blocked: each failing check, count of total, samples, report."""
        failed = [r for r in self.results if r.blocking]
        lines = [f"quality gate failed for {self.record.model}: {len(failed)} error check(s) failed; nothing was committed"]
        for r in failed:
            lines.append(f"  ✗ {r.name} [{r.expectation}, on {r.on}]: {r.summary()}")
            if r.samples:
                lines += ["      " + line for line in render_samples(r.samples).splitlines()]
        if report:
            lines.append(f"  report: {report}")
        return QualityGateError(
            "\n".join(lines),
            model=self.record.model,
            failed=[r.name for r in failed],
            report=report,
            checks=[CheckOutcome(name=r.name, severity=r.severity, success=r.success, failing=r.failing, total=r.total) for r in self.record.results],
            fix="fix the data or the model; or set `severity: warn` (commit and report) or `drop` (quarantine failing rows) on the check. The checkpoint is unchanged, so the next run retries",
        )

    def raise_if_blocked(self, report: str | None = None) -> None:
        if self.blocked:
            raise self.error(report)


def render_samples(samples: list[dict[str, Any]]) -> str:
    """A small text table of sample rows."""
    cols = list(dict.fromkeys(k for s in samples for k in s))
    cells = [[_cell(s.get(c)) for c in cols] for s in samples]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*cols), "-+-".join("-" * w for w in widths), *(fmt.format(*row) for row in cells)])


def _cell(v: object) -> str:
    return "NULL" if v is None else str(v)


def evaluate(
    spark: SparkSession,
    model: str,
    checks: Sequence[CheckSpec],
    rows: DataFrame,
    resulting_table: DataFrame | Callable[[DataFrame], DataFrame] | None = None,
    *,
    run_id: str,
    key: Sequence[str] = (),
) -> QualityOutcome:
    """Evaluate `checks` of `model` on `rows` (about to be written) and the resulting table.

    Args:
        spark: the session `rows` belongs to.
        model: `dwd.x` or `ods.y`; names the GE suites (`<model>.rows`, `<model>.table`).
        checks: the model's CheckSpecs (ModelConfig.checks / OdsTable.checks).
        rows: the rows about to be committed.
        resulting_table: the table as it would be after the commit, or a function computing it
            from the rows kept; None means `rows` are the whole table (a full rebuild).
        run_id: recorded in the result and in every quarantined row.
        key: the record key; sample rows are identified by it.

    Returns:
        The outcome; call `raise_if_blocked(report)` before committing `kept`.
    """
    started = time.perf_counter()
    on_rows = [c for c in checks if c.on == "rows"]
    on_table = [c for c in checks if c.on == "table"]
    results: dict[str, CheckResult] = {}
    ge_results: list[dict[str, Any]] = []
    if on_rows:
        found, ge = gx_run.validate(rows, f"{model}.rows", on_rows, list(key))
        results.update((r.name, _with_sql_samples(spark, r, on_rows, rows)) for r in found)
        ge_results.append(ge)
    failed_drops = [c for c in on_rows if c.severity == "drop" and not results[c.name].success]
    kept, quarantined = rows, None
    if failed_drops:
        kept, quarantined = split(spark, rows, failed_drops, run_id=run_id, model=model)
    if on_table:
        table = resulting_table(kept) if callable(resulting_table) else (resulting_table if resulting_table is not None else kept)
        found, ge = gx_run.validate(table, f"{model}.table", on_table, list(key))
        results.update((r.name, _with_sql_samples(spark, r, on_table, table)) for r in found)
        ge_results.append(ge)
    record = ModelQuality(
        model=model,
        run_id=run_id,
        evaluated_at=datetime.now(timezone.utc),
        seconds=round(time.perf_counter() - started, 3),
        results=[results[c.name] for c in checks],
        ge_results=ge_results,
    )
    return QualityOutcome(record=record, kept=kept, quarantined=quarantined)


def _view(spark: SparkSession, df: DataFrame) -> str:
    name = f"_lake_this_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(name)
    return name


def _with_sql_samples(spark: SparkSession, r: CheckResult, specs: list[CheckSpec], df: DataFrame) -> CheckResult:
    """GE's summary of a query check has the count only; fetch a few failing rows for the message."""
    spec = next(s for s in specs if s.name == r.name)
    if spec.kind != "sql" or r.success or r.error:
        return r
    view = _view(spark, df)
    try:
        rows = [row.asDict() for row in spark.sql(spec.query_on(view)).limit(gx_run.SAMPLES).collect()]
    finally:
        spark.catalog.dropTempView(view)
    return r.model_copy(update={"samples": rows})


def split(spark: SparkSession, rows: DataFrame, drops: Sequence[CheckSpec], *, run_id: str, model: str) -> tuple[DataFrame, DataFrame]:
    """(kept, quarantined): rows failing any of `drops` go to quarantined, tagged with the names of
    every drop check they failed, the run id and the model."""
    from pyspark.sql import functions as F

    tagged = rows
    flags: list[Column] = []
    markers: list[str] = []
    for i, spec in enumerate(drops):
        if spec.kind != "sql":
            flags.append(F.when(failing(spec), F.lit(spec.name)))
            continue
        marker = f"_lake_sql_{i}"
        tagged = _mark_sql_failures(spark, tagged, rows.columns, spec, marker)
        flags.append(F.when(F.col(marker), F.lit(spec.name)))
        markers.append(marker)
    tagged = tagged.withColumn(FAILED_CHECKS, F.array_compact(F.array(*flags))).drop(*markers)
    kept = tagged.where(F.size(FAILED_CHECKS) == 0).drop(FAILED_CHECKS)
    quarantined = tagged.where(F.size(FAILED_CHECKS) > 0).withColumn(RUN_ID, F.lit(run_id)).withColumn(MODEL, F.lit(model))
    return kept, quarantined


def _mark_sql_failures(spark: SparkSession, df: DataFrame, columns: list[str], spec: CheckSpec, marker: str) -> DataFrame:
    """Add boolean `marker`: the row is among those the check's query returns (matched on every
    column, NULL-safe), so a drop `sql:` check must return the rows themselves."""
    from pyspark.sql import functions as F
    from pyspark.sql.utils import AnalysisException

    view = _view(spark, df.select(*[F.col(f"`{c}`") for c in columns]))
    try:
        bad = spark.sql(spec.query_on(view))
        missing = [c for c in columns if c not in bad.columns]
        if missing:
            raise LakeError(
                f"check {spec.name}: severity drop needs the query to return the failing rows themselves, but it lacks {', '.join(missing)}",
                fix="write it as `select * from {{ this }} where <condition>`, or use severity error or warn",
            )
    except AnalysisException as e:
        raise LakeError(f"check {spec.name}: the query failed: {str(e).splitlines()[0]}", fix="fix the `sql:` of the check") from e
    finally:
        spark.catalog.dropTempView(view)
    bad = bad.select(*[F.col(f"`{c}`").alias(f"_b{j}") for j, c in enumerate(columns)]).distinct().withColumn(marker, F.lit(True))
    cond = reduce(lambda a, b: a & b, [F.col(f"`{c}`").eqNullSafe(F.col(f"_b{j}")) for j, c in enumerate(columns)])
    joined = df.join(bad, cond, "left")
    return joined.drop(*[f"_b{j}" for j in range(len(columns))]).withColumn(marker, F.coalesce(F.col(marker), F.lit(False)))
