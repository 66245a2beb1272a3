"""`lake freshness`: the click command and its table (registered by framework/cli/main.py)."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from framework.cli.support import Ctx, handle_errors, say
from models.freshness import show_duration
from models.records import SourceFreshness

STYLE = {"ok": "green", "warn": "yellow", "error": "bold red", "none": "dim"}


def age_text(seconds: float | None) -> str:
    """An age as days, hours, minutes and seconds: 2h 5m, 3d 4h, 42s."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s")]
    shown = [f"{n}{u}" for n, u in parts if n][:2]
    return " ".join(shown) or "0s"


def print_freshness(console: Console, rows: list[SourceFreshness]) -> None:
    t = Table(title="source freshness", title_justify="left")
    for col in ("table", "status", "age", "measured from", "newest event (UTC)", "last commit (UTC)", "warn after", "error after"):
        t.add_column(col, no_wrap=True)
    for r in rows:
        t.add_row(Text(r.table), Text(r.status if r.status != "none" else "-", style=STYLE[r.status]), age_text(r.age_s), r.measured_from,
                  f"{r.newest_event_at:%Y-%m-%d %H:%M:%S}" if r.newest_event_at else "-",
                  f"{r.last_commit_at:%Y-%m-%d %H:%M:%S}" if r.last_commit_at else "-",
                  show_duration(r.warn_after_s) if r.warn_after_s else "-", show_duration(r.error_after_s) if r.error_after_s else "-")
    console.print(t)


@click.command()
@click.argument("selectors", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_obj
@handle_errors
def freshness(obj: Ctx, selectors: tuple[str, ...], as_json: bool) -> None:
    """Age of each ODS table's newest ingested source event against its `freshness:`.

    Exits 1 when a table is past its error_after (warn_after only warns), as dbt's `source freshness`."""
    from framework.commands.freshness import run_freshness

    rows = run_freshness(project=obj.project(), selectors=list(selectors))
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=2))
    else:
        print_freshness(obj.console, rows)
        if all(r.status == "none" for r in rows):
            say(obj.console, "no selected table declares `freshness:` (e.g. freshness: {warn_after: 30m, error_after: 2h})")
    if any(r.status == "error" for r in rows):
        sys.exit(1)
