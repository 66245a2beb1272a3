"""`lake verify`: printing and exit codes (framework/commands/verify.py)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale

if TYPE_CHECKING:
    from rich.console import Console

    from models.verify import ModelVerify


@click.command("verify")
@click.argument("selectors", nargs=-1)
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--sample", default=None, metavar="PCT", help="Compare only the keys whose hash falls in this fraction, e.g. 1%.")
@click.option("--repair", is_flag=True, help="Rebuild each model that differs in full (gate and commit as `lake build MODEL`), "
                                             "then verify the models reading it.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def verify_cmd(obj: Ctx, selectors: tuple[str, ...], exclude: tuple[str, ...], sample: str | None, repair: bool, as_json: bool,
               lock_timeout: float) -> None:
    """Compare each selected model's table with a full build of it from its upstreams as of the
    instants its last commit recorded; nothing is written (unless --repair).

    Exits 1 when any model differs or could not be verified."""
    from framework.commands.verify import run_verify
    from framework.transform.runner import selection
    from framework.transform.verify import check_fraction

    fraction = check_fraction(sample) if sample is not None else None  # before Spark starts
    project = obj.project()
    chosen = selection(project, selectors, exclude)
    shown = None if (obj.quiet or as_json) else (lambda r: print_verify(obj.console, r))
    rec = run_verify(project=project, selection=chosen, sample=fraction, repair=repair, lock_timeout=lock_timeout,
                     argv=sys.argv[1:], on_result=shown, on_stale=stale)
    if as_json:
        click.echo(json.dumps([v.model_dump(mode="json") for v in rec.verified], indent=2))
    if rec.status == "failed":
        sys.exit(1)


def print_verify(console: Console, r: ModelVerify) -> None:
    """One model: its status and reason, then a few differing keys with both rows."""
    style = {"equal": "green", "differs": "bold red", "failed": "red", "skipped": "yellow"}[r.status]
    console.print(f"[{style}]{r.status:8}[/{style}] {r.model}", highlight=False)
    say(console, f"         {r.reason}")
    for s in r.samples:
        key = ", ".join(f"{k}={v}" for k, v in s.key.items())
        say(console, f"         key {key}: table {json.dumps(s.table, default=str)} | full build {json.dumps(s.full, default=str)}")
