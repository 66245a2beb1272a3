"""A unit test's inputs: for each upstream of the model, its columns with their types, its given
rows, its key, and (incremental tests) its rows after the change events (no Spark).

An input has the columns its rows and events give, the test's `columns:`, an ODS table's declared
`columns:` and key, a model upstream's output columns (as far as its SQL tells) and the columns
the model's SQL reads from it; the ones without a value are NULL. An upstream the test gives no
rows for is empty.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from framework.errors import ConfigIssue
from framework.modeltest.events import EventError, Round, Table, apply, duplicate_rows
from framework.modeltest.refs import Where, referenced_columns
from framework.modeltest.rows import (
    Row,
    Rows,
    RowsError,
    check_value,
    infer,
    kind_of,
    read_rows,
    text,
)
from framework.project.config import Project
from framework.transform.analysis import Analyses
from framework.transform.lineage import Tracer
from framework.transform.loader import Model
from models.config import _SQL_TYPE
from models.unit_test import ChangeEvent, UnitTest


@dataclass(frozen=True)
class Input:
    """One upstream of a test: its schema (column, Spark type), given rows and key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[Row, ...]
    key: tuple[str, ...] | None


Resolved = tuple[dict[str, Input], dict[str, tuple[Row, ...]], tuple[Round, ...]]


def resolve_inputs(project: Project, m: Model, t: UnitTest, where: Where, base: Path, analyses: Analyses,
                   tracer: Tracer) -> Resolved | list[ConfigIssue]:
    """The test's inputs, their final rows and the commits of its changes; or its problems."""
    given, issues = _given(project, m, t, where, base)
    for i, ev in enumerate(t.changes):
        if ev.input not in m.upstreams:
            issues.append(_not_read(where, ("changes", i, "input"), ev.input, m))
    if issues:
        return issues
    refs = referenced_columns(m.sql, m.upstreams) if m.sql else {}
    inputs: dict[str, Input] = {}
    events: list[ChangeEvent] = list(t.changes)
    for u in m.upstreams:
        j, rows = given.get(u, (None, Rows((), False)))
        typed = _Typing(project, u, t, j, rows, where, tracer, analyses)
        inputs[u], events = typed.input(refs.get(u, set()), events), typed.canonical_events(events)
        issues += typed.issues
    if issues or not t.changes:
        return issues or (inputs, {u: i.rows for u, i in inputs.items()}, ())
    return _incremental(inputs, events, given, where)


def _given(project: Project, m: Model, t: UnitTest, where: Where, base: Path) -> tuple[dict[str, tuple[int, Rows]], list[ConfigIssue]]:
    given: dict[str, tuple[int, Rows]] = {}
    issues = []
    for j, g in enumerate(t.given):
        if g.input not in m.upstreams:
            issues.append(_not_read(where, ("given", j, "input"), g.input, m))
            continue
        if g.input in given:
            issues.append(where.issue(("given", j, "input"), f"{g.input} is given twice", "give each upstream's rows once"))
            continue
        for c, typ in g.columns.items():
            if not _SQL_TYPE.match(typ.strip()):
                issues.append(where.issue(("given", j, "columns", c), f"unknown type {typ!r}",
                                          "use one of string, boolean, int, bigint, float, double, date, timestamp, binary, decimal(p,s)"))
        try:
            given[g.input] = (j, read_rows(g, base, project.root))
        except RowsError as e:
            issues.append(where.issue(("given", j, e.field), e.problem, e.fix, e.file, e.line))
    return given, issues


def _not_read(where: Where, loc: tuple[int | str, ...], name: str, m: Model) -> ConfigIssue:
    hint = difflib.get_close_matches(name, m.upstreams, n=1)
    fix = f"did you mean {hint[0]}? " if hint else ""
    return where.issue(loc, f"{m.name} does not read {name}", f"{fix}name one of its upstreams as its {'SQL' if m.sql else 'depends_on'} does: {', '.join(m.upstreams)}")


class _Typing:
    """The columns, types and rows of one input; problems go to `issues`."""

    def __init__(self, project: Project, u: str, t: UnitTest, j: int | None, rows: Rows, where: Where, tracer: Tracer,
                 analyses: Analyses) -> None:
        self.u, self.t, self.j, self.given, self.where = u, t, j, rows, where
        self.ods = next((o for o in project.ods_tables if o.qualified_name == u), None)
        self.known = tracer.columns(u) if self.ods is None else None
        self.key = (tuple(self.ods.key) or None) if self.ods is not None else analyses.key_of(u)
        self.declared = {c.lower(): typ for c, typ in (t.given[j].columns if j is not None else {}).items()}
        self.from_table = {c.lower(): typ for c, typ in (self.ods.columns if self.ods else {}).items()}
        self.names: dict[str, str] = {}
        self.issues: list[ConfigIssue] = []

    def _name(self, c: str, loc: tuple[int | str, ...] | None) -> None:
        low = c.lower()
        if low in self.names:
            return
        if loc is not None and self.known is not None and low not in self.known:
            hint = difflib.get_close_matches(low, self.known, n=1)
            self.issues.append(self.where.issue(loc, f"{self.u} has no column {c} (its columns: {', '.join(self.known)})",
                                                f"did you mean {hint[0]}?" if hint else f"give only columns {self.u} returns"))
        self.names[low] = c

    def input(self, refs: Iterable[str], events: list[ChangeEvent]) -> Input:
        mine = [(i, ev) for i, ev in enumerate(events) if ev.input == self.u]
        for r, row in enumerate(self.given.rows):
            for c in row:
                self._name(c, ("given", self.j or 0, "rows") if self.given.csv else ("given", self.j or 0, "rows", r, c))
        for i, ev in mine:
            for part in ("row", "key"):
                for c in getattr(ev, part) or {}:
                    self._name(c, ("changes", i, part, c))
        for c in [*self.declared, *self.from_table, *(self.key or ()), *(self.known or ()), *sorted(refs)]:
            self._name(c, None)
        rows = tuple(self._canon(r) for r in self.given.rows)
        values = {low: [kind_of(r.get(c), self.given.csv) for r in rows] for low, c in self.names.items()}
        for _i, ev in mine:
            for low, c in self.names.items():
                values[low] += [kind_of(v.get(c), False) for v in (self._canon(ev.row), self._canon(ev.key or {}))]
        types = {low: self.declared.get(low) or self.from_table.get(low) or infer(values[low]) or "string" for low in self.names}
        self._check_values(rows, mine)
        key = tuple(self.names[k.lower()] for k in self.key) if self.key else None
        return Input(self.u, tuple((c, types[low]) for low, c in self.names.items()), rows, key)

    def _canon(self, row: Mapping[str, object]) -> Row:
        return {self.names.get(k.lower(), k): v for k, v in row.items()}

    def canonical_events(self, events: list[ChangeEvent]) -> list[ChangeEvent]:
        return [ev.model_copy(update={"row": self._canon(ev.row), "key": None if ev.key is None else self._canon(ev.key)})
                if ev.input == self.u else ev for ev in events]

    def _check_values(self, rows: tuple[Row, ...], mine: list[tuple[int, ChangeEvent]]) -> None:
        """Values that are not of their column's declared type (an inferred type fits its values)."""
        typed = {low: typ for low, typ in {**self.from_table, **self.declared}.items() if low in self.names}
        cells: list[tuple[tuple[int | str, ...], object]] = [(("given", self.j or 0, "rows", r, c), v) for r, row in enumerate(rows) for c, v in row.items()]
        cells += [(("changes", i, part, c), v) for i, ev in mine for part in ("row", "key") for c, v in (getattr(ev, part) or {}).items()]
        for loc, v in cells:
            typ = typed.get(str(loc[-1]).lower())
            problem = check_value(str(text(v)), typ) if typ and v is not None else None
            if problem:
                file = self.given.file if loc[0] == "given" and self.given.file else None
                at = loc[:-1] if self.given.csv and loc[0] == "given" else loc
                by = "the test's `columns:`" if str(loc[-1]).lower() in self.declared else f"the `columns:` of {self.u} in layers/ods/"
                self.issues.append(self.where.issue(at, f"{text(v)!r} in column {loc[-1]} of {self.u} {problem}",
                                                    f"give a {typ} value ({by} declares it {typ})",
                                                    file, (int(loc[3]) + 2) if file else None))


def _incremental(inputs: dict[str, Input], events: list[ChangeEvent], given: Mapping[str, tuple[int, Rows]],
                 where: Where) -> Resolved | list[ConfigIssue]:
    """Final rows and commits of the change events: each upstream is a table, one row per key."""
    issues = []
    tables = {u: Table(i.key, tuple(c for c, _t in i.columns)) for u, i in inputs.items()}
    for u, inp in inputs.items():
        if inp.key is None and u.startswith("ods."):
            issues.append(where.issue(("changes",), f"{u} declares no `key:`, which an incremental test needs",
                                      f"add `key: [...]` to {u}'s declaration in layers/ods/"))
            continue
        j = given[u][0] if u in given else 0
        for r, problem in duplicate_rows(inp.rows, tables[u]):
            issues.append(where.issue(("given", j, "rows", r), f"row {r + 1} of {u} {problem}", "an incremental test writes the rows into a table: one row per key"))
    if issues:
        return issues
    try:
        done = apply({u: i.rows for u, i in inputs.items()}, events, tables)
    except EventError as e:
        return [where.issue(("changes", e.index, e.field), f"{events[e.index].op} of {events[e.index].input}: {e.problem}", e.fix)]
    return inputs, {u: tuple(done.final.get(u, ())) for u in inputs}, tuple(done.rounds)
