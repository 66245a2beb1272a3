"""`lake demo --source mariadb|postgres` (`make demo-cdc`): the real chain for a newcomer.

The database (MariaDB or PostgreSQL, Debian's packages), a Kafka broker and Kafka Connect with
Debezium's connector for it start on loopback ports in `<project>/out/cdc-demo/`; a shop gets
seed rows (the snapshot) and three rounds of transactions (the second adds a column, the third
truncates a table and inserts two thirds of its keys again; PostgreSQL's rounds also update rows
whose large TOASTed values stay unchanged). After each round one `lake run` cycle ingests what
Debezium published and builds the models; at the end every ODS table and model is compared with
what the database itself returns (framework.demo.oracle). Everything it started is stopped at the
end, also on errors and Ctrl-C. The demo's lake project (`lake.yaml`, `layers/`, `warehouse/`)
stays in that folder to explore; the services do not, so `lake sql` works there but `lake run`
has no broker to read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from framework.demo.project import _clear, _locked, _ours, _refuse_foreign, _remove_ours
from framework.errors import LakeError
from framework.project.config import Project, load_project

CDC_DIR = Path("out") / "cdc-demo"
DATABASE, PREFIX = "shop", "shop"


@dataclass
class Kit:
    """What the demo needs of one database: its server, its shop and the rounds' steps."""

    label: str
    server: Callable[[Path], Any]
    shop: Callable[[Any, int], Any]
    files: Callable[[str], dict[str, str]]  # bootstrap servers -> the project's files
    views: Callable[[Any], None]
    tables: tuple[str, ...]
    models: list[str]
    steps: Callable[[Any], list[tuple[str, Callable[[], object]]]]


def _kit(source: str) -> Kit:
    if source == "postgres":
        from framework.demo import pgshop
        from framework.demo.postgres import Postgres

        def pg_steps(shop: Any) -> list[tuple[str, Callable[[], object]]]:
            return [("the snapshot, then random transactions and unchanged TOASTed values", shop.toast_cases),
                    ("ALTER TABLE account ADD COLUMN tier; unchanged TOASTed values of stored rows", lambda: (shop.toast_cases(), shop.alter())),
                    ("TRUNCATE TABLE item, two thirds of it inserted again", lambda: (shop.refill("item"), shop.toast_cases()))]

        return Kit("PostgreSQL", Postgres, lambda db, seed: pgshop.PgShop(db, DATABASE, seed=seed),
                   lambda servers: pgshop.project_files(DATABASE, servers, PREFIX), lambda db: pgshop.oracle_views(db, DATABASE),
                   pgshop.TABLES, [n.replace("/", ".") for n in pgshop.MODELS], pg_steps)
    from framework.demo import shop as maria
    from framework.demo.mariadb import MariaDB

    def maria_steps(shop: Any) -> list[tuple[str, Callable[[], object]]]:
        return [("the snapshot, then random transactions", lambda: None),
                ("ALTER TABLE customer ADD COLUMN tier; orders.note VARCHAR(20) -> VARCHAR(200)", shop.alter),
                ("TRUNCATE TABLE product, two thirds of it inserted again", shop.refill)]

    return Kit("MariaDB", MariaDB, lambda db, seed: maria.Shop(db, DATABASE, seed=seed),
               lambda servers: maria.project_files(DATABASE, servers, PREFIX), lambda db: maria.oracle_views(db, DATABASE),
               maria.TABLES, [n.replace("/", ".") for n in maria.MODELS], maria_steps)


def run_cdc_demo(project: Project, console: Console, events: int, seed: int, lock_timeout: float, source: str = "mariadb") -> None:
    """The demo (module docstring); `events`: transactions per round."""
    from framework.demo.broker import KafkaBroker
    from framework.demo.connect import ConnectWorker

    kit = _kit(source)
    base = project.root / CDC_DIR
    for path in (base, base / "layers", base / "warehouse", base / "services"):
        _refuse_foreign(path)
    _ours(base)
    _remove_ours(base / "services", console)
    _remove_ours(base / "layers", console)
    services = _ours(base / "services")
    with KafkaBroker(services / "broker") as broker, kit.server(services / source) as db:
        console.print(f"Kafka broker on {broker.bootstrap_servers}, {kit.label} on 127.0.0.1:{db.port} (started in "
                      f"{broker.startup_seconds:.1f}s and {db.startup_seconds:.1f}s; logs in {services})", markup=False, highlight=False)
        demo = _write_project(base, kit.files(broker.bootstrap_servers))
        shop = kit.shop(db, seed)
        shop.create()
        console.print(f"created {DATABASE} with {', '.join(kit.tables)} and their seed rows (the snapshot)", markup=False, highlight=False)
        with _locked(demo, demo, console, lock_timeout), ConnectWorker(services / "connect", broker.bootstrap_servers) as worker, \
                worker.connector(db, prefix=PREFIX, databases=[DATABASE]) as connect:
            _clear(demo.warehouse.local, console)
            console.print(f"Kafka Connect with Debezium's {kit.label} connector (REST {worker.rest}), started in {worker.startup_seconds:.1f}s",
                          markup=False, highlight=False)
            _rounds(demo, console, shop, connect, events, kit.steps(shop), source)
        table, equal = _results(demo, db, kit)
        console.print(table)
    if not equal:
        raise LakeError(f"lake's tables differ from {kit.label}'s (see the table above)",
                        fix=f"rerun with --debug; the services' logs are in {services}, Spark's in {demo.warehouse.local}/_lake/logs")
    first = kit.models[-1]
    console.print(f"every service is stopped; the demo project is {demo.root}: lake --project {demo.root} sql 'select * from {first}'",
                  markup=False, highlight=False)


def _write_project(base: Path, files: dict[str, str]) -> Project:
    _ours(base / "layers")
    _ours(base / "warehouse")
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return load_project(base)


def _rounds(demo: Project, console: Console, shop: Any, connect: Any, events: int, steps: list[tuple[str, Callable[[], object]]],
            source: str) -> None:
    from framework.ops.continuous import run_cycle
    from framework.runtime import terminal as report
    from framework.table.session import spark_session

    spark = spark_session(demo)
    for n, (label, step) in enumerate(steps, 1):
        console.rule(f"round {n}: {label} + {events} transactions")
        step()
        shop.changes(events)
        waited = connect.wait_caught_up()
        console.print(f"{shop.transactions} transactions committed so far; Debezium caught up in {waited:.1f}s",
                      markup=False, highlight=False)
        rec = run_cycle(spark, demo, [], [], ["demo", "--source", source], on_result=report.model_printer(console))
        if rec.ingest is not None:
            report.print_ingest_summary(console, rec.ingest)
        if rec.status != "ok":
            raise LakeError(f"lake run failed in round {n}: {rec.error}", fix="rerun with --debug")


def _results(demo: Project, db: Any, kit: Kit) -> tuple[RichTable, bool]:
    from framework.demo.oracle import compare_all
    from framework.table.session import spark_session

    kit.views(db)
    out = RichTable(title=f"lake vs {kit.label} (the ODS tables against SELECT * of the source, the models against their SQL run by {kit.label})",
                    title_justify="left")
    for col in ("table", f"{kit.label} rows", "lake rows", "equal"):
        out.add_column(col, justify="right" if "rows" in col else "left")
    comparisons = compare_all(spark_session(demo), demo.warehouse.local, db, DATABASE, list(kit.tables), kit.models)
    for c in comparisons:
        out.add_row(c.name, str(c.expected), str(c.actual), "[green]yes[/]" if c.equal else f"[red]no[/] {c.describe(2)}")
    return out, all(c.equal for c in comparisons)
