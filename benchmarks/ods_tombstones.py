"""Cost of ODS tombstones per micro-batch: a batch with deletes and one without, before and after.

    .venv/bin/python benchmarks/ods_tombstones.py --before /work/main [--rows 10000] [--out BENCHMARKS.md]

Runs itself twice, in fresh processes: once importing lake from `--before` (a checkout with soft
deletes), once from this repository (Hudi deletes plus a tombstone table). Each run loads ROWS
inserts into one copy-on-write ODS table (not timed), then alternates two kinds of micro-batch
twice each, timing `run_ingest` (no JVM start-up): ROWS/100 updates; and ROWS/200 updates
plus ROWS/200 deletes of live keys. Both runs see the same events. Prints the medians and, with
--out, replaces this benchmark's section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SECTION = "## ODS tombstones: cost per micro-batch (benchmarks/ods_tombstones.py)"
ROUNDS = 2


def _env(op: str, k: int, v: int, pos: int) -> str:
    row = {"id": k, "name": f"user {k}", "v": v}
    return json.dumps({"before": row if op == "d" else None, "after": None if op == "d" else row, "op": op, "ts_ms": 1_700_000_000_000,
                       "source": {"connector": "mysql", "name": "b", "ts_ms": 1_700_000_000_000, "db": "shop", "table": "users",
                                  "file": "mysql-bin.000001", "pos": pos, "row": 0}})


def child(repo: Path, rows: int) -> dict[str, Any]:
    """One run, importing lake from `repo`: the medians of each kind of batch, in seconds."""
    sys.path.insert(0, str(repo))
    from framework.ods.ingest import run_ingest
    from framework.project.config import load_project
    from framework.table.session import spark_session

    rnd = random.Random(7)
    root = Path(tempfile.mkdtemp(prefix="lake-tomb-bench-"))
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "cdc").mkdir()
    (root / "lake.yaml").write_text("name: b\nwarehouse: warehouse\nspark: {master: 'local[2]'}\n")
    (root / "layers" / "ods" / "tables.yaml").write_text("tables:\n  - {source: shop.users, key: [id]}\n")
    project = load_project(root)
    spark = spark_session(project)
    pos, live, n = 0, list(range(rows)), 0

    def batch(lines: list[str]) -> float:
        nonlocal n
        n += 1
        (root / "cdc" / f"{n:04d}.json").write_text("\n".join(lines) + "\n")
        t0 = time.perf_counter()
        run_ingest(spark, project)
        return time.perf_counter() - t0

    def events(op: str, count: int) -> list[str]:
        nonlocal pos
        out = []
        for k in rnd.sample(live, count):
            pos += 10
            out.append(_env(op, k, rnd.randint(0, 9), pos))
            if op == "d":
                live.remove(k)
        return out

    lines = []
    for k in live:
        pos += 10
        lines.append(_env("c", k, 0, pos))
    batch(lines)
    times: dict[str, list[float]] = {"updates": [], "updates+deletes": []}
    for _ in range(ROUNDS):
        times["updates"].append(batch(events("u", rows // 100)))
        times["updates+deletes"].append(batch(events("u", rows // 200) + events("d", rows // 200)))
    return {k: statistics.median(v) for k, v in times.items()} | {"all": times}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="a checkout of lake with soft deletes")
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.rows)))
        return
    res = {}
    for label, repo in (("before (soft deletes)", a.before), ("after (Hudi deletes + tombstones)", REPO)):
        p = subprocess.run([sys.executable, __file__, "--child", str(repo), "--rows", str(a.rows)], cwd=repo,
                           capture_output=True, text=True, check=True)
        res[label] = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    lines = [SECTION, "",
             f"One copy-on-write ODS table of {a.rows:,} rows; `run_ingest` of one micro-batch (no JVM start-up), median of "
             f"{ROUNDS} alternating batches of each kind, same events before and after; 2-core machine shared with other jobs.", "",
             f"| lake | {a.rows // 100} updates | {a.rows // 200} updates + {a.rows // 200} deletes |", "|---|---|---|"]
    for label, r in res.items():
        lines.append(f"| {label} | {r['updates']:.1f} s | {r['updates+deletes']:.1f} s |")
    lines += ["", "Every run: " + "; ".join(f"{k}: {json.dumps(v['all'])}" for k, v in res.items()), ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        sys.path.insert(0, str(REPO))
        from benchmarks._common import write_markdown

        write_markdown(a.out, text)


if __name__ == "__main__":
    main()
