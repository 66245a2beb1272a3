"""A real MariaDB server (Debian's `mariadb-server` package) on a loopback port, for the CDC chain.

For tests and `lake demo --source mariadb`, never for production. Its datadir, socket, binlog
and error log live in `work_dir`; the server's binlog is what Debezium reads:

    with MariaDB(work_dir) as db:
        db.execute("CREATE DATABASE shop")
        rows = db.query("SELECT * FROM shop.t")

ROW binlog with full row images (what Debezium's MySQL connector requires), server id 1, and
MariaDB's GTIDs in strict mode (MariaDB writes a GTID for every transaction whenever the binlog is
on; there is no `gtid_mode` switch as in MySQL). The server time zone is UTC, so TIMESTAMP values
read back the same through Debezium and through a client session. `stop()` (also run at exit)
sends SIGTERM (a clean shutdown), then SIGKILL, and reaps it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from framework.demo.connect import COMMON
from framework.demo.services import Service, free_port, log_tail
from framework.errors import EnvironmentProblem

USER, PASSWORD = "lake", "lake-cdc"  # a loopback-only server that lives as long as a test
# A database outside every connector's include list: wait_caught_up writes to it (connect.py).
PING_DB = "lake_chain_ping"
# SQL text, or text with %s placeholders and their values (PyMySQL quotes them).
Statement = str | tuple[str, tuple[Any, ...]]


def executables() -> tuple[str, str]:
    """(mariadbd, mariadb-install-db); EnvironmentProblem naming the package when missing."""
    found = [shutil.which(n) or shutil.which(n, path="/usr/sbin:/usr/bin") for n in ("mariadbd", "mariadb-install-db")]
    if None in found:
        raise EnvironmentProblem(
            "MariaDB is not installed (no mariadbd / mariadb-install-db on PATH)",
            fix="run `make install` as root, or `apt-get install -y mariadb-server`",
        )
    return found[0], found[1]  # type: ignore[return-value]


def _client() -> Any:
    try:
        import pymysql
    except ImportError as e:
        raise EnvironmentProblem("the Python MariaDB client (PyMySQL) is not installed",
                                 fix="run `make install` (or pip install pymysql)") from e
    return pymysql


class MariaDB(Service):
    """One mariadbd process with its own datadir; a context manager. See the module docstring."""

    name = "mariadbd"
    flavor = "mariadb"

    def __init__(self, work_dir: Path | str, *, start_timeout: float = 60.0, stop_timeout: float = 30.0) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.port = 0
        self._replicas = 0  # connectors made: each reads the binlog as its own replica id

    @property
    def socket(self) -> Path:
        return self.work_dir / "mariadb.sock"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "error.log"

    @property
    def out_file(self) -> Path:
        return self.work_dir / "logs" / "mariadbd.out"

    def log_files(self) -> list[Path]:
        return [self.log_file, self.out_file]

    @property
    def datadir(self) -> Path:
        return self.work_dir / "data"

    def options(self) -> list[str]:
        return [
            "--no-defaults",  # never /etc/mysql/my.cnf: this server is all in work_dir
            f"--datadir={self.datadir}", f"--socket={self.socket}", f"--pid-file={self.work_dir / 'mariadb.pid'}",
            f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-name-resolve", f"--log-error={self.log_file}",
            "--user=root",  # the tests run as root; mariadbd refuses that without being told
            "--server-id=1", f"--log-bin={self.work_dir / 'binlog' / 'mariadb-bin'}", "--binlog-format=ROW",
            "--binlog-row-image=FULL", "--gtid-strict-mode=1", "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
            # Small: a test server on a shared 2-core box.
            "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M", "--performance-schema=OFF",
            "--max-connections=50", f"--tmpdir={self.work_dir / 'tmp'}",
        ]  # fmt: skip

    def prepare(self) -> None:
        """Create the datadir (first start) and pick the port."""
        self._mariadbd, install_db = executables()
        for sub in ("logs", "binlog", "tmp"):
            (self.work_dir / sub).mkdir(parents=True, exist_ok=True)
        if not (self.datadir / "mysql").is_dir():
            self._install(install_db)
        self.port = free_port()

    def command(self) -> list[str]:
        return [self._mariadbd, *self.options()]

    def ready(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self._root().close()
            return True
        except Exception:  # OperationalError while the server finishes starting
            return False

    def after_ready(self) -> None:
        self._create_user()

    def _install(self, install_db: str) -> None:
        proc = subprocess.run(
            [install_db, "--no-defaults", f"--datadir={self.datadir}", "--user=root", "--auth-root-authentication-method=normal",
             "--skip-test-db", "--skip-name-resolve"],
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise EnvironmentProblem(f"mariadb-install-db failed in {self.datadir}:\n{log_tail(proc.stdout + proc.stderr, 15)}",
                                     fix="check that mariadb-server is installed completely (apt-get install --reinstall mariadb-server)")

    def _root(self) -> Any:
        return _client().connect(unix_socket=str(self.socket), user="root", password="", autocommit=True, charset="utf8mb4")

    def _create_user(self) -> None:
        """`lake`@`127.0.0.1` with what Debezium's MySQL connector needs (and DDL for the workload)."""
        conn = self._root()
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
                cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1'")
        finally:
            conn.close()

    # -- client helpers ----------------------------------------------------------------------
    def connect(self, database: str | None = None) -> Any:
        """A PyMySQL connection over TCP as `lake`, autocommit on, session time zone UTC."""
        conn = _client().connect(host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, database=database,
                                 autocommit=True, charset="utf8mb4", init_command="SET time_zone = '+00:00'")
        return conn

    def execute(self, statements: Statement | Iterable[Statement], database: str | None = None) -> None:
        """Run statements in order, each committed on its own (autocommit)."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                for st in [statements] if isinstance(statements, (str, tuple)) else statements:
                    _run(cur, st)
        finally:
            conn.close()

    def transaction(self, statements: Sequence[Statement], database: str | None = None) -> None:
        """Run statements as one transaction (one binlog transaction, one GTID)."""
        conn = self.connect(database)
        try:
            conn.begin()
            with conn.cursor() as cur:
                for st in statements:
                    _run(cur, st)
            conn.commit()
        finally:
            conn.close()

    def query(self, sql: str, database: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """(column names, rows) of one query."""
        conn = self.connect(database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return [d[0] for d in cur.description], list(cur.fetchall())
        finally:
            conn.close()

    # -- what Debezium's MariaDB connector needs (framework.demo.connect.CaptureSource) ---------
    def connector_config(self, name: str, prefix: str, databases: Sequence[str], servers: str, heartbeat_ms: int) -> dict[str, str]:
        """Debezium's MariaDB connector for `databases` (docs/guides/real-database.md has the table)."""
        self._replicas += 1
        return {
            "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
            "database.hostname": "127.0.0.1", "database.port": str(self.port), "database.user": USER, "database.password": PASSWORD,
            # A replica id: not the server's own (1), one per connector.
            "database.server.id": str(5400 + self._replicas),
            "database.include.list": ",".join(databases), "topic.prefix": prefix,
            "schema.history.internal.kafka.bootstrap.servers": servers,
            "schema.history.internal.kafka.topic": f"{prefix}.schema-history",
            "include.schema.changes": "true", "heartbeat.interval.ms": str(heartbeat_ms),
            **COMMON,
        }  # fmt: skip

    def capture_target(self) -> tuple[str, int]:
        self.execute([f"CREATE DATABASE IF NOT EXISTS {PING_DB}",
                      f"CREATE TABLE IF NOT EXISTS {PING_DB}.ping (id INT PRIMARY KEY, at DATETIME(6))"])
        _cols, rows = self.query("SHOW MASTER STATUS")
        return str(rows[0][0]), int(rows[0][1])

    def reached(self, offset: Mapping[str, Any], target: Any) -> bool:
        return "file" in offset and (str(offset["file"]), int(offset.get("pos", 0))) >= tuple(target)

    def ping(self) -> None:
        self.execute(f"REPLACE INTO {PING_DB}.ping VALUES (1, NOW(6))")

    def forget(self, name: str) -> None:
        """Nothing: a binlog reader leaves nothing behind in the server."""

    def __repr__(self) -> str:
        state = f"pid {self.process.pid} on 127.0.0.1:{self.port}" if self.process else "stopped"
        return f"MariaDB({state}, {self.work_dir})"


def _run(cursor: Any, statement: Statement) -> None:
    if isinstance(statement, tuple):
        cursor.execute(statement[0], statement[1])
    else:
        cursor.execute(statement)
