"""Issue 32 goal 5, the daily loop: `lake build dws.user_agg` from a cold shell (its unit tests
included) against a bare PySpark script that reads the same ODS table and upserts the same
aggregate into Hudi, both cold (a new process and JVM each), on a project of the repo's ODS
declarations and `dws.user_agg` with the demo's simulated data. Also the same build once its
tests have passed (not rerun), and `lake build --incremental` with nothing new upstream (no JVM).
Then issue 43's goals: the same builds on a warm engine (`lake engine start` once; each command a
new client process), and in an already-running local session (the build called in this benchmark's
own process, its SparkSession started before the clock runs).

    python benchmarks/daily_loop.py [--users 116] [--repeat 2]

Writes the "Daily loop (benchmarks/daily_loop.py)" section of BENCHMARKS.md. Run on an idle
machine: each figure is one process's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._common import machine_info, write_markdown  # noqa: E402

LAKE = [sys.executable, "-m", "framework.cli"]

BARE = textwrap.dedent('''
    import sys
    from pyspark.sql import SparkSession
    ods, out, jar = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = (SparkSession.builder.master("local[2]").appName("bare")
             .config("spark.jars", jar)
             .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
             .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.read.format("hudi").load(ods).createOrReplaceTempView("user")
    agg = spark.sql("select count(1) as num, device_model from user where not _deleted group by device_model")
    (agg.write.format("hudi").option("hoodie.table.name", "user_agg")
        .option("hoodie.datasource.write.recordkey.field", "device_model")
        .option("hoodie.datasource.write.precombine.field", "num")
        .option("hoodie.datasource.write.operation", "upsert")
        .option("hoodie.metadata.enable", "false")
        .mode("append").save(out))
    spark.stop()
''')


def _project(root: Path, users: int) -> None:
    from framework.demo import DEFAULT_INITIAL_ROWS, USER, Simulator

    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "dws").mkdir(parents=True)
    (root / "cdc").mkdir()
    (root / "lake.yaml").write_text("name: daily\nwarehouse: warehouse\nspark: {master: 'local[2]'}\n")
    for f in (REPO / "layers" / "ods").glob("*.yaml"):
        shutil.copy(f, root / "layers" / "ods" / f.name)
    for f in ("user_agg.sql", "user_agg.yaml"):
        shutil.copy(REPO / "layers" / "dws" / f, root / "layers" / "dws" / f)
    lines = Simulator(7, initial_rows={**DEFAULT_INITIAL_ROWS, USER: users}).snapshot()
    (root / "cdc" / "0001.json").write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0


def _forget_tests(root: Path) -> None:
    """The unit tests' pass record: without it the next build runs them again."""
    (root / "warehouse" / "_lake" / "unit-tests.json").unlink(missing_ok=True)


def _on_engine(root: Path, runs: dict[str, list[float]]) -> None:
    proj = ["--project", str(root)]
    env = {"LAKE_ENGINE": ""}
    runs["engine_start"].append(_timed([*LAKE, *proj, "engine", "start"], REPO, env))
    try:
        _timed([*LAKE, *proj, "sql", "select 1"], REPO, env)  # the engine's first command: not timed
        _forget_tests(root)
        runs["engine_tests"].append(_timed([*LAKE, *proj, "build", "dws.user_agg"], REPO, env))
        runs["engine_kept"].append(_timed([*LAKE, *proj, "build", "dws.user_agg"], REPO, env))
    finally:
        _timed([*LAKE, *proj, "engine", "stop"], REPO, env)


def _in_session(root: Path, runs: dict[str, list[float]]) -> None:
    """The build called in this process, its session already running (what a notebook or an
    embedding application does); the process's session is started by a first, untimed command."""
    from click.testing import CliRunner

    from framework.cli.main import main as cli

    def build() -> float:
        t0 = time.perf_counter()
        r = CliRunner().invoke(cli, ["--project", str(root), "build", "dws.user_agg"], catch_exceptions=False)
        if r.exit_code != 0:
            raise SystemExit(f"in-process build failed:\n{r.output[-2000:]}")
        return time.perf_counter() - t0

    CliRunner().invoke(cli, ["--project", str(root), "sql", "select 1"], catch_exceptions=False)
    _forget_tests(root)
    runs["session_tests"].append(build())
    runs["session_kept"].append(build())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=116)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "BENCHMARKS.md")
    args = ap.parse_args(argv)
    from framework.runtime.jars import HUDI_BUNDLE, ensure_jar

    jar = str(ensure_jar(HUDI_BUNDLE))
    runs: dict[str, list[float]] = {"lake_tests": [], "lake_kept": [], "lake_nothing_new": [], "bare": [], "engine_start": [],
                                    "engine_tests": [], "engine_kept": [], "session_tests": [], "session_kept": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            _project(root, args.users)
            proj = ["--project", str(root)]
            _timed([*LAKE, *proj, "ingest", "--once"], REPO)
            runs["lake_tests"].append(_timed([*LAKE, *proj, "build", "dws.user_agg"], REPO))  # its unit tests run
            runs["lake_kept"].append(_timed([*LAKE, *proj, "build", "dws.user_agg"], REPO))  # passed, unchanged: kept
            runs["lake_nothing_new"].append(_timed([*LAKE, *proj, "build", "dws.user_agg", "--incremental"], REPO))
            script = root / "bare.py"
            script.write_text(BARE)
            ods = str(root / "warehouse" / "ods" / "user")
            runs["bare"].append(_timed([sys.executable, str(script), ods, str(root / "bare_out"), jar], REPO))
            _on_engine(root, runs)
            _in_session(root, runs)
    med = {k: statistics.median(v) for k, v in runs.items()}
    info = machine_info()
    rows = [
        ("`lake build dws.user_agg`, unit tests run (cold)", med["lake_tests"]),
        ("`lake build dws.user_agg`, tests unchanged since they passed (cold)", med["lake_kept"]),
        ("`lake build dws.user_agg --incremental`, nothing new upstream (no JVM)", med["lake_nothing_new"]),
        ("bare PySpark script: read ods.user, upsert the aggregate into Hudi (cold)", med["bare"]),
        ("`lake engine start` (once; not in the rows below)", med["engine_start"]),
        ("`lake build dws.user_agg`, unit tests run, on a warm engine (a new client process)", med["engine_tests"]),
        ("`lake build dws.user_agg`, tests unchanged, on a warm engine", med["engine_kept"]),
        ("the same build, unit tests run, in an already-running local session (in process)", med["session_tests"]),
        ("the same build, tests unchanged, in an already-running local session", med["session_kept"]),
    ]
    table = "\n".join(f"| {what} | {s:.1f} | {s / med['bare']:.2f}x |" for what, s in rows)
    section = f"""## Daily loop (benchmarks/daily_loop.py)

- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {'; '.join(f'{k} {v}' for k, v in info.items())}
- Command: `python benchmarks/daily_loop.py --users {args.users} --repeat {args.repeat}`; median of {args.repeat} runs, each
  in a fresh project (the repo's ODS declarations and `dws.user_agg` with its unit tests, the demo simulator's snapshot
  with {args.users} users); every figure is one new process's wall time (a cold JVM but the last row's).

| what | seconds | vs the bare script |
|---|---:|---:|
{table}

Goal 5 (issue 32): the cold build with its unit tests at <= 1.5x the bare script. Issue 43: on a warm engine,
<= 0.5x the bare script started cold ({med["engine_tests"] / med["bare"]:.2f}x with unit tests run,
{med["engine_kept"] / med["bare"]:.2f}x unchanged) and <= 1.2x the same build in an already-running session
({med["engine_tests"] / med["session_tests"]:.2f}x, {med["engine_kept"] / med["session_kept"]:.2f}x). Raw: {json.dumps({k: [round(x, 1) for x in v] for k, v in runs.items()})}
"""
    write_markdown(args.out, section)
    print(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
