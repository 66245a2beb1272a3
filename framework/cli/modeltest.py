"""`lake test`: the click command (registered on the `lake` group by framework/cli/main.py)."""

from __future__ import annotations

import json
import sys

import click

from framework.cli.support import Ctx, handle_errors, say


@click.command("test")
@click.argument("selectors", nargs=-1)
@click.option("--exclude", multiple=True, help="Selectors to leave out.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_obj
@handle_errors
def test_cmd(obj: Ctx, selectors: tuple[str, ...], exclude: tuple[str, ...], as_json: bool) -> None:
    """Run the unit tests of the selected models (as `lake build` selects them) on given rows.

    Nothing is read from or written to the warehouse. Exits 1 when a test fails."""
    from framework.commands.test import run_test
    from framework.modeltest.render import print_result, summary
    from framework.transform.runner import selection

    project = obj.project()
    chosen = selection(project, selectors, exclude)  # config and model errors before Spark starts
    show = None if (as_json or obj.quiet) else (lambda r: print_result(obj.console, r))
    results = run_test(project=project, selection=chosen, on_result=show)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in results], indent=2))
    elif not results:
        say(obj.console, f"no unit tests for the {len(chosen.chosen)} selected model(s); add `tests:` to a model's YAML (docs/guides/unit-tests.md)")
    else:
        say(obj.console, summary(results))
    if any(r.status != "pass" for r in results):
        sys.exit(1)
