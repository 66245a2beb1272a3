"""`lake build` and `lake plan`: printing and exit codes (framework/commands/build.py, plan.py)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import TYPE_CHECKING

import click

from framework.cli.support import LOCK_TIMEOUT, Ctx, handle_errors, say, stale

if TYPE_CHECKING:
    from framework.transform.runner import Selection
    from models.restatement import RestateRange


@click.command("build")
@click.argument("selectors", nargs=-1)
@click.option("--incremental", is_flag=True, help="Build each model incrementally where its checkpoint allows.")
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--skip-tests", is_flag=True, help="Do not run the selected models' unit tests first.")
@click.option("--rerun-tests", is_flag=True, help="Run every unit test, also those unchanged since they last passed.")
@click.option("--env", default=None, metavar="NAME", help="Build into environment NAME (_env/NAME/); other tables are read from production as of a pinned instant.")
@click.option("--allow-full", is_flag=True, help="Let `incremental: strict` models fall back to a full build (or recompute) this once.")
@click.option("--restate", default=None, metavar="START..END",
              help="Recompute the partitions of the selected partitioned models whose `partition_by` value is in this range "
                   "(both ends included) and leave the others as built; implies --incremental.")
@click.option("--forward-only", is_flag=True,
              help="A model whose query only added output columns builds them from now on instead of rebuilding in full "
                   "(rows built before hold NULL in them until a change reaches their key); implies --incremental.")
@LOCK_TIMEOUT
@click.pass_obj
@handle_errors
def build_cmd(obj: Ctx, selectors: tuple[str, ...], incremental: bool, exclude: tuple[str, ...], as_json: bool, skip_tests: bool,
              rerun_tests: bool, env: str | None, allow_full: bool, restate: str | None, forward_only: bool, lock_timeout: float) -> None:
    """Build models: dws.user_agg, +dws.user_agg, dwd.order_detail+, layer:dws, tag:finance.

    Each model's unit tests run first (`lake test`); a failing test stops that model and its descendants.
    A test whose model, test and inputs are unchanged since it last passed here is not rerun."""
    from framework.commands.build import run_build
    from framework.commands.env import run_env_build
    from framework.modeltest.render import print_results
    from framework.runtime import terminal as report
    from framework.transform.options import BuildOptions
    from framework.transform.runner import selection

    project = obj.project()
    chosen = selection(project, selectors, exclude)  # config and model errors before Spark starts
    options = BuildOptions(allow_full=allow_full, restate=restate_range(restate, chosen) if restate else None, forward_only=forward_only)
    incremental = incremental or restate is not None or forward_only
    live = contextlib.nullcontext(None) if (obj.quiet or as_json) else report.ModelProgress(obj.console, len(chosen.chosen))
    with live as bar:
        said = None if (obj.quiet or as_json) else (lambda note: say(obj.console, f"note: {note}"))  # else stderr
        run = functools.partial(run_env_build, env=env, on_note=said) if env else run_build
        rec = run(project=project, selection=chosen, incremental=incremental, lock_timeout=lock_timeout, argv=sys.argv[1:],
                  on_start=bar.on_start if bar else None, on_result=bar.on_result if bar else None, on_stale=stale,
                  unit_tests=not skip_tests, rerun_tests=rerun_tests, options=options,
                  on_tests=None if (obj.quiet or as_json) else lambda r: print_results(obj.console, r))
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in rec.models], indent=2))  # datetimes as ISO text
    else:
        report.print_build_summary(obj.console, rec.models)
    if rec.status == "failed":
        sys.exit(1)


def restate_range(text: str, chosen: Selection) -> RestateRange:
    """`--restate`'s range, refused before Spark starts when it is not one or no selected model
    is partitioned."""
    from framework.errors import LakeError
    from models.restatement import RestateRange

    try:
        window = RestateRange.parse(text)
    except ValueError as e:  # "problem\nfix: fix"
        problem, _, fix = str(e).partition("\nfix: ")
        raise LakeError(problem, fix=fix or None) from None
    if not any(chosen.models[n].config.partition_by for n in chosen.chosen if chosen.models[n].kind != "seed"):
        raise LakeError(f"--restate {text}: none of the selected models has `partition_by`",
                        fix="select a partitioned model (`partition_by:` in its YAML), or rebuild the others in full: lake build MODEL")
    return window


@click.command("plan")
@click.argument("selectors", nargs=-1)
@click.option("--incremental", is_flag=True)
@click.option("--exclude", multiple=True)
@click.option("--allow-full", is_flag=True, help="Plan as `lake build --allow-full` would: strict models may fall back.")
@click.option("--forward-only", is_flag=True, help="Plan as `lake build --forward-only` would: added columns from now on.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.pass_obj
@handle_errors
def plan_cmd(obj: Ctx, selectors: tuple[str, ...], incremental: bool, exclude: tuple[str, ...], allow_full: bool, forward_only: bool,
             as_json: bool) -> None:
    """Show per model the strategy, the reason and the pending upstream changes; writes nothing.

    An `incremental: strict` model that would fall back to a full build is shown `refused`, with why."""
    from framework.commands.plan import run_plan
    from framework.runtime import terminal as report
    from framework.transform.runner import selection

    project = obj.project()
    plans = run_plan(project=project, selection=selection(project, selectors, exclude), incremental=incremental or forward_only,
                     allow_full=allow_full, forward_only=forward_only)
    if as_json:
        click.echo(json.dumps([{"model": p.model.name, "mode": p.mode, "strategy": p.analysis.strategy, "reason": p.reason,
                                "refused": p.refused, "pending_commits": dict(p.pending), "changed_rows": changed,
                                "upstream_end": dict(p.end)} for p, changed in plans], indent=2))
    else:
        report.print_plan(obj.console, plans, {n: e.where for n, e in project.externals.items()})
