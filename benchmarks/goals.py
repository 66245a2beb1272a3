"""Issue 19's goals, measured: runs the benchmarks and writes the "Goals" section of BENCHMARKS.md.

    .venv/bin/python benchmarks/goals.py [--rows 1000000] [--out BENCHMARKS.md]
    .venv/bin/python benchmarks/goals.py --render cow.json --render mor.json [--ingest ingest.json] --out BENCHMARKS.md

One command (`make bench`): `benchmarks/incremental.py` three times at `--rows` orders (default 1 M,
with the 10x smaller size first, changes of 0.1 % and 1 %): every model copy-on-write (the
default); every model merge-on-read with a bucket index; and that with `ods.orders` merge-on-read
with a bucket index too; then `benchmarks/ods_ingest.py` (lake
against a plain JSON -> Parquet write and the hand-written seed-004 job). Each writes its JSON
figures; this script reads them and states, per goal, the measured ratio next to the target. The
10 M size is `--rows 10000000` (hours on a 2-core machine). Ratios are taken within one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import write_markdown  # noqa: E402

SECTION = "## Issue 19 goals (benchmarks/goals.py)"
LAYOUTS = {"copy-on-write, simple index (default)": "", "merge-on-read, bucket index (8)": "type: mor, index: bucket, buckets: 8"}
STRATEGY_TARGET = {"rowwise": (1.0, 10.0), "aggregate": (1.5, 5.0), "rescan": (1.5, 3.0)}  # fixed cost s, full/incr at 0.1 %


def _label(r: dict[str, Any]) -> str:
    """The layout a run measured, from its `--model-layout`."""
    want = r.get("model_layout") or ""
    label = next((k for k, v in LAYOUTS.items() if v == want), f"models: {want}")
    return label + (f"; ods.orders {r['ods_layout']}" if r.get("ods_layout") else "")


def _runs(r: dict[str, Any], rows: int) -> list[dict[str, Any]]:
    return [ff for ff in r["runs"] if ff["rows"] == rows]


def growth_rows(label: str, r: dict[str, Any]) -> list[str]:
    """Goal 1: the same number of events at two table sizes 10x apart."""
    out = []
    small, main = r["small_rows"], r["rows"]
    for big in _runs(r, main):
        same = [ff for ff in _runs(r, small) if ff["events"] == big["events"]]
        if not same:
            continue
        s = same[0]
        for fb in big["models"]:
            fs = next(f for f in s["models"] if f["model"] == fb["model"])
            g = fb["incr"] / fs["incr"]
            out.append(f"| {label} | {fb['model']} ({fb['strategy']}) | {big['events']:,} | {small:,} → {main:,} | "
                       f"{fs['incr']:.2f} → {fb['incr']:.2f} | {_others(fs)} / {_others(fb)} | **{g:.2f}x** | {'met' if g <= 1.3 else 'not met'} |")
        g = big["ingest_seconds"] / s["ingest_seconds"]
        out.append(f"| {label} | ODS micro-batch (`run_ingest`) | {big['events']:,} | {small:,} → {main:,} | "
                   f"{s['ingest_seconds']:.2f} → {big['ingest_seconds']:.2f} | - | **{g:.2f}x** | {'met' if g <= 1.3 else 'not met'} |")
    return out


def ratio_rows(label: str, r: dict[str, Any]) -> list[str]:
    """Goal 2: full / incremental at the main size, smallest change."""
    out = []
    runs = sorted(_runs(r, r["rows"]), key=lambda ff: ff["fraction"])
    if not runs:
        return out
    ff = runs[0]
    for f in ff["models"]:
        want = STRATEGY_TARGET.get(f["strategy"], (0, 0))[1]
        real = f"{f['real_full']:.2f} s, **{f['real_full'] / f['incr']:.2f}x**" if f.get("real_full") else "-"
        out.append(f"| {label} | {f['model']} ({f['strategy']}) | {ff['fraction']:.1%} of {r['rows']:,} | {f['incr']:.2f} | {_others(f)} | "
                   f"{f['full']:.2f} s, {f['full'] / f['incr']:.2f}x | {real} | {want:g}x (at 10 M) |")
    return out


def floor_rows(label: str, r: dict[str, Any]) -> list[str]:
    """Goal 3: one changed row on the warm-up tables, warm session."""
    fl = r.get("floor")
    if not fl:
        return []
    return [f"| {label} | {f['model']} ({f['strategy']}) | {f['incr']:.2f} | {_others(f)} | ≤ {STRATEGY_TARGET.get(f['strategy'], (0, 0))[0]:g} | "
            f"{'met' if f['incr'] <= STRATEGY_TARGET.get(f['strategy'], (0, 0))[0] else 'not met'} |" for f in fl["models"]]


def _others(f: dict[str, Any]) -> str:
    """Cores other processes used while the build was measured (above ~0.2: a shared CPU)."""
    o = f.get("incr_others")
    return f"{o:.2f}" if isinstance(o, int | float) else "-"


def rss_rows(label: str, r: dict[str, Any]) -> list[str]:
    """Goal 5: peak RSS after the smaller size and after the 10x one."""
    rss = {int(k): v for k, v in (r.get("rss") or {}).items()}
    if len(rss) < 2:
        return []
    a, b = sorted(rss)
    def cell(k: str) -> str:
        x, y = rss[a].get(k), rss[b].get(k)
        return f"{x:,.0f} → {y:,.0f} MiB ({y / x:.2f}x)" if x and y else "-"
    return [f"| {label} | {a:,} → {b:,} | {cell('python_mib')} | {cell('jvm_mib')} |"]


def ingest_rows(ing: dict[str, Any] | None) -> list[str]:
    """Goal 4 (and the ODS part of goal 1), from benchmarks/ods_ingest.py's JSON figures."""
    if not ing:
        return ["Not measured in this run (`benchmarks/ods_ingest.py` gave no figures)."]
    n, a, b, c = ing["events"], ing["a_seconds"], ing["b_seconds"], ing.get("c_seconds")
    rows = [f"{n:,} Debezium events over {ing['tables']} tables, one micro-batch each job:", "",
            "| job | seconds | events/s |", "|---|---:|---:|",
            f"| A: lake `run_ingest` | {a:.1f} | {n / a:,.0f} |", f"| B: plain JSON → Parquet write | {b:.1f} | {n / b:,.0f} |"]
    if c:
        rows.append(f"| C: the hand-written seed-004 job | {c:.1f} | {n / c:,.0f} |")
    rows += ["", f"lake / plain write: **{b / a:.2f}x** (target ≥ 0.4x: {'met' if b / a >= 0.4 else 'not met'})"]
    if c:
        rows.append(f"lake / hand-written job: **{c / a:.2f}x** (target ≥ 1.2x: {'met' if c / a >= 1.2 else 'not met'})")
    g = ing.get("growth") or []
    if len(g) >= 2:
        rows.append(f"ODS micro-batch of {g[0]['events']:,} events into {g[0]['rows']:,} → {g[1]['rows']:,} rows: "
                    f"{g[0]['seconds']:.1f} → {g[1]['seconds']:.1f} s, **{g[1]['seconds'] / g[0]['seconds']:.2f}x** (goal 1: ≤ 1.3x)")
    return rows


def details(paths: list[Path]) -> list[str]:
    """Each incremental run's own tables (benchmarks/incremental.py's section), one level down."""
    import re

    from benchmarks.incremental import load_results, markdown_section

    out = []
    for path in paths:
        r = load_results(path)
        body = re.sub(r"^### ", "##### ", markdown_section([r]).split("\n", 1)[1], flags=re.M)
        out += ["", f"#### The incremental run in detail: {_label(json.loads(path.read_text()))}", body.rstrip()]
    return out


def section(results: dict[str, dict[str, Any]], ingest: dict[str, Any] | None, paths: list[Path]) -> str:
    first = next(iter(results.values()))
    waited = ", ".join(f"{r['waited']:.0f} s" for r in results.values())
    lines = [SECTION, "", f"- Date: {first['date']}; machine: {'; '.join(f'{k} {v}' for k, v in first['machine'].items())}",
             "- Commands: " + "; ".join(f"`{r['command']}`" for r in results.values()),
             f"- Waited for other test runs before measuring: {waited}", "",
             "**Goal 1: cost follows the change** (incremental build seconds for the same events, tables 10x apart; target ≤ 1.3x):", "",
             "| layout | what | events | orders | seconds | other cores | growth | |", "|---|---|---:|---|---|---|---:|---|"]
    for label, r in results.items():
        lines += growth_rows(label, r)
    lines += ["", "**Goal 2: full / incremental** at the largest size measured, smallest change (full = lake's computation "
              "without its write, and a real `lake build` with it):", "",
              "| layout | model | change | incremental s | other cores | full (noop) | real full | target |", "|---|---|---|---:|---:|---:|---:|---|"]
    for label, r in results.items():
        lines += ratio_rows(label, r)
    lines += ["", "**Goal 3: fixed cost** (one changed row on 2,000-row tables, warm session):", "",
              "| layout | model | incremental s | other cores | target s | |", "|---|---|---:|---:|---:|---|"]
    for label, r in results.items():
        lines += floor_rows(label, r)
    lines += ["", "**Goal 4: ODS ingest** (benchmarks/ods_ingest.py):", ""] + ingest_rows(ingest)
    lines += ["", "**Goal 5: memory** (peak RSS, monotonic, after the smaller size and after the 10x one; the JVM's is "
              "bounded by its heap setting, the Python driver's by what is collected to it):", "",
              "| layout | orders | Python driver | JVM |", "|---|---|---|---|"]
    for label, r in results.items():
        lines += rss_rows(label, r)
    lines += details(paths)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--render", type=Path, action="append", default=None, help="no run: incremental.py JSON files, in LAYOUTS order")
    ap.add_argument("--ingest", type=Path, default=None, help="ods_ingest.py JSON figures")
    args = ap.parse_args(argv)
    py = sys.executable
    if args.render:
        paths = list(args.render)
        results = {_label(r): r for r in (json.loads(p.read_text()) for p in paths)}
        ingest = json.loads(args.ingest.read_text()) if args.ingest else None
    else:
        tmp = Path(tempfile.mkdtemp(prefix="lake-goals-"))
        results, paths = {}, []
        bucket = LAYOUTS["merge-on-read, bucket index (8)"]
        # Default models; merge-on-read bucket models; both and ods.orders so (without the project copies).
        for i, extra in enumerate(([], ["--model-layout", bucket], ["--model-layout", bucket, "--ods-layout", bucket, "--no-copy"])):
            out = tmp / f"incremental-{i}.json"
            cmd = [py, str(REPO / "benchmarks/incremental.py"), "--rows", str(args.rows), "--fractions", "0.001,0.01", "--results", str(out)]
            subprocess.run(cmd + extra, check=True)
            r = json.loads(out.read_text())
            results[_label(r)] = r
            paths.append(out)
        ing = tmp / "ingest.json"
        done = subprocess.run([py, str(REPO / "benchmarks/ods_ingest.py"), "--grow", str(args.rows // 10), "--results", str(ing)])
        ingest = json.loads(ing.read_text()) if done.returncode == 0 and ing.exists() else None
    text = section(results, ingest, paths)
    if args.out:
        write_markdown(args.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
