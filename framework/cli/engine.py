"""`lake engine start|stop|status`: a warm engine for this project (framework/engine/)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from framework.cli.support import Ctx, handle_errors, say

FILE = click.option("--file", "engine_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                    help="The engine file (default: .lake/engine.json in the project); point $LAKE_ENGINE at it to use it from anywhere.")


def _file(obj: Ctx, engine_file: Path | None) -> Path:
    from framework.engine.control import default_file

    return engine_file if engine_file is not None else default_file(obj.project_dir.resolve())


@click.group()
def engine() -> None:
    """A warm engine: one running Spark driver that later `lake` commands of this project use."""


@engine.command("start")
@FILE
@click.option("--json", "as_json", is_flag=True, help="Print the engine's status as JSON.")
@click.pass_obj
@handle_errors
def start_cmd(obj: Ctx, engine_file: Path | None, as_json: bool) -> None:
    """Start the engine (a no-op when it runs); later commands of this project run on it."""
    from framework.engine import control

    obj.project()  # a broken lake.yaml is reported here, not in the engine's log
    began = time.monotonic()
    s, started = control.start(obj.project_dir.resolve(), _file(obj, engine_file))
    if as_json:
        click.echo(json.dumps(control.info_json(s)))
    elif started:
        say(obj.console, f"engine started in {time.monotonic() - began:.1f} s: pid {s.pid}, 127.0.0.1:{s.port}, {s.master} ({s.file})")
    else:
        say(obj.console, f"engine already running: pid {s.pid}, 127.0.0.1:{s.port} ({s.file})")


@engine.command("stop")
@FILE
@click.pass_obj
@handle_errors
def stop_cmd(obj: Ctx, engine_file: Path | None) -> None:
    """Stop the engine (a command it is running is cancelled)."""
    from framework.engine import control

    s = control.stop(_file(obj, engine_file))
    if s.state == "dead":
        say(obj.console, f"the engine (pid {s.pid}) had died; its file is removed")
    else:
        say(obj.console, "no engine was running" if s.pid is None else f"engine stopped (pid {s.pid})")


@engine.command("status")
@FILE
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@handle_errors
def status_cmd(obj: Ctx, engine_file: Path | None, as_json: bool) -> None:
    """Whether an engine runs for this project; exit 1 when none does."""
    from framework.engine import control

    s = control.status(_file(obj, engine_file))
    if as_json:
        click.echo(json.dumps(control.info_json(s)))
    elif s.state == "running":
        say(obj.console, f"running: pid {s.pid}, 127.0.0.1:{s.port}, {s.master}, since {s.started_at}, project {s.project}")
    elif s.state == "dead":
        say(obj.console, f"dead: the engine (pid {s.pid}) is gone; its file is removed, commands run on their own")
    else:
        say(obj.console, "stopped: no engine; commands start their own driver")
    raise SystemExit(0 if s.state == "running" else 1)
