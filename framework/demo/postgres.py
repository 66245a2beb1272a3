"""A real PostgreSQL server (Debian's `postgresql` package) on a loopback port, for the CDC chain.

For tests and `lake demo --source postgres`, never for production. initdb makes a fresh cluster
(`wal_level=logical`, UTC, UTF-8) whose WAL Debezium's PostgreSQL connector decodes with `pgoutput`:

    with Postgres(work_dir) as db:
        db.execute("CREATE SCHEMA shop")
        cols, rows = db.query("SELECT * FROM shop.t")

PostgreSQL refuses to run as root: when this process is root (the tests are), the server and
initdb run as the `postgres` user the package created, with the cluster in a private directory
that user owns (removed at stop); otherwise the cluster is `work_dir/data`. Durability is off
(fsync, full_page_writes): a test server. The server log is `work_dir/logs/postgres.out`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from framework.demo.connect import COMMON
from framework.demo.services import Service, free_port, log_tail
from framework.errors import EnvironmentProblem

USER, PASSWORD, DBNAME = "lake", "lake-cdc", "lake"
PING_SCHEMA = "lake_chain_ping"  # outside every connector's schema list: wait_caught_up writes here
Statement = str | tuple[str, tuple[Any, ...]]
_JSON_OIDS = (114, 3802)  # json, jsonb: read as their text, as Debezium sends them


def bin_dir() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin with a server; EnvironmentProblem naming the package."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(re.sub(r"\D", "", p.split("/")[4]) or 0))
    if not found:
        raise EnvironmentProblem("the PostgreSQL server is not installed (no /usr/lib/postgresql/*/bin/postgres)",
                                 fix="run `make install` as root, or `apt-get install -y postgresql`")
    return Path(found[-1]).parent


def _client() -> Any:
    try:
        import pg8000.dbapi
    except ImportError as e:
        raise EnvironmentProblem("the Python PostgreSQL client (pg8000) is not installed",
                                 fix="run `make install` (or pip install pg8000)") from e
    return pg8000.dbapi


class Postgres(Service):
    """One postgres process with its own cluster; a context manager. See the module docstring."""

    name = "PostgreSQL"
    flavor = "postgres"

    def __init__(self, work_dir: Path | str, *, start_timeout: float = 60.0, stop_timeout: float = 30.0) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.port = 0
        self.dbname = DBNAME
        self._private: Path | None = None  # the root-run cluster's own directory
        self._as: dict[str, Any] = {}

    @property
    def out_file(self) -> Path:
        return self.work_dir / "logs" / "postgres.out"

    @property
    def cluster(self) -> Path:
        return (self._private or self.work_dir) / "data"

    def prepare(self) -> None:
        self._bin = bin_dir()
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            self._as = {"user": pg.pw_uid, "group": pg.pw_gid, "extra_groups": []}
            if self._private is None:
                self._private = Path(tempfile.mkdtemp(prefix="lake-postgres-"))
                os.chown(self._private, pg.pw_uid, pg.pw_gid)
                link = self.work_dir / "data"
                if not link.exists():
                    link.symlink_to(self._private / "data", target_is_directory=True)
        if not (self.cluster / "PG_VERSION").exists():
            proc = subprocess.run([str(self._bin / "initdb"), "-D", str(self.cluster), "-U", "postgres", "--auth=trust",
                                   "--encoding=UTF8", "--no-locale", "--no-sync"],
                                  capture_output=True, text=True, **self._as)  # fmt: skip
            if proc.returncode != 0:
                raise EnvironmentProblem(f"initdb failed in {self.cluster}:\n{log_tail(proc.stdout + proc.stderr, 15)}",
                                         fix="check that postgresql is installed completely (apt-get install --reinstall postgresql)")
        self.port = free_port()

    def command(self) -> list[str]:
        settings = {
            "listen_addresses": "127.0.0.1", "unix_socket_directories": str(self.cluster),
            "wal_level": "logical", "max_wal_senders": "8", "max_replication_slots": "8",
            "timezone": "UTC", "log_timezone": "UTC", "fsync": "off", "full_page_writes": "off", "synchronous_commit": "off",
            "shared_buffers": "32MB", "max_connections": "40", "logging_collector": "off", "log_min_messages": "warning",
        }  # fmt: skip
        return [str(self._bin / "postgres"), "-D", str(self.cluster), "-p", str(self.port),
                *[a for k, v in settings.items() for a in ("-c", f"{k}={v}")]]

    def popen_options(self) -> dict[str, Any]:
        # Popen switches user and group before it runs die_with_parent, whose prctl survives that.
        return dict(self._as)

    def ready(self) -> bool:
        try:
            self._connect("postgres", "postgres").close()
            return True
        except Exception:  # the server is still starting
            return False

    def after_ready(self) -> None:
        """The `lake` role (a superuser: Debezium creates the publication FOR ALL TABLES) and database."""
        conn = self._connect("postgres", "postgres")
        try:
            cur = conn.cursor()
            cur.execute(f"CREATE ROLE {USER} LOGIN SUPERUSER REPLICATION PASSWORD '{PASSWORD}'")
            cur.execute(f"CREATE DATABASE {DBNAME} OWNER {USER}")
        finally:
            conn.close()

    def stop(self) -> None:
        super().stop()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    # -- client helpers ----------------------------------------------------------------------
    def _connect(self, user: str, database: str) -> Any:
        conn = _client().connect(user=user, host="127.0.0.1", port=self.port, database=database,
                                 password=PASSWORD if user == USER else None, timeout=10)
        conn.autocommit = True
        for oid in _JSON_OIDS:
            conn.register_in_adapter(oid, str)
        cur = conn.cursor()
        cur.execute("SET TIME ZONE 'UTC'")
        return conn

    def connect(self) -> Any:
        """A pg8000 connection to database `lake` as `lake`, autocommit on, time zone UTC, JSON as text."""
        return self._connect(USER, self.dbname)

    def execute(self, statements: Statement | Iterable[Statement], database: str | None = None) -> None:
        """Run statements in order, each committed on its own (autocommit). `database`: unused
        (one database; schemas separate the tests), kept for MariaDB's signature."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            for st in [statements] if isinstance(statements, (str, tuple)) else statements:
                _run(cur, st)
        finally:
            conn.close()

    def transaction(self, statements: Sequence[Statement], database: str | None = None) -> None:
        """Run statements as one transaction."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute("BEGIN")
            for st in statements:
                _run(cur, st)
            cur.execute("COMMIT")
        finally:
            conn.close()

    def query(self, sql: str, database: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """(column names, rows) of one query."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [d[0] for d in cur.description], [tuple(r) for r in cur.fetchall()]
        finally:
            conn.close()

    # -- what Debezium's PostgreSQL connector needs (framework.demo.connect.CaptureSource) --------
    def connector_config(self, name: str, prefix: str, databases: Sequence[str], servers: str, heartbeat_ms: int) -> dict[str, str]:
        """Debezium's PostgreSQL connector for schemas `databases` of database `lake`
        (docs/guides/real-database.md has the table)."""
        slot = _slot(name)
        return {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "database.hostname": "127.0.0.1", "database.port": str(self.port), "database.user": USER,
            "database.password": PASSWORD, "database.dbname": self.dbname,
            "topic.prefix": prefix, "schema.include.list": ",".join(databases),
            "slot.name": slot, "publication.name": f"{slot}_pub", "publication.autocreate.mode": "all_tables",
            "heartbeat.interval.ms": str(heartbeat_ms),
            **COMMON,
        }  # fmt: skip

    def capture_target(self) -> int:
        self.execute([f"CREATE SCHEMA IF NOT EXISTS {PING_SCHEMA}",
                      f"CREATE TABLE IF NOT EXISTS {PING_SCHEMA}.ping (id int PRIMARY KEY, at timestamptz)"])
        _cols, rows = self.query("SELECT pg_current_wal_lsn()::text")
        return lsn_int(str(rows[0][0]))

    def reached(self, offset: Mapping[str, Any], target: Any) -> bool:
        done = [int(offset[k]) for k in ("lsn", "lsn_proc", "lsn_commit") if offset.get(k) is not None]
        return bool(done) and max(done) >= int(target)

    def ping(self) -> None:
        self.execute(f"INSERT INTO {PING_SCHEMA}.ping VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET at = now()")

    def forget(self, name: str) -> None:
        """Drop the replication slot and publication of a removed connector (a slot left behind
        keeps WAL forever)."""
        if not self.running:
            return
        slot = _slot(name)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            _cols, rows = self.query(f"SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'")
            if not rows or not rows[0][0]:
                break
            time.sleep(0.2)
        with contextlib.suppress(Exception):
            self.execute([f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'",
                          f"DROP PUBLICATION IF EXISTS {slot}_pub"])

    def __repr__(self) -> str:
        state = f"pid {self.pid} on 127.0.0.1:{self.port}" if self.process else "stopped"
        return f"Postgres({state}, {self.work_dir})"


def lsn_int(text: str) -> int:
    """PostgreSQL's `X/Y` LSN text as the number Debezium writes (`source.lsn`)."""
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


def _slot(connector: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", connector.lower())[:63]


def _run(cursor: Any, statement: Statement) -> None:
    if isinstance(statement, tuple):
        cursor.execute(statement[0], statement[1])
    else:
        cursor.execute(statement)
