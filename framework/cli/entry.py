"""The `lake` console script: a command goes to a warm engine when one serves this project
(framework/engine/client.py, standard library only), else runs in this process as always."""

from __future__ import annotations

import sys


def main() -> None:
    from framework.engine.client import run

    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from framework.cli.main import main as cli

    cli()
