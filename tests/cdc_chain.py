"""The real CDC chain the tests share: one MariaDB server per test session (Debian's package, a
datadir under a pytest temp dir), the session's Kafka broker, and a Kafka Connect worker with
Debezium's MariaDB connector that each test starts for its own databases and topic prefix.

Nothing is simulated: the tests write SQL into MariaDB and lake reads what Debezium publishes.
When MariaDB or the Python client is missing, the tests that need the chain skip and say why
(`make install` installs both, MariaDB only when run as root).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from framework.demo.broker import KafkaBroker
from framework.demo.connect import DebeziumConnect
from framework.demo.mariadb import MariaDB, executables
from framework.errors import EnvironmentProblem


@dataclass
class Chain:
    """MariaDB and the Kafka broker, running; `connector()` starts Debezium on them."""

    db: MariaDB
    broker: KafkaBroker
    work_dir: Path
    _connectors: list[int] = field(default_factory=list)

    @contextlib.contextmanager
    def connector(self, prefix: str, databases: Sequence[str], flavor: str = "mariadb", settings: dict[str, str] | None = None,
                  plugins: dict[str, Path] | None = None) -> Iterator[DebeziumConnect]:
        """A Connect worker capturing `databases` into topics `<prefix>.<db>.<table>`; stopped
        afterwards. `settings` override the connector's (converters), `plugins` add plugin directories."""
        self._connectors.append(len(self._connectors) + 1)
        n = self._connectors[-1]
        with DebeziumConnect(self.work_dir / f"connect-{n}-{prefix}", self.broker.bootstrap_servers, self.db, prefix=prefix,
                             databases=databases, flavor=flavor, server_id=5400 + n, settings=settings, plugins=plugins) as connect:
            yield connect


def running_chain(work_dir: Path, broker: KafkaBroker) -> Iterator[Chain]:
    """Start MariaDB beside `broker`; yield the chain; stop MariaDB afterwards, whatever happened."""
    try:
        executables()
        import pymysql  # noqa: F401
    except (EnvironmentProblem, ImportError) as e:
        pytest.skip(f"the real CDC chain needs MariaDB and PyMySQL: {e} (run `make install` as root)")
    db = MariaDB(work_dir / "mariadb")
    db.start()
    try:
        yield Chain(db, broker, work_dir)
    finally:
        db.stop()
