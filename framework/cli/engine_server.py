"""`python -m framework.cli.engine_server --project DIR --file ENGINE_FILE`: the engine process
`lake engine start` launches (framework/engine/server.py), running this CLI's commands."""

from __future__ import annotations

import sys

from framework.cli.main import main as cli
from framework.engine.server import main


def run(argv: list[str]) -> None:
    cli.main(args=argv, prog_name="lake", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main(run))
