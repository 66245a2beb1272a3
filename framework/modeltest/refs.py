"""Which columns of each upstream a SQL model reads, and where a test's YAML says something.

A test gives only the columns it cares about; the others must still exist (as NULL) for the
model's SQL to resolve. They are found with sqlglot: columns qualified by an upstream's alias or
name, and unqualified columns of a model with one upstream (output aliases excluded: Spark would
resolve `GROUP BY alias` to an input column of that name first).
"""

from __future__ import annotations

from typing import Any

import sqlglot
import yaml
from sqlglot import exp

from framework.errors import ConfigIssue

Loc = tuple[int | str, ...]


def referenced_columns(sql: str, upstreams: tuple[str, ...]) -> dict[str, set[str]]:
    """Lower-case column names each upstream must have for `sql` to resolve (as far as the SQL
    tells: an unqualified column of a join belongs to no upstream here)."""
    out: dict[str, set[str]] = {u: set() for u in upstreams}
    try:
        tree: Any = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError:
        return out
    by_alias: dict[str, str] = {}
    for t in tree.find_all(exp.Table):
        full = f"{t.db}.{t.name}".lower() if t.db else None
        if full in out:
            by_alias[(t.alias or t.name).lower()] = full
            by_alias[full] = full
    aliases = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    for c in tree.find_all(exp.Column):
        if isinstance(c.this, exp.Star) or not c.name:
            continue
        name = c.name.lower()
        if c.table:
            qualifier = f"{c.db}.{c.table}".lower() if c.db else c.table.lower()
            if qualifier in by_alias:
                out[by_alias[qualifier]].add(name)
        elif len(upstreams) == 1 and name not in aliases:
            out[upstreams[0]].add(name)
    return out


def dotted(loc: Loc) -> str:
    """`tests[0].given[1].rows` from ("tests", 0, "given", 1, "rows")."""
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


class Where:
    """Issues about one test, with the line of the YAML node they point at."""

    def __init__(self, rel: str, node: yaml.Node | None, prefix: Loc) -> None:
        self.rel, self.node, self.prefix = rel, node, prefix

    def issue(self, loc: Loc, problem: str, fix: str, file: str | None = None, line: int | None = None) -> ConfigIssue:
        full = self.prefix + loc
        if file is None:
            file, line = self.rel, line_at(self.node, full)
        return ConfigIssue(file, line, dotted(full), problem, fix)

    @property
    def line(self) -> int | None:
        return line_at(self.node, self.prefix)


def line_at(node: yaml.Node | None, loc: Loc) -> int | None:
    """The line (1-based) of the node at `loc`, or of the deepest one found on the way. A row
    index into CSV text given as a block (`rows: |`) counts the lines of that text (header first)."""
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == part), None)
            if nxt is None:
                break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        elif isinstance(node, yaml.ScalarNode) and isinstance(part, int) and node.style in ("|", ">"):
            return int(node.start_mark.line) + 3 + part  # the `|` line, the header, then the rows
        else:
            break
    return int(node.start_mark.line) + 1 if node is not None else None


def compose(text: str) -> yaml.Node | None:
    """The node tree of a YAML text (None when it does not parse: its loader reports that)."""
    try:
        return yaml.compose(text)
    except yaml.YAMLError:
        return None
