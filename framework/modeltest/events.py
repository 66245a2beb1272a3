"""The change events of an incremental unit test, applied to its given rows (no Spark).

Each upstream's rows are identified by its key (an ODS table's `key:`, a model's inferred or
declared key), or, for a model without a key (a set of rows), by all its values. An `insert`
adds a row whose key is new; an `update` changes the row with the key `row` (or `key:`) names:
the columns `row` gives replace the old values, the others stay; a `delete` removes the row its
key names. Applying them gives each upstream's final rows, and the commits that bring the change
to a table: consecutive events go into one commit until one touches a row the commit already
changed (a table holds one version of a row per commit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from framework.modeltest.rows import Row, text
from models.unit_test import ChangeEvent

Identity = tuple[str | None, ...]


class EventError(ValueError):
    """Event `index` cannot apply: the problem, under which field, and the fix."""

    def __init__(self, index: int, field: str, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.index, self.field, self.problem, self.fix = index, field, problem, fix


@dataclass(frozen=True)
class Round:
    """One commit per upstream: rows written (their new state) and rows deleted (their last)."""

    upserts: Mapping[str, tuple[Row, ...]]
    deletes: Mapping[str, tuple[Row, ...]]


@dataclass
class Applied:
    final: dict[str, list[Row]]
    rounds: list[Round] = field(default_factory=list)


@dataclass(frozen=True)
class Table:
    """What identifies the rows of one upstream: its key, or (None) every column."""

    key: tuple[str, ...] | None
    columns: tuple[str, ...]

    def identity(self, row: Row) -> Identity:
        return tuple(text(row.get(c)) for c in (self.key or self.columns))

    def shown(self, ident: Identity) -> str:
        cols = self.key or self.columns
        return ", ".join(f"{c}={v if v is not None else 'NULL'}" for c, v in zip(cols, ident, strict=True))


def duplicate_rows(rows: Sequence[Row], table: Table) -> list[tuple[int, str]]:
    """(row index, problem) for rows a table cannot hold: a NULL key column, a key given twice."""
    seen: dict[Identity, int] = {}
    out = []
    for i, row in enumerate(rows):
        missing = [k for k in table.key or () if row.get(k) is None]
        if missing:
            out.append((i, f"has no value for key column {missing[0]}"))
            continue
        ident = table.identity(row)
        if ident in seen:
            what = "key" if table.key else "row (a model without a key holds each row once)"
            out.append((i, f"repeats the {what} of row {seen[ident] + 1} ({table.shown(ident)})"))
        seen.setdefault(ident, i)
    return out


def apply(initial: Mapping[str, Sequence[Row]], events: Sequence[ChangeEvent], tables: Mapping[str, Table]) -> Applied:
    """Every upstream's final rows and the commits of the change (EventError on a bad event)."""
    state = {u: {tables[u].identity(r): dict(r) for r in rows} for u, rows in initial.items()}
    out = Applied({})
    touched: set[tuple[str, Identity]] = set()
    pending: dict[str, dict[Identity, tuple[bool, Row]]] = {}  # input -> identity -> (deleted, row)
    for i, ev in enumerate(events):
        steps = _steps(i, ev, tables[ev.input], state.setdefault(ev.input, {}))
        if any((ev.input, ident) in touched for ident, _d, _r in steps):
            out.rounds.append(_round(pending))
            touched, pending = set(), {}
        for ident, deleted, row in steps:
            touched.add((ev.input, ident))
            pending.setdefault(ev.input, {})[ident] = (deleted, row)
            if deleted:
                state[ev.input].pop(ident, None)
            else:
                state[ev.input][ident] = row
    if pending:
        out.rounds.append(_round(pending))
    out.final = {u: list(rows.values()) for u, rows in state.items()}
    return out


def _round(pending: dict[str, dict[Identity, tuple[bool, Row]]]) -> Round:
    ups = {u: tuple(r for d, r in rows.values() if not d) for u, rows in pending.items()}
    dels = {u: tuple(r for d, r in rows.values() if d) for u, rows in pending.items()}
    return Round({u: r for u, r in ups.items() if r}, {u: r for u, r in dels.items() if r})


def _steps(i: int, ev: ChangeEvent, table: Table, rows: dict[Identity, Row]) -> list[tuple[Identity, bool, Row]]:
    """What event `i` does to `rows`: (identity, deleted?, row) per row it changes."""
    if ev.op == "insert":
        _require_key(i, ev.row, table, "row")
        ident = table.identity(ev.row)
        if ident in rows:
            raise EventError(i, "row", f"{table.shown(ident)} is in {ev.input} already at this point",
                             "use `op: update` to change it, or give the insert another key")
        return [(ident, False, dict(ev.row))]
    if table.key is None and ev.op == "update":
        raise EventError(i, "op", f"{ev.input} has no key, so an update cannot say which row it changes",
                         "write it as a delete (the whole old row) and an insert (the new row)")
    names = ev.key if ev.key is not None else ev.row
    where = "key" if ev.key is not None else "row"
    if table.key is None:  # a delete of a keyless row: the row as a whole
        ident = tuple(text(names.get(c)) for c in table.columns)
    else:
        _require_key(i, names, table, where)
        ident = tuple(text(names[k]) for k in table.key)
    old = rows.get(ident)
    if old is None:
        raise EventError(i, where, f"{table.shown(ident)} is not in {ev.input} at this point",
                         "insert it first (in `given:` or an earlier insert), or correct the key")
    if ev.op == "delete":
        return [(ident, True, old)]
    new = {**old, **ev.row}
    new_ident = table.identity(new)
    if new_ident == ident:
        return [(ident, False, new)]
    if new_ident in rows:
        raise EventError(i, "row", f"the new key {table.shown(new_ident)} is in {ev.input} already",
                         "delete that row first, or give another key")
    return [(ident, True, old), (new_ident, False, new)]


def _require_key(i: int, row: Mapping[str, object], table: Table, where: str) -> None:
    for k in table.key or ():
        if row.get(k) is None:
            raise EventError(i, where, f"no value for the key column {k}",
                             f"add `{k}:` to `{where}:` (the key of the row the event changes)")
