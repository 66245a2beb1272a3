"""`lake` command line: argument parsing, printing and exit codes. Each command loads the project
once (config errors stop here, before Spark) and calls one `run_<verb>` of framework/commands/."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from framework.cli.build import build_cmd, plan_cmd
from framework.cli.compact import compact_cmd
from framework.cli.docs import docs as docs_group
from framework.cli.engine import engine as engine_group
from framework.cli.env import diff as diff_command
from framework.cli.env import env as env_group
from framework.cli.freshness import freshness, print_freshness
from framework.cli.modeltest import test_cmd
from framework.cli.reconcile import reconcile_cmd
from framework.cli.runs import runs as runs_group
from framework.cli.schedule import schedule as schedule_cmd
from framework.cli.support import LOCK_TIMEOUT, Ctx, err_console, handle_errors, say, stale
from framework.cli.verify import verify_cmd
from framework.commands.common import parse_seconds
from framework.errors import LakeError


def _version(ctx: click.Context) -> None:
    from framework.cli.retry import version_text

    click.echo(version_text())
    ctx.exit()


@click.group()
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda ctx, _p, v: _version(ctx) if v else None,
              help="Print lake's version (and its PySpark, Hudi and Python), then exit.")
@click.option("--project", "project_dir", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True, help="Project directory (with lake.yaml).")
@click.option("--target", default=None, metavar="NAME", help="Apply this entry of lake.yaml's `targets:` (default: $LAKE_TARGET, else `default_target:`).")
@click.option("--debug", is_flag=True, help="Show stack traces.")
@click.option("--quiet", "-q", is_flag=True, help="Print only errors and requested output.")
@click.pass_context
def main(ctx: click.Context, project_dir: Path, target: str | None, debug: bool, quiet: bool) -> None:
    """lake: Debezium CDC into Hudi ODS tables, and models built from them."""
    ctx.obj = Ctx(project_dir, debug, quiet, target)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default=None, help="Project name (default: the directory name).")
@click.pass_obj
@handle_errors
def init(obj: Ctx, directory: Path, name: str | None) -> None:
    """Scaffold a working project in DIRECTORY."""
    from framework.demo.seed import inventory_sample
    from framework.project.scaffold import scaffold

    created = scaffold(directory, name, cdc_sample=inventory_sample())
    say(obj.console, f"Created project in {directory}:")
    for p in created:
        say(obj.console, f"  {p}")
    say(obj.console, f"Next: cd {directory} && lake ingest --once && lake sql 'select * from ods.customers'"
                     " (and `lake test`, `lake build`)")


@main.command()
@click.option("--once", "mode", flag_value="once", default=True, help="Process everything not yet ingested, then exit (default).")
@click.option("--continuous", "mode", flag_value="continuous", help="Keep ingesting until Ctrl-C / SIGTERM.")
@click.option("--tables", default=None, help="Comma-separated ODS tables (ods.user,ods.product); uses its own checkpoint.")
@click.option("--trigger", default=None, help="Continuous trigger interval, e.g. 10s.")
@click.option("--bootstrap", default=None, metavar="ods.TABLE", help="Bulk-load a full dump into this table instead of reading CDC.")
@click.option("--rebuild", default=None, metavar="ods.TABLE", help="Write this table anew: [the dump of --path, then] the CDC the source still holds.")
@click.option("--path", "dump_path", default=None, type=click.Path(path_type=Path), help="The dump for --bootstrap or --rebuild (Parquet or CSV, file or directory).")
@click.option("--position", default=None, help="Source position of the dump: mysql-bin.000003:1234, lsn:123456 or an ISO time.")
@click.option("--format", "dump_format", type=click.Choice(["auto", "parquet", "csv"]), default="auto")
@click.option("--accept-loss", is_flag=True,
              help="--rebuild without --path: go on although rows whose last event the source no longer holds will be lost.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def ingest(obj: Ctx, mode: str, tables: str | None, trigger: str | None, bootstrap: str | None, rebuild: str | None,
           dump_path: Path | None, position: str | None, dump_format: str, accept_loss: bool, as_json: bool, lock_timeout: float) -> None:
    """Ingest CDC events into the ODS Hudi tables (one streaming job for all tables)."""
    from framework.commands.ingest import run_bootstrap_command, run_ingest_command
    from framework.runtime import terminal as report

    project = obj.project()
    if rebuild:
        from framework.commands.rebuild import run_rebuild_command

        rb = run_rebuild_command(project=project, table=rebuild, path=dump_path, position=position, fmt=dump_format,
                                 lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale, accept_loss=accept_loss)
        dump = f"{rb.dump_rows} from the dump (hand-off position {rb.position or 'none'}), " if rb.dump_rows is not None else ""
        before = "no readable table" if rb.rows_before is None else f"{rb.rows_before} rows"
        lost = f" ({rb.given_up} the source no longer held were given up: --accept-loss)" if rb.given_up else ""
        if as_json:
            click.echo(rb.model_dump_json(indent=2))
        else:
            say(obj.console, f"rebuilt {rb.table}: {before} before, {rb.rows} rows after{lost}; {dump}{rb.events} CDC events replayed, "
                             f"{rb.dead_letter} to the dead letter. Models reading it rebuild fully at their next build.")
        return
    if bootstrap:
        if dump_path is None:
            raise LakeError("--bootstrap needs --path DUMP", fix="lake ingest --bootstrap ods.user --path dumps/user.parquet --position mysql-bin.000003:154")
        res = run_bootstrap_command(project=project, table=bootstrap, path=dump_path, position=position, fmt=dump_format,
                                    lock_timeout=lock_timeout, argv=sys.argv[1:], on_stale=stale)
        if as_json:
            click.echo(res.model_dump_json(indent=2))
        else:
            dropped = f"; {res.duplicates} older duplicate rows dropped (by ordering)" if res.duplicates else ""
            say(obj.console, f"bootstrapped {res.table}: {res.rows} rows from {res.path} (hand-off position {res.position or 'none'}){dropped}")
        return
    secs = parse_seconds(trigger) if trigger else None
    live = contextlib.nullcontext(None) if (obj.quiet or as_json) else report.IngestProgress(obj.console)
    with live as bar:
        summary = run_ingest_command(project=project, continuous=mode == "continuous", tables=tables.split(",") if tables else None,
                                     trigger_seconds=secs, lock_timeout=lock_timeout, argv=sys.argv[1:],
                                     on_batch=bar.on_batch if bar else None, on_stale=stale)
    if as_json:
        click.echo(summary.model_dump_json(indent=2))
    else:
        report.print_ingest_summary(obj.console, summary)


@main.command()
@click.argument("query")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--limit", default=1000, show_default=True, help="Rows printed at most in table format.")
@click.pass_obj
@handle_errors
def sql(obj: Ctx, query: str, fmt: str, limit: int) -> None:
    """Run a Spark SQL query; ODS tables are `ods.<name>`."""
    from framework.commands.sql import run_sql
    from framework.runtime import terminal as report

    report.print_rows(obj.console, run_sql(project=obj.project(), query=query), fmt, limit)


@main.command()
@click.option("--events", type=int, default=None, help="CDC events per table and round, roughly (default 400); with --source mariadb|postgres, transactions per round (default 40).")
@click.option("--seed", default=7, show_default=True)
@click.option("--fresh/--keep", default=True, show_default=True,
              help="Empty the demo's warehouse and CDC directory first (only what `lake demo` created; each removed path is printed).")
@click.option("--kafka", is_flag=True, help="Start a local Kafka broker, publish the CDC to it and ingest from Kafka (out/kafka-demo/).")
@click.option("--source", type=click.Choice(["simulator", "mariadb", "postgres"]), default="simulator", show_default=True,
              help="mariadb|postgres: the real chain, the database -> Debezium (Kafka Connect) -> Kafka -> lake, in out/cdc-demo/ (--events: transactions per round).")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def demo(obj: Ctx, events: int | None, seed: int, fresh: bool, kafka: bool, source: str, lock_timeout: float) -> None:
    """Generate Debezium batches for the seed tables, ingest them and print a summary.

    Runs in its own project, out/demo/ under --project (never the project's warehouse or CDC),
    set up from the project's declarations of the seed tables and the models built from them.
    With --source mariadb|postgres, starts the database, a Kafka broker and Debezium, writes SQL and
    compares lake's tables with the database's answers (out/cdc-demo/; stops every service it started)."""
    if source in ("mariadb", "postgres"):
        from framework.demo.chain import run_cdc_demo

        if kafka:
            raise LakeError(f"--kafka and --source {source} do not go together", fix=f"--source {source} always runs through Kafka; drop --kafka")
        run_cdc_demo(obj.project(), obj.console, events=40 if events is None else events, seed=seed, lock_timeout=lock_timeout, source=source)
        return
    from framework.demo.run import run_demo

    run_demo(obj.project(), obj.console, events=400 if events is None else events, seed=seed, fresh=fresh, kafka=kafka, lock_timeout=lock_timeout)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_obj
@handle_errors
def check(obj: Ctx, selectors: tuple[str, ...], fmt: str) -> None:
    """Run the declared checks against the current tables, without building: dws.user_agg, ods.users.

    Exits 1 if an error-severity check fails or an ODS table is past its freshness error_after.
    Results are stored (see `lake report`)."""
    from framework.commands.check import run_check
    from framework.runtime import terminal as report

    rec, results, missing = run_check(project=obj.project(), selectors=list(selectors), argv=sys.argv[1:])
    if fmt == "json":
        click.echo(json.dumps({"run_id": rec.run_id, "results": [r.model_dump(mode="json", exclude={"ge_results"}) for r in results],
                               "skipped": missing, "freshness": [f.model_dump(mode="json") for f in rec.sources.values()]}, indent=2))
    else:
        report.print_checks(obj.console, results)
        for n in missing:
            say(obj.console, f"  {n}: skipped, no table yet")
        if rec.sources:
            print_freshness(obj.console, list(rec.sources.values()))
        say(obj.console, f"run {rec.run_id}; `lake report --run {rec.run_id}` renders it")
    if rec.status == "failed":
        sys.exit(1)


@main.command("report")
@click.option("--format", "fmt", type=click.Choice(["html", "json"]), default="html", show_default=True)
@click.option("--open", "show_path", is_flag=True, help="Print only the path of the run page (to open in a browser).")
@click.option("--run", "run_ids", multiple=True, help="Report these runs only (default: the last --last runs).")
@click.option("--last", default=20, show_default=True, help="How many recent runs.")
@click.pass_obj
@handle_errors
def report_cmd(obj: Ctx, fmt: str, show_path: bool, run_ids: tuple[str, ...], last: int) -> None:
    """Write the HTML report (GE Data Docs + a page per run) to out/report/, or print JSON."""
    from framework.quality.report import report_dir, report_json, write_report
    from framework.runtime.paths import Layout
    from framework.table.session import ensure_storage

    project = obj.project()
    ensure_storage(project)
    layout = Layout(project.warehouse)
    if fmt == "json":
        click.echo(json.dumps(report_json(layout, list(run_ids) or None, last), indent=2))
        return
    from framework.commands.docs import report_overview

    page = write_report(layout, report_dir(project), list(run_ids) or None, last, overview=report_overview(project))
    if show_path:
        click.echo(str(page))
    else:
        say(obj.console, f"wrote {report_dir(project)}: runs in {page.parent / 'index.html'}, Data Docs in {report_dir(project) / 'gx' / 'index.html'}")
        say(obj.console, f"newest run page: {page}")


@main.command("run")
@click.argument("selectors", nargs=-1)
@click.option("--once", "mode", flag_value="once", default=True, help="One cycle, then exit (the default).")
@click.option("--continuous", "mode", flag_value="continuous", help="Repeat every --trigger until Ctrl-C / SIGTERM (the cycle in flight finishes).")
@click.option("--trigger", default=None, help="Cycle interval for --continuous, e.g. 10s (default ods.trigger_seconds).")
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--cycles", type=int, default=None, help="Stop after N cycles (with --continuous).")
@click.option("--json", "as_json", is_flag=True, help="Print each cycle's run record as JSON (one line each).")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def run_cmd(obj: Ctx, selectors: tuple[str, ...], mode: str, trigger: str | None, exclude: tuple[str, ...],
            cycles: int | None, as_json: bool, lock_timeout: float) -> None:
    """Ingest, then build incrementally the selected models the new events reach."""
    from framework.ops.run import run_run

    continuous = mode == "continuous"
    from framework.runtime import terminal as report
    from framework.transform.runner import selection

    project = obj.project()
    chosen = selection(project, selectors, exclude)
    secs = parse_seconds(trigger) if trigger else project.config.ods.trigger_seconds
    printer = report.cycle_printer(obj.console)

    def show(rec: Any) -> None:
        if as_json:
            click.echo(rec.model_dump_json())
        elif not obj.quiet:
            printer(rec)

    records = run_run(project=project, selection=chosen, cycles=cycles if continuous else 1, trigger_seconds=secs,
                      lock_timeout=lock_timeout, argv=sys.argv[1:], on_cycle=show,
                      on_result=None if (obj.quiet or as_json) else report.model_printer(obj.console), on_stale=stale,
                      say=lambda text: say(err_console, text), continuous=continuous)
    if any(r.status == "failed" for r in records[-1:]):
        sys.exit(1)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["tree", "dot", "mermaid", "json"]), default="tree", show_default=True)
@click.pass_obj
@handle_errors
def dag(obj: Ctx, selectors: tuple[str, ...], fmt: str) -> None:
    """Print the model graph (no Spark)."""
    from framework.transform.dag import render, select
    from framework.transform.runner import load
    from framework.transform.state import recorded

    project = obj.project()
    models, g = load(project)
    only = None
    if selectors:
        chosen = set(select(g, models, list(selectors), project=project, recorded=recorded(project)))
        only = chosen | {u for n in chosen for u in g.predecessors(n)}
    click.echo(render(g, fmt, only))


@main.command()
@click.argument("column")
@click.option("--format", "fmt", type=click.Choice(["tree", "text", "json"]), default="tree", show_default=True)
@click.pass_obj
@handle_errors
def lineage(obj: Ctx, column: str, fmt: str) -> None:
    """Upstream columns a model column derives from, down to ODS: dws.user_agg.num (no Spark)."""
    from framework.transform.dag import build_graph
    from framework.transform.lineage import Tracer
    from framework.transform.lineage_render import render_json, render_text, render_tree
    from framework.transform.loader import load_models

    project = obj.project()
    models = load_models(project)
    build_graph(project, models)  # a cycle is a config error here too
    node = Tracer.for_project(project, models).trace(column)
    if fmt == "json":
        click.echo(render_json(node))
    elif fmt == "text":
        click.echo(render_text(node))
    else:
        Console().print(render_tree(node))


main.add_command(build_cmd)
main.add_command(engine_group)
main.add_command(plan_cmd)
main.add_command(verify_cmd)
main.add_command(reconcile_cmd)
main.add_command(test_cmd)
main.add_command(schedule_cmd)
main.add_command(runs_group)
main.add_command(docs_group)
main.add_command(env_group)
main.add_command(diff_command)

main.add_command(freshness)
main.add_command(compact_cmd)

from framework.cli.dead_letter import dead_letter  # noqa: E402 - its own module: this one is at its size limit

main.add_command(dead_letter)

from framework.cli.retry import retry  # noqa: E402

main.add_command(retry)

if __name__ == "__main__":
    main()
