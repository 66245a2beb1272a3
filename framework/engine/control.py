"""`lake engine start|stop|status`: one engine per project (or per engine file), found through its
file (`.lake/engine.json` in the project, or `--file`), started once and reused.

Two starts at once make one engine (an exclusive lock file beside the engine file, naming its
process); an engine whose process died is noticed (its pid is gone or its port refuses) and its
file removed, so the next command runs on its own and the next start starts a new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from framework.engine.client import ENGINE_FILE, read_engine
from framework.errors import LakeError
from framework.runtime.history import process_alive

START_TIMEOUT = 300.0  # a cold driver on a busy 2-core machine: ~30 s; a JVM that never comes up: the log says why


class EngineStatus(BaseModel):
    """What `lake engine status` reports (and `--json` prints)."""

    file: str
    state: str  # running | stopped | dead
    pid: int | None = None
    port: int | None = None
    project: str | None = None
    master: str | None = None
    started_at: str | None = None


def default_file(project_root: Path) -> Path:
    return project_root / ENGINE_FILE


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def status(file: Path) -> EngineStatus:
    info = read_engine(file)
    if info is None:
        return EngineStatus(file=str(file), state="stopped")
    alive = process_alive(int(info["pid"])) and _answers(int(info["port"]))
    fields = {k: info.get(k) for k in ("pid", "port", "project", "master", "started_at")}
    if not alive:
        with contextlib.suppress(OSError):
            file.unlink()  # a dead engine's file: commands run on their own again
    return EngineStatus(file=str(file), state="running" if alive else "dead", **fields)


def start(project_root: Path, file: Path, timeout: float = START_TIMEOUT) -> tuple[EngineStatus, bool]:
    """Start an engine for the project unless one runs; (its status, whether this call started it)."""
    now = status(file)
    if now.state == "running":
        return now, False
    file.parent.mkdir(parents=True, exist_ok=True)
    lock = file.with_name(file.name + ".lock")
    log = file.with_name(file.stem + ".log")
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            break
        except FileExistsError:
            holder = lock.read_text().strip() if lock.exists() else ""
            if holder.isdigit() and process_alive(int(holder)):
                return _wait_for(file, int(holder), log, timeout), False  # another start is bringing it up
            lock.unlink(missing_ok=True)  # left by a start that died
    try:
        with log.open("ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "framework.cli.engine_server", "--project", str(project_root), "--file", str(file)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=str(project_root))
        os.write(fd, str(proc.pid).encode())
        os.close(fd)
        fd = -1
        return _wait_for(file, proc.pid, log, timeout, proc), True
    finally:
        if fd >= 0:
            os.close(fd)
        lock.unlink(missing_ok=True)


def _wait_for(file: Path, pid: int, log: Path, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> EngineStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_engine(file)
        if info is not None and info.get("pid") == pid:
            return status(file)
        if (proc.poll() is not None) if proc is not None else not process_alive(pid):
            raise LakeError(f"the engine exited while starting: {_tail(log)}", fix=f"read {log}; `lake build` without an engine shows the same error")
        time.sleep(0.2)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    raise LakeError(f"the engine did not start within {timeout:.0f} s: {_tail(log)}", fix=f"read {log}")


def _tail(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(lines[-3:]) or "(empty log)"


def stop(file: Path, timeout: float = 60.0) -> EngineStatus:
    """Stop the engine of `file` (SIGTERM: a running command is cancelled), waiting for it to exit."""
    now = status(file)
    if now.state != "running" or now.pid is None:
        return now
    with contextlib.suppress(ProcessLookupError):
        os.kill(now.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_alive(now.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if process_alive(now.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(now.pid, signal.SIGKILL)
    file.unlink(missing_ok=True)
    return now.model_copy(update={"state": "stopped"})


def info_json(s: EngineStatus) -> dict[str, Any]:
    return json.loads(s.model_dump_json())
