"""Freshness through the real chain: MariaDB commit -> Debezium -> Kafka -> `lake run --continuous`
-> the row visible in a DWS model.

MariaDB, a Kafka broker and Kafka Connect with Debezium's MariaDB connector run on loopback (as in
tests/cdc_chain.py). The shop of framework/demo/shop.py gets its seed rows and a warm-up cycle
(snapshot ingest and full builds, not measured). Then a writer thread commits a steady stream of
transactions, each inserting one order (ids increasing) and, every other time, updating a random
order, customer or product; it notes the wall-clock time each COMMIT returned. Meanwhile lake's
continuous loop runs in this process. After each cycle in which `dws.product_stats` committed, its
rows are read: order X (product p) is visible from the first such commit whose row p has
`last_order_id >= X` (ids only grow and Kafka keeps a table's order, so a later order of p being
there means X is too). Latency = that commit's time minus X's COMMIT time; both clocks are this
machine's.

    python benchmarks/cdc_freshness.py --seconds 180 --out BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, write_markdown  # noqa: E402
from benchmarks.freshness import percentile  # noqa: E402

SECTION = "## Freshness through the real chain: MariaDB commit → DWS row (benchmarks/cdc_freshness.py)"
MODEL = "dws.product_stats"


class Writer(threading.Thread):
    """Commits `rate` transactions per second until stopped; `commits[order id] = (pid, time)`."""

    def __init__(self, shop: Any, rate: float, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.shop, self.rate, self.stop = shop, rate, stop
        self.commits: dict[int, tuple[int, float]] = {}

    def run(self) -> None:
        shop, nxt = self.shop, time.time()
        while not self.stop.is_set():
            key = shop.next_id["orders"]
            row = shop.row("orders", key)
            statements = [shop.insert("orders", row)]
            if shop.rnd.random() < 0.5:
                table = shop.rnd.choice(["orders", "customer", "product"])
                statements.append(shop.update(table, shop.rnd.choice(sorted(shop.keys[table]))))
            shop.run(statements)
            self.commits[key] = (row["pid"], time.time())
            nxt += 1 / self.rate
            self.stop.wait(max(0.0, nxt - time.time()))


def visible_at(states: list[tuple[float, dict[int, int]]], commits: dict[int, tuple[int, float]]) -> tuple[list[float], int]:
    """Latency of each committed order to the first model state that shows it; and how many never showed."""
    out, missing = [], 0
    for key, (pid, at) in commits.items():
        seen = next((t for t, state in states if state.get(pid, -1) >= key), None)
        if seen is None:
            missing += 1
        else:
            out.append(seen - at)
    return out, missing


def _chain(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    from framework.demo.broker import KafkaBroker
    from framework.demo.connect import DebeziumConnect
    from framework.demo.mariadb import MariaDB
    from framework.demo.shop import Shop, project_files
    from framework.ops.continuous import run_continuous
    from framework.project.config import load_project
    from framework.runtime.paths import Layout
    from framework.table import hudi
    from framework.table.session import spark_session

    with KafkaBroker(tmp / "broker") as broker, MariaDB(tmp / "mariadb") as db:
        for rel, text in project_files("shop", broker.bootstrap_servers, "shop").items():
            (tmp / "project" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / "project" / rel).write_text(text, encoding="utf-8")
        shop = Shop(db, "shop", seed=3)
        shop.create(customers=200, products=40, orders=2000)
        project = load_project(tmp / "project")
        spark = spark_session(project)
        model_path = Layout(project.warehouse).table(MODEL)
        states: list[tuple[float, dict[int, int]]] = []
        cycles: list[float] = []

        def cycle(rec: Any) -> None:
            cycles.append((rec.finished_at - rec.started_at).total_seconds())
            built = next((m for m in rec.models if m.model == MODEL and m.committed_at), None)
            if built is not None:
                rows = hudi.read(spark, model_path).select("pid", "last_order_id").collect()
                states.append((built.committed_at.timestamp(), {r["pid"]: r["last_order_id"] for r in rows}))
            print(f"cycle {len(cycles)}: {rec.ingest.events if rec.ingest else 0} messages, {cycles[-1]:.1f}s: "
                  + ", ".join(f"{m.model} {m.mode} {m.seconds:.1f}s" for m in rec.models), flush=True)

        with DebeziumConnect(tmp / "connect", broker.bootstrap_servers, db, prefix="shop", databases=["shop"]) as connect:
            connect.wait_caught_up()
            t0 = time.perf_counter()
            run_continuous(spark, project, [], [], ["bench"], trigger_seconds=0, max_cycles=1)
            warm = time.perf_counter() - t0
            print(f"warm-up (snapshot ingest + full builds): {warm:.1f}s", flush=True)
            stop_writer, stop_lake = threading.Event(), threading.Event()
            writer = Writer(shop, args.rate, stop_writer)
            load = os.getloadavg()
            writer.start()
            timer = threading.Timer(args.seconds, lambda: (stop_writer.set(), stop_lake.set()))
            timer.start()
            run_continuous(spark, project, [], [], ["bench"], trigger_seconds=args.trigger, on_cycle=cycle, stop_event=stop_lake)
            writer.join()
            connect.wait_caught_up()
            run_continuous(spark, project, [], [], ["bench"], trigger_seconds=0, max_cycles=1, on_cycle=cycle)  # drain
        lat, missing = visible_at(states, writer.commits)
        return {"warm": warm, "cycles": cycles, "latencies": lat, "missing": missing, "commits": len(writer.commits),
                "load_start": load, "load_end": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seconds", type=float, default=180, help="how long the stream runs")
    ap.add_argument("--rate", type=float, default=5, help="MariaDB transactions per second")
    ap.add_argument("--trigger", type=int, default=10, help="lake run --continuous --trigger (seconds)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--note", default=None)
    args = ap.parse_args(argv)
    command = "python benchmarks/cdc_freshness.py " + " ".join(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="lake-bench-cdc-") as tmp:
        r = _chain(Path(tmp), args)
    r.update(date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), machine=machine_info(), command=command, args=vars(args))
    text = markdown_section(r, args.note)
    print(text)
    if args.out:
        write_markdown(args.out, text)
    return 0


def markdown_section(r: dict[str, Any], note: str | None) -> str:
    lat, a = r["latencies"], r["args"]
    p95 = percentile(lat, 0.95)
    lines = [
        SECTION, "",
        f"- Date: {r['date']}",
        "- Machine: " + "; ".join(f"{k} {v}" for k, v in r["machine"].items()),
        f"- Load average (1, 5, 15 min) when the stream started: {', '.join(f'{x:.2f}' for x in r['load_start'])}; "
        f"when it ended: {', '.join(f'{x:.2f}' for x in r['load_end'])} (other jobs share the 2 cores).",
        f"- Command: `{r['command']}`",
        f"- Chain: MariaDB 10.11 (ROW binlog) → Debezium MariaDB connector 2.7.0 in Kafka Connect standalone → Kafka 3.9 → "
        f"`lake run --continuous --trigger {a['trigger']}s` (Kafka source, lake's default build settings) over the shop's "
        f"three tables and three models; warm-up cycle (snapshot ingest + full builds) {r['warm']:.0f} s, not measured.",
        f"- Stream: {a['rate']:g} transactions/s for {a['seconds']:g} s ({r['commits']:,} orders inserted, half the "
        f"transactions also update an order, customer or product); {len(r['cycles'])} cycles, median "
        f"{percentile(r['cycles'], 0.5):.1f} s, longest {max(r['cycles'], default=0):.1f} s.",
        "",
        "| DWS model | orders measured | p50 (s) | p95 (s) | max (s) |",
        "|---|---:|---:|---:|---:|",
        f"| {MODEL} | {len(lat):,}" + (f" (+{r['missing']} never visible)" if r["missing"] else "")
        + f" | {percentile(lat, 0.5):.1f} | {p95:.1f} | {max(lat, default=float('nan')):.1f} |",
        "",
        f"Target p95 ≤ 60 s from the MariaDB commit: p95 {p95:.1f} s — " + ("met." if p95 <= 60 else "**missed**."),
    ]
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
