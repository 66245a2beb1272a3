"""`lake runs`: run history (framework/runtime/history.py)."""

from __future__ import annotations

import json

import click

from framework.cli.support import Ctx, handle_errors


@click.group(invoke_without_command=True)
@click.option("--last", default=20, show_default=True, help="How many recent runs.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
@handle_errors
def runs(ctx: click.Context, last: int, fmt: str) -> None:
    """Run history: `lake runs`, `lake runs show RUN_ID`."""
    if ctx.invoked_subcommand:
        return
    from framework.runtime import history
    from framework.runtime import terminal as report
    from framework.runtime.paths import Layout
    from framework.table.session import ensure_storage

    obj: Ctx = ctx.obj
    ensure_storage(obj.project())
    records = history.runs(Layout(obj.project().warehouse), last)
    if fmt == "json":
        click.echo(json.dumps([json.loads(r.model_dump_json()) for r in records], indent=2))
    else:
        report.print_runs(obj.console, records)


@runs.command("show")
@click.argument("run_id")
@click.pass_obj
@handle_errors
def runs_show(obj: Ctx, run_id: str) -> None:
    """Everything recorded about one run (JSON)."""
    from framework.runtime import history
    from framework.runtime.paths import Layout
    from framework.table.session import ensure_storage

    ensure_storage(obj.project())
    click.echo(history.get(Layout(obj.project().warehouse), run_id).model_dump_json(indent=2))
