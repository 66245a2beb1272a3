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

import atexit
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from framework.demo.services import die_with_parent, free_port, log_tail, stop_process
from framework.errors import EnvironmentProblem

USER, PASSWORD = "lake", "lake-cdc"  # a loopback-only server that lives as long as a test
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


class MariaDB:
    """One mariadbd process with its own datadir; a context manager. See the module docstring."""

    def __init__(self, work_dir: Path | str, *, start_timeout: float = 60.0, stop_timeout: float = 30.0) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def socket(self) -> Path:
        return self.work_dir / "mariadb.sock"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "error.log"

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

    def __enter__(self) -> MariaDB:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Create the datadir (first start), start mariadbd, create the `lake` user; return when ready."""
        if self.process is not None:
            raise RuntimeError("MariaDB is already started")
        began = time.monotonic()
        mariadbd, install_db = executables()
        for sub in ("logs", "binlog", "tmp"):
            (self.work_dir / sub).mkdir(parents=True, exist_ok=True)
        if not (self.datadir / "mysql").is_dir():
            self._install(install_db)
        self.port = free_port()
        main_thread = threading.current_thread() is threading.main_thread()
        with open(self.work_dir / "logs" / "mariadbd.out", "ab") as out:
            self.process = subprocess.Popen(
                [mariadbd, *self.options()], cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                # The death signal fires when the forking *thread* exits, so only from the main one.
                preexec_fn=die_with_parent if main_thread else None,
            )  # fmt: skip
        atexit.register(self.stop)
        try:
            self._wait_ready(began)
            self._create_user()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _install(self, install_db: str) -> None:
        proc = subprocess.run(
            [install_db, "--no-defaults", f"--datadir={self.datadir}", "--user=root", "--auth-root-authentication-method=normal",
             "--skip-test-db", "--skip-name-resolve"],
            capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise EnvironmentProblem(f"mariadb-install-db failed in {self.datadir}:\n{log_tail(proc.stdout + proc.stderr, 15)}",
                                     fix="check that mariadb-server is installed completely (apt-get install --reinstall mariadb-server)")

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"mariadbd exited with code {self.process.returncode} while starting")
            if self.socket.exists():
                try:
                    self._root().close()
                    return
                except Exception as e:  # OperationalError while the server finishes starting
                    last = str(e)
            time.sleep(0.2)
        self._fail(f"mariadbd did not answer on {self.socket} within {self.start_timeout:.0f}s ({last})")

    def _fail(self, what: str) -> None:
        log = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        raise EnvironmentProblem(f"{what}; last lines of {self.log_file}:\n{log_tail(log, 20)}",
                                 fix="check the log; a port clash or a slow machine may need a retry or a longer start_timeout")

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

    def stop(self) -> None:
        """Stop the server: SIGTERM (clean shutdown), SIGKILL after stop_timeout. Idempotent."""
        proc = self.process
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_process(proc, self.stop_timeout)
        self.process = None

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

    def __repr__(self) -> str:
        state = f"pid {self.process.pid} on 127.0.0.1:{self.port}" if self.process else "stopped"
        return f"MariaDB({state}, {self.work_dir})"


def _run(cursor: Any, statement: Statement) -> None:
    if isinstance(statement, tuple):
        cursor.execute(statement[0], statement[1])
    else:
        cursor.execute(statement)
