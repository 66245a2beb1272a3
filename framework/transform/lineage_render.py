"""Print a column lineage: a rich tree for terminals, plain indented text, or JSON."""

from __future__ import annotations

import json

from rich.markup import escape
from rich.tree import Tree

from framework.transform.lineage import LineageNode


def _children(node: LineageNode) -> list[tuple[str, LineageNode]]:
    return [("", s) for s in node.sources] + [("group by ", g) for g in node.grouped_by]


def _label(node: LineageNode, role: str) -> str:
    text = f"{role}{node.name}"
    if node.expression is not None:
        text += f" = {node.expression}"
    if node.kind in ("python", "unknown"):
        text += f"  [{node.kind}]"
    return text


def render_text(node: LineageNode) -> str:
    """Indented text with box-drawing branches; notes on their own `! ` lines."""
    lines: list[str] = []

    def add(n: LineageNode, role: str, prefix: str, branch: str) -> None:
        lines.append(prefix + branch + _label(n, role))
        inner = prefix + ("" if not branch else ("    " if branch.startswith("└") else "│   "))
        if n.note:
            lines.append(inner + "! " + n.note)
        kids = _children(n)
        for i, (r, child) in enumerate(kids):
            add(child, r, inner, "└── " if i == len(kids) - 1 else "├── ")

    add(node, "", "", "")
    return "\n".join(lines)


def render_tree(node: LineageNode) -> Tree:
    """A rich Tree: models bold, ODS columns green, notes yellow."""

    def style(n: LineageNode, role: str) -> str:
        label = escape(_label(n, role))
        return f"[green]{label}[/]" if n.kind in ("ods", "external") else f"[bold]{label}[/]"

    def fill(tree: Tree, n: LineageNode) -> None:
        if n.note:
            tree.add(f"[yellow]! {escape(n.note)}[/]")
        for role, child in _children(n):
            fill(tree.add(style(child, role)), child)

    root = Tree(style(node, ""))
    fill(root, node)
    return root


def render_json(node: LineageNode) -> str:
    return json.dumps(node.to_dict(), indent=2)
