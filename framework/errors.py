"""Errors users see. Each names what went wrong, where, and how to fix it."""

from __future__ import annotations

from models.records import CheckOutcome


class LakeError(Exception):
    """Root of every error lake reports without a stack trace (exit code 1)."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message + (f"\n  fix: {self.fix}" if self.fix else "")


class ConfigIssue:
    """One problem in one config file, with its location."""

    def __init__(self, file: str, line: int | None, field: str, problem: str, fix: str) -> None:
        self.file, self.line, self.field, self.problem, self.fix = file, line, field, problem, fix

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.problem}\n  fix: {self.fix}"


class ConfigError(LakeError):
    """All config problems found in a project, reported together before Spark starts."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        text = "\n".join(str(i) for i in issues)
        super().__init__(f"{len(issues)} configuration error(s):\n{text}")

    def __str__(self) -> str:
        return self.message


class EnvironmentProblem(LakeError):
    """Something outside the project is missing: Java, mvn, a jar, a directory."""


class IngestFailed(LakeError):
    """An ingest run stopped; committed tables are consistent, the rest retries next run."""


class QualityGateError(LakeError):
    """Error-severity checks failed: nothing was committed (framework/quality/checks.py words it)."""

    def __init__(self, message: str, *, model: str, failed: list[str], report: str | None, fix: str,
                 checks: list[CheckOutcome] | None = None, quarantined: int = 0) -> None:
        super().__init__(message, fix=fix)
        self.model = model
        self.failed = failed
        self.report = report
        self.checks: list[CheckOutcome] = list(checks or [])  # every check's verdict, for the run record
        self.quarantined = quarantined  # rows `drop` checks quarantined before an `error` check blocked
