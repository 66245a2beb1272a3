"""Validation results as stored under `<warehouse>/_lake/quality/<run_id>/<model>.json`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from models.quality import Kind, Scope, Severity


class CheckResult(BaseModel):
    """What one check found."""

    name: str
    expectation: str
    kind: Kind
    on: Scope
    severity: Severity
    success: bool
    failing: int | None = Field(default=None, description="GE's unexpected_count (rows for sql checks)")
    total: int | None = Field(default=None, description="GE's element_count: rows evaluated")
    observed: Any = Field(default=None, description="GE's observed_value for table-level checks")
    samples: list[dict[str, Any]] = Field(default_factory=list, description="a few failing values or rows")
    error: str | None = Field(default=None, description="the exception GE caught (e.g. a missing column)")

    @property
    def blocking(self) -> bool:
        return self.severity == "error" and not self.success

    def summary(self) -> str:
        """`3 of 120 rows fail`, `observed 0`, or the exception."""
        if self.error:
            return f"could not run: {self.error}"
        if self.failing is not None and self.total is not None:
            return f"{self.failing} of {self.total} rows fail"
        if self.failing is not None:
            return f"{self.failing} failing rows"
        return f"observed {self.observed!r}"


class ModelQuality(BaseModel):
    """All checks of one model (or ODS table) in one run."""

    model: str
    run_id: str
    evaluated_at: datetime
    seconds: float = Field(description="wall time of the whole evaluation (GE and Spark)")
    results: list[CheckResult]
    ge_results: list[dict[str, Any]] = Field(
        default_factory=list,
        description="GE ExpectationSuiteValidationResult JSON, one per evaluated DataFrame (rows, table); Data Docs are built from these",
    )

    @property
    def blocked(self) -> bool:
        return any(r.blocking for r in self.results)

    @property
    def warnings(self) -> list[CheckResult]:
        return [r for r in self.results if not r.success and r.severity == "warn"]
