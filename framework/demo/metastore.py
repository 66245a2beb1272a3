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

import os
from pathlib import Path
from xml.sax.saxutils import escape

from framework.demo.services import Service, free_port, port_open
from framework.runtime.jars import java_executable

# Without it, log4j2 looks for the LMAX disruptor Hive's log4j2 config asks for, and fails.
_LOG_SELECTOR = "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.ClassLoaderContextSelector"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


class HiveMetastore(Service):
    """One Hive metastore process; a context manager. See the module docstring."""

    name = "the Hive metastore"
    fix = "check the log; pyspark's jars must include hive-metastore (a pip pyspark does), Java 17 must be installed"

    def __init__(self, work_dir: Path | str, *, heap: str = "512m", start_timeout: float = 90.0, stop_timeout: float = 20.0) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.heap = heap
        self.port = 0

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

    def prepare(self) -> None:
        conf = self.work_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        props = "".join(f"<property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in self.site().items())
        (conf / "hive-site.xml").write_text(f"<configuration>\n{props}</configuration>\n")
        self.port = free_port()

    def command(self) -> list[str]:
        return [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            _LOG_SELECTOR, f"-Dderby.system.home={self.work_dir}", f"-Dhive.log.dir={self.work_dir / 'logs'}",
            "-cp", os.pathsep.join([str(self.work_dir / "conf"), str(pyspark_jars() / "*")]),
            "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port),
        ]  # fmt: skip

    def ready(self) -> bool:
        """The Thrift port accepts connections."""
        return port_open(self.port)

    def __repr__(self) -> str:
        state = f"pid {self.process.pid} on {self.uri}" if self.process else "stopped"
        return f"HiveMetastore(2.3.9, {state}, {self.work_dir})"
