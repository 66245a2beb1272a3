"""Strict skips: with `LAKE_STRICT_SKIPS=1` (set by `make test`, which CI runs) a skipped test fails.

A test that needs a package or a program (MariaDB and PyMySQL for the CDC chain, Chromium for the
rendered report, hudi-rs for the outside reader) skips when it is missing, so that a developer
without root can still run the suite. In CI the same skip would hide a broken install: the test
would never run and the run would stay green. In strict mode every skip fails with its reason,
except the ones that are skips by design:

- tests marked `nightly` (opt-in sizes, skipped unless their variable is set);
- `optional(reason)`: data that lives outside the repository and may be absent by design (the
  public Debezium captures in ../shared/fixtures).

Registered by tests/conftest.py (`pytest_plugins`); usable alone with `pytest -p tests.strict_skips`.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import NoReturn

import pytest

VAR = "LAKE_STRICT_SKIPS"
OPTIONAL = "optional input: "  # the reason's prefix of a skip strict mode keeps


def optional(reason: str) -> NoReturn:
    """Skip the test, also under strict mode: its input is optional by design, not an install
    (see the module docstring for when that is right)."""
    pytest.skip(OPTIONAL + reason)


def strict() -> bool:
    return os.environ.get(VAR, "").strip() not in ("", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or hasattr(report, "wasxfail") or not strict():
        return
    if item.get_closest_marker("nightly") is not None:
        return
    reason = (report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)).removeprefix("Skipped: ")
    if reason.startswith(OPTIONAL):
        return
    report.outcome = "failed"
    report.longrepr = (f"{VAR}=1 (make test, CI): this skip fails, since it hides a missing install: {reason}\n"
                       f"install what it names (`make install` as root installs the system packages), or run pytest without {VAR} "
                       "to let it skip")
