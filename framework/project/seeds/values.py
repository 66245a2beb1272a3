"""Typing a seed's CSV values, in plain Python: the declared type of a column, or one inferred
from its values as dbt-spark infers a seed's (integers → bigint, other numbers → double,
true/false → boolean, ISO dates → date, ISO date-times → timestamp, anything else → string).

A value is checked here, not by Spark's cast (which turns a bad value into NULL without a word),
and comes back as the text Spark's cast reads exactly; an empty field is NULL.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

_INT = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_PLAIN_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$")
_DECIMAL_TYPE = re.compile(r"^decimal\((\d+),(\d+)\)$")
_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
_TRUE, _FALSE = {"true", "t", "yes", "y", "1"}, {"false", "f", "no", "n", "0"}
_ALIASES = {"integer": "int", "long": "bigint"}


class BadValue(ValueError):
    """A value its column's type does not take: `problem`, and what a value of the type looks like."""

    def __init__(self, problem: str, example: str) -> None:
        super().__init__(problem)
        self.problem, self.example = problem, example


def normalize(t: str) -> str:
    """A seed type as Spark writes it: lower case, no spaces, aliases resolved."""
    t = t.strip().lower().replace(" ", "")
    return _ALIASES.get(t, t)


def infer(values: list[str | None]) -> str:
    """The type of a column whose type is not declared, from its non-empty values."""
    present = [v.strip() for v in values if v is not None]
    if not present:
        return "string"
    if all(_INT.match(v) and -(2**63) <= int(v) < 2**63 for v in present):
        return "bigint"
    if all(_NUMBER.match(v) for v in present):
        return "double"
    if all(v.lower() in ("true", "false") for v in present):
        return "boolean"
    for typ in ("date", "timestamp"):
        try:
            for v in present:
                typed(v, typ)
            return typ
        except BadValue:
            continue
    return "string"


def typed(value: str | None, typ: str) -> str | None:
    """`value` as the text Spark casts to `typ` (None: NULL); BadValue when it is not one."""
    if value is None:
        return None
    if typ == "string":
        return value
    v = value.strip()
    if typ in _BITS:
        bits = _BITS[typ]
        if not _INT.match(v):
            raise BadValue(f"{value!r} is not a whole number", "42")
        if not -(2 ** (bits - 1)) <= int(v) < 2 ** (bits - 1):
            raise BadValue(f"{value!r} does not fit in {typ.upper()} ({bits}-bit)", f"a value between {-(2 ** (bits - 1))} and {2 ** (bits - 1) - 1}, or the type bigint")
        return str(int(v))
    if typ in ("double", "float"):
        if not _NUMBER.match(v):
            raise BadValue(f"{value!r} is not a number", "3.25")
        return v
    if typ == "boolean":
        if v.lower() in _TRUE | _FALSE:
            return "true" if v.lower() in _TRUE else "false"
        raise BadValue(f"{value!r} is not a boolean", "true or false")
    if typ == "date":
        return _date(value, v)
    if typ == "timestamp":
        return _timestamp(value, v)
    m = _DECIMAL_TYPE.match(typ)
    if m:
        return _decimal(value, v, int(m.group(1)), int(m.group(2)))
    raise BadValue(f"{typ} is not a seed column type", "")  # models/seed_config.py refuses it first


def _date(value: str, v: str) -> str:
    try:
        if _DATE.match(v):
            return date.fromisoformat(v).isoformat()
    except ValueError:
        pass
    raise BadValue(f"{value!r} is not a date", "2024-01-31 (YYYY-MM-DD)")


def _timestamp(value: str, v: str) -> str:
    try:
        if _DATE.match(v):
            return datetime.fromisoformat(v).isoformat(sep=" ")
        if _TIMESTAMP.match(v):
            return datetime.fromisoformat(v.replace("T", " ")).isoformat(sep=" ")
    except ValueError:
        pass
    raise BadValue(f"{value!r} is not a timestamp", "2024-01-31 13:45:00 (YYYY-MM-DD HH:MM[:SS[.ffffff]], no time zone)")


def _decimal(value: str, v: str, precision: int, scale: int) -> str:
    example = f"a number with at most {precision - scale} digit(s) before the point and {scale} after"
    try:
        d = Decimal(v) if _PLAIN_DECIMAL.match(v) else None
    except InvalidOperation:
        d = None
    if d is None:
        raise BadValue(f"{value!r} is not a decimal number", example)
    exponent = d.normalize().as_tuple().exponent if d else 0  # 1.500 fits DECIMAL(p,2)
    places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    whole = len(str(abs(int(d)))) if int(d) else 0
    if places > scale or whole > precision - scale:
        raise BadValue(f"{value!r} does not fit in DECIMAL({precision},{scale})", example)
    return v
