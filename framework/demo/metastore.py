"""A real Hive metastore (Thrift) on a loopback port, on an embedded Derby database.

For tests and demos of `catalog: {kind: hive}`, never for production. It runs the Hive 2.3.9
metastore classes pyspark ships (`pyspark/jars`), so nothing is downloaded:

    with HiveMetastore(work_dir) as hms:
        spark conf: spark.sql.catalogImplementation=hive, spark.hadoop.hive.metastore.uris=hms.uri

Hive 2.3's metastore binds its port on every interface: `HiveMetaStore.startMetaStore` passes a
null host to `HiveAuthUtils.getServerSocket` and has no bind-host setting (Hive 3.1.3's standalone
metastore does the same; `metastore.thrift.bind.host` came with Hive 4). Clients here connect on
127.0.0.1 only, the port is a free one picked at start, and the process lives as long as the test.

Derby data and logs stay in `work_dir` (`work_dir/logs/metastore.out` is the place to look when
it fails). `stop()` (also run at exit) sends SIGTERM, then SIGKILL, and reaps it.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import escape

from framework.demo.services import die_with_parent, free_port, log_tail, stop_process
from framework.errors import EnvironmentProblem
from framework.runtime.jars import java_executable

# Without it, log4j2 looks for the LMAX disruptor Hive's log4j2 config asks for, and fails.
_LOG_SELECTOR = "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


class HiveMetastore:
    """One Hive metastore process; a context manager. See the module docstring."""

    def __init__(self, work_dir: Path | str, *, heap: str = "512m", start_timeout: float = 90.0, stop_timeout: float = 20.0) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def uri(self) -> str:
        if not self.port:
            raise RuntimeError("the Hive metastore is not started")
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def out_file(self) -> Path:
        return self.work_dir / "logs" / "metastore.out"

    def site(self) -> dict[str, str]:
        """hive-site.xml: Derby under work_dir, schema created on first use."""
        return {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.work_dir / 'metastore_db'};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": str(self.work_dir / "warehouse"),
            # Hudi's sync alters tables when columns are added; Hive 2.3 rejects an ALTER that
            # changes column types unless this is off. Lake only widens types (framework/project/types.py).
            "hive.metastore.disallow.incompatible.col.type.changes": "false",
        }

    def __enter__(self) -> HiveMetastore:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the JVM and return once the Thrift port accepts connections."""
        if self.process is not None:
            raise RuntimeError("the Hive metastore is already started")
        began = time.monotonic()
        conf = self.work_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        self.out_file.parent.mkdir(parents=True, exist_ok=True)
        props = "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in self.site().items())
        (conf / "hive-site.xml").write_text(f"<configuration>\n{props}</configuration>\n")
        self.port = free_port()
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            _LOG_SELECTOR, f"-Dderby.system.home={self.work_dir}", f"-Dhive.log.dir={self.work_dir / 'logs'}",
            "-cp", os.pathsep.join([str(conf), str(pyspark_jars() / "*")]),
            "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port),
        ]  # fmt: skip
        main_thread = threading.current_thread() is threading.main_thread()
        with open(self.out_file, "ab") as out:
            self.process = subprocess.Popen(
                cmd, cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                # The death signal fires when the forking *thread* exits, so only from the main one.
                preexec_fn=die_with_parent if main_thread else None,
            )  # fmt: skip
        atexit.register(self.stop)
        try:
            self._wait_ready(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.start_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"the Hive metastore exited with code {self.process.returncode} while starting")
            with socket.socket() as s:
                s.settimeout(1)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.2)
        self._fail(f"the Hive metastore did not listen on {self.uri} within {self.start_timeout:.0f}s")

    def _fail(self, what: str) -> None:
        log = self.out_file.read_text(errors="replace") if self.out_file.exists() else ""
        raise EnvironmentProblem(
            f"{what}; last lines of {self.out_file}:\n{log_tail(log, 20)}",
            fix="check the log; pyspark's jars must include hive-metastore (a pip pyspark does), Java 17 must be installed",
        )

    def stop(self) -> None:
        """Stop the metastore: SIGTERM, SIGKILL after stop_timeout. Idempotent."""
        proc = self.process
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_process(proc, self.stop_timeout)
        self.process = None

    def __repr__(self) -> str:
        state = f"pid {self.process.pid} on {self.uri}" if self.process else "stopped"
        return f"HiveMetastore(2.3.9, {state}, {self.work_dir})"
