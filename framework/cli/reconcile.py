"""`lake reconcile`: printing and exit codes (framework/commands/reconcile.py)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale

if TYPE_CHECKING:
    from rich.console import Console

    from models.reconcile import TableReconcile


@click.command("reconcile")
@click.argument("tables", nargs=-1, metavar="[ods.TABLE ...]")
@click.option("--repair", is_flag=True, help="Bring the differing keys' rows back into ODS: through the connector as an incremental "
                                             "snapshot when reconcile.sources.<db>.signal names its signal table (MariaDB, MySQL), else read from the "
                                             "source and written at its log position (so no newer event is overtaken); extra keys deleted.")
@click.option("--settle", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Pause between two reads of a differing key (default: reconcile.settle_seconds, 5); longer than ingest's lag. "
                   "Not used with reconcile.sources.<db>.connect: the re-read waits for ODS to reach the database's position.")
@click.option("--timeout", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="How long keys that keep changing are re-read before they count as in flight (default: reconcile.timeout_seconds, 120).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def reconcile_cmd(obj: Ctx, tables: tuple[str, ...], repair: bool, settle: float | None, timeout: float | None, as_json: bool,
                  lock_timeout: float) -> None:
    """Compare ODS tables (default: all) with the source database tables they mirror, by checksums
    over key ranges computed in the database and in Spark, bisected down to the differing rows
    (`reconcile:` in lake.yaml says how to connect). Keys still changing are in flight, not
    differences; nothing is written (unless --repair).

    Exits 1 when any table differs or could not be compared."""
    from framework.commands.reconcile import chosen_tables, run_reconcile

    project = obj.project()
    chosen = chosen_tables(project, tables)  # config errors before Spark
    shown = None if (obj.quiet or as_json) else (lambda r: print_reconcile(obj.console, r))
    rec = run_reconcile(project=project, tables=chosen, repair=repair, lock_timeout=lock_timeout, argv=sys.argv[1:],
                        settle=settle, timeout=timeout, on_result=shown, on_stale=stale)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in rec.reconciled], indent=2))
    if rec.status == "failed":
        sys.exit(1)


def print_reconcile(console: Console, r: TableReconcile) -> None:
    """One table: its status and reason, then a few differing keys with both rows."""
    style = {"equal": "green", "differs": "bold red", "failed": "red", "unsettled": "yellow"}[r.status]
    console.print(f"[{style}]{r.status:9}[/{style}] {r.table} <- {r.source}", highlight=False)
    say(console, f"          {r.reason}")
    for s in r.samples:
        key = ", ".join(f"{k}={v}" for k, v in s.key.items())
        cols = f" [{', '.join(s.columns)}]" if s.columns else ""
        say(console, f"          {s.kind} {key}{cols}: source {json.dumps(s.source)} | ods {json.dumps(s.ods)}")
