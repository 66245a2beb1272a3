"""Small micro-batches and many tables (issue 32, goal 2): the wall time of one `run_ingest` of a
1,000-event micro-batch into tables of ~2,000 rows, over 3 tables and over 30, with the tables'
commits one after another (`ods.commit_threads: 1`) and concurrent (the default), in one run.

    .venv/bin/python benchmarks/ods_small_batch.py [--events 1000] [--rows 2000] [--rounds 3] [--out BENCHMARKS.md]

One Python process and one warm SparkSession (local[2]); every case is its own project under one
temporary directory: its base load (inserts, updates and deletes leaving ~`--rows` live rows per
table, not measured), then `--rounds` micro-batches of `--events` new events, each timed, each
followed by a check of every table's live rows against the generator's own state. The figure is
the median round. Targets: <= 5 s for 3 tables; 30 tables <= 3x the 3-table time.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import CpuMark, machine_info, write_markdown  # noqa: E402
from benchmarks.ods_ingest import ALL_TABLES, Generator, TableDef, ingest, live_rows, make_project  # noqa: E402

SECTION = "## ODS small micro-batches over many tables (benchmarks/ods_small_batch.py)"
PRODUCTS = ALL_TABLES[2].columns


def table_set(n: int) -> list[TableDef]:
    """3: orders, customers, products; otherwise n product-shaped tables of equal weight."""
    if n == 3:
        return list(ALL_TABLES)
    return [TableDef("shop", f"t{i:02d}", 1 / n, dict(PRODUCTS)) for i in range(n)]


def run_case(spark: Any, root: Path, n_tables: int, threads: int, args: Any, say: Any, after_base: Any = None) -> dict[str, Any]:
    tables = table_set(n_tables)
    make_project(root, tables, f"small_{n_tables}_{threads}")
    with (root / "lake.yaml").open("a") as f:
        f.write(f"ods: {{commit_threads: {threads}}}\n" + (args.lake_yaml or ""))
    gen = Generator(tables, seed=args.seed)
    # 75 % inserts, 5 % deletes: ~70 % of the base events leave a live row.
    gen.write(math.ceil(args.rows * n_tables / 0.7), root / "cdc", files=1)
    t0 = time.perf_counter()
    ingest(spark, root)
    base = time.perf_counter() - t0
    say(f"{n_tables} tables, commit_threads {threads}: base load {base:.1f} s")
    if after_base is not None:
        after_base()
    times: list[float] = []
    others: list[float] = []
    for r in range(args.rounds):
        gen.write(args.events, root / "cdc", files=1, first_file=r + 1, start_ms=1_740_000_000_000 + r * 3_600_000, span_ms=3_000_000)
        t0, cpu0 = time.perf_counter(), CpuMark.now()
        run = ingest(spark, root)
        times.append(time.perf_counter() - t0)
        others.append(CpuMark.now().cores_since(cpu0)[1])
        if run.status != "ok" or len(run.batches) != 1:
            raise SystemExit(f"round {r}: status {run.status}, {len(run.batches)} micro-batches")
        for name, (live, _) in gen.expected().items():
            got = live_rows(spark, root / "warehouse" / "ods" / name)
            if got != live:
                raise SystemExit(f"{name}: {got} live rows, the generator has {live}")
        say(f"  round {r}: {times[-1]:.2f} s (rows checked)")
    return {"tables": n_tables, "threads": threads, "base_s": base, "rounds": times, "median": statistics.median(times),
            "others": max(others), "rows": {n: v[0] for n, v in gen.expected().items()}}


def markdown(results: list[dict[str, Any]], args: Any, command: str) -> str:
    by = {(r["tables"], r["threads"]): r for r in results}
    t = args.threads
    three, thirty = by[(3, t)]["median"], by[(30, t)]["median"]
    info = machine_info()
    lines = [
        SECTION, "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; machine: "
        + "; ".join(f"{k} {v}" for k, v in info.items()),
        f"- Command: `{command}`; one warm SparkSession (local[2]); each figure is the median of {args.rounds} micro-batches "
        f"of {args.events:,} events (75 % inserts, 20 % updates, 5 % deletes) into tables of ~{args.rows:,} live rows, "
        "every table's live rows checked against the generator after each round.", "",
        "| goal | target | measured | met |", "|---|---|---:|---|",
        f"| 1,000 events into 3 tables (commit_threads {t}) | <= 5 s | {three:.2f} s | {'yes' if three <= 5 else 'no'} |",
        f"| the same over 30 tables, against 3 | <= 3x | {thirty / three:.2f}x ({thirty:.2f} s) | {'yes' if thirty <= 3 * three else 'no'} |",
        "", "| tables | commit_threads | base load s | rounds s | median s | other processes (cores, max) |",
        "|---:|---:|---:|---|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r['tables']} | {r['threads']} | {r['base_s']:.1f} | {', '.join(f'{x:.2f}' for x in r['rounds'])} | "
                     f"**{r['median']:.2f}** | {r['others']:.2f} |")
    serial3, serial30 = by.get((3, 1)), by.get((30, 1))
    if serial3 and serial30:
        lines += ["", f"Tables prepared and committed concurrently against one after another: 3 tables {serial3['median'] / three:.2f}x, "
                      f"30 tables {serial30['median'] / thirty:.2f}x faster."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4, help="commit_threads of the concurrent cases (lake's default)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--lake-yaml", default=None, help="more lake.yaml text for every case (e.g. hudi options), with its newline")
    ap.add_argument("--profile", action="store_true", help="only the 3-table serial case, printing the writer's steps (exclusive s)")
    args = ap.parse_args(argv)
    command = "python benchmarks/ods_small_batch.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="lake-small-batch-"))
    try:
        from framework.project.config import load_project
        from framework.table.session import spark_session

        make_project(tmp / "warm", ALL_TABLES, "warm")
        Generator(ALL_TABLES, seed=1).write(1000, tmp / "warm" / "cdc", files=1)
        spark = spark_session(load_project(tmp / "warm"))
        ingest(spark, tmp / "warm")
        say("warm-up done")
        if args.profile:
            from benchmarks._common import Phases
            from benchmarks.ods_ingest import instrument

            phases = Phases()
            instrument(spark, phases)
            args.rounds = 1
            def reset() -> None:
                for d in (phases.incl, phases.excl, phases.calls):
                    d.clear()
                phases.order.clear()

            run_case(spark, tmp / "profile", 3, 1, args, say, after_base=reset)
            for name in phases.order:
                print(f"{phases.excl[name]:8.2f} s {phases.calls[name]:4d}x  {name}")
            return 0
        results = [run_case(spark, tmp / f"c{n}_{t}", n, t, args, say) for n in (3, 30) for t in (1, args.threads)]
        text = markdown(results, args, command)
        print(text)
        if args.out:
            write_markdown(args.out, text)
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
