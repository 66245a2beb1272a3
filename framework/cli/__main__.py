"""`python -m framework.cli`: the `lake` console script."""

from framework.cli.entry import main

main()
