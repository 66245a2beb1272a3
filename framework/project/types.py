"""Schema evolution rules for ODS tables (pure logic).

New columns are added. A change that loses nothing is taken: integer widening (tinyint → smallint
→ int → bigint), float → double, int → double, DECIMAL(p,s) → DECIMAL(p',s') when the new type
holds every old value (s' ≥ s and p'-s' ≥ p-s: more digits, or more scale that fits), and DATE →
TIMESTAMP when the source means a wall-clock time (Debezium's Timestamp, MicroTimestamp and
NanoTimestamp: MySQL/MariaDB DATETIME, Postgres `timestamp`), where a date is exactly its
midnight in lake's UTC session. A narrowing (the new type is held by the old one) is rejected
unless the table keeps the wider type (`schema_narrowing: keep_wider`), except between types the
table stores alike (TINYINT, SMALLINT and INT are all INT in Hudi's Avro schema): that is no
change at all. Anything else (string →
int, a scale decrease, a scale increase that does not fit, a zoned TIMESTAMP) is rejected: the
table's events of that schema version go to the dead letter with the reason.

What Hudi 1.2.0 takes in place (schema on write, lake's write options, COW and MOR, measured: see
docs/concepts/ods.md "Schema changes"): every promotion above except DATE → TIMESTAMP ("Cannot update column
... from type 'date' to incompatible type 'timestamp'", in every write mode and with
`hoodie.schema.on.read.enable`). Snapshot, incremental, CDC and time-travel reads across base and
log files of both types are exact, and MOR compaction merges them. So DATE → TIMESTAMP rewrites the
table (framework/ods/rewrite.py), and so does a change of a key column whose text form changes
(Hudi's record key is that text). `hoodie.datasource.write.reconcile.schema=true` lets Hudi take
DATE → TIMESTAMP and scale changes, and corrupts the rows already written (days read as
microseconds, unscaled decimals read at the new scale): lake never sets it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_INT_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
# Hudi keeps a table's schema in Avro, which has no 8- or 16-bit integer: a column written as
# TINYINT or SMALLINT is stored as INT, and every later process reads it back as INT
# (../shared/HUDI_NOTES.md, "SMALLINT and TINYINT come back as INT").
_STORED_AS = {"tinyint": "int", "smallint": "int"}
_FLOAT_RANK = {"float": 1, "double": 2}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
# Debezium decoders of wall-clock times (no zone): a date is exactly their midnight (UTC session).
WALL_CLOCK = frozenset({"ts_ms", "ts_us", "ts_ns", "plain"})


def normalize(t: str) -> str:
    t = t.lower().replace(" ", "")
    return {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float"}.get(t, t)


def stored(t: str) -> str:
    """The type a Hudi table stores a column of type `t` as (what a later process reads back)."""
    n = normalize(t)
    return _STORED_AS.get(n, n)


def decimal_of(t: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type's text, or None."""
    m = _DECIMAL.match(normalize(t))
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Resolution:
    """The type a column is written as, or why it cannot be."""

    target: str | None
    promoted: bool = False
    narrowing: bool = False
    error: str | None = None


def _holds(wide: str, narrow: str) -> bool | None:
    """Whether type `wide` holds every value of `narrow` exactly (None: not comparable here)."""
    if wide == narrow:
        return True
    if wide in _INT_RANK and narrow in _INT_RANK:
        return _INT_RANK[wide] > _INT_RANK[narrow]
    if wide in _FLOAT_RANK and narrow in _FLOAT_RANK:
        return _FLOAT_RANK[wide] > _FLOAT_RANK[narrow]
    if wide == "double" and narrow in _INT_RANK:
        return narrow != "bigint"  # a double holds every int exactly, not every bigint
    w, n = decimal_of(wide), decimal_of(narrow)
    if w and n:
        return w[1] >= n[1] and w[0] - w[1] >= n[0] - n[1]
    return None


def resolve(column: str, existing: str | None, incoming: str, *, wall_clock: bool = True) -> Resolution:
    """Decide the written type of `column` given the table's type and an event's type.
    `wall_clock`: an incoming TIMESTAMP is a wall-clock time (see WALL_CLOCK)."""
    inc = normalize(incoming)
    if existing is None:
        return Resolution(inc)
    ex = normalize(existing)
    if ex == inc:
        return Resolution(ex)
    if ex == "date" and inc == "timestamp":
        if wall_clock:
            return Resolution(inc, promoted=True)
        return Resolution(None, error=(f"column {column!r} changed type from DATE to a zoned TIMESTAMP, which is not exact: "
                                       "the source converted its dates in its own time zone, unknown here"))
    if ex == "timestamp" and inc == "date":
        return Resolution(ex, narrowing=True, error=f"column {column!r} narrowed from TIMESTAMP to DATE")
    if _holds(inc, ex):
        return Resolution(inc, promoted=True)
    if stored(ex) == stored(inc):
        # The narrower type is stored as the table's (an INT read back from a table created from
        # SMALLINT events, or a SMALLINT source column changed to TINYINT): nothing changes.
        return Resolution(ex)
    if _holds(ex, inc):
        return Resolution(ex, narrowing=True, error=f"column {column!r} narrowed from {ex.upper()} to {inc.upper()}")
    if decimal_of(ex) and decimal_of(inc):
        return Resolution(None, error=(f"column {column!r} changed type from {ex.upper()} to {inc.upper()}, which cannot hold "
                                       f"every {ex.upper()} value"))
    return Resolution(None, error=f"column {column!r} changed type from {ex.upper()} to {inc.upper()}, which the table cannot take")


def merge_batch_types(column: str, existing: str | None, incoming: list[str], keep_wider: bool, *, wall_clock: bool = True) -> Resolution:
    """Resolve a column over several schema versions seen in one micro-batch."""
    current = existing
    promoted = False
    for t in incoming:
        r = resolve(column, current, t, wall_clock=wall_clock)
        if r.error and not (r.narrowing and keep_wider):
            return r
        promoted = promoted or r.promoted
        current = r.target
    assert current is not None
    return Resolution(current, promoted=promoted)


def in_place(old: str, new: str) -> bool:
    """Whether Hudi 1.2.0 changes a column of type `old` to `new` in place (a write of `new` values
    into the table; docs/concepts/ods.md "Schema changes"): the promotions `resolve` takes, but DATE → TIMESTAMP.
    Avro stores tinyint and smallint as int."""
    o, n = stored(old), stored(new)
    return bool(_holds(n, o)) and not (o == "date" and n == "timestamp")


def key_text_kept(old: str, new: str) -> bool:
    """Whether a key value keeps its text (Hudi's record key, lake's `_lake_key`) when its column
    changes from `old` to `new`: integer widening and a DECIMAL's precision do; a scale change
    (1.50 → 1.5000), float → double (0.1 → 0.10000000149011612) and DATE → TIMESTAMP do not."""
    o, n = normalize(old), normalize(new)
    if o == n or (o in _INT_RANK and n in _INT_RANK):
        return True
    od, nd = decimal_of(o), decimal_of(n)
    return bool(od and nd and od[1] == nd[1])
