"""Source-to-DWS freshness of `lake run --continuous` under a steady CDC stream.

A producer thread plays the demo's Debezium MySQL simulator in real time: every `--every`
seconds it writes one CDC file of `--rate * --every` events whose `source.ts_ms` is the wall
clock at writing (binlog positions, which decide ordering, are untouched). Meanwhile the main
thread runs lake's continuous loop (ingest, then build incrementally the models the new events
reach) on the demo project's tables and models. Afterwards each event's latency to each DWS model
is the commit time of that model in the cycle that ingested the event minus the event's source
time — taken from the run records lake stores (`ingest` event-time range per cycle, model
`committed_at`), not from the producer's clock alone.

    python benchmarks/freshness.py --seconds 240 --out BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, write_markdown  # noqa: E402
from models.config import BuildSettings  # noqa: E402

SECTION = "## Freshness: source event → DWS commit under a steady stream (benchmarks/freshness.py)"
REPO = Path(__file__).resolve().parent.parent
DEFAULT_RECOMPUTE = BuildSettings.model_fields["recompute_below_mib"].default


def _restamp(line: str, ms: int) -> str:
    """Set the event's source and envelope time to `ms` (ordering uses the binlog position)."""
    msg = json.loads(line)
    body = msg["payload"] if "payload" in msg and isinstance(msg["payload"], dict) else msg
    body["source"]["ts_ms"] = ms
    body["ts_ms"] = ms
    return json.dumps(msg, separators=(",", ":"))


class Producer(threading.Thread):
    """Writes one CDC file every `every` seconds (atomically: written beside, then renamed in)."""

    def __init__(self, sim: Any, cdc: Path, staging: Path, rate: float, every: float, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.sim, self.cdc, self.staging, self.rate, self.every, self.stop = sim, cdc, staging, rate, every, stop
        self.files: list[tuple[float, int]] = []  # (source time, events)

    def run(self) -> None:
        n = 0
        nxt = time.time()
        while not self.stop.is_set():
            lines = self.sim.changes(max(1, round(self.rate * self.every)))
            now = time.time()
            ms = int(now * 1000)
            n += 1
            tmp = self.staging / f"{n:06d}.json"
            tmp.write_text("\n".join(_restamp(x, ms) for x in lines) + "\n")
            os.utime(tmp, (now, now))
            os.replace(tmp, self.cdc / tmp.name)
            self.files.append((ms / 1000, len(lines)))
            nxt += self.every
            self.stop.wait(max(0.0, nxt - time.time()))


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    i = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[i]


def latencies(records: list[Any], files: list[tuple[float, int]], model: str) -> tuple[list[float], int]:
    """Per event: commit time of `model` in the cycle that ingested its file minus its source
    time; events of cycles where the model was not committed are counted as missing."""
    out: list[float] = []
    missing = 0
    for rec in records:
        if rec.ingest is None:
            continue
        stamps = [t for t in rec.ingest.totals().values() if t.event_ts_min is not None]
        if not stamps:
            continue
        lo = min(t.event_ts_min for t in stamps).timestamp() - 0.0005  # type: ignore[union-attr]
        hi = max(t.event_ts_max for t in stamps).timestamp() + 0.0005  # type: ignore[union-attr]
        committed = next((m.committed_at for m in rec.models if m.model == model and m.committed_at), None)
        for ts, n in files:
            if lo <= ts <= hi:
                if committed is None:
                    missing += n
                else:
                    out += [committed.timestamp() - ts] * n
    return out, missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seconds", type=float, default=240, help="how long the stream runs")
    ap.add_argument("--rate", type=float, default=20, help="CDC events per second")
    ap.add_argument("--every", type=float, default=2, help="seconds between CDC files")
    ap.add_argument("--trigger", type=int, default=10, help="lake run --continuous --trigger (seconds)")
    ap.add_argument("--warmup-events", type=int, default=2000, help="snapshot + changes ingested and built before the stream")
    ap.add_argument("--recompute-below-mib", type=float, default=None,
                    help="build.recompute_below_mib for the run (default: lake's default, not the demo lake.yaml's 0)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--note", default=None)
    args = ap.parse_args(argv)
    command = "python benchmarks/freshness.py " + " ".join(sys.argv[1:] if argv is None else argv)

    from framework.demo import Simulator
    from framework.ops.continuous import run_continuous
    from framework.project.config import load_project
    from framework.table.session import spark_session

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-fresh-"))
    try:
        cfg = yaml.safe_load((REPO / "lake.yaml").read_text())
        cfg.pop("build", None)
        if args.recompute_below_mib is not None:
            cfg["build"] = {"recompute_below_mib": args.recompute_below_mib}
        (tmp / "lake.yaml").write_text(yaml.safe_dump(cfg))
        shutil.copytree(REPO / "layers", tmp / "layers")
        cdc, staging = tmp / "cdc", tmp / "staging"
        cdc.mkdir()
        staging.mkdir()
        sim = Simulator(seed=3)
        (cdc / "000000-snapshot.json").write_text("\n".join(sim.snapshot() + sim.changes(args.warmup_events)) + "\n")
        project = load_project(tmp)
        limit = project.config.build.recompute_below_mib
        spark = spark_session(project)
        t0 = time.perf_counter()
        run_continuous(spark, project, [], [], ["bench"], trigger_seconds=0, max_cycles=1)
        warm = time.perf_counter() - t0
        print(f"warm-up (snapshot ingest + full builds): {warm:.1f}s", flush=True)
        stop_stream, stop_lake = threading.Event(), threading.Event()
        producer = Producer(sim, cdc, staging, args.rate, args.every, stop_stream)
        records: list[Any] = []

        def cycle(rec: Any) -> None:
            records.append(rec)
            built = sum(1 for m in rec.models if m.committed_at)
            print(f"cycle {len(records)}: {rec.ingest.events if rec.ingest else 0} events, {built} models "
                  f"in {(rec.finished_at - rec.started_at).total_seconds():.1f}s: "
                  + ", ".join(f"{m.model} {m.mode} {m.seconds:.1f}s" for m in rec.models), flush=True)
            for m in rec.models:
                if m.mode == "failed":
                    print(f"  {m.model} failed: {m.error or m.reason}", flush=True)

        producer.start()
        timer = threading.Timer(args.seconds, lambda: (stop_stream.set(), stop_lake.set()))
        timer.start()
        started = datetime.now(timezone.utc)
        run_continuous(spark, project, [], [], ["bench"], trigger_seconds=args.trigger, on_cycle=cycle, stop_event=stop_lake)
        producer.join()
        # Drain: one more cycle picks up what the producer wrote during the last one.
        run_continuous(spark, project, [], [], ["bench"], trigger_seconds=0, max_cycles=1, on_cycle=cycle)
        wall = (datetime.now(timezone.utc) - started).total_seconds()
        dws = sorted(m.name for m in __import__("framework.transform.runner", fromlist=["load"]).load(project)[0].values() if m.layer == "dws")
        produced = sum(n for _t, n in producer.files)
        rows = []
        for model in dws:
            lat, missing = latencies(records, producer.files, model)
            rows.append({"model": model, "events": len(lat), "missing": missing, "p50": percentile(lat, 0.5),
                         "p95": percentile(lat, 0.95), "max": max(lat) if lat else float("nan")})
        cycles = [(r.finished_at - r.started_at).total_seconds() for r in records]
        result = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "machine": machine_info(), "command": command,
            "rate": args.rate, "every": args.every, "trigger": args.trigger, "seconds": args.seconds, "produced": produced,
            "files": len(producer.files), "cycles": len(records), "cycle_p50": percentile(cycles, 0.5),
            "cycle_max": max(cycles) if cycles else 0.0, "warm": warm, "wall": wall, "rows": rows,
            "models": len(__import__("framework.transform.runner", fromlist=["load"]).load(project)[0]),
            "recompute_below_mib": limit,
            "modes": dict(Counter(m.mode for r in records for m in r.models)),
        }
        text = markdown_section(result, args.note)
        print(text)
        if args.out:
            write_markdown(args.out, text)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown_section(r: dict[str, Any], note: str | None) -> str:
    lines = [
        SECTION,
        "",
        f"- Date: {r['date']}",
        "- Machine: " + "; ".join(f"{k} {v}" for k, v in r["machine"].items()),
        f"- Command: `{r['command']}`",
        f"- Stream: the demo's six tables (Debezium MySQL simulator), {r['rate']:g} events/s in one file every "
        f"{r['every']:g} s for {r['seconds']:g} s ({r['produced']:,} events in {r['files']} files); "
        f"`lake run --continuous --trigger {r['trigger']}s` over all {r['models']} demo models, after a warm-up cycle "
        f"(snapshot ingest + full builds, {r['warm']:.0f} s, not measured).",
        f"- Builds: `build.recompute_below_mib: {r['recompute_below_mib']:g}`"
        + (" (lake's default)" if r["recompute_below_mib"] == DEFAULT_RECOMPUTE else "")
        + "; model builds by mode: " + ", ".join(f"{k} {v}" for k, v in sorted(r["modes"].items())) + ".",
        f"- Cycles: {r['cycles']}, each ingest + incremental builds of the affected models: median {r['cycle_p50']:.1f} s, "
        f"longest {r['cycle_max']:.1f} s.",
        "",
        "| DWS model | events measured | p50 latency (s) | p95 latency (s) | max (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in r["rows"]:
        lines.append(f"| {row['model']} | {row['events']:,}" + (f" (+{row['missing']} not built)" if row["missing"] else "")
                     + f" | {row['p50']:.1f} | {row['p95']:.1f} | {row['max']:.1f} |")
    worst = max((row["p95"] for row in r["rows"]), default=float("nan"))
    lines += ["", f"Target p95 ≤ 60 s: worst p95 {worst:.1f} s — " + ("met." if worst <= 60 else "**missed**.")]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
