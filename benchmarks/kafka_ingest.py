"""ODS ingest from Kafka against ingest from files, for the same Debezium events.

The demo's MySQL simulator generates a snapshot plus changes of its six tables. The events are
written once as CDC files and published once to a local Kafka broker (KRaft, 3 partitions per
topic, one topic per table, keyed by primary key as Debezium does); then `lake ingest --once`
runs from each source into its own empty warehouse, in one SparkSession, files first and Kafka
second, then files again (the first run pays Spark's warm-up). Both warehouses are checked equal.

    python benchmarks/kafka_ingest.py --events 200000 --out BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import machine_info, write_markdown  # noqa: E402

SECTION = "## ODS ingest: Kafka source vs file source (benchmarks/kafka_ingest.py)"
REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--events", type=int, default=200_000, help="change events on top of the snapshot")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    command = "python benchmarks/kafka_ingest.py " + " ".join(sys.argv[1:] if argv is None else argv)

    from framework.demo import Simulator
    from framework.demo.broker import KafkaBroker
    from framework.demo.run import _topic_and_key
    from framework.ods.ingest import run_ingest
    from framework.project.config import load_project
    from framework.table.session import spark_session
    from models.config import KafkaSourceConfig

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-kafka-"))
    try:
        shutil.copy(REPO / "lake.yaml", tmp / "lake.yaml")
        shutil.copytree(REPO / "layers" / "ods", tmp / "layers" / "ods")
        (tmp / "cdc").mkdir()
        sim = Simulator(seed=11)
        t0 = time.perf_counter()
        lines = sim.snapshot() + sim.changes(args.events)
        chunk = 10_000
        for i in range(0, len(lines), chunk):
            (tmp / "cdc" / f"{i // chunk:04d}.json").write_text("\n".join(lines[i:i + chunk]) + "\n")
        gen = time.perf_counter() - t0
        project = load_project(tmp)
        spark = spark_session(project)
        with KafkaBroker(tmp / "broker", num_partitions=args.partitions) as broker:
            t0 = time.perf_counter()
            by_topic: dict[str, list[tuple[str | None, str | None]]] = {}
            for line in lines:
                topic, key = _topic_and_key(line)
                by_topic.setdefault(topic, []).append((key, line))
            for topic in sorted(by_topic):
                broker.create_topic(topic, partitions=args.partitions)
                broker.produce(topic, by_topic[topic])
            publish = time.perf_counter() - t0
            source = KafkaSourceConfig(kind="kafka", bootstrap_servers=broker.bootstrap_servers, topic_pattern=r"demo\..*")

            def variant(name: str, kafka: bool) -> tuple[Any, float]:
                ods = project.config.ods.model_copy(update={"source": source}) if kafka else project.config.ods
                cfg = project.config.model_copy(update={"warehouse": str(tmp / f"wh-{name}"), "ods": ods})
                p = replace(project, config=cfg)
                t = time.perf_counter()
                run_ingest(spark, p)
                return p, time.perf_counter() - t

            runs: dict[str, float] = {}
            projects: dict[str, Any] = {}
            for name, kafka in (("files-warmup", False), ("kafka", True), ("files", False)):
                projects[name], runs[name] = variant(name, kafka)
                print(f"{name}: {runs[name]:.1f}s", flush=True)
        from framework.runtime.paths import Layout
        from framework.table import hudi

        equal = True
        for t in project.ods_tables:
            rows = []
            for name in ("kafka", "files"):
                df = hudi.read(spark, Layout(projects[name].warehouse).table(t.qualified_name))
                cols = sorted(c for c in df.columns if not c.startswith("_hoodie") and c not in ("_ingested_at", "_source", "_seq"))
                rows.append(df.select(*cols))
            equal &= rows[0].exceptAll(rows[1]).isEmpty() and rows[1].exceptAll(rows[0]).isEmpty()
        n = len(lines)
        r = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "machine": machine_info(), "command": command,
             "events": n, "topics": len(by_topic), "partitions": args.partitions, "gen": gen, "publish": publish,
             "runs": runs, "equal": equal}
        text = markdown_section(r)
        print(text)
        if args.out:
            write_markdown(args.out, text)
        return 0 if equal else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown_section(r: dict[str, Any]) -> str:
    n, runs = r["events"], r["runs"]
    k, f = runs["kafka"], runs["files"]
    return "\n".join([
        SECTION,
        "",
        f"- Date: {r['date']}",
        "- Machine: " + "; ".join(f"{key} {v}" for key, v in r["machine"].items()),
        f"- Command: `{r['command']}`",
        f"- Input: {n:,} Debezium MySQL envelopes with schema blocks (the demo simulator's snapshot + changes of six tables), "
        f"as {(n + 9_999) // 10_000} CDC files and as {r['topics']} Kafka topics × {r['partitions']} partitions on a local KRaft broker "
        f"(published in {r['publish']:.0f} s with confluent-kafka, not measured). Each run: `lake ingest --once` into an empty warehouse, same SparkSession.",
        "",
        "| source | seconds | events/s |",
        "|---|---:|---:|",
        f"| files (first run, includes warm-up) | {runs['files-warmup']:.1f} | {n / runs['files-warmup']:,.0f} |",
        f"| Kafka | {k:.1f} | {n / k:,.0f} |",
        f"| files | {f:.1f} | {n / f:,.0f} |",
        "",
        f"Kafka / files time ratio: **{k / f:.2f}×**. The ODS tables of both runs are equal: {'yes' if r['equal'] else '**no**'}.",
    ]) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
