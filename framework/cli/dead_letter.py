"""`lake dead-letter list|replay|purge`: printing and exit codes (framework/commands/dead_letter.py)."""

from __future__ import annotations

import json
import sys

import click
from rich.table import Table
from rich.text import Text

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale

TABLE = click.option("--table", default=None, metavar="ods.TABLE", help="Only the events of this ODS table (as declared now).")
REASON = click.option("--reason", default=None, metavar="TEXT", help="Only events whose reason contains TEXT (case-insensitive).")


@click.group("dead-letter")
def dead_letter() -> None:
    """The dead letter (_lake.dead_letter): list it, replay events after a fix, purge it."""


@dead_letter.command("list")
@TABLE
@REASON
@click.option("--samples", default=3, show_default=True, help="Sample events shown per table and reason.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_obj
@handle_errors
def list_cmd(obj: Ctx, table: str | None, reason: str | None, samples: int, fmt: str) -> None:
    """Counts by source table and reason (pending and replayed), with samples."""
    from framework.commands.dead_letter import run_dead_letter_list

    found = run_dead_letter_list(project=obj.project(), table=table, reason=reason, samples=samples)
    if fmt == "json":
        click.echo(json.dumps([g.model_dump(mode="json") for g in found], indent=2))
        return
    if not found:
        say(obj.console, "the dead letter holds no such events")
        return
    t = Table("source table", "ODS table", "pending", "replayed", "reason")
    for g in found:
        # Text cells: a reason holds text lake does not control (`[...]` would be read as markup).
        t.add_row(*[Text(c) for c in (g.source_table or "-", g.table or "(not declared)", str(g.pending), str(g.replayed), g.reason)])
    obj.console.print(t)
    for g in found:
        for s in g.samples:
            say(obj.console, f"  {g.source_table or '-'} | {s.loc}: {s.raw}")


@dead_letter.command("replay")
@TABLE
@REASON
@click.option("--allow-expired-tombstones", "allow_expired", is_flag=True,
              help="Also replay events older than a delete whose tombstone expired (they may re-insert deleted rows).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def replay_cmd(obj: Ctx, table: str | None, reason: str | None, allow_expired: bool, as_json: bool, lock_timeout: float) -> None:
    """Put pending events back through ingest, in their original order; each is marked replayed."""
    from framework.commands.dead_letter import run_dead_letter_replay

    done = run_dead_letter_replay(project=obj.project(), table=table, reason=reason, lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale,
                                  allow_expired=allow_expired)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in done], indent=2))
        return
    if not any(r.selected for r in done):
        say(obj.console, "nothing to replay: no pending event matches")
    for r in done:
        if r.selected:
            was = "finished interrupted replay" if r.resumed else "replay"
            say(obj.console, f"{was} {r.replay_id}: {r.selected} events put back through ingest, {r.replayed} marked replayed, "
                             f"{r.failed_again} dead-lettered again (still pending, with their new reason)")
        if r.refused_expired:
            n = sum(r.refused_expired.values())
            per = ", ".join(f"{t}: {k}" for t, k in sorted(r.refused_expired.items()))
            say(obj.console, f"  of those, {n} refused ({per}): older than a delete whose tombstone expired "
                             "(ods.tombstone_retention_days), of keys in neither the table nor its tombstones, so replaying them "
                             f"could re-insert deleted rows; e.g. {', '.join(r.refused_samples)}. They stay pending: check them in the "
                             "source, then lake dead-letter replay --allow-expired-tombstones, or purge them "
                             "(lake dead-letter list --reason 'tombstone expired' lists them)")


@dead_letter.command("purge")
@TABLE
@REASON
@click.option("--include-pending", is_flag=True, help="Also delete pending events (never replayed): they are lost.")
@click.option("--yes", is_flag=True, help="Delete them (without it: only say how many would go).")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def purge_cmd(obj: Ctx, table: str | None, reason: str | None, include_pending: bool, yes: bool, lock_timeout: float) -> None:
    """Delete replayed dead-lettered events the filters select (pending ones with --include-pending)."""
    from framework.commands.dead_letter import run_dead_letter_purge

    r = run_dead_letter_purge(project=obj.project(), table=table, reason=reason, apply=yes, include_pending=include_pending,
                              lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale)
    kept = "" if include_pending or not r.pending else f"; {r.pending} pending events (never replayed) kept: --include-pending deletes them too"
    if yes:
        say(obj.console, f"purged {r.purged} events from the dead letter ({r.replayed} replayed, "
                         f"{r.pending if include_pending else 0} pending){kept}")
        return
    which = "replayed and pending" if include_pending else "replayed"
    say(obj.console, f"{r.replayed} replayed and {r.pending} pending events match; {r.would_purge} ({which}) would be purged{kept}; "
                     "rerun with --yes to delete them")
    sys.exit(1 if r.would_purge else 0)
