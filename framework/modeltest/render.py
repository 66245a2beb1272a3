"""Printing unit test results: a line per test and, for a failing one, its rows as a table with
each row marked (chispa-style): `ok`, `missing` (expected, not returned), `extra` (returned, not
expected), and for a changed row (its key matches) the `expected` line then the `actual` one,
with the differing cells highlighted."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from models.unit_test import Comparison, DiffLine, UnitTestResult

_MARKS = {"ok": ("", ""), "missing": ("- missing", "red"), "extra": ("+ extra", "green"),
          "expected": ("~ expected", "red"), "actual": ("~ actual", "green")}


def print_results(console: Console, results: Sequence[UnitTestResult]) -> None:
    """Every result, then one summary line."""
    for r in results:
        print_result(console, r)
    console.print(summary(results), markup=False, highlight=False)


def print_result(console: Console, r: UnitTestResult) -> None:
    where = f"{r.file}:{r.line}" if r.line else r.file
    what = f" (full rebuild and incremental: {r.mode})" if r.incremental and r.mode else " (full rebuild and incremental)" if r.incremental else ""
    if r.status == "pass" and r.cached:
        console.print(Text.assemble(("PASS", "green"), f" {r.model}: {r.test}{what}  unchanged since it passed, not rerun"))
        return
    if r.status == "pass":
        console.print(Text.assemble(("PASS", "green"), f" {r.model}: {r.test}{what}  {r.seconds:.1f}s"))
        return
    label = ("FAIL", "bold red") if r.status == "fail" else ("ERROR", "bold red")
    console.print(Text.assemble(label, f" {r.model}: {r.test}{what}  ({where})"))
    if r.message:
        console.print(Text("  " + r.message.replace("\n", "\n  ")))
    for title, c in (("full rebuild", r.full), (f"incremental build ({r.mode})" if r.mode else "incremental build", r.changes)):
        if c is not None and not c.matches:
            order = "in order" if c.ordered else "order ignored"
            console.print(f"  {title}: {c.summary()} ({order})", markup=False, highlight=False)
            console.print(comparison_table(c))


def comparison_table(c: Comparison) -> Table:
    t = Table(padding=(0, 1))
    t.add_column("", no_wrap=True)
    for col in c.columns:
        t.add_column(col, overflow="fold")
    pending: DiffLine | None = None
    for line in c.lines:
        mark, style = _MARKS[line.mark]
        other = pending.values if line.mark == "actual" and pending is not None else None
        cells = [Text("NULL" if v is None else v, style="bold " + style if other is not None and other[i] != v else style)
                 for i, v in enumerate(line.values)]
        t.add_row(Text(mark, style=style), *cells)
        pending = line if line.mark == "expected" else None
    return t


def summary(results: Sequence[UnitTestResult]) -> str:
    counts = {s: sum(1 for r in results if r.status == s) for s in ("pass", "fail", "error")}
    parts = [f"{counts['pass']} passed"] + [f"{n} {s}ed" if s == "fail" else f"{n} error{'s' if n != 1 else ''}"
                                            for s, n in (("fail", counts["fail"]), ("error", counts["error"])) if n]
    cached = sum(1 for r in results if r.cached)
    if cached:
        parts[0] += f" ({cached} unchanged since they passed, not rerun)"
    return f"unit tests: {', '.join(parts)}"


def failure_text(r: UnitTestResult, width: int = 120) -> str:
    """A failed test as plain text (the build's record of a model its tests stopped)."""
    out = io.StringIO()
    print_result(Console(file=out, width=width, color_system=None, force_terminal=False), r)
    return out.getvalue().rstrip()
