"""`lake compact`: printing and exit codes (framework/commands/compact.py)."""

from __future__ import annotations

import json
import sys

import click

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale


@click.command("compact")
@click.argument("tables", nargs=-1, metavar="[TABLE]...")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def compact_cmd(obj: Ctx, tables: tuple[str, ...], as_json: bool, lock_timeout: float) -> None:
    """Compact merge-on-read tables (all of them without TABLE): their log files become base files.

    Tables with `compact_every: 0` compact only here; run it by hand or from a schedule
    (`what: compact` in lake.yaml)."""
    from framework.commands.compact import chosen, run_compact

    project = obj.project()
    if not chosen(project, tables):
        say(obj.console, "no merge-on-read table in this project: nothing to compact (`type: mor` declares one)")
        return
    done = run_compact(project=project, names=tables, lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in done], indent=2))
        return
    for r in done:
        if r.status == "compacted":
            say(obj.console, f"{r.table}: compacted in {r.seconds:.1f} s (instant {r.instant})")
        elif r.status == "nothing":
            say(obj.console, f"{r.table}: nothing to compact (no log files since the last compaction)")
        else:
            say(obj.console, f"{r.table}: not written yet")
