"""mkdocs hook: fills the `<!-- lake:reference NAME -->` and `<!-- lake:include FILE -->` markers
of the manual's pages from the code (framework/site/reference.py) at every build, so the CLI and
YAML reference cannot go stale. mkdocs.yml names this file under `hooks:`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.cli.main import main
from framework.site.reference import expand

REPO = Path(__file__).resolve().parents[2]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any, **_: Any) -> str:
    return expand(markdown, main, REPO)
