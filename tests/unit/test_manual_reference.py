"""The manual's generated reference (framework/site/reference.py) against independent sources:
click's own `--help` of every command, pydantic's JSON schema of every config file; and the
README front door: short, its links resolving, every `lake` command in it one the CLI accepts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from framework.cli.main import main
from framework.errors import LakeError
from framework.site import reference, yaml_keys
from models.config import LakeConfig, ModelConfig, OdsFile
from models.external_config import ExternalConfig
from models.unit_test import UnitTestFile

REPO = Path(__file__).resolve().parents[2]


def _help_options(args: list[str]) -> list[str]:
    """Option names as click's own help formatter prints them (`  -q, --quiet  Print ...`)."""
    out = CliRunner().invoke(main, [*args, "--help"], terminal_width=200)
    assert out.exit_code == 0, out.output
    section = out.output.split("Options:", 1)[1].split("Commands:", 1)[0]
    names = []
    for line in section.splitlines():
        m = re.match(r"^\s{2}(-[^\s,]+(?:, -[^\s,]+)*)", line)
        if m:
            names += [n for n in m[1].split(", ") if n != "--help"]
        m2 = re.match(r"^\s{2}(--[\w-]+) / (--[\w-]+)", line)
        if m2:
            names.append(m2[2])
    return names


def _help_commands(args: list[str]) -> list[str]:
    out = CliRunner().invoke(main, [*args, "--help"], terminal_width=200)
    if "Commands:" not in out.output:
        return []
    return [line.split()[0] for line in out.output.split("Commands:", 1)[1].splitlines() if line.strip()]


def _all_commands(args: list[str]) -> list[list[str]]:
    found = []
    for name in _help_commands(args):
        found.append([*args, name])
        found += _all_commands([*args, name])
    return found


def test_cli_reference_has_every_command_and_option_click_prints() -> None:
    page = reference.cli_reference(main)
    commands = _all_commands([])
    assert ["build"] in commands and ["dead-letter", "replay"] in commands and len(commands) >= 25
    for args in [[], *commands]:
        path = " ".join(["lake", *args])
        start = page.index("### Global options") if not args else page.index(f"### {path} {{#")
        end = page.find("\n### ", start + 1)
        section = page[start:end if end > 0 else None]
        for option in _help_options(args):
            assert f"`{option}`" in section, f"{path} {option} missing from the CLI reference"


def _schema_keys(schema: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    """Every property name at every depth of a JSON schema (pydantic's own rendering)."""
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[1]
                if name not in seen and name in defs:
                    seen.add(name)
                    walk(defs[name])
            for k, v in node.get("properties", {}).items():
                keys.add(k)
                walk(v)
            for k in ("items", "anyOf", "oneOf", "allOf", "additionalProperties"):
                if k in node:
                    walk(node[k])
        elif isinstance(node, list):
            for x in node:
                walk(x)

    seen: set[str] = set()
    walk(schema)
    return keys


SKIPPED = {"CheckSpec"}  # documented on the Checks page: users write checks in forms of their own


@pytest.mark.parametrize("model,render", [
    (LakeConfig, reference.lake_yaml), (OdsFile, reference.ods_yaml),
    (ModelConfig, reference.model_yaml), (UnitTestFile, reference.unit_test_yaml),
    (ExternalConfig, reference.external_yaml),
])
def test_yaml_reference_has_every_key_pydantic_knows_with_a_description(model: type[BaseModel], render: Any) -> None:
    schema = model.model_json_schema()
    defs = {k: v for k, v in schema.get("$defs", {}).items() if k not in SKIPPED}
    page = render(main)
    missing = sorted(k for k in _schema_keys(schema, defs) if f"| `{k}` |" not in page)
    assert not missing, f"keys of {model.__name__} missing from its reference page: {missing}"
    skip = frozenset({"tables[].checks", "checks"})
    assert yaml_keys.undocumented(model, skip) == [], "give these fields Field(description=...) in models/"


def test_markers_are_expanded_and_unknown_ones_fail(tmp_path: Path) -> None:
    (tmp_path / "NOTE.md").write_text("hello from a file\n")
    text = "# x\n<!-- lake:reference selectors -->\n<!-- lake:include NOTE.md -->\n"
    out = reference.expand(text, main, tmp_path)
    assert "`state:modified`" in out and "hello from a file" in out and "lake:" not in out
    for bad in ("<!-- lake:reference nonesuch -->", "<!-- lake:include ../etc/passwd -->", "<!-- lake:include MISSING.md -->"):
        with pytest.raises(LakeError):
            reference.expand(bad, main, tmp_path)


# --------------------------------------------------------------------------- the front door
def _readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def test_readme_is_a_short_front_door_whose_links_resolve() -> None:
    text = _readme()
    assert len(text.splitlines()) <= 300
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if not re.match(r"^[a-z]+://|^#|^mailto:", link)]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if link and not (REPO / link).exists()]
    assert not missing, missing


def _lake_commands(text: str) -> list[list[str]]:
    """Every `lake ...` line of the README's shell blocks, as arguments (comments dropped)."""
    out = []
    for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.split(" #")[0].strip()
                if part.startswith("lake "):
                    out.append(shlex.split(part)[1:])
    return out


def test_every_lake_command_in_the_readme_parses() -> None:
    commands = _lake_commands(_readme())
    assert {c[0] for c in commands if c} >= {"init", "run", "plan", "report", "build"}
    for args in commands:
        ctx = main.make_context("lake", list(args), resilient_parsing=False)
        rest = ctx.protected_args + ctx.args
        group: click.Command = main
        while isinstance(group, click.Group) and rest:
            name, cmd, rest = group.resolve_command(ctx, rest)
            assert cmd is not None, args
            ctx = cmd.make_context(name or "", list(rest), parent=ctx)
            rest = getattr(ctx, "protected_args", []) + ctx.args if isinstance(cmd, click.Group) else []
            group = cmd


def test_every_manual_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    pages: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            pages.append(node)
        elif isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)

    walk(config["nav"])
    docs = REPO / "docs"
    on_disk = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md"))
    assert sorted(pages) == on_disk
