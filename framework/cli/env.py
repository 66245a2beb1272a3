"""`lake diff` and `lake env list|promote|drop`: environments (framework/envs/layout.py); builds into an
environment are `lake build --env NAME`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale


@click.command()
@click.argument("model")
@click.option("--env", required=True, metavar="NAME", help="The environment to compare with production.")
@click.option("--samples", default=5, show_default=True, help="Sample rows per kind of difference.")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.pass_obj
@handle_errors
def diff(obj: Ctx, model: str, env: str, samples: int, as_json: bool) -> None:
    """Schema and rows of MODEL in environment --env against production (added, removed, changed by key)."""
    from framework.envs import layout as envs
    from framework.envs.diff import diff_model
    from framework.table.session import spark_session

    project = obj.project()
    spark = spark_session(project)
    result = diff_model(spark, envs.existing(project.warehouse, env), model.strip().lower(), samples)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    _print_diff(obj, result)


def _print_diff(obj: Ctx, d: Any) -> None:
    c = obj.console
    say(c, f"{d.model}: environment {d.env} vs production")
    if d.columns:
        t = Table(title="schema", title_justify="left")
        for col in ("column", "production", "environment"):
            t.add_column(col)
        for ch in d.columns:
            t.add_row(Text(ch.name), Text(ch.production or "(absent)"), Text(ch.environment or "(absent)"))
        c.print(t)
    else:
        say(c, "schema: the same")
    say(c, f"rows: production {d.production_rows}, environment {d.environment_rows}; "
           f"added {d.added}, removed {d.removed}, changed {d.changed}, unchanged {d.unchanged} (by key)")
    for kind in ("added", "removed", "changed"):
        rows = d.samples.get(kind) or []
        if rows:
            t = Table(title=f"{kind} (sample)", title_justify="left")
            for col in rows[0]:
                t.add_column(Text(col))
            for r in rows:
                t.add_row(*[Text("NULL" if v is None else str(v)) for v in r.values()])
            c.print(t)
    for note in d.notes:
        say(c, f"note: {note}")


@click.group()
def env() -> None:
    """Environments: list, promote to production, drop (build into one with `lake build --env NAME`)."""


@env.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@handle_errors
def list_cmd(obj: Ctx, as_json: bool) -> None:
    """The environments of the warehouse, their models and pinned production instants."""
    from framework.commands.env import list_envs
    from framework.table.session import ensure_storage

    project = obj.project()
    ensure_storage(project)
    states = list_envs(project)
    if as_json:
        click.echo(json.dumps([s.model_dump(mode="json") for s in states], indent=2))
        return
    if not states:
        say(obj.console, "no environments (create one with `lake build --env NAME SELECTOR`)")
    for s in states:
        say(obj.console, f"{s.name}: models {', '.join(s.models) or 'none'}; created {s.created_at:%Y-%m-%d %H:%M:%S} UTC")
        for table, at in sorted(s.pins.items()):
            say(obj.console, f"  reads production {table} as of {at}")


@env.command("promote")
@click.argument("name")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def promote_cmd(obj: Ctx, name: str, lock_timeout: float) -> None:
    """Production builds the environment's models and their descendants (changed code rebuilds fully)."""
    from framework.commands.env import promote
    from framework.runtime import terminal as report

    rec = promote(project=obj.project(), env=name, lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale)
    report.print_build_summary(obj.console, rec.models)
    if rec.status == "failed":
        sys.exit(1)
    say(obj.console, f"promoted {name}; `lake env drop {name}` removes the environment")


@env.command("drop")
@click.argument("name")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def drop_cmd(obj: Ctx, name: str, lock_timeout: float) -> None:
    """Delete the environment's tables and records (_env/NAME/), after any build running in it;
    production is not touched."""
    from framework.commands.env import drop
    from framework.table.session import ensure_storage

    project = obj.project()
    ensure_storage(project)
    state = drop(project=project, env=name, lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale)
    say(obj.console, f"dropped environment {name} ({', '.join(state.models) or 'no models'})")
