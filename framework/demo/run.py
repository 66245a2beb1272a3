"""`lake demo`: simulated Debezium traffic on the seed tables, ingested in two rounds, then checked.

Round 1 is a snapshot plus random changes; round 2 adds a column to `test_db.user`
(`ALTER TABLE user ADD COLUMN age int`, seed 004) and more changes. After each round the ODS job
runs; at the end the seed's `dws.user_agg` query runs on the ODS table, and every ODS table is
compared row by row with the simulator's final source state, the invariant DESIGN.md promises.

The demo runs in its own project, `<project>/out/demo/` (`out/kafka-demo/` with --kafka), never in
the project's warehouse or CDC directory: pointed at a real project it once deleted both. Every
directory it creates carries a `.lake-demo` marker, and it empties or deletes only those.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from framework import demo as demo_data
from framework.commands.common import recorded
from framework.demo.project import (
    KAFKA_DIR,
    _cdc_dir,
    _clear,
    _declared_tables,
    _locked,
    _ours,
    _refuse_foreign,
    _remove_ours,
    prepared,
)
from framework.errors import LakeError
from framework.project.config import Project
from framework.runtime.history import settle_models
from framework.table.catalog import quote_ident
from models.config import OdsTable

if TYPE_CHECKING:

    from pyspark.sql import SparkSession

    from models.records import BatchResult, IngestSummary

_NUMBERED = re.compile(r"^(\d{4})-.*\.json$")

def run_demo(project: Project, console: Console, events: int, seed: int, fresh: bool, kafka: bool = False,
             lock_timeout: float = 30.0) -> None:
    """Generate, ingest and verify two rounds of CDC for the six seed tables, in the demo's own folder.

    The demo never writes into the project's own warehouse or CDC directory: it runs in the project
    `<project>/out/demo/` (`lake.yaml`, `layers/`, `cdc/`, `warehouse/`), which it sets up from the
    project's declarations of the seed tables and the models built only from them.

    Args:
        project: a project declaring the six seed source tables (checked before anything is written).
        console: where progress and results go.
        events: change events per round (on top of the snapshot in round 1).
        seed: makes the traffic reproducible.
        fresh: empty the demo's warehouse and CDC directory and rewrite its `lake.yaml` and `layers/`
            first; only directories carrying the demo marker are touched, and each removed path is printed.
        kafka: start a local Kafka broker, publish the events to it (one topic per table, keyed
            by primary key, as Debezium does) and ingest from Kafka into `out/kafka-demo/warehouse`.
        lock_timeout: how long to wait for another lake process writing the demo's tables.
    """
    if kafka:
        _run_kafka_demo(project, console, events, seed, lock_timeout)
        return
    with prepared(project, console, fresh, lock_timeout) as demo:
        cdc = _cdc_dir(demo)
        number = _next_file_number(cdc)
        if number > 1:
            console.print(
                f"--keep: CDC files up to {number - 1:04d}-* stay in {cdc}; rows earlier runs left may differ from this run's source",
                style="yellow", markup=False, highlight=False,
            )

        def emit(n: int, label: str, lines: list[str]) -> None:
            _write(console, cdc, number + n, label, lines)

        _rounds(demo, console, events, seed, number, emit)
    console.print(f"the demo project is {demo.root}; explore it with: lake --project {demo.root} sql 'show tables in ods'",
                  markup=False, highlight=False)


def _run_kafka_demo(project: Project, console: Console, events: int, seed: int, lock_timeout: float) -> None:
    """The same rounds through a real Kafka broker (KRaft, started here, stopped at the end)."""
    from dataclasses import replace

    from framework.demo.broker import KafkaBroker
    from models.config import KafkaSourceConfig

    _declared_tables(project)
    base = project.root / KAFKA_DIR
    for path in (base, base / "warehouse", base / "broker"):
        _refuse_foreign(path)
    _ours(base)
    warehouse = _ours(base / "warehouse")
    with _locked(project, replace(project, config=project.config.model_copy(update={"warehouse": str(warehouse)})), console, lock_timeout):
        _clear(warehouse, console)  # every run starts empty: the broker below is new
        _remove_ours(base / "broker", console)
        with KafkaBroker(_ours(base / "broker"), num_partitions=2) as broker:
            console.print(f"Kafka broker (KRaft) on {broker.bootstrap_servers}, started in {broker.startup_seconds:.1f}s; log {broker.log_file}",
                          markup=False, highlight=False)
            source = KafkaSourceConfig(kind="kafka", bootstrap_servers=broker.bootstrap_servers, topic_pattern=r"demo\..*")
            config = project.config.model_copy(update={"warehouse": str(warehouse), "ods": project.config.ods.model_copy(update={"source": source})})
            kproject = replace(project, config=config)

            def emit(_n: int, label: str, lines: list[str]) -> None:
                by_topic: dict[str, list[tuple[str | None, str | None]]] = {}
                for line in lines:
                    topic, key = _topic_and_key(line)
                    by_topic.setdefault(topic, []).append((key, line))
                for topic, msgs in sorted(by_topic.items()):
                    broker.produce(topic, msgs)
                console.print(f"published {len(lines)} {label} events to {len(by_topic)} topics ({', '.join(sorted(by_topic))})", markup=False, highlight=False)

            _rounds(kproject, console, events, seed, 1, emit)


def _topic_and_key(line: str) -> tuple[str, str]:
    """Debezium's topic (`<server>.<db>.<table>`) and message key (the primary key) of an event."""
    import json

    msg = json.loads(line)
    body = msg["payload"] if isinstance(msg.get("payload"), dict) else msg
    src = body["source"]
    image = body["before"] if body["op"] == "d" else body["after"]
    key = _KEYS[f"{src['db']}.{src['table']}"]
    return f"{src.get('name', 'demo')}.{src['db']}.{src['table']}", json.dumps({k: image[k] for k in key})


_KEYS = {t.qualified: t.key for t in demo_data.seed_tables()}


def _rounds(project: Project, console: Console, events: int, seed: int, number: int,
            emit: Callable[[int, str, list[str]], None]) -> None:
    from framework.runtime import terminal as report
    from framework.runtime.paths import Layout
    from framework.table.catalog import register_ods
    from framework.table.session import spark_session

    ods = _declared_tables(project)
    sim = demo_data.Simulator(seed, start=demo_data.DEFAULT_START + timedelta(days=number - 1), binlog_index=2 + number)
    spark = spark_session(project)
    printer = report.batch_printer(console)
    _test(spark, project, console)

    console.rule(f"round 1: snapshot of {len(sim.tables)} tables + {events} change events")
    emit(0, "snapshot", sim.snapshot())
    emit(1, "changes", sim.changes(events))
    report.print_ingest_summary(console, _ingest(spark, project, printer))
    models = _build(spark, project, console, incremental=False)

    console.rule(f"round 2: ALTER TABLE user ADD COLUMN age int + {events} change events")
    sim.add_column_user_age()
    emit(2, "changes-age", sim.changes(events))
    report.print_ingest_summary(console, _ingest(spark, project, printer))
    if models:
        _build(spark, project, console, incremental=True)

    console.rule("results")
    registered = set(register_ods(spark, Layout(project.warehouse)))
    user = ods[demo_data.USER].qualified_name
    if "dws.user_agg" in registered:
        console.print("dws.user_agg (seed 004), built incrementally:")
        report.print_rows(console, spark.sql("select num, device_model from dws.user_agg order by num desc, device_model"), "table", 20)
    elif user in registered:
        console.print(f"dws.user_agg (seed 004) on {user}:", markup=False, highlight=False)
        sql = f"select count(1) as num, device_model from {_quoted(user)} group by device_model order by num desc"
        report.print_rows(console, spark.sql(sql), "table", 20)
    console.print(_comparison(spark, sim, ods, registered))
    _pages(project, console)


def _pages(project: Project, console: Console) -> None:
    """Write the run report and the docs site of the demo project, and say where they are."""
    from framework.commands.docs import generate_docs, report_overview
    from framework.quality.report import report_dir, write_report
    from framework.runtime.paths import Layout

    runs = write_report(Layout(project.warehouse), report_dir(project), overview=report_overview(project)).parent / "index.html"
    docs = generate_docs(project)
    console.print(f"run report: {runs}\ndocs site:  {docs}\n(open them in a browser; `lake --project {project.root} docs serve` serves both)",
                  markup=False, highlight=False)


def _test(spark: SparkSession, project: Project, console: Console) -> None:
    """`lake test`: the models' unit tests (their YAML's `tests:`), before anything is built."""
    from framework.modeltest.cases import discover
    from framework.modeltest.render import print_result, summary
    from framework.modeltest.run import run_cases
    from framework.transform.runner import selection

    chosen = selection(project, [])
    cases = discover(project, chosen.models, chosen.chosen)
    if not cases:
        return
    console.rule("lake test: the models' unit tests, on given rows only")
    results = run_cases(spark, project, chosen.models, cases, on_result=lambda r: print_result(console, r))
    console.print(summary(results), markup=False, highlight=False)
    if any(r.status != "pass" for r in results):
        raise LakeError("the demo's unit tests failed (above)", fix="fix the model or its `tests:` in layers/, then rerun")


def _build(spark: SparkSession, project: Project, console: Console, incremental: bool) -> bool:
    """Build every model of the project (full, then incremental); False when there are none."""
    from framework.runtime import terminal as report
    from framework.transform.loader import load_models
    from framework.transform.runner import build

    if not load_models(project):
        return False
    args = ["build", "--incremental"] if incremental else ["build"]
    console.rule("lake " + " ".join(args))
    with recorded(project, "build", args) as rec:  # run history, as `lake build` leaves it (lake runs, lake report)
        results = build(spark, project, [], [], incremental, on_result=report.model_printer(console), run_id=rec.run_id)
        settle_models(rec, results)
    report.print_build_summary(console, results)
    failed = [r for r in results if r.mode in ("failed", "skipped")]
    if failed:
        raise LakeError(f"the demo build failed: {failed[0].model}: {failed[0].reason}", fix="rerun with --debug; see <warehouse>/_lake/logs/spark.log")
    return True


# ------------------------------------------------------------------ project checks
def _next_file_number(cdc: Path) -> int:
    """1 + the highest `NNNN-` prefix in the CDC directory, so kept files stay first in order."""
    numbers = [int(m.group(1)) for p in cdc.glob("*.json") if (m := _NUMBERED.match(p.name))] if cdc.is_dir() else []
    return max(numbers, default=0) + 1


# ------------------------------------------------------------------ rounds
def _write(console: Console, cdc: Path, number: int, label: str, lines: list[str]) -> None:
    path = demo_data.write(lines, cdc / f"{number:04d}-{label}.json")
    console.print(f"wrote {len(lines)} events to {path}", markup=False, highlight=False)


def _ingest(spark: SparkSession, project: Project, printer: Callable[[BatchResult], None]) -> IngestSummary:
    from framework.ods.ingest import run_ingest

    with recorded(project, "ingest", ["ingest"]) as rec:
        rec.ingest = summary = run_ingest(spark, project, on_batch=printer, run_id=rec.run_id)
    return summary


# ------------------------------------------------------------------ verification
def _comparison(spark: SparkSession, sim: demo_data.Simulator, ods: dict[str, OdsTable], registered: set[str]) -> RichTable:
    """Source rows vs ODS rows per table; `match` compares every column of every row."""
    out = RichTable(title="ODS vs source (simulated MySQL)", title_justify="left")
    for col in ("table", "source rows", "ods rows", "match"):
        out.add_column(col, justify="right" if "rows" in col else "left")
    for source in sim.tables:
        name = ods[source].qualified_name
        expected = _source_rows(sim, source)
        if name not in registered:
            out.add_row(Text(f"{source} → {name}"), str(len(expected)), "missing", "[red]no[/]")
            continue
        actual = _ods_rows(spark, sim.table(source), name)
        differ = len(expected ^ set(actual))
        if not differ and len(actual) == len(expected):
            verdict = "[green]yes[/]"
        elif differ:
            verdict = f"[red]no[/] ({differ} rows differ in a column or exist on one side only)"
        else:
            verdict = "[red]no[/] (duplicate rows in ODS)"
        out.add_row(Text(f"{source} → {name}"), str(len(expected)), str(len(actual)), verdict)
    return out


def _source_rows(sim: demo_data.Simulator, source: str) -> set[tuple[str | None, ...]]:
    table = sim.table(source)
    return {tuple(demo_data.text_value(c, row.get(c.name)) for c in table.columns) for row in sim.state(source).values()}


def _ods_rows(spark: SparkSession, table: demo_data.Table, name: str) -> list[tuple[str | None, ...]]:
    """The ODS table's live rows as text in the source's column order (absent columns NULL)."""
    present = set(spark.table(_quoted(name)).columns)
    exprs = [_as_text(c) if c.name in present else "CAST(NULL AS STRING)" for c in table.columns]
    rows = spark.sql(f"SELECT {', '.join(exprs)} FROM {_quoted(name)}").collect()
    return [tuple(r) for r in rows]


def _as_text(column: demo_data.Column) -> str:
    """SQL giving the same text as :func:`demo_data.text_value` (the session time zone is UTC)."""
    ref = quote_ident(column.name)
    if column.kind == "timestamp":
        return f"date_format({ref}, \"yyyy-MM-dd'T'HH:mm:ss'Z'\")"
    if column.kind == "datetime":
        return f"date_format({ref}, \"yyyy-MM-dd'T'HH:mm:ss\")"
    return f"CAST({ref} AS STRING)"


def _quoted(qualified: str) -> str:
    """`ods.user` as ods.`user` (USER is a keyword in some SQL modes)."""
    db, name = qualified.split(".", 1)
    return f"{db}.{quote_ident(name)}"
