"""`python -m framework.cli`: the `lake` console script."""

from framework.cli.main import main

main()
