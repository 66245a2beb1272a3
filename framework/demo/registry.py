"""Apicurio Registry on a loopback port, in-memory: the schema registry of the Avro tests.

For tests and demos, never for production. Its runnable form is built from Maven Central's
packages on first use (framework/runtime/apicurio.py). lake talks to its Confluent-compatible API
(`.ccompat_url`); Apicurio's Kafka Connect converter (framework.runtime.jars.AVRO_CONVERTER) to its
own (`.api_url`):

    with ApicurioRegistry(work_dir) as registry:
        registry.ccompat_url    # http://127.0.0.1:<port>/apis/ccompat/v7

Logs go to `work_dir/registry.log`. Starting, stopping (SIGTERM, then SIGKILL; also at exit) and
the errors are framework/demo/services.py's `Service`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from framework.demo.services import Service, free_port
from framework.runtime.apicurio import CCOMPAT, VERSION, registry_jar
from framework.runtime.jars import java_executable


class ApicurioRegistry(Service):
    """One Apicurio Registry process (in-memory storage)."""

    name = "Apicurio Registry"
    fix = "check the log; the registry is built by framework/runtime/apicurio.py (Maven, a JDK)"
    poll_seconds = 0.3

    def __init__(self, work_dir: Path | str, *, heap: str = "256m", start_timeout: float = 120.0, stop_timeout: float = 15.0) -> None:
        super().__init__(work_dir, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.heap = heap
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ccompat_url(self) -> str:
        """The Confluent-compatible API: what `schema_registry.url` of lake.yaml names."""
        return self.base + CCOMPAT

    @property
    def api_url(self) -> str:
        """Apicurio's own API (v2): what its serdes and converter talk to."""
        return self.base + "/apis/registry/v2"

    @property
    def out_file(self) -> Path:
        return self.work_dir / "registry.log"

    def prepare(self) -> None:
        self._jar = registry_jar()
        self.port = free_port()

    def command(self) -> list[str]:
        return [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1",
            # No error reporting service, no metrics collection beyond the process.
            "-Dsentry.dsn=", "-Dquarkus.log.level=WARN", "-Dquarkus.log.category.\"io.apicurio\".level=WARN",
            "-jar", str(self._jar),
        ]  # fmt: skip

    def ready(self) -> bool:
        """Its Confluent-compatible API answers `GET /subjects` with a list."""
        try:
            with urllib.request.urlopen(self.ccompat_url + "/subjects", timeout=5) as r:
                return isinstance(json.loads(r.read()), list)
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}, {self.base}" if self.process else "stopped"
        return f"ApicurioRegistry({VERSION}, {state})"
