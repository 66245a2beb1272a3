"""The real CDC chain the tests share: per test session one Kafka Connect worker (every Debezium
plugin; connectors added and removed over its REST API), one MariaDB server and one PostgreSQL
server (Debian's packages, data under pytest temp dirs), beside the session's Kafka broker. Each
test adds a connector for its own databases (MariaDB) or schemas (PostgreSQL) and topic prefix.

Nothing is simulated: the tests write SQL into the database and lake reads what Debezium publishes.
When a database or its Python client is missing, the tests that need it skip and say why
(`make install` installs them, the servers only when run as root).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from framework.demo.broker import KafkaBroker
from framework.demo.connect import Connector, ConnectWorker
from framework.errors import EnvironmentProblem


@dataclass
class Chain:
    """A database and the Kafka broker, running; `connector()` adds a Debezium connector to the
    session's Connect worker."""

    db: Any  # framework.demo.mariadb.MariaDB or framework.demo.postgres.Postgres
    broker: KafkaBroker
    worker: ConnectWorker
    work_dir: Path

    @contextlib.contextmanager
    def connector(self, prefix: str, databases: Sequence[str], **extra: str) -> Iterator[Connector]:
        """A connector capturing `databases` (schemas on PostgreSQL) into topics `<prefix>.…`;
        removed afterwards. `extra`: connector settings over the chain's."""
        with self.worker.connector(self.db, prefix=prefix, databases=databases, extra=extra) as c:
            yield c


def running_worker(work_dir: Path, broker: KafkaBroker) -> Iterator[ConnectWorker]:
    """Start one Connect worker beside `broker`, with Apicurio's Avro converter beside the
    Debezium plugins (the Avro chain's connectors use it); stop it afterwards, whatever happened."""
    from framework.runtime.jars import avro_converter_plugin

    with ConnectWorker(work_dir, broker.bootstrap_servers, plugins={"apicurio-avro": avro_converter_plugin()}) as worker:
        yield worker


def running_mariadb(work_dir: Path, broker: KafkaBroker, worker: ConnectWorker) -> Iterator[Chain]:
    """Start MariaDB; yield the chain; stop MariaDB afterwards, whatever happened."""
    from framework.demo.mariadb import MariaDB, executables

    try:
        executables()
        import pymysql  # noqa: F401
    except (EnvironmentProblem, ImportError) as e:
        pytest.skip(f"the real CDC chain needs MariaDB and PyMySQL: {e} (run `make install` as root)")
    with MariaDB(work_dir / "mariadb") as db:
        yield Chain(db, broker, worker, work_dir)


def running_postgres(work_dir: Path, broker: KafkaBroker, worker: ConnectWorker) -> Iterator[Chain]:
    """Start PostgreSQL; yield the chain; stop it afterwards, whatever happened."""
    from framework.demo.postgres import Postgres, bin_dir

    try:
        bin_dir()
        import pg8000  # noqa: F401
    except (EnvironmentProblem, ImportError) as e:
        pytest.skip(f"the PostgreSQL chain needs PostgreSQL and pg8000: {e} (run `make install` as root)")
    with Postgres(work_dir / "postgres") as db:
        yield Chain(db, broker, worker, work_dir)


def dead_letters(spark: Any, root: Path) -> list[tuple[str, str]]:
    """(location, reason) of every dead letter of the project at `root`."""
    from framework.project.config import load_project
    from framework.runtime.paths import Layout
    from framework.table import hudi

    path = Layout(load_project(root).warehouse).dead_letter
    if not hudi.table_exists(path):
        return []
    return [(r["loc"], r["reason"]) for r in hudi.read(spark, path).select("loc", "reason").collect()]
