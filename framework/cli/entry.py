"""The `lake` console script: a command goes to a warm engine when one serves this project
(framework/engine/client.py, standard library only), else runs in this process as always."""

from __future__ import annotations

import sys


def main() -> None:
    """Ctrl-C before a command's own handling takes over (while the client connects to an engine,
    or while the command's modules load) still ends with "interrupted" and exit code 130, as a
    command interrupted later does, not with a stack trace."""
    try:
        from framework.engine.client import run

        code = run(sys.argv[1:])
        if code is not None:
            sys.exit(code)
        from framework.cli.main import main as cli

        cli()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
