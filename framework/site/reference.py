"""The generated parts of lake's manual: the mkdocs site built from docs/ by `make docs`.

Not `lake docs` (framework/site/catalog.py and docs.py), which documents one project's tables.

A manual page asks for generated text with a marker on a line of its own,

    <!-- lake:reference cli -->           the whole command tree: every command, option, help text
    <!-- lake:reference lake.yaml -->     the keys of lake.yaml, from models/config.py
    <!-- lake:include CHANGELOG.md -->    a file of the repository, without its `# Title` line

and docs/hooks/reference.py (an mkdocs hook) replaces each marker while mkdocs builds, so the
reference is written from the code at every build and cannot go stale. The click group is passed
in by the hook (framework/cli sits above this package), so this module imports no command.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from framework.errors import LakeError
from framework.site import yaml_keys
from models.config import LakeConfig, ModelConfig, OdsFile
from models.quality import CheckSpec
from models.unit_test import UnitTestFile

MARKER = re.compile(r"^<!-- lake:(reference|include) ([\w.\-/]+) -->$", re.MULTILINE)
_CHECKS = frozenset({"tables[].checks"})


def expand(markdown: str, cli: click.Group, root: Path) -> str:
    """`markdown` with every marker replaced; an unknown one is an error naming it."""

    def one(m: re.Match[str]) -> str:
        kind, name = m[1], m[2]
        if kind == "include":
            path = (root / name).resolve()
            if root.resolve() not in path.parents or not path.is_file():
                raise LakeError(f"<!-- lake:include {name} -->: no file {name} in {root}", fix="name a file of the repository")
            return _without_title(path.read_text(encoding="utf-8"))
        if name not in SECTIONS:
            raise LakeError(f"<!-- lake:reference {name} -->: no such reference", fix=f"use one of {', '.join(SECTIONS)}")
        return SECTIONS[name](cli)

    return MARKER.sub(one, markdown)


def _without_title(text: str) -> str:
    """An included file without its own `# Title` line: the page that includes it has one."""
    lines = text.lstrip("\n").splitlines()
    return "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines) + "\n"


# --------------------------------------------------------------------------- the CLI
def commands(group: click.Group, prefix: str = "lake") -> Iterator[tuple[str, click.Command, click.Context]]:
    """(`lake build`, the command, its context) for every command under `group`, in `--help` order."""
    ctx = click.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        path = f"{prefix} {name}"
        yield path, cmd, click.Context(cmd, info_name=path, parent=None)
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)


def _help(text: str | None) -> str:
    """A command's docstring as Markdown paragraphs (click keeps its indentation and `\\b` marks)."""
    return "\n".join(line for line in inspect.cleandoc(text or "").splitlines() if line.strip() != "\b").strip()


def _shown(params: list[click.Parameter]) -> list[click.Parameter]:
    return [p for p in params if "--help" not in getattr(p, "opts", ())]


def _default(param: click.Option) -> str:
    default = param.default
    if param.is_flag:
        return "the default" if param.flag_value is not True and default is True else ""
    if default is None or default is False or callable(default) or type(default).__name__ == "Sentinel":
        return ""
    if isinstance(default, (tuple, list)):
        return f"`{' '.join(map(str, default))}`" if default else ""
    return f"`{default}`"


def _param_row(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        name = param.human_readable_name + (" ..." if param.nargs == -1 else "")
        return f"| `{name}` | argument{'' if param.required else ', optional'} | | |"
    assert isinstance(param, click.Option)
    flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if isinstance(param.type, click.Choice):
        kind = "one of " + ", ".join(f"`{c}`" for c in param.type.choices)
    elif param.is_flag:
        kind = "flag"
    else:
        kind = param.metavar or param.type.name.upper()
    help_text = " ".join((param.help or "").split()).replace("|", "\\|")
    return f"| {flags} | {kind} | {_default(param)} | {help_text} |"


def _command(path: str, cmd: click.Command, ctx: click.Context) -> list[str]:
    anchor = path.replace(" ", "-")
    out = [f"### {path} {{#{anchor}}}", "", f"```\n{cmd.get_usage(ctx).strip()}\n```", "", _help(cmd.help), ""]
    params = _shown(cmd.get_params(ctx))
    if params:
        out += ["| option | takes | default | what it does |", "|---|---|---|---|", *map(_param_row, params), ""]
    if isinstance(cmd, click.Group):
        subs = [f"[{path} {n}](#{anchor}-{n})" for n in cmd.list_commands(ctx)]
        out += ["Subcommands: " + ", ".join(subs) + ".", ""]
    return out


def cli_reference(cli: click.Group) -> str:
    """Every command of `cli` with its usage, help and options, after the global options."""
    ctx = click.Context(cli, info_name="lake")
    out = ["### Global options {#global-options}", "", f"```\n{cli.get_usage(ctx).strip()}\n```", "", _help(cli.help), "",
           "| option | takes | default | what it does |", "|---|---|---|---|",
           *map(_param_row, _shown(cli.get_params(ctx))), ""]
    listed = [f"[`{path}`](#{path.replace(' ', '-')})" for path, _c, _x in commands(cli)]
    out += ["Commands: " + ", ".join(listed) + ".", ""]
    for path, cmd, cctx in commands(cli):
        out += _command(path, cmd, cctx)
    return "\n".join(out)


# --------------------------------------------------------------------------- the YAML files
def lake_yaml(_cli: click.Group) -> str:
    from framework.project.targets import ALLOWED_TEXT, ENV_VAR

    targets = ["### `targets` and `default_target` {#targets}", "",
               "Read before the keys above are validated (framework/project/targets.py): `targets:` maps a name to "
               f"overrides of the top level; `--target NAME`, else `${ENV_VAR}`, else `default_target:` picks one. "
               f"A target may override only: {ALLOWED_TEXT}.", ""]
    return yaml_keys.render(LakeConfig, "lake.yaml") + "\n" + "\n".join(targets)


def ods_yaml(_cli: click.Group) -> str:
    return yaml_keys.render(OdsFile, "layers/ods/*.yaml", skip=_CHECKS, elsewhere={CheckSpec: "checks.md"})


def model_yaml(_cli: click.Group) -> str:
    return yaml_keys.render(ModelConfig, "<model>.yaml", skip=frozenset({"checks"}), elsewhere={CheckSpec: "checks.md"})


def external_yaml(_cli: click.Group) -> str:
    from models.external_config import ExternalConfig

    return yaml_keys.render(ExternalConfig, "layers/external/<name>.yaml")


def unit_test_yaml(_cli: click.Group) -> str:
    return yaml_keys.render(UnitTestFile, "tests/*.yaml")


# --------------------------------------------------------------------------- checks, selectors
def checks_reference(_cli: click.Group) -> str:
    """The shorthands and every Great Expectations expectation lake accepts, from GE's registry."""
    from framework.project import expectations as gx
    from framework.project.checks import DROPPABLE, ITEM_KEYS, SEVERITIES, SHORTHANDS

    out = ["### Shorthands {#shorthands}", "", "| shorthand | written | the expectation it stands for |", "|---|---|---|"]
    for key, text in SHORTHANDS.items():
        written, _, meaning = text.partition("  ")
        out.append(f"| `{key}` | `{written}` | {meaning.strip().strip('()')} |")
    out += ["", f"Keys beside a check: {', '.join(f'`{k}`' for k in ITEM_KEYS)}; severities: "
            f"{', '.join(f'`{s}`' for s in SEVERITIES)}.", "",
            "### Expectations {#expectations}", "",
            "Every expectation of the installed Great Expectations, as lake validates it. *Level* says "
            "which data it judges (row-level: the rows being written; table-level: the table after the "
            "commit); *drop* says whether `severity: drop` can quarantine its failing rows.", "",
            "| expectation | level | required arguments | optional arguments | drop |", "|---|---|---|---|---|"]
    for name in gx.expectation_names():
        required, optional = gx.argument_names(name)
        args = [", ".join(f"`{a}`" for a in x) or "-" for x in (required, optional)]
        out.append(f"| `{name}` | {gx.level_of(name)} | {args[0]} | {args[1]} | {'yes' if name in DROPPABLE else ''} |")
    return "\n".join(out) + "\n"


def selectors_reference(_cli: click.Group) -> str:
    from framework.transform.selector import METHODS, STATES

    methods = ", ".join(f"`{m}:`" for m in METHODS)
    states = ", ".join(f"`state:{s}`" for s in STATES)
    return f"Methods: {methods}; states: {states}.\n"


SECTIONS: dict[str, Callable[[click.Group], str]] = {
    "cli": cli_reference,
    "lake.yaml": lake_yaml,
    "ods.yaml": ods_yaml,
    "model.yaml": model_yaml,
    "external.yaml": external_yaml,
    "unit-tests.yaml": unit_test_yaml,
    "checks": checks_reference,
    "selectors": selectors_reference,
}
