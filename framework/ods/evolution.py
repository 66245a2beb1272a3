"""Schema evolution rules for ODS tables (pure logic).

New columns are added; widening (tinyint→smallint→int→bigint, float→double, int→double) is
accepted and the table column is promoted; anything else is a change the table cannot take, and
the table's events of that batch go to the dead letter with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

_INT_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
_FLOAT_RANK = {"float": 1, "double": 2}


def normalize(t: str) -> str:
    t = t.lower().replace(" ", "")
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float"}.get(t, t)


@dataclass(frozen=True)
class Resolution:
    """The type a column is written as, or why it cannot be."""

    target: str | None
    promoted: bool = False
    narrowing: bool = False
    error: str | None = None


def resolve(column: str, existing: str | None, incoming: str) -> Resolution:
    """Decide the written type of `column` given the table's type and an event's type."""
    inc = normalize(incoming)
    if existing is None:
        return Resolution(inc)
    ex = normalize(existing)
    if ex == inc:
        return Resolution(ex)
    if ex in _INT_RANK and inc in _INT_RANK:
        if _INT_RANK[inc] > _INT_RANK[ex]:
            return Resolution(inc, promoted=True)
        return Resolution(ex, narrowing=True, error=f"column {column!r} narrowed from {ex.upper()} to {inc.upper()}")
    if ex in _FLOAT_RANK and inc in _FLOAT_RANK:
        if _FLOAT_RANK[inc] > _FLOAT_RANK[ex]:
            return Resolution(inc, promoted=True)
        return Resolution(ex, narrowing=True, error=f"column {column!r} narrowed from {ex.upper()} to {inc.upper()}")
    if ex in _INT_RANK and inc == "double" and ex != "bigint":
        return Resolution("double", promoted=True)
    if ex == "double" and inc in _INT_RANK and inc != "bigint":
        return Resolution(ex, narrowing=True, error=f"column {column!r} narrowed from DOUBLE to {inc.upper()}")
    return Resolution(None, error=f"column {column!r} changed type from {ex.upper()} to {inc.upper()}, which the table cannot take")


def merge_batch_types(column: str, existing: str | None, incoming: list[str], keep_wider: bool) -> Resolution:
    """Resolve a column over several schema versions seen in one micro-batch."""
    current = existing
    promoted = False
    for t in incoming:
        r = resolve(column, current, t)
        if r.error and not (r.narrowing and keep_wider):
            return r
        promoted = promoted or r.promoted
        current = r.target
    assert current is not None
    return Resolution(current, promoted=promoted)
