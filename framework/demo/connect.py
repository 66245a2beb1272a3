"""Kafka Connect (standalone) running Debezium connectors against real databases, on loopback.

For tests and `lake demo --source mariadb|postgres`, never for production. The jars come from
framework.runtime.jars (`make install` fetches them); every Debezium connector is a Connect plugin
in its own directory. One worker serves any number of connectors, added and removed over its REST
API, so a test session starts one JVM for all of them:

    with ConnectWorker(work_dir, broker.bootstrap_servers) as worker:
        with worker.connector(db, prefix="chain", databases=["shop"]) as connector:
            connector.wait_caught_up()     # every transaction committed so far is in Kafka

`db` is a :class:`CaptureSource` (framework.demo.mariadb.MariaDB, framework.demo.postgres.Postgres):
it gives the connector's settings and says when its offset has reached the database's position.
The settings are the ones a user of lake would give Debezium (docs/guides/real-database.md):
JsonConverter with schemas, `decimal.handling.mode=precise`, heartbeats, transaction metadata and
truncate events on, so that lake meets every kind of message the connector writes. A connector's
own `key.converter`/`value.converter` settings (`extra=`) override the worker's JSON ones.
`DebeziumConnect` is a worker with one connector, for scripts that need just that.
Connect logs to `work_dir/logs/connect.log`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from framework.demo.services import Service, free_port
from framework.errors import EnvironmentProblem
from framework.runtime.jars import (
    CONNECT_VERSION,
    DEBEZIUM,
    debezium_plugin,
    java_executable,
    kafka_connect_classpath,
)

HEARTBEAT_PREFIX = "__debezium-heartbeat"
# Debezium settings every connector of the chain runs with (framework/demo/<db>.py add theirs).
COMMON = {
    "tasks.max": "1",
    "snapshot.mode": "initial",
    "decimal.handling.mode": "precise",
    "time.precision.mode": "adaptive_time_microseconds",
    "provide.transaction.metadata": "true",
    "tombstones.on.delete": "true",
    "skipped.operations": "none",  # the default skips truncates ("t")
    "max.batch.size": "2048",
    "poll.interval.ms": "100",
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


class CaptureSource(Protocol):
    """A database a Debezium connector captures (framework/demo/mariadb.py, postgres.py)."""

    flavor: str  # the Debezium plugin: a key of framework.runtime.jars.DEBEZIUM

    def connector_config(self, name: str, prefix: str, databases: Sequence[str], servers: str, heartbeat_ms: int) -> dict[str, str]: ...

    def capture_target(self) -> Any:
        """The database's current log position; `reached` compares an offset with it."""

    def reached(self, offset: Mapping[str, Any], target: Any) -> bool: ...

    def ping(self) -> None:
        """A write outside every captured table, so an idle connector still advances its offset."""

    def forget(self, name: str) -> None:
        """Drop what a removed connector left in the database (a replication slot)."""


class ConnectWorker(Service):
    """One Kafka Connect standalone worker with every Debezium plugin; connectors come and go."""

    name = "Kafka Connect"
    fix = "check the log; the jars come from `make install`, Java 17 must be installed"

    def __init__(self, work_dir: Path | str, bootstrap_servers: str, *, plugins: Mapping[str, Path] | None = None,
                 worker: Mapping[str, str] | None = None, heap: str = "512m", start_timeout: float = 120.0,
                 stop_timeout: float = 20.0) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.bootstrap_servers = bootstrap_servers
        self.plugins = dict(plugins or {})  # more plugin directories by name (a converter, ...)
        self.extra = dict(worker or {})  # worker properties over ours
        self.heap = heap
        self.rest_port = 0
        self._names = 0
        self.poll_seconds = 0.5

    @property
    def log_file(self) -> Path:
        return self.work_dir / "logs" / "connect.log"

    @property
    def out_file(self) -> Path:
        return self.work_dir / "logs" / "connect.out"

    def log_files(self) -> list[Path]:
        return [self.log_file, self.out_file]

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
            **self.extra,
        }

    def prepare(self) -> None:
        self._classpath = kafka_connect_classpath()
        self.rest_port = free_port()
        plugins = self.work_dir / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        # plugin.path names a directory of plugins; each subdirectory is one, loaded on its own.
        for name, target in {**{f: debezium_plugin(f) for f in ("mariadb", "postgres")}, **self.plugins}.items():
            link = plugins / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target, target_is_directory=True)
        self._worker_file = self.work_dir / "worker.properties"
        self._worker_file.write_text("".join(f"{k}={v}\n" for k, v in self.worker_properties().items()))
        (self.work_dir / "log4j.properties").write_text(_LOG4J.format(log=self.log_file))

    def command(self) -> list[str]:
        return [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.work_dir / 'log4j.properties'}",
            "-cp", os.pathsep.join(str(p) for p in self._classpath),
            "org.apache.kafka.connect.cli.ConnectStandalone", str(self._worker_file),
        ]  # fmt: skip

    def ready(self) -> bool:
        try:
            return bool(self.request("GET", "/").get("version"))
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Connect's REST API: the JSON answer (None when empty)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.rest + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    @contextlib.contextmanager
    def connector(self, db: CaptureSource, *, prefix: str, databases: Sequence[str], heartbeat_ms: int = 1000,
                  extra: Mapping[str, str] | None = None, timeout: float = 120.0) -> Iterator[Connector]:
        """A Debezium connector capturing `databases` of `db` into topics `<prefix>.…`, running
        when entered and removed afterwards. `extra`: connector settings over the chain's."""
        self._names += 1
        name = f"lake-{prefix}-{self._names}"
        config = {"name": name, **db.connector_config(name, prefix, databases, self.bootstrap_servers, heartbeat_ms), **(extra or {})}
        c = Connector(self, db, name, config)
        c.create(timeout)
        try:
            yield c
        finally:
            c.remove()

    def __repr__(self) -> str:
        state = f"pid {self.pid}, REST {self.rest}" if self.process else "stopped"
        return f"ConnectWorker(Kafka Connect {CONNECT_VERSION}, {state}, {self.work_dir})"


class Connector:
    """One connector of a :class:`ConnectWorker`; made by `ConnectWorker.connector`."""

    def __init__(self, worker: ConnectWorker, db: CaptureSource, name: str, config: dict[str, str]) -> None:
        self.worker, self.db, self.name, self.config = worker, db, name, config

    @property
    def log_file(self) -> Path:
        return self.worker.log_file

    @property
    def rest(self) -> str:
        return self.worker.rest

    def create(self, timeout: float) -> None:
        """Add the connector and return once its task runs."""
        try:
            self.worker.request("PUT", f"/connectors/{self.name}/config", self.config)
        except urllib.error.HTTPError as e:
            self.worker.fail(f"Kafka Connect refused connector {self.name}: {e.read().decode(errors='replace')[:500]}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self._checked_status()
            tasks = st.get("tasks") or []
            if tasks and all(t.get("state") == "RUNNING" for t in tasks):
                return
            time.sleep(0.3)
        self.worker.fail(f"the Debezium connector {self.name} was not running within {timeout:.0f}s")

    def status(self) -> dict[str, Any]:
        """The connector's status from Connect's REST API (`connector.state`, `tasks[].state`)."""
        try:
            return dict(self.worker.request("GET", f"/connectors/{self.name}/status"))
        except urllib.error.HTTPError as e:
            if e.code == 404:  # not created yet
                return {}
            raise

    def _checked_status(self) -> dict[str, Any]:
        self.worker.check_alive()
        st = self.status()
        tasks = st.get("tasks") or []
        if any(t.get("state") == "FAILED" for t in tasks) or st.get("connector", {}).get("state") == "FAILED":
            trace = next((t.get("trace", "") for t in tasks if t.get("trace")), "") or st.get("connector", {}).get("trace", "")
            self.worker.fail(f"the Debezium connector {self.name} failed: {trace.splitlines()[0] if trace else st}")
        return st

    def offset(self) -> dict[str, Any]:
        """The connector's committed source offset (binlog file and pos, LSN, ...)."""
        offsets = self.worker.request("GET", f"/connectors/{self.name}/offsets").get("offsets") or []
        return dict(offsets[0]["offset"]) if offsets else {}

    def wait_caught_up(self, timeout: float = 120.0) -> float:
        """Wait until the connector's committed offset reaches the database's position at the call,
        so every transaction committed before it is in Kafka. Returns the seconds waited.

        Connect commits a source offset only after the broker acknowledged the records before it,
        so an offset at or past the position means the transactions are published. The offset of
        the last change is its transaction's start; heartbeats carry later positions, but only
        while the log moves, so while waiting, writes outside the captured tables keep it moving."""
        target = self.db.capture_target()
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            self.db.ping()
            self._checked_status()
            off = self.offset()
            if off and not off.get("snapshot") and self.db.reached(off, target):
                return time.monotonic() - began
            time.sleep(0.3)
        raise EnvironmentProblem(f"the Debezium connector {self.name} did not reach position {target} within {timeout:.0f}s "
                                 f"(offset {self.offset()})", fix=f"check {self.worker.log_file}")

    def remove(self) -> None:
        """Delete the connector (its task stops) and what it left in the database."""
        if self.worker.running:
            with contextlib.suppress(urllib.error.HTTPError, OSError):
                self.worker.request("DELETE", f"/connectors/{self.name}")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.status():
                time.sleep(0.2)
        self.db.forget(self.name)


class DebeziumConnect:
    """A worker with one connector, started and stopped together (benchmarks, one-off scripts)."""

    def __init__(self, work_dir: Path | str, bootstrap_servers: str, db: CaptureSource, *, prefix: str,
                 databases: Sequence[str], heartbeat_ms: int = 1000) -> None:
        self.worker = ConnectWorker(work_dir, bootstrap_servers)
        self._args = (db, prefix, list(databases), heartbeat_ms)
        self._stack = contextlib.ExitStack()
        self.connector: Connector | None = None
        self.startup_seconds: float | None = None

    @property
    def rest(self) -> str:
        return self.worker.rest

    def __enter__(self) -> DebeziumConnect:
        began = time.monotonic()
        db, prefix, databases, heartbeat_ms = self._args
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.worker)
            self.connector = stack.enter_context(self.worker.connector(db, prefix=prefix, databases=databases, heartbeat_ms=heartbeat_ms))
            self._stack = stack.pop_all()
        self.startup_seconds = time.monotonic() - began
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def wait_caught_up(self, timeout: float = 120.0) -> float:
        assert self.connector is not None, "DebeziumConnect is not started"
        return self.connector.wait_caught_up(timeout)

    def __repr__(self) -> str:
        return f"DebeziumConnect({', '.join(DEBEZIUM.values())}, {self.worker!r})"
