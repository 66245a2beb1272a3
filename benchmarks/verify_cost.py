"""`lake verify` against a full rebuild of the same model, in one session (issue 44: verify <= 1.3x).

    .venv/bin/python benchmarks/verify_cost.py [--rows 1000000] [--out BENCHMARKS.md]

The project and data of benchmarks/incremental.py (ods.orders with N rows bootstrapped, 10k users,
a row-wise model, an aggregate with SUM/COUNT/MIN/MAX/AVG and two join rescans): the initial full
build, then 0.1 % of the orders changed by CDC (updates, inserts, deletes), ingested and built
incrementally, so each model's last commit is an incremental one. Then, per model, alternately
and twice each (the faster of the two counted, as the JIT warms):

- **full rebuild**: `lake build MODEL --full` as the engine runs it (`runner.build(...,
  incremental=False)`): every upstream row read, the model's query computed, compared with the
  table, only differing rows written (none here: the table is what a full build gives);
- **verify**: `verify_model` (what `lake verify MODEL` runs per model): the full build as of the
  checkpoint's instants (time travel), the table read and compared by key;
- **verify, 1 % sample**: the same, comparing the keys whose hash falls in 1 %.

A warm-up project of 2,000 rows goes through the same steps first (JIT). Runs with more than 50k
rows wait while a pytest process runs on the machine. Ratios are verify / full rebuild in the same
session, so the machine's speed cancels out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import machine_info, write_markdown  # noqa: E402
from benchmarks.incremental import MODEL_ORDER, Bench, Shape, Steps, make_project  # noqa: E402

SECTION = "## Verify cost (benchmarks/verify_cost.py)"
TARGET = 1.3


@dataclass
class Figures:
    model: str
    strategy: str
    full_s: float
    verify_s: float
    sample_s: float
    status: str


def measure(bench: Bench, root: Path, rows: int, say: Any) -> list[Figures]:
    """One project of `rows` orders: set up, change 0.1 % incrementally, then time each model."""
    from framework.ods.ingest import run_ingest
    from framework.transform.evaluate import Evaluator
    from framework.transform.runner import build, load
    from framework.transform.verify import verify_model

    project, _builder, gen, _initial = bench.setup(root, rows)
    lines, _ops, _keys = gen.events(max(1, rows // 1000))
    gen.write(root / "cdc", lines)
    run_ingest(bench.spark, project)
    for r in build(bench.spark, project, [], [], incremental=True):
        if r.mode != "incremental":
            raise SystemExit(f"FAILED: {r.model} built {r.mode}, not incrementally ({r.reason})")
    models, _ = load(project)
    out = []
    for name in MODEL_ORDER:
        full, ver, smp, status = [], [], [], ""
        for _ in range(2):
            bench.wait_idle(rows)
            t0 = time.perf_counter()
            (res,) = build(bench.spark, project, [name], [], incremental=False)
            full.append(time.perf_counter() - t0)
            if res.rows_written or res.rows_deleted:
                raise SystemExit(f"FAILED: the full rebuild of {name} wrote {res.rows_written} and deleted {res.rows_deleted} rows")
            ev = Evaluator(bench.spark, project, models)
            t0 = time.perf_counter()
            v = verify_model(ev, models[name])
            ver.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            s = verify_model(ev, models[name], sample=0.01)
            smp.append(time.perf_counter() - t0)
            status = f"{v.status} / {s.status}"
            if v.status != "equal" or s.status != "equal":
                raise SystemExit(f"FAILED: verify of {name}: {v.status} ({v.reason}); sampled {s.status} ({s.reason})")
        strategy = Evaluator(bench.spark, project, models).analyses.of(models[name]).strategy
        f = Figures(name, strategy, min(full), min(ver), min(smp), status)
        say(f"  {rows:,} rows {name:<22} full {f.full_s:6.2f} s  verify {f.verify_s:6.2f} s ({f.verify_s / f.full_s:.2f}x)  "
            f"1% sample {f.sample_s:6.2f} s")
        out.append(f)
    return out


def section(figures: list[Figures], rows: int, command: str, info: dict[str, str]) -> str:
    lines = [SECTION, "", f"`{command}`, {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; "
             f"{info.get('CPU', '?')}, {info.get('cores (nproc)', '?')} cores, driver {info.get('driver memory', '?')}; one SparkSession (warm: a 2,000-row project first); "
             f"{rows:,} orders, 0.1 % changed and built incrementally before measuring; the faster of two runs each.", "",
             "| model | strategy | full rebuild s | verify s | verify / full | target | verify, 1 % sample s |",
             "|---|---|---:|---:|---:|---|---:|"]
    for f in figures:
        r = f.verify_s / f.full_s
        lines.append(f"| {f.model} | {f.strategy} | {f.full_s:.2f} | {f.verify_s:.2f} | **{r:.2f}x** | "
                     f"≤ {TARGET}x: {'met' if r <= TARGET else 'not met'} | {f.sample_s:.2f} |")
    lines += ["", "A full rebuild and a verify do the same main work (every upstream row read, the query computed, the result "
              "compared with the table by key); verify reads the upstreams as of the checkpoint's instants and writes nothing. "
              "The sample saves the comparison and the result's size; the upstream reads stay whole (docs/concepts/verify.md)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--warmup-rows", type=int, default=2_000)
    ap.add_argument("--out", type=Path, default=None, help="replace this benchmark's section of this Markdown file")
    args = ap.parse_args(argv)
    command = "python benchmarks/verify_cost.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    from framework.project.config import load_project
    from framework.table.session import spark_session

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-verify-"))
    make_project(tmp / "session")
    spark = spark_session(load_project(tmp / "session"))
    try:
        bench = Bench(spark, Steps(), say, Shape(), seed=1)
        measure(bench, tmp / "warmup", args.warmup_rows, say)
        figures = measure(bench, tmp / "main", args.rows, say)
        info = machine_info()
    finally:
        spark.stop()
    text = section(figures, args.rows, command, info)
    print(text)
    if args.out:
        write_markdown(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
