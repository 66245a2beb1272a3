"""Shared fixtures: one SparkSession (with the Hudi bundle), one Kafka broker, one Hive metastore,
and for the real CDC chain one Kafka Connect worker, one MariaDB, one PostgreSQL and one schema
registry per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from framework.demo.broker import KafkaBroker
    from framework.demo.connect import ConnectWorker
    from framework.demo.metastore import HiveMetastore
    from framework.demo.registry import ApicurioRegistry
    from tests.cdc_chain import Chain
    from tests.s3_fixture import S3Server

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO.parent / "shared" / "fixtures"
# LAKE_STRICT_SKIPS=1 (make test, CI): a skip for a missing install fails (tests/strict_skips.py).
# A `lake` command printing "Internal error:" fails its test (tests/no_internal_error.py).
pytest_plugins = ["tests.strict_skips", "tests.no_internal_error"]

# Every Spark driver a test starts in a `lake` subprocess compiles with C1 only: it lives for
# seconds on small data, and C2's compiler threads cost more CPU than they save (a small Hudi
# upsert job: 76 s of JVM CPU with C2, 46 s without). The session's own SparkSession (below) lives
# for the whole run and keeps C2. The service JVMs (broker, Connect, metastore) start with C1 too.
# And the serial collector: G1's concurrent threads and barriers cost a short-lived driver on small
# data ~8 % of its CPU (a `lake ingest --once` of seven events: 29.2 -> 26.9 s of JVM CPU, two runs each).
SUBPROCESS_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("LAKE_JVM_OPTIONS", SUBPROCESS_JVM_OPTIONS)


# `make test` runs the suite on two pytest-xdist workers (`-n 2 --dist loadfile --no-loadscope-reorder`): much of a test's
# time is a JVM starting, a service polling or Python driving Spark, which leaves a core idle. A
# file is one unit (its tests may build on each other through module fixtures); each worker starts
# the services its files need. Slow files go first so that neither worker is left with a long one
# at the end. (Not `loadgroup`: pytest 9 ignores the node id suffix xdist 3.8 groups by.)
def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank: dict[str, int] = {}  # 0: a slow end-to-end file, 1: a Spark file, 2: the rest
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark" in names:
            item.add_marker(pytest.mark.spark)
        if "kafka_broker" in names:
            item.add_marker(pytest.mark.kafka)
        mine = 0 if item.get_closest_marker("slow") else 1 if "spark" in names else 2
        rank[_file(item)] = min(rank.get(_file(item), 2), mine)
    items.sort(key=lambda i: rank[_file(i)])  # stable: file order kept within each rank


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from framework.project.config import load_project
    from framework.table.session import spark_session

    base = tmp_path_factory.mktemp("spark-session")
    (base / "lake.yaml").write_text(
        "name: tests\nwarehouse: wh\nspark:\n  master: 'local[2]'\n  conf: {spark.sql.shuffle.partitions: '2', spark.default.parallelism: '2'}\n"
    )
    inherited = os.environ.pop("LAKE_JVM_OPTIONS", None)
    try:
        session = spark_session(load_project(base))  # a long-lived JVM: C2 pays for itself
    finally:
        if inherited is not None:
            os.environ["LAKE_JVM_OPTIONS"] = inherited
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real single-node Kafka broker (KRaft) on loopback; `.bootstrap_servers`, `.produce`, ..."""
    from tests.kafka_fixture import running_broker

    yield from running_broker(tmp_path_factory.mktemp("kafka"))


@pytest.fixture(scope="session")
def connect_worker(tmp_path_factory: pytest.TempPathFactory, kafka_broker: KafkaBroker) -> Iterator[ConnectWorker]:
    """One Kafka Connect worker with every Debezium plugin; tests add and remove connectors."""
    from tests.cdc_chain import running_worker

    yield from running_worker(tmp_path_factory.mktemp("connect"), kafka_broker)


@pytest.fixture(scope="session")
def cdc_chain(tmp_path_factory: pytest.TempPathFactory, kafka_broker: KafkaBroker, connect_worker: ConnectWorker) -> Iterator[Chain]:
    """MariaDB beside the session's broker and Connect worker; `.connector(prefix, databases)` adds Debezium."""
    from tests.cdc_chain import running_mariadb

    yield from running_mariadb(tmp_path_factory.mktemp("cdc-chain"), kafka_broker, connect_worker)


@pytest.fixture(scope="session")
def pg_chain(tmp_path_factory: pytest.TempPathFactory, kafka_broker: KafkaBroker, connect_worker: ConnectWorker) -> Iterator[Chain]:
    """PostgreSQL beside the session's broker and Connect worker; `.connector(prefix, schemas)` adds Debezium."""
    from tests.cdc_chain import running_postgres

    yield from running_postgres(tmp_path_factory.mktemp("pg-chain"), kafka_broker, connect_worker)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server (moto) on loopback, with AWS credentials in the environment."""
    from tests.s3_fixture import running_s3

    yield from running_s3(tmp_path_factory.mktemp("s3"))


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApicurioRegistry]:
    """A real schema registry (Apicurio, in-memory) on loopback: `.ccompat_url` (Confluent API) for
    lake, `.api_url` for Apicurio's converter. Stopped after the session."""
    from framework.demo.registry import ApicurioRegistry

    with ApicurioRegistry(tmp_path_factory.mktemp("schema-registry")) as registry:
        yield registry


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastore]:
    """A real Hive metastore (Thrift, Derby) on loopback; `.uri`. Stopped after the session."""
    from framework.demo.metastore import HiveMetastore

    with HiveMetastore(tmp_path_factory.mktemp("hive-metastore")) as hms:
        yield hms


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        from tests.strict_skips import optional

        optional("needs ../shared/fixtures (the public Debezium captures) beside the repo")
    return FIXTURES
