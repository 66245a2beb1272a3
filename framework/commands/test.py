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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from framework.errors import LakeError
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
