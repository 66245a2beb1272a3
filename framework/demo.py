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

import contextlib
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from framework import demo_data
from framework.catalog import quote_ident
from framework.config import Project
from framework.errors import LakeError
from framework.ods.batch import resolve_source_path
from models.config import FileSourceConfig, OdsTable

if TYPE_CHECKING:

    from pyspark.sql import SparkSession

    from models.records import BatchResult, IngestSummary, LockHolder

_NUMBERED = re.compile(r"^(\d{4})-.*\.json$")
DEMO_DIR = Path("out") / "demo"  # the demo's own project, under the project it is pointed at
KAFKA_DIR = Path("out") / "kafka-demo"
# Written into every directory lake creates for the demo; only directories carrying it are ever
# emptied or deleted, so a user's folder that happens to sit there is never touched.
MARKER = ".lake-demo"


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

    from framework.kafka_broker import KafkaBroker
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


# ------------------------------------------------------------------ the demo's own folders
@contextlib.contextmanager
def prepared(project: Project, console: Console, fresh: bool, lock_timeout: float) -> Iterator[Project]:
    """The demo's own project (see `demo_project`), its tables locked for the body of the `with`;
    with `fresh`, its CDC directory and warehouse emptied first, under those locks."""
    demo = demo_project(project, console, fresh)
    with _locked(demo, demo, console, lock_timeout):
        if fresh:
            _clear(_cdc_dir(demo), console)
            _clear(demo.warehouse, console)
        yield demo


def demo_project(project: Project, console: Console, fresh: bool) -> Project:
    """Set up `<project>/out/demo/` and load it: a `lake.yaml` with the project's spark, hudi,
    build and ods settings (warehouse `warehouse`, CDC from `cdc`), and in `layers/` the project's
    files declaring the seed tables plus the models built only from them. Nothing is written
    before every check has passed; nothing is deleted here but the demo's own `layers/` (--fresh)."""
    from framework.config import load_project

    seed = _declared_tables(project)
    files = _seed_files(project, seed)
    root = project.root / DEMO_DIR
    for path in (root, root / "layers", root / "cdc", root / "warehouse"):
        _refuse_foreign(path)
    _ours(root)
    if fresh or not (root / "layers").is_dir():
        _remove_ours(root / "layers", console)
        layers = _ours(root / "layers")
        for rel in files:
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(project.root / rel, dst)
        console.print(f"wrote {layers}: {len(files)} file(s) from {project.root / 'layers'}", markup=False, highlight=False)
    if fresh or not (root / "lake.yaml").is_file():
        _write_config(project, root / "lake.yaml")
    _ours(root / "cdc")
    _ours(root / "warehouse")
    demo = load_project(root)
    if demo.warehouse.resolve() != (root / "warehouse").resolve() or _cdc_dir(demo).resolve() != (root / "cdc").resolve():
        raise LakeError(f"{root / 'lake.yaml'} points `warehouse:` or `ods.source` outside {root}; the demo writes only inside its own folder",
                        fix="rerun with --fresh, which rewrites that lake.yaml")
    return demo


def _seed_files(project: Project, seed: dict[str, OdsTable]) -> list[Path]:
    """Project-relative files to copy: the YAML files declaring the seed tables, and each model
    (with its YAML) whose upstreams are seed tables or such models."""
    from framework.transform.loader import load_models

    tables = [seed[s] for s in demo_data.SOURCES]
    files = sorted({Path(project.ods_files[t.table_name]) for t in tables})
    models = load_models(project)
    have = {t.qualified_name for t in tables}
    chosen: list[str] = []
    grew = True
    while grew:
        ready = sorted(n for n, m in models.items() if n not in have and set(m.upstreams) <= have)
        have |= set(ready)
        chosen += ready
        grew = bool(ready)
    for name in chosen:
        m = models[name]
        files += [p.relative_to(project.root) for p in (m.path, m.config_path) if p is not None]
    return files


def _write_config(project: Project, path: Path) -> None:
    import yaml

    cfg = project.config
    data = {
        "name": "demo",
        "warehouse": "warehouse",
        "spark": cfg.spark.model_dump(mode="json"),
        "hudi": dict(cfg.hudi),
        "build": cfg.build.model_dump(mode="json"),
        "ods": {**cfg.ods.model_dump(mode="json", exclude={"source"}), "source": {"kind": "files", "path": "cdc", "format": "debezium-json"}},
    }
    head = (f"# Written by `lake demo` from the spark, hudi, build and ods settings of {project.root / 'lake.yaml'};\n"
            "# the demo's warehouse and CDC stay in this folder. `lake demo --fresh` rewrites this file.\n")
    path.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _refuse_foreign(path: Path) -> None:
    """Stop unless `path` is absent, an empty directory, or a directory the demo created (marked)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise LakeError(f"{path} is in the way of the demo and was not created by it (a {'link' if path.is_symlink() else 'file'})",
                        fix=f"move {path} away, then rerun `lake demo`")
    if path.is_dir() and not (path / MARKER).is_file() and any(path.iterdir()):
        raise LakeError(f"{path} exists and was not created by `lake demo` (it has no {MARKER} marker); "
                        "the demo never writes into or deletes what it did not create",
                        fix=f"move {path} away (or remove it yourself), then rerun `lake demo`")


def _ours(path: Path) -> Path:
    """Create (or adopt an empty) directory for the demo and mark it as the demo's."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    if not marker.is_file():
        marker.write_text("Created by `lake demo`; `lake demo --fresh` may delete what is in this directory.\n", encoding="utf-8")
    return path


def _remove_ours(path: Path, console: Console) -> None:
    """Delete a directory the demo created (it carries the marker), saying so; anything else stays."""
    if path.is_dir() and not path.is_symlink() and (path / MARKER).is_file():
        shutil.rmtree(path)
        console.print(f"removed {path}/", markup=False, highlight=False)


def _clear(path: Path, console: Console) -> None:
    """Empty a directory the demo created, except its marker and the lock files (`_lake/locks`,
    held by this run), naming each removed path."""
    if not (path.is_dir() and (path / MARKER).is_file()):
        return
    for entry in sorted(path.iterdir()):
        if entry.name == MARKER:
            continue
        if entry.name == "_lake" and entry.is_dir() and not entry.is_symlink():
            for sub in sorted(entry.iterdir()):
                if sub.name != "locks":
                    _delete(sub, console)
            continue
        _delete(entry, console)


def _delete(entry: Path, console: Console) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
        console.print(f"removed {entry}/", markup=False, highlight=False)
    else:
        entry.unlink()
        console.print(f"removed {entry}", markup=False, highlight=False)


@contextlib.contextmanager
def _locked(tables_of: Project, writes_to: Project, console: Console, timeout: float) -> Iterator[None]:
    """Hold the locks `lake run` takes (ingest checkpoint, every ODS table and model of
    `tables_of`) in the warehouse of `writes_to`, for the whole demo."""
    from framework.lock import hold, ingest_lock, table_lock
    from framework.ods.ingest import checkpoint_name
    from framework.paths import Layout
    from framework.transform.loader import load_models

    names = [ingest_lock(checkpoint_name(None)), *(table_lock(t.qualified_name) for t in tables_of.ods_tables),
             *(table_lock(n) for n in load_models(tables_of))]

    def stale(name: str, h: LockHolder) -> None:
        console.print(f"note: lock {name} was left by pid {h.pid} on {h.host} (`{h.command}`), which exited without releasing it; taken over",
                      markup=False, highlight=False)

    with hold(Layout(writes_to.warehouse).locks, names, command=shlex.join(["lake", *sys.argv[1:]]), timeout=timeout, on_stale=stale):
        yield


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
    from framework import report
    from framework.catalog import register_ods
    from framework.paths import Layout
    from framework.session import spark_session

    ods = _declared_tables(project)
    sim = demo_data.Simulator(seed, start=demo_data.DEFAULT_START + timedelta(days=number - 1), binlog_index=2 + number)
    spark = spark_session(project)
    printer = report.batch_printer(console)

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


def _build(spark: SparkSession, project: Project, console: Console, incremental: bool) -> bool:
    """Build every model of the project (full, then incremental); False when there are none."""
    from framework import report
    from framework.transform.loader import load_models
    from framework.transform.runner import build

    if not load_models(project):
        return False
    console.rule("lake build --incremental" if incremental else "lake build")
    results = build(spark, project, [], [], incremental, on_result=report.model_printer(console))
    report.print_build_summary(console, results)
    failed = [r for r in results if r.mode in ("failed", "skipped")]
    if failed:
        raise LakeError(f"the demo build failed: {failed[0].model}: {failed[0].reason}", fix="rerun with --debug; see <warehouse>/_lake/logs/spark.log")
    return True


# ------------------------------------------------------------------ project checks
def _declared_tables(project: Project) -> dict[str, OdsTable]:
    """The ODS declaration of each seed source table; the demo cannot run without all six."""
    by_source = {t.source: t for t in project.ods_tables}
    missing = [s for s in demo_data.SOURCES if s not in by_source]
    if missing:
        raise LakeError(
            f"the demo writes CDC for {', '.join(missing)}, which {project.root}/layers/ods/ does not declare",
            fix="run it in the lake repository (lake --project <repo> demo), or copy its layers/ods/test_db.yaml and salesdb.yaml",
        )
    return by_source


def _cdc_dir(project: Project) -> Path:
    src = project.config.ods.source
    if not isinstance(src, FileSourceConfig):
        raise LakeError(
            f"the demo writes CDC files, but ods.source.kind is {src.kind!r}",
            fix="run the demo in a project whose lake.yaml has `ods: {source: {kind: files, path: cdc}}`",
        )
    return resolve_source_path(project, src.path)


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

    return run_ingest(spark, project, on_batch=printer)


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
