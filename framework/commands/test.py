"""`lake test`, and the unit tests `lake build` runs before it builds: the tests of the selected
models, on a local Spark, with nothing read from or written to the warehouse (no locks, no run
record, no catalog)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from framework.errors import LakeError
from framework.modeltest.cache import PassedTests
from framework.modeltest.cases import Case, discover
from framework.modeltest.render import failure_text
from framework.project.config import Project
from framework.transform.runner import Selection
from models.catalog import CatalogConfig
from models.config import SparkConfig
from models.records import ModelResult
from models.unit_test import UnitTestResult

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Settings of the project's `spark.conf` a test session keeps: what changes query results (SQL
# settings) or what a model may need (jars). Cluster settings would not work on local[1].
KEPT_CONF = ("spark.sql.", "spark.jars", "spark.driver.memory")


def run_test(*, project: Project, selection: Selection, on_result: Callable[[UnitTestResult], None] | None = None) -> list[UnitTestResult]:
    """Run the unit tests of the selection (config errors before Spark starts; none: no Spark)."""
    cases = discover(project, selection.models, selection.chosen)
    if not cases:
        return []
    from framework.modeltest.run import run_cases

    return run_cases(test_session(project), project, selection.models, cases, on_result)


def test_session(project: Project) -> SparkSession:
    """The process's SparkSession if it has one (tests in a process that runs Spark already),
    else a new local[1] session with one shuffle partition whose warehouse and logs are a
    temporary folder: the project's warehouse is never opened, its catalog never contacted."""
    from pyspark.sql import SparkSession

    from framework.table.session import spark_session

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    tmp = Path(tempfile.mkdtemp(prefix="lake-test-session-"))
    atexit.register(shutil.rmtree, tmp, True)
    kept = {k: v for k, v in project.config.spark.conf.items() if k.startswith(KEPT_CONF)}
    config = project.config.model_copy(update={"warehouse": str(tmp), "catalog": CatalogConfig(), "spark": SparkConfig(master="local[1]", conf=kept)})
    return spark_session(replace(project, config=config), extra={"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1"})


def build_cases(project: Project, selection: Selection) -> list[Case]:
    """The unit tests `lake build` runs first (config errors before locks and Spark)."""
    return discover(project, selection.models, selection.chosen)


@dataclass
class BuildTests:
    """The unit tests a build runs before it builds: those unchanged since they passed are not
    rerun (framework/modeltest/cache.py); the rest run in the build's session when it is local,
    else in a `lake test` child process started before this process starts Spark."""

    project: Project
    selection: Selection
    cases: list[Case] = field(default_factory=list)
    kept: list[UnitTestResult] = field(default_factory=list)  # passed before, unchanged: not run
    child: list[UnitTestResult] | None = None  # results of the child process, when one ran

    @classmethod
    def prepare(cls, project: Project, selection: Selection, *, enabled: bool, rerun: bool) -> BuildTests:
        """Find the tests (config errors before locks and Spark) and set aside the unchanged ones."""
        out = cls(project, selection)
        if not enabled:
            return out
        out.cases = build_cases(project, selection)
        if out.cases and not rerun:
            out.cases, out.kept = PassedTests(project).split(out.cases)
        return out

    def before_spark(self) -> None:
        """Run the tests in a child process when the build's session cannot run them."""
        if self.cases and not shares_session(self.project):
            self.child = self._recorded(run_in_child(self.project, self.cases))

    def run(self, spark: SparkSession) -> list[UnitTestResult]:
        """Every result: the unchanged passes, then the tests run now (in `spark` unless a child ran them)."""
        if self.child is not None:
            return self.kept + self.child
        if not self.cases:
            return list(self.kept)
        from framework.modeltest.run import run_cases

        return self.kept + self._recorded(run_cases(spark, self.project, self.selection.models, self.cases))

    def _recorded(self, results: list[UnitTestResult]) -> list[UnitTestResult]:
        PassedTests(self.project).record(self.cases, results)
        return results


def shares_session(project: Project) -> bool:
    """Whether a build's own session can run the tests: a local master whose default file system
    is the local one (the tests' throw-away tables are local folders). A cluster's executors
    could not reach them: the tests then run in a `lake test` child process first."""
    fs = project.config.spark.conf.get("spark.hadoop.fs.defaultFS", "file:///")
    return project.config.spark.master.startswith("local") and fs.startswith("file:")


def run_in_child(project: Project, cases: Sequence[Case]) -> list[UnitTestResult]:
    """Run the tests of `cases`' models in a `lake test --json` child process (its own local
    Spark), for a build whose session is a cluster's."""
    names = list(dict.fromkeys(c.model.name for c in cases))
    cmd = [sys.executable, "-m", "framework.cli", "--project", str(project.root), "--quiet"]
    cmd += ["--target", project.target] if project.target else []
    r = subprocess.run([*cmd, "test", *names, "--json"], capture_output=True, text=True, env={**os.environ}, check=False)
    try:
        return [UnitTestResult.model_validate(x) for x in json.loads(r.stdout)]
    except (json.JSONDecodeError, ValueError):
        detail = " ".join(line.strip() for line in (r.stderr or r.stdout).strip().splitlines()[:6]) or f"exit {r.returncode}"
        raise LakeError(f"the unit tests (`lake test {' '.join(names)}`) did not run: {detail}",
                        fix="run `lake test` to see why, or build with --skip-tests") from None


def stopped_models(results: Sequence[UnitTestResult]) -> dict[str, ModelResult]:
    """The failed build result of every model with a failing unit test."""
    out: dict[str, ModelResult] = {}
    for r in results:
        if r.status == "pass":
            continue
        prev = out.get(r.model)
        names = f"{prev.reason.removeprefix('unit test failed: ')}, {r.test}" if prev else r.test
        text = failure_text(r)
        out[r.model] = ModelResult(model=r.model, strategy="-", mode="failed", reason=f"unit test failed: {names}",
                                   error=f"{prev.error}\n{text}" if prev and prev.error else text)
    return out
