"""Rows of both sides of `lake reconcile` compared key by key: missing, extra, changed (with the
columns that differ) or equal; a column ODS holds as Debezium's unavailable-value placeholder (an
unchanged TOASTed PostgreSQL value lake had no earlier value for) is unknown, not a difference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from framework.reconcile.canonical import ColumnSpec, same_value
from framework.reconcile.rows import Key, Row


@dataclass(frozen=True)
class KeyDiff:
    """One key whose rows differ: how, and in which columns (changed keys)."""

    key: Key
    kind: Literal["missing", "extra", "changed", "unknown"]
    columns: tuple[str, ...] = ()


def compare_row(cols: Sequence[ColumnSpec], key: Key, source: Row | None, ods: Row | None, *, float_digits: int,
                placeholder: str) -> KeyDiff | None:
    """How the two rows of one key differ (None: equal).

    Example:
        >>> from framework.reconcile.canonical import ColumnSpec
        >>> cols = [ColumnSpec("id", "id", "int"), ColumnSpec("note", "note", "string")]
        >>> compare_row(cols, ("1",), Row(1, ("1", "")), Row(1, ("1", None)), float_digits=6, placeholder="?")
        KeyDiff(key=('1',), kind='changed', columns=('note',))
        >>> compare_row(cols, ("1",), Row(1, ("1", "long text")), Row(1, ("1", "?")), float_digits=6, placeholder="?").kind
        'unknown'
    """
    if source is None and ods is None:
        return None
    if ods is None:
        return KeyDiff(key, "missing")
    if source is None:
        return KeyDiff(key, "extra")
    differ, unknown = [], False
    for c, a, b in zip(cols, source.values, ods.values, strict=True):
        if same_value(c.kind, a, b, float_digits):
            continue
        if b == placeholder and c.kind == "string":
            unknown = True
            continue
        differ.append(c.name)
    if differ:
        return KeyDiff(key, "changed", tuple(differ))
    return KeyDiff(key, "unknown") if unknown else None


def compare_rows(cols: Sequence[ColumnSpec], source: dict[Key, Row], ods: dict[Key, Row], *, float_digits: int,
                 placeholder: str) -> list[KeyDiff]:
    """Every key of either side whose rows differ, in key order."""
    out = []
    for key in sorted(source.keys() | ods.keys(), key=lambda k: tuple("" if v is None else v for v in k)):
        d = compare_row(cols, key, source.get(key), ods.get(key), float_digits=float_digits, placeholder=placeholder)
        if d is not None:
            out.append(d)
    return out
