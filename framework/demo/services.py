"""Helpers for the service processes the tests and the demo start on loopback (Kafka today):
free ports, children that die with their parent, the useful end of a log."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket
import subprocess
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
