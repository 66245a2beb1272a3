"""Run CheckSpecs through Great Expectations 1.x on one Spark DataFrame.

One ephemeral GE context per process (creating it is cheap, importing GE is ~3 s), one Spark data
source with one dataframe asset per model and scope, and a whole-dataframe batch definition. The
suite is built fresh per call from the specs, so nothing but this process's memory holds GE state;
results leave as JSON (Data Docs are rendered later from that JSON, see docs.py).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from models.quality import CheckSpec
from models.quality_result import CheckResult

if TYPE_CHECKING:
    from great_expectations.data_context import AbstractDataContext
    from pyspark.sql import DataFrame

DATASOURCE = "lake"
SAMPLES = 5
_GX_SEVERITY = {"error": "critical", "warn": "warning", "drop": "warning"}
_lock = threading.Lock()
_context: AbstractDataContext | None = None


def context() -> AbstractDataContext:
    """The process's ephemeral GE context: no files, no analytics, no progress bars."""
    global _context
    with _lock:
        if _context is None:
            os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            ctx = gx.get_context(mode="ephemeral")
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
            # persist=False: GE would otherwise cache every batch and never release it; callers
            # cache the DataFrame they then write.
            ctx.data_sources.add_spark(name=DATASOURCE, persist=False)
            _context = ctx
        return _context


def _batch_definition(asset_name: str) -> Any:
    ds: Any = context().data_sources.get(DATASOURCE)
    try:
        asset = ds.get_asset(asset_name)
    except LookupError:
        asset = ds.add_dataframe_asset(name=asset_name)
    try:
        return asset.get_batch_definition("whole")
    except (KeyError, LookupError):
        return asset.add_batch_definition_whole_dataframe("whole")


def _expectation(spec: CheckSpec) -> Any:
    from great_expectations.expectations.expectation import FailureSeverity
    from great_expectations.expectations.registry import get_expectation_impl

    cls = get_expectation_impl(spec.expectation)
    return cls(**spec.kwargs, meta={"lake_check": spec.name, "lake_severity": spec.severity},
               severity=FailureSeverity(_GX_SEVERITY[spec.severity]))


def validate(df: DataFrame, suite_name: str, specs: list[CheckSpec], index_columns: list[str]) -> tuple[list[CheckResult], dict[str, Any]]:
    """Validate `df` against `specs` as one GE suite; per-check results (in spec order) and GE's
    ExpectationSuiteValidationResult as JSON. `index_columns` (the key) identify sample rows."""
    import great_expectations as gx
    from pyspark import StorageLevel

    suite = gx.ExpectationSuite(name=suite_name, expectations=[_expectation(s) for s in specs])
    result_format: dict[str, Any] = {"result_format": "SUMMARY", "partial_unexpected_count": SAMPLES}
    present = [c for c in index_columns if c in df.columns]
    if present:
        result_format["unexpected_index_column_names"] = present
    # GE runs several Spark jobs per expectation; without a cache each recomputes df's lineage
    # (a model's whole query, or the merge that forms the resulting table).
    ours = not df.storageLevel.useMemory and not df.storageLevel.useDisk
    if ours:
        df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        batch = _batch_definition(suite_name).get_batch(batch_parameters={"dataframe": df})
        suite_result = batch.validate(suite, result_format=result_format)
    finally:
        if ours:
            df.unpersist()
    by_name = {r.expectation_config.meta.get("lake_check"): r for r in suite_result.results}
    return [_check_result(s, by_name[s.name].to_json_dict()) for s in specs], suite_result.to_json_dict()


def _check_result(spec: CheckSpec, ge: dict[str, Any]) -> CheckResult:
    res: dict[str, Any] = ge.get("result") or {}
    error = _exception(ge.get("exception_info") or {})
    failing = res.get("unexpected_count")
    if spec.kind == "sql":
        failing = res.get("observed_value")
    samples: list[dict[str, Any]] = list(res.get("partial_unexpected_index_list") or [])
    if not samples and res.get("partial_unexpected_list"):
        key = spec.column or "value"
        samples = [{key: v} for v in res["partial_unexpected_list"]]
    return CheckResult(
        name=spec.name,
        expectation=spec.expectation,
        kind=spec.kind,
        on=spec.on,
        severity=spec.severity,
        success=bool(ge.get("success")) and error is None,
        failing=failing,
        total=res.get("element_count"),
        observed=None if spec.kind == "sql" else res.get("observed_value"),
        samples=samples[:SAMPLES],
        error=error.strip().splitlines()[-1] if error else None,
    )


def _exception(info: dict[str, Any]) -> str | None:
    """GE reports a caught exception either flat or keyed by the metric that raised it."""
    entries = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for e in entries:
        if e.get("raised_exception", True) and e.get("exception_message"):
            return str(e["exception_message"])
    return None
