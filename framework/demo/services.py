"""The service processes tests and demos start on loopback (Kafka broker, Kafka Connect, Hive
metastore, MariaDB, PostgreSQL): one base class for starting, waiting until ready, stopping and
failing with the useful end of the log, plus the helpers they share (free ports).

A service subclasses :class:`Service` and says what is particular to it:

    class Thing(Service):
        name = "the thing"
        def command(self) -> list[str]: ...        # after prepare(): ports picked, files written
        def prepare(self) -> None: ...             # optional: config files, data dir, ports
        def ready(self) -> bool: ...               # polled until True (may call self.fail)
        def after_ready(self) -> None: ...         # optional: users, grants

    with Thing(work_dir) as thing:                 # start() ... stop(), also on errors
        ...

The child dies with this process (PR_SET_PDEATHSIG), its output goes to `out_file`, `stop()` (also
run at exit) sends SIGTERM, then SIGKILL after `stop_timeout`, and reaps it. A start that fails
stops the child and raises EnvironmentProblem with the last lines of `log_files()`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from framework.errors import EnvironmentProblem

S = TypeVar("S", bound="Service")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as s:
        s.settimeout(timeout)
        return s.connect_ex(("127.0.0.1", port)) == 0


def die_with_parent() -> None:
    """Runs in the child before exec: the kernel kills the JVM if this Python process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def log_tail(text: str, n: int = 10) -> str:
    """Last `n` lines that say something: indented lines (stack frames, the config dump) are left out."""
    lines = [line for line in text.strip().splitlines() if line and not line[0].isspace()]
    return "\n".join(lines[-n:])


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Stop a service process: SIGTERM, SIGKILL when it is still there after `timeout` seconds;
    reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Service:
    """One service process with its own `work_dir`; a context manager (module docstring)."""

    name = "the service"
    # What the error of a failed start suggests, after the log's last lines.
    fix = "check the log; a port clash or a slow machine may need a retry or a longer start_timeout"
    poll_seconds = 0.2

    def __init__(self, work_dir: Path | str, *, start_timeout: float = 60.0, stop_timeout: float = 20.0) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    # -- what a service says about itself --------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Before the process starts: ports, configuration files, a data directory."""

    def ready(self) -> bool:
        """Whether the service answers; polled until True or `start_timeout`."""
        raise NotImplementedError

    def after_ready(self) -> None:
        """Once it answers: users, grants, anything the callers need before start() returns."""

    @property
    def out_file(self) -> Path:
        """The process's stdout and stderr."""
        return self.work_dir / "logs" / "service.out"

    def log_files(self) -> list[Path]:
        """Where a failure is explained; their last lines go into the error."""
        return [self.out_file]

    def cwd(self) -> Path:
        return self.work_dir

    def popen_options(self) -> dict[str, Any]:
        """More arguments for subprocess.Popen (`user`, `group`: applied before die_with_parent)."""
        return {}

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __enter__(self: S) -> S:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the process and return once it is ready; on any failure it is stopped again."""
        if self.process is not None:
            raise RuntimeError(f"{self.name} is already started")
        began = time.monotonic()
        self.out_file.parent.mkdir(parents=True, exist_ok=True)
        self.prepare()
        main_thread = threading.current_thread() is threading.main_thread()
        with open(self.out_file, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=self.cwd(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                # The death signal fires when the forking *thread* exits, so only from the main one.
                preexec_fn=die_with_parent if main_thread else None, **self.popen_options(),
            )  # fmt: skip
        atexit.register(self.stop)
        try:
            self._wait_ready(began)
            self.after_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began

    def _wait_ready(self, began: float) -> None:
        deadline = began + self.start_timeout
        while time.monotonic() < deadline:
            self.check_alive("while starting")
            if self.ready():
                return
            time.sleep(self.poll_seconds)
        self.fail(f"{self.name} was not ready within {self.start_timeout:.0f}s")

    def check_alive(self, when: str = "") -> None:
        """Fail (with the log's end) when the process has exited."""
        assert self.process is not None, f"{self.name} is not started"
        if self.process.poll() is not None:
            self.fail(f"{self.name} exited with code {self.process.returncode}" + (f" {when}" if when else ""))

    def fail(self, what: str, fix: str | None = None) -> NoReturn:
        """Raise EnvironmentProblem: `what`, then the last lines of the service's logs."""
        parts = [(p, p.read_text(errors="replace")) for p in self.log_files() if p.exists()]
        shown = [p for p, text in parts if text.strip()]
        tail = log_tail("\n".join(text for _p, text in parts), 20)
        where = ", ".join(str(p) for p in shown) or ", ".join(str(p) for p in self.log_files())
        raise EnvironmentProblem(f"{what}; last lines of {where}:\n{tail}", fix=fix or self.fix)

    def stop(self) -> None:
        """Stop the process: SIGTERM (a clean shutdown), SIGKILL after stop_timeout. Idempotent."""
        proc = self.process
        if proc is None:
            return
        atexit.unregister(self.stop)
        stop_process(proc, self.stop_timeout)
        self.process = None
