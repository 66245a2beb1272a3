"""Unit tests `lake build` need not run again: a test whose model, test and inputs are unchanged
since it last passed on this machine.

A test's digest covers everything its outcome depends on: the model's data fingerprint (its SQL
or Python source and the YAML that shapes its output), the test's resolved inputs (columns,
types, rows, change events) and expected rows, the Spark SQL settings the test session keeps, and
lake's own code. Passes are kept per machine in `<local state>/unit-tests.json` (never in the
warehouse: a test is a property of the code, not of the data). `lake test` always runs its tests;
`lake build --rerun-tests` runs them all again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

from framework.modeltest.cases import Case
from framework.project.config import Project
from models.unit_test import UnitTestResult

FILE = "unit-tests.json"
KEEP = 2000  # passes remembered; the oldest go first


@cache
def _lake_code() -> str:
    """A digest of lake's own Python source: a lake upgrade reruns every test."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def digest(project: Project, case: Case) -> str:
    """What the outcome of `case` depends on, as one hash."""
    sql_conf = sorted((k, v) for k, v in project.config.spark.conf.items() if k.startswith("spark.sql."))
    parts: dict[str, Any] = {
        "lake": _lake_code(),
        "model": case.model.name,
        "fingerprint": case.model.fingerprint,
        "test": [case.name, case.file],
        "inputs": {n: [i.columns, i.rows, i.key] for n, i in sorted(case.inputs.items())},
        "final": {n: rows for n, rows in sorted(case.final.items())},
        "rounds": [[sorted(r.upserts.items()), sorted(r.deletes.items())] for r in case.rounds],
        "expect": [case.expect, case.expect_columns, case.ordered, case.key],
        "conf": sql_conf,
    }
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


class PassedTests:
    """The digests of tests that passed on this machine, with when."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.path = project.local_state / FILE
        try:
            loaded = json.loads(self.path.read_text())
            self.passed: dict[str, str] = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self.passed = {}

    def split(self, cases: Sequence[Case]) -> tuple[list[Case], list[UnitTestResult]]:
        """The cases to run, and the results of those that passed unchanged before (not run)."""
        run, kept = [], []
        for c in cases:
            when = self.passed.get(digest(self.project, c))
            if when is None:
                run.append(c)
                continue
            kept.append(UnitTestResult(model=c.model.name, test=c.name, file=c.file, line=c.line, status="pass",
                                       incremental=c.incremental, cached=True,
                                       message=f"unchanged since it passed at {when}: not rerun (--rerun-tests runs it)"))
        return run, kept

    def record(self, cases: Sequence[Case], results: Sequence[UnitTestResult]) -> None:
        """Remember the passes among `results` (of `cases`, same order); failures are forgotten."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        by_name = {(r.model, r.test): r for r in results}
        for c in cases:
            r = by_name.get((c.model.name, c.name))
            d = digest(self.project, c)
            if r is not None and r.status == "pass":
                self.passed[d] = now
            else:
                self.passed.pop(d, None)
        kept = dict(list(self.passed.items())[-KEEP:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{FILE}.{os.getpid()}")
        tmp.write_text(json.dumps(kept, indent=0))
        os.replace(tmp, self.path)
