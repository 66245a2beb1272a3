"""`lake retry` (framework/commands/retry.py) and `lake --version`."""

from __future__ import annotations

import sys
from importlib import metadata

import click

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale


def version_text() -> str:
    """lake's version and the Spark and Hudi it runs on (no JVM)."""
    from framework import __version__
    from framework.runtime.jars import HUDI_BUNDLE

    try:
        lake = metadata.version("lake")
    except metadata.PackageNotFoundError:
        lake = __version__
    try:
        spark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        spark = "not installed"
    return f"lake {lake} (PySpark {spark}, Hudi {HUDI_BUNDLE.rsplit(':', 1)[1]}, Python {sys.version.split()[0]})"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@LOCK_TIMEOUT
@click.pass_context
@handle_errors
def retry(ctx: click.Context, as_json: bool, lock_timeout: float) -> None:
    """Rerun what failed or was skipped in the last ingest, build or run (dbt retry).

    Its failed and skipped models are built again (incrementally if it was incremental); a run
    that failed before any model had a result is rerun whole."""
    from framework.commands.retry import plan_retry

    obj: Ctx = ctx.obj
    project = obj.project()
    todo = plan_retry(project)
    say(obj.console, todo.text)
    if todo.argv:  # the whole command again, with this process's global options
        main = ctx.find_root().command
        options = ["--project", str(obj.project_dir), *(["--target", obj.target] if obj.target else []),
                   *(["--debug"] if obj.debug else []), *(["--quiet"] if obj.quiet else [])]
        main.main(args=[*options, *todo.argv], standalone_mode=False)
        return
    if todo.models:
        _rebuild(obj, project, todo, as_json, lock_timeout)


def _rebuild(obj: Ctx, project: object, todo: object, as_json: bool, lock_timeout: float) -> None:
    import contextlib
    import json

    from framework.commands.build import run_build
    from framework.commands.retry import Retry
    from framework.project.config import Project
    from framework.runtime import terminal as report
    from framework.transform.runner import selection

    assert isinstance(project, Project) and isinstance(todo, Retry)
    chosen = selection(project, list(todo.models))
    live = contextlib.nullcontext(None) if (obj.quiet or as_json) else report.ModelProgress(obj.console, len(chosen.chosen))
    with live as bar:
        rec = run_build(project=project, selection=chosen, incremental=todo.incremental, lock_timeout=lock_timeout, argv=sys.argv[1:],
                        on_start=bar.on_start if bar else None, on_result=bar.on_result if bar else None, on_stale=stale,
                        unit_tests=todo.unit_tests)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in rec.models], indent=2))
    else:
        report.print_build_summary(obj.console, rec.models)
    if rec.status == "failed":
        sys.exit(1)
