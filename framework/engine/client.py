"""The client side of the warm engine: the first thing the `lake` console script does.

`run(argv)` sends the command to an engine when one serves this project and returns its exit code,
or returns None (no engine, a dead one, a command an engine does not run, a project whose Spark
settings the engine's JVM cannot take): the caller then runs the command itself, as without an
engine. Only the standard library is imported here, so a served command starts in milliseconds.

Which engine: `$LAKE_ENGINE` (the path of an engine file; `off` uses none), else the project's own
`.lake/engine.json` (written by `lake engine start`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from framework.engine import wire

ENGINE_FILE = Path(".lake") / "engine.json"
# Commands an engine never runs: they run until stopped, manage the engine, or are the platform's
# (spark-submit) entry point. `lake demo` starts services (a broker, a database) with --kafka or a
# --source other than the simulator: then it runs on its own too.
LOCAL_ONLY = frozenset({"init", "schedule", "engine", "submit"})
# Fault injection kills or pauses its own process (framework/runtime/faults.py): never the engine.
LOCAL_ENV = ("LAKE_FAILPOINT", "LAKE_PAUSE")
GLOBAL_WITH_VALUE = ("--project", "--target")


def split_globals(argv: list[str]) -> tuple[dict[str, str], str | None]:
    """The group options before the subcommand (`--project`, `--target`) and the subcommand."""
    found: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        name, eq, value = a.partition("=")
        if name in GLOBAL_WITH_VALUE:
            if eq:
                found[name] = value
            elif i + 1 < len(argv):
                found[name] = argv[i + 1]
                i += 1
        elif not a.startswith("-"):
            return found, a
        i += 1
    return found, None


def servable(argv: list[str], env: dict[str, str] | os._Environ[str]) -> bool:
    _, command = split_globals(argv)
    if command is None or command in LOCAL_ONLY or "--continuous" in argv:
        return False
    if command == "demo" and ("--kafka" in argv or _option(argv, "--source") not in (None, "simulator")):
        return False
    return not any(env.get(k) for k in LOCAL_ENV)


def _option(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def engine_file(argv: list[str], env: dict[str, str] | os._Environ[str], cwd: Path) -> Path | None:
    chosen = env.get("LAKE_ENGINE", "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return Path(chosen)
    found, _ = split_globals(argv)
    return (cwd / found.get("--project", ".")) / ENGINE_FILE


def read_engine(path: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and {"port", "token", "pid"} <= info.keys() else None


def _terminal() -> dict[str, Any]:
    def tty(stream: Any) -> bool:
        try:
            return bool(stream.isatty())
        except (AttributeError, ValueError):
            return False

    size = shutil.get_terminal_size()
    return {"stdin": tty(sys.stdin), "stdout": tty(sys.stdout), "stderr": tty(sys.stderr),
            "columns": size.columns, "lines": size.lines}


def run(argv: list[str]) -> int | None:
    """Run `argv` on this project's engine: its exit code, or None when no engine takes it."""
    env = os.environ
    if not servable(argv, env):
        return None
    path = engine_file(argv, env, Path.cwd())
    info = read_engine(path) if path is not None else None
    if info is None:
        return None
    info["own"] = not env.get("LAKE_ENGINE")
    try:
        sock = socket.create_connection(("127.0.0.1", int(info["port"])), timeout=5)
    except OSError:
        return None  # not running (a dead engine's file): the command runs here
    sock.settimeout(None)
    with sock:
        request = {"token": info["token"], "argv": argv, "cwd": os.getcwd(), "env": dict(env), "terminal": _terminal()}
        try:
            wire.send_json(sock, b"R", request)
            return _relay(sock, info)
        except wire.WireError:
            return None  # closed before it started the command (it was stopping): run here
        except OSError:
            return None


def _relay(sock: socket.socket, info: dict[str, Any]) -> int | None:
    """Copy the engine's output to ours until its exit code arrives. Ctrl-C asks the engine to
    cancel the command (its Spark jobs and its Python code), then waits for it to end."""
    started = False
    interrupts = 0
    while True:
        try:
            kind, payload = wire.receive(sock)
        except KeyboardInterrupt:
            interrupts += 1
            if interrupts > 1:
                return 130
            with contextlib.suppress(OSError):
                wire.send(sock, b"C")
            continue
        except wire.WireError:
            if not started:
                return None
            sys.stderr.write(f"lake: the engine (pid {info.get('pid')}) ended during the command; lake's commits are atomic, "
                             "so what it had not committed is not in the tables: run the command again\n")
            return 1
        if kind == b"o":
            started = True
            sys.stdout.buffer.write(payload)
            sys.stdout.flush()
        elif kind == b"e":
            started = True
            sys.stderr.buffer.write(payload)
            sys.stderr.flush()
        elif kind == b"x":
            return int(json.loads(payload)["code"])
        elif kind == b"n":
            if info.get("own") and not started:  # the project's own engine: say why this command starts a driver
                why = json.loads(payload).get("reason", "")
                sys.stderr.write(f"note: the engine does not run this command ({why}); running it here\n")
            return None
