"""The engine process (`python -m framework.cli.engine_server --project DIR --file ENGINE_FILE`,
which hands it the CLI to run).

It starts the project's Spark driver once, imports what commands use (lake's modules, Great
Expectations), then serves `lake` commands on a loopback port, one at a time, in the main thread
(lake's signal handling and Python's import machinery expect it). Each command runs with its
client's argument list, working directory, environment and terminal, in a session of its own
(framework/engine/session.py); its output streams to the client as it is written. The engine file
(pid, port, a random token the client must present) is written only once the engine serves, and
removed when it stops. SIGTERM (`lake engine stop`) cancels a running command and ends the engine.

A command whose project the engine's JVM cannot take (other static Spark settings), or that runs
with fault injection set, is answered "not here": its client runs it itself.
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import hmac
import io
import json
import os
import secrets
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from framework.engine import client as engine_client
from framework.engine import streams, wire
from framework.runtime.history import process_alive


class Engine:
    def __init__(self, project_dir: Path, file: Path, cli: Callable[[list[str]], Any]) -> None:
        self.project_dir, self.file, self.cli = project_dir, file, cli
        self.token = secrets.token_hex(16)
        self.stopping = False
        self.running = False  # a command is in flight (the cancel watcher may interrupt it)
        self.serial = 0  # which command: a watcher acts on its own command only, never on the next one
        self.state = threading.Lock()  # held while `running`/`serial` change, and while a cancel acts on them
        self.served = 0
        self.spark: Any = None
        # LAKE_ENGINE_OWNER: a process whose end ends the engine (a test session's worker).
        owner = os.environ.get("LAKE_ENGINE_OWNER", "")
        self.owner = int(owner) if owner.isdigit() else None

    # -- start -------------------------------------------------------------------------------
    def start(self) -> socket.socket:
        from framework.engine.session import remember_java
        from framework.project.config import load_project
        from framework.table.session import spark_session

        project = load_project(self.project_dir)
        remember_java()
        self.spark = spark_session(project)
        self.spark.range(1).count()  # the first job starts the executors' machinery
        import framework.commands.build  # noqa: F401
        import framework.commands.check  # noqa: F401
        import framework.commands.ingest  # noqa: F401
        with contextlib.suppress(ImportError):
            import great_expectations  # noqa: F401 - ~5 s a cold command with checks pays
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.5)
        self._write_file(listener.getsockname()[1], project)
        return listener

    def _write_file(self, port: int, project: Any) -> None:
        info = {"pid": os.getpid(), "port": port, "token": self.token, "project": str(project.root.resolve()),
                "master": self.spark.sparkContext.master, "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "python": sys.executable}
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the token lets a client run code here
        with os.fdopen(fd, "w") as out:
            json.dump(info, out)
        os.replace(tmp, self.file)

    # -- serve -------------------------------------------------------------------------------
    def serve(self, listener: socket.socket) -> None:
        while not self.stopping:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if not self._jvm_alive():
                    print("engine: the driver JVM is gone; stopping", file=sys.__stderr__)
                    return
                if self.owner is not None and not process_alive(self.owner):
                    print(f"engine: its owner (pid {self.owner}) is gone; stopping", file=sys.__stderr__)
                    return
                continue
            except OSError:
                if self.stopping:
                    return
                raise
            # a client that went away, or a cancel that arrived after its command ended
            with conn, contextlib.suppress(OSError, KeyboardInterrupt):
                self.handle(conn)

    def _jvm_alive(self) -> bool:
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()
        except Exception:  # noqa: BLE001 - py4j: the gateway is gone
            return False

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        kind, payload = wire.receive(conn)
        conn.settimeout(None)
        req = json.loads(payload) if kind == b"R" else {}
        if not hmac.compare_digest(str(req.get("token", "")), self.token):
            wire.send_json(conn, b"n", {"reason": "not this engine's token"})
            return
        argv: list[str] = [str(a) for a in req["argv"]]
        env: dict[str, str] = {str(k): str(v) for k, v in req["env"].items()}
        if not engine_client.servable(argv, env):
            wire.send_json(conn, b"n", {"reason": "a command the engine does not run"})
            return
        with _client_context(conn, req, env):
            why = self._refusal(argv)
            if why is not None:
                streams.CLIENT.sock = None
                print(f"engine: not running `lake {' '.join(argv)}`: {why}", file=sys.__stderr__)
                wire.send_json(conn, b"n", {"reason": why})
                return
            code = self._run(conn, argv)
        self.served += 1
        wire.send_json(conn, b"x", {"code": code})

    def _refusal(self, argv: list[str]) -> str | None:
        """Why this engine cannot run the command's project (None: it can, or the project does not
        load, and the command itself reports that as it would anywhere)."""
        from framework.engine.session import reason
        from framework.project.config import load_project

        found, _ = engine_client.split_globals(argv)
        try:
            project = load_project(Path(found.get("--project", ".")), found.get("--target"))
        except Exception:  # noqa: BLE001 - the command reports a broken project itself
            return None
        return reason(project, self.spark)

    def _run(self, conn: socket.socket, argv: list[str]) -> int:
        from framework.engine.session import fresh, release
        from framework.table import session as sessions

        session = fresh(self.spark)
        sessions._ADOPTED[:] = [session]
        with self.state:
            self.serial += 1
            self.running = True
        watcher = threading.Thread(target=self._watch, args=(conn, self.serial), daemon=True, name="engine-cancel")
        watcher.start()
        code = 0
        try:
            self.cli(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            code = 130
        except BaseException as e:  # noqa: BLE001 - the command's crash is the client's, not the engine's
            print(f"Internal error: {type(e).__name__}: {e}", file=sys.stderr)
            traceback.print_exc(file=sys.__stderr__)  # the engine's log
            code = 2
        finally:
            with self.state:
                self.running = False
            sessions._ADOPTED[:] = []
            with contextlib.suppress(Exception):
                release(self.spark, session)
            sys.stdout.flush()
            sys.stderr.flush()
        return code

    def _watch(self, conn: socket.socket, serial: int) -> None:
        """Cancel the command when its client asks (Ctrl-C) or goes away."""
        try:
            kind, _ = wire.receive(conn)
        except OSError:
            kind = b"C"  # gone
        if kind == b"C":
            self.cancel(serial)

    def _serving(self, serial: int | None) -> bool:
        return self.running and (serial is None or self.serial == serial)

    def cancel(self, serial: int | None = None) -> None:
        """Stop the running command (`serial`: only if it is still that one) as Ctrl-C stops a
        local `lake`: its Spark jobs are cancelled (the call waiting on them fails, and the command
        reports an interruption, exit 130), and so is every job it starts until it ends, so a
        Ctrl-C that comes before its first job is not lost. A command still running Python code 5 s
        later gets KeyboardInterrupt in its thread."""
        if not self._serving(serial):
            return
        sc = self.spark.sparkContext
        with contextlib.suppress(Exception):
            sc.cancelAllJobs()
        if threading.get_ident() == threading.main_thread().ident:
            raise KeyboardInterrupt  # SIGTERM's handler, in the command's own thread
        serial = self.serial if serial is None else serial
        interrupt_at = time.monotonic() + 5
        while self._serving(serial):
            time.sleep(0.25)
            with self.state:
                if not self._serving(serial):
                    break
                with contextlib.suppress(Exception):
                    sc.cancelAllJobs()  # one the command started since
                if interrupt_at and time.monotonic() >= interrupt_at:
                    _thread.interrupt_main()
                    interrupt_at = 0.0

    def stop(self, *_: Any) -> None:
        self.stopping = True
        if self.running:
            self.cancel()

    def remove_file(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(self.file.read_text()).get("pid") == os.getpid():
                self.file.unlink()


@contextlib.contextmanager
def _client_context(conn: socket.socket, req: dict[str, Any], env: dict[str, str]) -> Any:
    """The client's working directory, environment, terminal and streams for one command."""
    saved_env, saved_cwd, saved_argv, saved_stdin = dict(os.environ), os.getcwd(), sys.argv, sys.stdin
    terminal = req.get("terminal", {})
    if terminal.get("stdout") or terminal.get("stderr"):
        env.setdefault("COLUMNS", str(terminal.get("columns", 80)))
        env.setdefault("LINES", str(terminal.get("lines", 24)))
    os.environ.clear()
    os.environ.update(env)
    streams.CLIENT.tty = {"stdout": bool(terminal.get("stdout")), "stderr": bool(terminal.get("stderr"))}
    streams.CLIENT.sock = conn
    sys.argv = ["lake-engine", *req["argv"]]  # not "lake": a command never re-executes the engine (cli/support.py)
    sys.stdin = io.StringIO("")
    try:
        os.chdir(req["cwd"])
        yield
    finally:
        streams.CLIENT.sock = None
        sys.stdin, sys.argv = saved_stdin, saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def main(cli: Callable[[list[str]], Any], argv: list[str] | None = None) -> int:
    """Run an engine; `cli(argv)` runs one command (click's standalone mode: it raises SystemExit)."""
    parser = argparse.ArgumentParser(prog="python -m framework.cli.engine_server")
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--file", type=Path, required=True)
    args = parser.parse_args(argv)
    sys.stdout = streams.ClientStream(b"o", "stdout", sys.__stdout__)  # type: ignore[arg-type]
    sys.stderr = streams.ClientStream(b"e", "stderr", sys.__stderr__)  # type: ignore[arg-type]
    engine = Engine(args.project.resolve(), args.file.resolve(), cli)
    signal.signal(signal.SIGTERM, engine.stop)
    began = time.monotonic()
    try:
        listener = engine.start()
    except Exception as e:  # noqa: BLE001 - said in the log the starter shows
        print(f"engine: could not start: {type(e).__name__}: {e}", file=sys.__stderr__)
        return 1
    print(f"engine: serving on 127.0.0.1:{listener.getsockname()[1]} after {time.monotonic() - began:.1f} s", file=sys.__stderr__)
    try:
        engine.serve(listener)
    finally:
        engine.remove_file()
        listener.close()
        with contextlib.suppress(Exception):
            engine.spark.stop()
    print(f"engine: stopped after {engine.served} commands", file=sys.__stderr__)
    return 0
