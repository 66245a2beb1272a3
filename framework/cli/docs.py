"""`lake docs`: generate and serve the static docs site (framework/commands/docs.py)."""

from __future__ import annotations

import click

from framework.cli.support import Ctx, handle_errors, say


@click.group()
def docs() -> None:
    """The docs site: tables, columns, lineage, strategies, last runs and checks."""


@docs.command("generate")
@click.option("--open", "show_path", is_flag=True, help="Print only the path of index.html.")
@click.pass_obj
@handle_errors
def generate(obj: Ctx, show_path: bool) -> None:
    """Write out/docs/index.html (self-contained, works offline) and out/docs/catalog.json."""
    from framework.commands.docs import generate_docs

    page = generate_docs(obj.project())
    if show_path:
        click.echo(str(page))
    else:
        say(obj.console, f"wrote {page} (and catalog.json beside it); open it in a browser or run `lake docs serve`")


@docs.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, help="Port (0: any free port).")
@click.option("--no-generate", is_flag=True, help="Serve what is there without regenerating first.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests for this host name (besides IP addresses, localhost and this machine's names).")
@click.pass_obj
@handle_errors
def serve(obj: Ctx, host: str, port: int, no_generate: bool, allow_hosts: tuple[str, ...]) -> None:
    """Generate the site, then serve out/docs/ and out/report/ over HTTP until Ctrl-C."""
    from framework.commands.docs import generate_docs, serve_docs

    project = obj.project()
    if not no_generate:
        generate_docs(project)
    serve_docs(project, host, port, lambda url: say(obj.console, f"serving {url} (Ctrl-C stops)"), allow_hosts)
