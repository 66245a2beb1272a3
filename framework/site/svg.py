"""Inline SVG for lake's HTML pages: the DAG coloured by status, line charts and bar charts.

Plain strings, no JavaScript and no CDN: the pages must open offline, from a file, in any browser.
Every name and label is escaped here (table names and run ids come from YAML and user input).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

import networkx as nx

# Status of a table in the last run -> fill colour (legend order).
STATUS_COLOURS: dict[str, str] = {
    "ods": "#dbe9f6",
    "external": "#e6e1f2",
    "built": "#cdebd3",
    "unchanged": "#eef5ef",
    "failed": "#f6c9cf",
    "skipped": "#fbe3b8",
    "not built yet": "#f1f1f1",
}
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
_NODE_W, _NODE_H, _COL_GAP, _ROW_GAP, _PAD = 190, 30, 70, 14, 12


def _depths(g: nx.DiGraph) -> dict[str, int]:
    """Longest path from a source: ODS tables in column 0, each model right of all it reads."""
    depth: dict[str, int] = {}
    for n in nx.lexicographical_topological_sort(g):
        depth[n] = max((depth[p] + 1 for p in g.predecessors(n)), default=0)
    return depth


def _columns(g: nx.DiGraph) -> list[list[str]]:
    """Nodes per column, each column ordered by the mean row of its upstreams (fewer crossings)."""
    depth = _depths(g)
    cols: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    row: dict[str, float] = {}
    for d, col in enumerate(cols):
        col.extend(sorted((n for n in depth if depth[n] == d),
                          key=lambda n: (sum(row[p] for p in g.predecessors(n)) / max(1, g.in_degree(n)), n)))
        for i, n in enumerate(col):
            row[n] = float(i)
    return cols


def _label(text: str, width: int = _NODE_W - 16) -> str:
    """Shorten a name to what fits a node (about 7 px per character at 12 px)."""
    room = width // 7
    return text if len(text) <= room else text[: room - 1] + "…"


def dag_svg(g: nx.DiGraph, status: Mapping[str, str], href: Mapping[str, str] | None = None) -> str:
    """The DAG left to right, each node filled by `status[node]` (a key of STATUS_COLOURS) and
    linking to `href[node]` when given; with a legend of the statuses used."""
    cols = _columns(g)
    if not cols:
        return "<p>No tables yet.</p>"
    pos: dict[str, tuple[int, int]] = {}
    for c, col in enumerate(cols):
        for r, n in enumerate(col):
            pos[n] = (_PAD + c * (_NODE_W + _COL_GAP), _PAD + 24 + r * (_NODE_H + _ROW_GAP))
    width = _PAD * 2 + len(cols) * _NODE_W + (len(cols) - 1) * _COL_GAP
    height = _PAD * 2 + 24 + max(len(c) for c in cols) * (_NODE_H + _ROW_GAP)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'role="img" aria-label="dependency graph">',
             '<defs><marker id="arr" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
             '<path d="M0,0L10,5L0,10z" fill="#888"/></marker></defs>']
    for a, b in sorted(g.edges):
        (x1, y1), (x2, y2) = pos[a], pos[b]
        sx, sy, ex, ey = x1 + _NODE_W, y1 + _NODE_H / 2, x2, y2 + _NODE_H / 2
        mid = (sx + ex) / 2
        parts.append(f'<path d="M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}" fill="none" stroke="#999" marker-end="url(#arr)"/>')
    for n, (x, y) in sorted(pos.items()):
        state = status.get(n, "not built yet")
        fill = STATUS_COLOURS.get(state, "#f1f1f1")
        box = (f'<g class="node" data-status="{escape(state)}"><title>{escape(n)}: {escape(state)}</title>'
               f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="5" fill="{fill}" stroke="#777"/>'
               f'<text x="{x + 8}" y="{y + 19}" font-size="12" font-family="system-ui,sans-serif">{escape(_label(n))}</text></g>')
        link = (href or {}).get(n)
        parts.append(f'<a href="{escape(link)}">{box}</a>' if link else box)
    used = [s for s in STATUS_COLOURS if s in {status.get(n, "not built yet") for n in pos}]
    for i, s in enumerate(used):
        x = _PAD + i * 130
        parts.append(f'<rect x="{x}" y="{_PAD - 2}" width="14" height="14" fill="{STATUS_COLOURS[s]}" stroke="#777"/>'
                     f'<text x="{x + 20}" y="{_PAD + 10}" font-size="12" font-family="system-ui,sans-serif">{escape(s)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _nice_max(v: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten, at least `v`."""
    if v <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(v))
    return next(m * p for m in (1, 2, 5, 10) if m * p >= v)


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"


def line_chart(title: str, unit: str, labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
               width: int = 720, height: int = 260) -> str:
    """One line per series over `labels` (x, in order); None leaves a gap. A legend names the series."""
    if not labels or not series:
        return f'<p class="empty">{escape(title)}: no data yet.</p>'
    left, right, top, bottom = 56, 170, 28, 36
    top_v = _nice_max(max((v for vs in series.values() for v in vs if v is not None), default=0.0))
    pw, ph = width - left - right, height - top - bottom
    step = pw / max(1, len(labels) - 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return left + (i * step if len(labels) > 1 else pw / 2), top + ph - v / top_v * ph

    parts = _frame(title, unit, width, height, left, top, pw, ph, top_v)
    for i, lab in enumerate(labels):
        if len(labels) <= 12 or i % math.ceil(len(labels) / 12) == 0:
            x, _ = xy(i, 0)
            parts.append(f'<text x="{x:.1f}" y="{top + ph + 16}" font-size="10" text-anchor="middle">{escape(lab)}</text>')
    for k, (name, values) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        points = [(i, v) for i, v in enumerate(values) if v is not None]
        path = " ".join(f"{'M' if j == 0 or points[j - 1][0] != i - 1 else 'L'}{xy(i, v)[0]:.1f},{xy(i, v)[1]:.1f}"
                        for j, (i, v) in enumerate(points))
        parts.append(f'<path class="series" data-series="{escape(name)}" d="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, v in points:
            x, y = xy(i, v)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"><title>{escape(name)} {escape(labels[i])}: '
                         f'{_fmt(v)} {escape(unit)}</title></circle>')
        ly = top + 4 + k * 16
        parts.append(f'<rect x="{width - right + 12}" y="{ly}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{width - right + 26}" y="{ly + 9}" font-size="11">{escape(_label(name, right * 7 // 8))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(title: str, unit: str, bars: Sequence[tuple[str, float]], width: int = 720, height: int = 220) -> str:
    """One bar per (label, value), in order."""
    if not bars:
        return f'<p class="empty">{escape(title)}: no data yet.</p>'
    left, right, top, bottom = 56, 20, 28, 36
    top_v = _nice_max(max(v for _, v in bars))
    pw, ph = width - left - right, height - top - bottom
    slot = pw / len(bars)
    parts = _frame(title, unit, width, height, left, top, pw, ph, top_v)
    for i, (lab, v) in enumerate(bars):
        h = v / top_v * ph
        x = left + i * slot + slot * 0.15
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{top + ph - h:.1f}" width="{slot * 0.7:.1f}" height="{h:.1f}" fill="{PALETTE[0]}">'
                     f'<title>{escape(lab)}: {_fmt(v)} {escape(unit)}</title></rect>')
        if len(bars) <= 16 or i % math.ceil(len(bars) / 16) == 0:
            parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{top + ph + 16}" font-size="10" text-anchor="middle">{escape(lab)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _frame(title: str, unit: str, width: int, height: int, left: int, top: int, pw: float, ph: float, top_v: float) -> list[str]:
    """The SVG element, its title, the y axis with four grid lines, and the x axis."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="{escape(title)}" font-family="system-ui,sans-serif">',
             f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>']
    for j in range(5):
        v = top_v * j / 4
        y = top + ph - ph * j / 4
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{_fmt(v)}</text>')
    parts.append(f'<text x="12" y="{top + ph / 2:.1f}" font-size="10" transform="rotate(-90 12 {top + ph / 2:.1f})" '
                 f'text-anchor="middle">{escape(unit)}</text>')
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw:.1f}" y2="{top + ph}" stroke="#888"/>')
    return parts
