"""Kafka Connect standalone running Debezium's MariaDB connector against a MariaDB, on loopback.

For tests and `lake demo --source mariadb`, never for production. The jars come from
framework.runtime.jars (`make install` fetches them); the connector is a Connect plugin in its own
directory. Source offsets are a file in `work_dir`, the schema history a topic on the broker:

    with DebeziumConnect(work_dir, broker.bootstrap_servers, db, prefix="chain", databases=["shop"]) as connect:
        connect.wait_caught_up()       # every transaction committed so far is in Kafka

The settings are the ones a user of lake would give Debezium (docs/guides/debezium.md):
JsonConverter with schemas, `decimal.handling.mode=precise`, the default `time.precision.mode`,
heartbeats, transaction metadata and truncate events on, so that lake meets every kind of message
the connector writes. `flavor="mysql"` runs Debezium's MySQL connector instead (framework.runtime.jars).
Connect logs to `work_dir/logs/connect.log`. `stop()` (also run at exit) sends SIGTERM, then
SIGKILL, and reaps it.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from framework.demo.mariadb import PASSWORD, USER, MariaDB
from framework.demo.services import die_with_parent, free_port, log_tail, stop_process
from framework.errors import EnvironmentProblem
from framework.runtime.jars import (
    DEBEZIUM,
    debezium_plugin,
    java_executable,
    kafka_connect_classpath,
)

CONNECTOR = "lake-cdc"
HEARTBEAT_PREFIX = "__debezium-heartbeat"
# A database outside every connector's include list: wait_caught_up writes to it (see there).
PING_DB = "lake_chain_ping"
_CLASSES = {
    "mariadb": {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
                # 2.7.0 hands its default ("preferred") to MariaDB's JDBC driver, which rejects it.
                "database.ssl.mode": "disabled"},
    "mysql": {"connector.class": "io.debezium.connector.mysql.MySqlConnector"},
}

_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.reflections=ERROR
"""


def connector_config(db: MariaDB, servers: str, prefix: str, databases: Sequence[str], *, flavor: str = "mariadb",
                     server_id: int = 5401, heartbeat_ms: int = 1000) -> dict[str, str]:
    """The Debezium connector's settings for `db` (see the module docstring)."""
    return {
        "name": CONNECTOR,
        **_CLASSES[flavor],
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(db.port),
        "database.user": USER,
        "database.password": PASSWORD,
        "database.server.id": str(server_id),  # a replica id: not the server's own (1), one per connector
        "database.include.list": ",".join(databases),
        "topic.prefix": prefix,
        "schema.history.internal.kafka.bootstrap.servers": servers,
        "schema.history.internal.kafka.topic": f"{prefix}.schema-history",
        "include.schema.changes": "true",
        "snapshot.mode": "initial",
        "decimal.handling.mode": "precise",
        "time.precision.mode": "adaptive_time_microseconds",
        "heartbeat.interval.ms": str(heartbeat_ms),
        "provide.transaction.metadata": "true",
        "tombstones.on.delete": "true",
        "skipped.operations": "none",  # the default skips truncates ("t")
        "max.batch.size": "2048",
        "poll.interval.ms": "100",
    }


class DebeziumConnect:
    """One Kafka Connect standalone worker with one Debezium connector; a context manager."""

    def __init__(self, work_dir: Path | str, bootstrap_servers: str, db: MariaDB, *, prefix: str, databases: Sequence[str],
                 flavor: str = "mariadb", server_id: int = 5401, heap: str = "384m", start_timeout: float = 120.0,
                 stop_timeout: float = 20.0, heartbeat_ms: int = 1000) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.bootstrap_servers = bootstrap_servers
        self.db = db
        self.prefix = prefix
        self.databases = list(databases)
        self.flavor = flavor
        self.server_id = server_id
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.heartbeat_ms = heartbeat_ms
        self.rest_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "connect.log"

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def worker_properties(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            # What lake reads: JSON with the schema block (lake takes column types from it).
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.file.filename": str(self.work_dir / "connect.offsets"),
            "offset.flush.interval.ms": "500",
            "plugin.path": str(self.work_dir / "plugins"),
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "task.shutdown.graceful.timeout.ms": "5000",
        }

    def __enter__(self) -> DebeziumConnect:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _files(self) -> tuple[Path, Path]:
        (self.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        plugins = self.work_dir / "plugins"
        plugins.mkdir(exist_ok=True)
        link = plugins / self.flavor
        if not link.exists():
            # plugin.path names a directory of plugins; each subdirectory is one, loaded on its own.
            link.symlink_to(debezium_plugin(self.flavor), target_is_directory=True)
        worker = self.work_dir / "worker.properties"
        worker.write_text("".join(f"{k}={v}\n" for k, v in self.worker_properties().items()))
        connector = self.work_dir / "connector.properties"
        cfg = connector_config(self.db, self.bootstrap_servers, self.prefix, self.databases, flavor=self.flavor,
                               server_id=self.server_id, heartbeat_ms=self.heartbeat_ms)
        connector.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J.format(log=self.log_file))
        return worker, connector

    def start(self) -> None:
        """Start the worker with the connector; return once its task runs."""
        if self.process is not None:
            raise RuntimeError("Kafka Connect is already started")
        began = time.monotonic()
        classpath = kafka_connect_classpath()
        self.rest_port = free_port()
        worker, connector = self._files()
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
            "-cp", os.pathsep.join(str(p) for p in classpath),
            "org.apache.kafka.connect.cli.ConnectStandalone", str(worker), str(connector),
        ]  # fmt: skip
        main_thread = threading.current_thread() is threading.main_thread()
        with open(self.work_dir / "logs" / "connect.out", "ab") as out:
            self.process = subprocess.Popen(cmd, cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            preexec_fn=die_with_parent if main_thread else None)
        atexit.register(self.stop)
        try:
            self._wait_running(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.rest + path, timeout=5) as r:
            return json.loads(r.read())

    def status(self) -> dict[str, Any]:
        """The connector's status from Connect's REST API (`connector.state`, `tasks[].state`)."""
        return dict(self._get(f"/connectors/{CONNECTOR}/status"))

    def _wait_running(self, began: float) -> None:
        deadline = began + self.start_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"Kafka Connect exited with code {self.process.returncode} while starting")
            try:
                st = self.status()
            except (OSError, urllib.error.URLError, ValueError):
                time.sleep(0.5)
                continue
            tasks = st.get("tasks") or []
            if any(t.get("state") == "FAILED" for t in tasks) or st.get("connector", {}).get("state") == "FAILED":
                trace = next((t.get("trace", "") for t in tasks if t.get("trace")), "")
                self._fail(f"the Debezium connector failed: {trace.splitlines()[0] if trace else st}")
            if tasks and all(t.get("state") == "RUNNING" for t in tasks):
                return
            time.sleep(0.5)
        self._fail(f"the Debezium connector was not running within {self.start_timeout:.0f}s")

    def _fail(self, what: str) -> None:
        log = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        raise EnvironmentProblem(f"{what}; last lines of {self.log_file}:\n{log_tail(log, 20)}",
                                 fix="check the log; the jars come from `make install`, Java 17 must be installed")

    def offset(self) -> dict[str, Any]:
        """The connector's committed source offset (binlog file, pos, ...; Connect's REST API)."""
        offsets = self._get(f"/connectors/{CONNECTOR}/offsets").get("offsets") or []
        return dict(offsets[0]["offset"]) if offsets else {}

    def wait_caught_up(self, timeout: float = 120.0) -> float:
        """Wait until the connector's committed offset reaches the server's current binlog position,
        so every transaction committed before the call is in Kafka. Returns the seconds waited.

        Connect commits a source offset only after the broker acknowledged the records before it,
        so `offset >= position` means the transactions are published. The offset of the last
        change is its transaction's start; a heartbeat carries the position after it, but Debezium
        sends heartbeats only while binlog events arrive (an idle server sends one every ~30 s).
        So while waiting, a transaction on a database no connector captures keeps events coming."""
        self.db.execute([f"CREATE DATABASE IF NOT EXISTS {PING_DB}",
                         f"CREATE TABLE IF NOT EXISTS {PING_DB}.ping (id INT PRIMARY KEY, at DATETIME(6))"])
        _cols, rows = self.db.query("SHOW MASTER STATUS")
        target = (str(rows[0][0]), int(rows[0][1]))
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            self.db.execute(f"REPLACE INTO {PING_DB}.ping VALUES (1, NOW(6))")
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"Kafka Connect exited with code {self.process.returncode}")
            st = self.status()
            if any(t.get("state") == "FAILED" for t in st.get("tasks") or []):
                self._fail("the Debezium connector task failed")
            off = self.offset()
            if "file" in off and (str(off["file"]), int(off.get("pos", 0))) >= target and not off.get("snapshot"):
                return time.monotonic() - began
            time.sleep(0.3)
        self._fail(f"the Debezium connector did not reach binlog position {target[0]}:{target[1]} within {timeout:.0f}s "
                   f"(offset {self.offset()})")
        return 0.0  # not reached: _fail raises

    def stop(self) -> None:
        """Stop the worker: SIGTERM, SIGKILL after stop_timeout. Idempotent."""
        proc = self.process
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_process(proc, self.stop_timeout)
        self.process = None

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}, REST {self.rest}" if self.process else "stopped"
        return f"DebeziumConnect({DEBEZIUM[self.flavor]}, {state}, {self.work_dir})"
