"""`lake schedule`: run the `schedules:` of lake.yaml (framework/ops/schedule.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from framework.cli.support import Ctx, err_console, handle_errors, say
from framework.errors import LakeError


@click.command()
@click.option("--list", "list_only", is_flag=True, help="Print each schedule with its next fire times, then exit.")
@click.option("--next", "count", default=3, show_default=True, help="How many fire times --list shows.")
@click.option("--airflow", "airflow_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write an Airflow DAG file (one DAG per schedule) to this path, then exit.")
@click.option("--lake-bin", default="lake", show_default=True, help="With --airflow: the lake executable on the workers.")
@click.pass_obj
@handle_errors
def schedule(obj: Ctx, list_only: bool, count: int, airflow_path: Path | None, lake_bin: str) -> None:
    """Run the `schedules:` of lake.yaml until SIGTERM/Ctrl-C (each run in its own `lake` process)."""
    from framework.ops import schedule as sched

    project = obj.project()
    schedules = list(project.config.schedules)
    if not schedules:
        raise LakeError("lake.yaml has no `schedules:`",
                        fix="add e.g. schedules: [{name: nightly, cron: '0 2 * * *', what: run, incremental: true}]")
    sched.check(project, schedules)
    if airflow_path is not None:
        from framework.ops.airflow import render_dags

        airflow_path.write_text(render_dags(project.root, schedules, lake_bin, project.target), encoding="utf-8")
        say(obj.console, f"wrote {len(schedules)} Airflow DAG(s) to {airflow_path}")
        return
    if list_only:
        for s in schedules:
            commands = " && ".join("lake " + " ".join(c) for c in sched.lake_commands(s))
            times = ", ".join(f"{t:%Y-%m-%d %H:%M:%S %Z}" for t in sched.next_fire_times(s, count))
            click.echo(f"{s.name}  cron '{s.cron}' ({s.timezone})  {commands}\n  next: {times}")
        return

    def log(text: str) -> None:
        from datetime import datetime

        say(err_console, f"{datetime.now():%Y-%m-%d %H:%M:%S} {text}")

    from framework.observe.observer import exposing

    with exposing(project, log) as observer:
        steps = sched.SubprocessSteps(project.root, log, project.target, observer=observer, spool=project.local_state / "spool")
        scheduler = sched.Scheduler(schedules, steps, log, state_dir=project.local_state, metrics=observer.metrics)
        code = sched.serve(scheduler, log, steps.terminate)
    sys.exit(code)
