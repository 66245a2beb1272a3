"""`lake` command line. Each command loads the project (config errors stop here, before Spark),
then calls one function of the engine."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from framework.errors import LakeError

F = TypeVar("F", bound=Callable[..., Any])
err_console = Console(stderr=True, soft_wrap=True)  # errors stay one line per fact in logs (grep-able)


class Ctx:
    def __init__(self, project_dir: Path, debug: bool, quiet: bool) -> None:
        self.project_dir = project_dir
        self.debug = debug
        self.quiet = quiet
        self.console = Console(quiet=quiet)

    def project(self):  # type: ignore[no-untyped-def]
        from framework.config import load_project

        return load_project(self.project_dir)


def recorded(project: Any, command: str) -> contextlib.AbstractContextManager[Any]:
    """Store a run record for this command, whatever happens (run history)."""
    from framework import history
    from framework.paths import Layout

    return history.recorded(Layout(project.warehouse), command, sys.argv[1:])


LOCK_TIMEOUT = click.option(
    "--lock-timeout", default=30.0, show_default=True, metavar="SECONDS",
    help="Wait this long for another lake process writing the same tables; 0 fails at once.")


def locked(project: Any, names: list[str], timeout: float) -> contextlib.AbstractContextManager[Any]:
    """Hold the project locks of the tables (and checkpoint) a command writes (framework/lock.py)."""
    import shlex

    from framework.lock import hold
    from framework.paths import Layout

    def stale(name: str, h: Any) -> None:
        err_console.print(f"note: lock {name} was left by pid {h.pid} on {h.host} (`{h.command}`, "
                          f"since {h.since:%Y-%m-%d %H:%M:%S}Z), which exited without releasing it; taken over",
                          markup=False, highlight=False)

    return hold(Layout(project.warehouse).locks, names, command=shlex.join(["lake", *sys.argv[1:]]),
                timeout=timeout, on_stale=stale)


def handle_errors(fn: F) -> F:
    """Print user errors without a stack trace (exit 1); internal errors exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool(ctx.obj and ctx.obj.debug)
        try:
            return fn(*args, **kwargs)
        except LakeError as e:
            if debug:
                traceback.print_exc()
            err_console.print(Text.assemble(("Error:", "bold red"), " " + str(e)), highlight=False)
            sys.exit(1)
        except click.exceptions.Exit:
            raise
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the boundary that turns crashes into messages
            if debug:
                traceback.print_exc()
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            err_console.print(
                Text.assemble(("Internal error:", "bold red"), f" {type(e).__name__}: {first[:500]}\n"
                              "  rerun with --debug for the stack trace; Spark's log is in <warehouse>/_lake/logs/spark.log"),
                highlight=False,
            )
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def _say(console: Console, text: str) -> None:
    """Print a message holding paths, names or other text lake does not control: rich would parse
    `[...]` in it as markup (a folder named `[/]` raised MarkupError)."""
    console.print(text, markup=False, highlight=False)


@click.group()
@click.option("--project", "project_dir", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True, help="Project directory (with lake.yaml).")
@click.option("--debug", is_flag=True, help="Show stack traces.")
@click.option("--quiet", "-q", is_flag=True, help="Print only errors and requested output.")
@click.pass_context
def main(ctx: click.Context, project_dir: Path, debug: bool, quiet: bool) -> None:
    """lake: Debezium CDC into Hudi ODS tables, and models built from them."""
    ctx.obj = Ctx(project_dir, debug, quiet)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default=None, help="Project name (default: the directory name).")
@click.pass_obj
@handle_errors
def init(obj: Ctx, directory: Path, name: str | None) -> None:
    """Scaffold a working project in DIRECTORY."""
    from framework.scaffold import scaffold

    created = scaffold(directory, name)
    _say(obj.console, f"Created project in {directory}:")
    for p in created:
        _say(obj.console, f"  {p}")
    _say(obj.console, f"Next: cd {directory} && lake ingest --once && lake sql 'select * from ods.customers'")


@main.command()
@click.option("--once", "mode", flag_value="once", default=True, help="Process everything not yet ingested, then exit (default).")
@click.option("--continuous", "mode", flag_value="continuous", help="Keep ingesting until Ctrl-C / SIGTERM.")
@click.option("--tables", default=None, help="Comma-separated ODS tables (ods.user,ods.product); uses its own checkpoint.")
@click.option("--trigger", default=None, help="Continuous trigger interval, e.g. 10s.")
@click.option("--bootstrap", default=None, metavar="ods.TABLE", help="Bulk-load a full dump into this table instead of reading CDC.")
@click.option("--path", "dump_path", default=None, type=click.Path(path_type=Path), help="The dump for --bootstrap (Parquet or CSV, file or directory).")
@click.option("--position", default=None, help="Source position of the dump: mysql-bin.000003:1234, lsn:123456 or an ISO time.")
@click.option("--format", "dump_format", type=click.Choice(["auto", "parquet", "csv"]), default="auto")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def ingest(obj: Ctx, mode: str, tables: str | None, trigger: str | None, bootstrap: str | None, dump_path: Path | None,
           position: str | None, dump_format: str, as_json: bool, lock_timeout: float) -> None:
    """Ingest CDC events into the ODS Hudi tables (one streaming job for all tables)."""
    from framework import report
    from framework.lock import ingest_lock, table_lock
    from framework.session import spark_session

    project = obj.project()
    if bootstrap:
        if dump_path is None:
            raise LakeError("--bootstrap needs --path DUMP", fix="lake ingest --bootstrap ods.user --path dumps/user.parquet --position mysql-bin.000003:154")
        table = project.ods_table(bootstrap)
        from framework.ods.bootstrap import run_bootstrap

        with locked(project, [table_lock(table.qualified_name)], lock_timeout):
            spark = spark_session(project)
            res = run_bootstrap(spark, project, table, dump_path, position=position, fmt=dump_format)
        if as_json:
            click.echo(res.model_dump_json(indent=2))
        else:
            dropped = f"; {res.duplicates} older duplicate rows dropped (by ordering)" if res.duplicates else ""
            _say(obj.console, f"bootstrapped {res.table}: {res.rows} rows from {res.path} (hand-off position {res.position or 'none'}){dropped}")
        return
    secs = _parse_seconds(trigger) if trigger else None
    from framework.ods.ingest import checkpoint_name, run_ingest

    only = sorted({t.strip().removeprefix("ods.") for t in tables.split(",")}) if tables else None
    writes = only or [t.table_name for t in project.ods_tables]
    names = [ingest_lock(checkpoint_name(only)), *(table_lock(f"ods.{t}") for t in writes)]
    with locked(project, names, lock_timeout):
        spark = spark_session(project)
        live = contextlib.nullcontext(None) if (obj.quiet or as_json) else report.IngestProgress(obj.console)
        from framework.ods.gate import BatchBlocked

        with recorded(project, "ingest") as rec, live as bar:
            try:
                summary = run_ingest(spark, project, continuous=mode == "continuous", tables=tables.split(",") if tables else None,
                                     trigger_seconds=secs, on_batch=bar.on_batch if bar else None, run_id=rec.run_id)
            except BatchBlocked as e:
                rec.ingest = e.summary  # the tables that committed, and the checks' outcomes
                raise
            rec.ingest = summary
    if as_json:
        click.echo(summary.model_dump_json(indent=2))
    else:
        report.print_ingest_summary(obj.console, summary)


def _parse_seconds(text: str) -> int:
    t = text.strip().lower()
    mult = 1
    if t.endswith("ms"):
        raise LakeError(f"--trigger {text}: sub-second triggers are not supported", fix="use e.g. --trigger 10s")
    if t.endswith("s"):
        t = t[:-1]
    elif t.endswith("m"):
        t, mult = t[:-1], 60
    if not t.isdigit() or int(t) <= 0:
        raise LakeError(f"--trigger {text!r} is not a duration", fix="use seconds or minutes, e.g. --trigger 10s or --trigger 1m")
    return int(t) * mult


@main.command()
@click.argument("query")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("--limit", default=1000, show_default=True, help="Rows printed at most in table format.")
@click.pass_obj
@handle_errors
def sql(obj: Ctx, query: str, fmt: str, limit: int) -> None:
    """Run a Spark SQL query; ODS tables are `ods.<name>`."""
    from framework import report
    from framework.catalog import register_ods
    from framework.paths import Layout
    from framework.session import spark_session

    project = obj.project()
    spark = spark_session(project)
    register_ods(spark, Layout(project.warehouse))
    try:
        df = spark.sql(query)
    except Exception as e:  # AnalysisException / ParseException: a user error
        msg = str(e).strip().splitlines()[0]
        raise LakeError(f"query failed: {msg}", fix="check table and column names: lake sql 'show tables in ods'") from e
    report.print_rows(obj.console, df, fmt, limit)


@main.command()
@click.option("--events", default=400, show_default=True, help="CDC events per table and round (roughly).")
@click.option("--seed", default=7, show_default=True)
@click.option("--fresh/--keep", default=True, show_default=True,
              help="Empty the demo's warehouse and CDC directory first (only what `lake demo` created; each removed path is printed).")
@click.option("--kafka", is_flag=True, help="Start a local Kafka broker, publish the CDC to it and ingest from Kafka (out/kafka-demo/).")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def demo(obj: Ctx, events: int, seed: int, fresh: bool, kafka: bool, lock_timeout: float) -> None:
    """Generate Debezium batches for the seed tables, ingest them and print a summary.

    Runs in its own project, out/demo/ under --project (never the project's warehouse or CDC),
    set up from the project's declarations of the seed tables and the models built from them."""
    from framework.demo import run_demo

    run_demo(obj.project(), obj.console, events=events, seed=seed, fresh=fresh, kafka=kafka, lock_timeout=lock_timeout)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--incremental", is_flag=True, help="Build each model incrementally where its checkpoint allows.")
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def build(obj: Ctx, selectors: tuple[str, ...], incremental: bool, exclude: tuple[str, ...], as_json: bool, lock_timeout: float) -> None:
    """Build models: dws.user_agg, +dws.user_agg, dwd.order_detail+, layer:dws, tag:finance."""
    from framework import report
    from framework.lock import table_lock
    from framework.session import spark_session
    from framework.transform.dag import select
    from framework.transform.runner import build as run_build
    from framework.transform.runner import load

    project = obj.project()
    models, g = load(project)  # config and model errors before Spark starts
    names = [table_lock(n) for n in select(g, models, list(selectors), list(exclude))]
    with locked(project, names, lock_timeout):  # one writer per model, before Spark starts
        spark = spark_session(project)
        live = contextlib.nullcontext(None) if (obj.quiet or as_json) else report.ModelProgress(obj.console, len(names))
        with recorded(project, "build") as rec, live as bar:
            results = run_build(spark, project, list(selectors), list(exclude), incremental,
                                on_start=bar.on_start if bar else None, on_result=bar.on_result if bar else None, run_id=rec.run_id)
            rec.models = results
            if any(r.mode in ("failed", "skipped") for r in results):
                rec.status = "failed"
                rec.error = "; ".join(f"{r.model}: {r.reason}" for r in results if r.mode == "failed")
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in results], indent=2))  # datetimes as ISO text
    else:
        report.print_build_summary(obj.console, results)
    if any(r.mode in ("failed", "skipped") for r in results):
        sys.exit(1)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_obj
@handle_errors
def check(obj: Ctx, selectors: tuple[str, ...], fmt: str) -> None:
    """Run the declared checks against the current tables, without building: dws.user_agg, ods.users.

    Exits 1 if an error-severity check fails. Results are stored (see `lake report`)."""
    from framework import report
    from framework.quality.current import check_tables, targets
    from framework.session import spark_session
    from models.records import ModelResult

    project = obj.project()
    chosen = targets(project, list(selectors))  # config and selector errors before Spark starts
    if not chosen:
        raise LakeError("no selected model or ODS table declares `checks:`",
                        fix="add `checks:` to a model's YAML or an ODS table (see README, Quality gates), or widen the selection")
    spark = spark_session(project)
    with recorded(project, "check") as rec:
        results, missing = check_tables(spark, project, chosen, rec.run_id)
        rec.models = [ModelResult(model=r.model, strategy="-", mode="checked", reason="blocked" if r.blocked else "passed",
                                  checks=quality_outcomes(r), seconds=r.seconds) for r in results]
        rec.models += [ModelResult(model=n, strategy="-", mode="skipped", reason="no table yet") for n in missing]
        blocked = [r.model for r in results if r.blocked]
        if blocked:
            rec.status, rec.error = "failed", f"error checks fail in {', '.join(blocked)}"
    if fmt == "json":
        click.echo(json.dumps({"run_id": rec.run_id, "results": [r.model_dump(mode="json", exclude={"ge_results"}) for r in results],
                               "skipped": missing}, indent=2))
    else:
        report.print_checks(obj.console, results)
        for n in missing:
            _say(obj.console, f"  {n}: skipped, no table yet")
        _say(obj.console, f"run {rec.run_id}; `lake report --run {rec.run_id}` renders it")
    if rec.status == "failed":
        sys.exit(1)


def quality_outcomes(record: Any) -> Any:
    from framework.quality.quarantine import outcomes

    return outcomes(record)


@main.command("report")
@click.option("--format", "fmt", type=click.Choice(["html", "json"]), default="html", show_default=True)
@click.option("--open", "show_path", is_flag=True, help="Print only the path of the run page (to open in a browser).")
@click.option("--run", "run_ids", multiple=True, help="Report these runs only (default: the last --last runs).")
@click.option("--last", default=20, show_default=True, help="How many recent runs.")
@click.pass_obj
@handle_errors
def report_cmd(obj: Ctx, fmt: str, show_path: bool, run_ids: tuple[str, ...], last: int) -> None:
    """Write the HTML report (GE Data Docs + a page per run) to out/report/, or print JSON."""
    from framework.paths import Layout
    from framework.quality.report import report_dir, report_json, write_report

    project = obj.project()
    layout = Layout(project.warehouse)
    if fmt == "json":
        click.echo(json.dumps(report_json(layout, list(run_ids) or None, last), indent=2))
        return
    page = write_report(layout, report_dir(project), list(run_ids) or None, last)
    if show_path:
        click.echo(str(page))
    else:
        _say(obj.console, f"wrote {report_dir(project)}: runs in {page.parent / 'index.html'}, Data Docs in {report_dir(project) / 'gx' / 'index.html'}")
        _say(obj.console, f"newest run page: {page}")


@main.command("run")
@click.argument("selectors", nargs=-1)
@click.option("--continuous", is_flag=True, help="Repeat every --trigger until Ctrl-C / SIGTERM (the cycle in flight finishes).")
@click.option("--trigger", default=None, help="Cycle interval for --continuous, e.g. 10s (default ods.trigger_seconds).")
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--cycles", type=int, default=None, help="Stop after N cycles (with --continuous).")
@click.option("--json", "as_json", is_flag=True, help="Print each cycle's run record as JSON (one line each).")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def run_cmd(obj: Ctx, selectors: tuple[str, ...], continuous: bool, trigger: str | None, exclude: tuple[str, ...],
            cycles: int | None, as_json: bool, lock_timeout: float) -> None:
    """Ingest, then build incrementally the selected models the new events reach."""
    from framework import report
    from framework.continuous import run_continuous
    from framework.lock import ingest_lock, table_lock
    from framework.ods.ingest import checkpoint_name
    from framework.session import spark_session
    from framework.transform.dag import select
    from framework.transform.runner import load

    project = obj.project()
    models, g = load(project)
    chosen = select(g, models, list(selectors), list(exclude))
    names = [ingest_lock(checkpoint_name(None)), *(table_lock(t.qualified_name) for t in project.ods_tables), *(table_lock(n) for n in chosen)]
    secs = _parse_seconds(trigger) if trigger else project.config.ods.trigger_seconds
    printer = report.cycle_printer(obj.console)

    def show(rec: Any) -> None:
        if as_json:
            click.echo(rec.model_dump_json())
        elif not obj.quiet:
            printer(rec)

    with locked(project, names, lock_timeout):  # held for the whole loop, like `ingest --continuous`
        spark = spark_session(project)
        records = run_continuous(spark, project, list(selectors), list(exclude), sys.argv[1:], secs, on_cycle=show,
                                 on_result=None if (obj.quiet or as_json) else report.model_printer(obj.console),
                                 max_cycles=cycles if continuous else 1)
    if any(r.status == "failed" for r in records[-1:]):
        sys.exit(1)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--incremental", is_flag=True)
@click.option("--exclude", multiple=True)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_obj
@handle_errors
def plan(obj: Ctx, selectors: tuple[str, ...], incremental: bool, exclude: tuple[str, ...], as_json: bool) -> None:
    """Show per model the strategy, the reason and the pending upstream changes; writes nothing."""
    from framework import report
    from framework.session import spark_session
    from framework.transform.runner import load
    from framework.transform.runner import plan as make_plan

    project = obj.project()
    load(project)
    spark = spark_session(project)
    plans = make_plan(spark, project, list(selectors), list(exclude), incremental)
    if as_json:
        click.echo(json.dumps([{"model": p.model.name, "mode": p.mode, "strategy": p.analysis.strategy, "reason": p.reason,
                                "pending_commits": p.pending, "changed_rows": changed, "upstream_end": p.end} for p, changed in plans], indent=2))
    else:
        report.print_plan(obj.console, plans)


@main.command()
@click.argument("selectors", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["tree", "dot", "mermaid", "json"]), default="tree", show_default=True)
@click.pass_obj
@handle_errors
def dag(obj: Ctx, selectors: tuple[str, ...], fmt: str) -> None:
    """Print the model graph (no Spark)."""
    from framework.transform.dag import render, select
    from framework.transform.runner import load

    project = obj.project()
    models, g = load(project)
    only = None
    if selectors:
        chosen = set(select(g, models, list(selectors)))
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


@main.command()
@click.option("--list", "list_only", is_flag=True, help="Print each schedule with its next fire times, then exit.")
@click.option("--next", "count", default=3, show_default=True, help="How many fire times --list shows.")
@click.option("--airflow", "airflow_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write an Airflow DAG file (one DAG per schedule) to this path, then exit.")
@click.option("--lake-bin", default="lake", show_default=True, help="With --airflow: the lake executable on the workers.")
@click.pass_obj
@handle_errors
def schedule(obj: Ctx, list_only: bool, count: int, airflow_path: Path | None, lake_bin: str) -> None:
    """Run the `schedules:` of lake.yaml until SIGTERM/Ctrl-C (each run in its own `lake` process)."""
    from framework import schedule as sched

    project = obj.project()
    schedules = list(project.config.schedules)
    if not schedules:
        raise LakeError("lake.yaml has no `schedules:`",
                        fix="add e.g. schedules: [{name: nightly, cron: '0 2 * * *', what: run, incremental: true}]")
    sched.check(project, schedules)
    if airflow_path is not None:
        from framework.airflow import render_dags

        airflow_path.write_text(render_dags(project.root, schedules, lake_bin), encoding="utf-8")
        _say(obj.console, f"wrote {len(schedules)} Airflow DAG(s) to {airflow_path}")
        return
    if list_only:
        for s in schedules:
            commands = " && ".join("lake " + " ".join(c) for c in sched.lake_commands(s))
            times = ", ".join(f"{t:%Y-%m-%d %H:%M:%S %Z}" for t in sched.next_fire_times(s, count))
            click.echo(f"{s.name}  cron '{s.cron}' ({s.timezone})  {commands}\n  next: {times}")
        return

    def say(text: str) -> None:
        from datetime import datetime

        _say(err_console, f"{datetime.now():%Y-%m-%d %H:%M:%S} {text}")

    steps = sched.SubprocessSteps(project.root, say)
    sys.exit(sched.serve(sched.Scheduler(schedules, steps, say), say, steps.terminate))


@main.group(invoke_without_command=True)
@click.option("--last", default=20, show_default=True, help="How many recent runs.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
@handle_errors
def runs(ctx: click.Context, last: int, fmt: str) -> None:
    """Run history: `lake runs`, `lake runs show RUN_ID`."""
    if ctx.invoked_subcommand:
        return
    from framework import history, report
    from framework.paths import Layout

    obj: Ctx = ctx.obj
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
    from framework import history
    from framework.paths import Layout

    click.echo(history.get(Layout(obj.project().warehouse), run_id).model_dump_json(indent=2))


if __name__ == "__main__":
    main()
