"""Apicurio Registry on a loopback port, in-memory: the schema registry of the Avro tests.

For tests and demos, never for production. Its runnable form is built from Maven Central's
packages on first use (framework/runtime/apicurio.py). lake talks to its Confluent-compatible API
(`.ccompat_url`); Apicurio's Kafka Connect converter (framework.runtime.jars.AVRO_CONVERTER) to its
own (`.api_url`):

    with ApicurioRegistry(work_dir) as registry:
        registry.ccompat_url    # http://127.0.0.1:<port>/apis/ccompat/v7

Logs go to `work_dir/registry.log`. `stop()` (also run at exit) sends SIGTERM, then SIGKILL, and
reaps it.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from framework.demo.services import die_with_parent, free_port, log_tail, stop_process
from framework.errors import EnvironmentProblem
from framework.runtime.apicurio import CCOMPAT, VERSION, registry_jar
from framework.runtime.jars import java_executable


class ApicurioRegistry:
    """One Apicurio Registry process (in-memory storage); a context manager."""

    def __init__(self, work_dir: Path | str, *, heap: str = "256m", start_timeout: float = 120.0, stop_timeout: float = 15.0) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

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
    def log_file(self) -> Path:
        return self.work_dir / "registry.log"

    def __enter__(self) -> ApicurioRegistry:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the registry; return once its Confluent-compatible API answers."""
        if self.process is not None:
            raise RuntimeError("the registry is already started")
        began = time.monotonic()
        jar = registry_jar()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = [
            java_executable(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1",
            # No error reporting service, no metrics collection beyond the process.
            "-Dsentry.dsn=", "-Dquarkus.log.level=WARN", "-Dquarkus.log.category.\"io.apicurio\".level=WARN",
            "-jar", str(jar),
        ]  # fmt: skip
        main_thread = threading.current_thread() is threading.main_thread()
        with open(self.log_file, "ab") as out:
            self.process = subprocess.Popen(cmd, cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                            preexec_fn=die_with_parent if main_thread else None)
        atexit.register(self.stop)
        try:
            self._wait(began)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _wait(self, began: float) -> None:
        while time.monotonic() < began + self.start_timeout:
            assert self.process is not None
            if self.process.poll() is not None:
                self._fail(f"Apicurio Registry exited with code {self.process.returncode} while starting")
            try:
                with urllib.request.urlopen(self.ccompat_url + "/subjects", timeout=5) as r:
                    if isinstance(json.loads(r.read()), list):
                        return
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.3)
        self._fail(f"Apicurio Registry did not answer within {self.start_timeout:.0f}s")

    def _fail(self, what: str) -> None:
        log = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        raise EnvironmentProblem(f"{what}; last lines of {self.log_file}:\n{log_tail(log, 20)}",
                                 fix="check the log; the registry is built by framework/runtime/apicurio.py (Maven, a JDK)")

    def stop(self) -> None:
        """Stop the registry: SIGTERM, SIGKILL after stop_timeout. Idempotent."""
        proc = self.process
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_process(proc, self.stop_timeout)
        self.process = None

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}, {self.base}" if self.process else "stopped"
        return f"ApicurioRegistry({VERSION}, {state})"
