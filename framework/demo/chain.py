"""`lake demo --source mariadb` (`make demo-cdc`): the real chain for a newcomer.

MariaDB (Debian's package), a Kafka broker and Kafka Connect with Debezium's MariaDB connector
start on loopback ports in `<project>/out/cdc-demo/`; a shop database gets seed rows (the
snapshot) and three rounds of transactions (the second adds a column and widens a VARCHAR, the
third truncates a table and inserts two thirds of its keys again). After each round one `lake
run` cycle ingests what Debezium published and builds the models; at the end every ODS table and model is compared with
what MariaDB itself returns (framework.demo.oracle). Everything it started is stopped at the end,
also on errors and Ctrl-C. The demo's lake project (`lake.yaml`, `layers/`, `warehouse/`) stays
in that folder to explore; the services do not, so `lake sql` works there but `lake run` has no
broker to read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table as RichTable

from framework.demo.project import _clear, _locked, _ours, _refuse_foreign, _remove_ours
from framework.demo.shop import MODELS, TABLES, Shop, oracle_views, project_files
from framework.errors import LakeError
from framework.project.config import Project, load_project

if TYPE_CHECKING:
    from framework.demo.connect import DebeziumConnect
    from framework.demo.mariadb import MariaDB

CDC_DIR = Path("out") / "cdc-demo"
DATABASE, PREFIX = "shop", "shop"


def run_cdc_demo(project: Project, console: Console, events: int, seed: int, lock_timeout: float) -> None:
    """The demo (module docstring); `events`: transactions per round."""
    from framework.demo.broker import KafkaBroker
    from framework.demo.connect import DebeziumConnect
    from framework.demo.mariadb import MariaDB

    base = project.root / CDC_DIR
    for path in (base, base / "layers", base / "warehouse", base / "services"):
        _refuse_foreign(path)
    _ours(base)
    _remove_ours(base / "services", console)
    _remove_ours(base / "layers", console)
    services = _ours(base / "services")
    with KafkaBroker(services / "broker") as broker, MariaDB(services / "mariadb") as db:
        console.print(f"Kafka broker on {broker.bootstrap_servers}, MariaDB on 127.0.0.1:{db.port} (started in "
                      f"{broker.startup_seconds:.1f}s and {db.startup_seconds:.1f}s; logs in {services})", markup=False, highlight=False)
        demo = _write_project(base, broker.bootstrap_servers)
        shop = Shop(db, DATABASE, seed=seed)
        shop.create()
        console.print(f"created database {DATABASE} with {', '.join(TABLES)} and their seed rows (the snapshot)", markup=False, highlight=False)
        with _locked(demo, demo, console, lock_timeout), DebeziumConnect(services / "connect", broker.bootstrap_servers, db, prefix=PREFIX,
                                                                         databases=[DATABASE]) as connect:
            _clear(demo.warehouse.local, console)
            console.print(f"Kafka Connect with Debezium's MariaDB connector (REST {connect.rest}), started in {connect.startup_seconds:.1f}s",
                          markup=False, highlight=False)
            _rounds(demo, console, shop, connect, events)
        table, equal = _results(demo, db)
        console.print(table)
    if not equal:
        raise LakeError("lake's tables differ from MariaDB's (see the table above)",
                        fix=f"rerun with --debug; the services' logs are in {services}, Spark's in {demo.warehouse.local}/_lake/logs")
    console.print(f"every service is stopped; the demo project is {demo.root}: lake --project {demo.root} sql 'select * from dws.product_stats'",
                  markup=False, highlight=False)


def _write_project(base: Path, servers: str) -> Project:
    _ours(base / "layers")
    _ours(base / "warehouse")
    for rel, text in project_files(DATABASE, servers, PREFIX).items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return load_project(base)


def _rounds(demo: Project, console: Console, shop: Shop, connect: DebeziumConnect, events: int) -> None:
    from framework.ops.continuous import run_cycle
    from framework.runtime import terminal as report
    from framework.table.session import spark_session

    spark = spark_session(demo)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("the snapshot, then random transactions", lambda: None),
        ("ALTER TABLE customer ADD COLUMN tier; orders.note VARCHAR(20) -> VARCHAR(200)", shop.alter),
        ("TRUNCATE TABLE product, two thirds of it inserted again", shop.refill),
    ]
    for n, (label, step) in enumerate(steps, 1):
        console.rule(f"round {n}: {label} + {events} transactions")
        step()
        shop.changes(events)
        waited = connect.wait_caught_up()
        console.print(f"{shop.transactions} transactions committed in MariaDB so far; Debezium caught up in {waited:.1f}s",
                      markup=False, highlight=False)
        rec = run_cycle(spark, demo, [], [], ["demo", "--source", "mariadb"], on_result=report.model_printer(console))
        if rec.ingest is not None:
            report.print_ingest_summary(console, rec.ingest)
        if rec.status != "ok":
            raise LakeError(f"lake run failed in round {n}: {rec.error}", fix="rerun with --debug")


def _results(demo: Project, db: MariaDB) -> tuple[RichTable, bool]:
    from framework.demo.oracle import compare_all
    from framework.table.session import spark_session

    oracle_views(db, DATABASE)
    models = [name.replace("/", ".") for name in MODELS]
    out = RichTable(title="lake vs MariaDB (the ODS tables against SELECT * of the source, the models against their SQL run by MariaDB)",
                    title_justify="left")
    for col in ("table", "MariaDB rows", "lake rows", "equal"):
        out.add_column(col, justify="right" if "rows" in col else "left")
    comparisons = compare_all(spark_session(demo), demo.warehouse.local, db, DATABASE, list(TABLES), models)
    for c in comparisons:
        out.add_row(c.name, str(c.expected), str(c.actual), "[green]yes[/]" if c.equal else f"[red]no[/] {c.describe(2)}")
    return out, all(c.equal for c in comparisons)
