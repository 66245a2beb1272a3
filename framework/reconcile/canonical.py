"""The canonical text of a row, the same on both sides of `lake reconcile`: each column's value
as text by a rule of its kind, framed so that NULL, '' and any separator stay distinct, and the
60-bit hash the checksums add up.

A column's kind comes from its type in the ODS table (what Debezium made of the source type),
refined by the source's own type where ODS keeps text of something else (a TIME is the text
'HH:MM:SS.ffffff' in ODS). Per kind, the text both sides produce:

- int: decimal digits (TINYINT(1) read as an integer by Debezium stays one);
- bool: '1' or '0' (a MariaDB TINYINT(1) is true when non-zero, as Debezium's boolean converter reads it);
- decimal: the value at the ODS column's scale ('12.30');
- float: rounded to `float_digits` decimals at that scale (the checksum); fetched rows compare
  within 10^-digits (:func:`same_value`), so a value on a rounding edge costs a fetch, never a
  false difference;
- string: the text (a TIME: 'HH:MM:SS.ffffff');
- date: 'YYYY-MM-DD';
- timestamp: microseconds since the epoch, UTC (DATETIME as its wall clock read as UTC, which is
  what Debezium writes; TIMESTAMP / timestamptz as the instant);
- binary: upper-case hex.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

Kind = Literal["int", "bool", "decimal", "float", "string", "time", "date", "timestamp", "binary"]
NULL_MARK = "~"  # a NULL's framed text; a value's is '<characters>:<text>'
SEPARATOR = "|"
_INT = {"tinyint", "smallint", "int", "integer", "bigint"}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class ColumnSpec:
    """One compared column: its name on both sides, its kind and (decimals) its scale."""

    name: str  # as the ODS table spells it
    source_name: str  # as the source database spells it
    kind: Kind
    scale: int = 0
    spark_type: str = "string"


class UnsupportedColumn(ValueError):
    """A column whose ODS type lake cannot compare with the source's."""


def kind_of(spark_type: str, source_type: str) -> tuple[Kind, int]:
    """(kind, scale) of a column from its ODS (Spark) type and its source type (information_schema
    `data_type`, lower case).

    Example:
        >>> kind_of("decimal(10,2)", "decimal")
        ('decimal', 2)
        >>> kind_of("string", "time")
        ('time', 0)
        >>> kind_of("smallint", "tinyint")
        ('int', 0)
    """
    t = spark_type.lower().replace(" ", "")
    if t in _INT:
        return "int", 0
    if t == "boolean":
        return "bool", 0
    m = _DECIMAL.match(t)
    if m:
        return "decimal", int(m.group(2))
    if t in ("float", "double"):
        return "float", 0
    if t == "date":
        return "date", 0
    if t in ("timestamp", "timestamp_ntz"):
        return "timestamp", 0
    if t == "binary":
        return "binary", 0
    if t == "string":
        return ("time", 0) if source_type in ("time", "time without time zone") else ("string", 0)
    raise UnsupportedColumn(f"ODS type {spark_type} (source type {source_type})")


def frame(text: str | None) -> str:
    """One value's part of the row text: NULL and '' differ, a separator inside a value cannot
    shift the next.

    Example:
        >>> frame(None), frame(""), frame("a|b")
        ('~', '0:', '3:a|b')
    """
    return NULL_MARK if text is None else f"{len(text)}:{text}"


def row_text(values: tuple[str | None, ...]) -> str:
    """The canonical text of a row from its columns' texts (in the columns' order)."""
    return SEPARATOR.join(frame(v) for v in values)


def hash60(text: str) -> int:
    """The 60 low bits of the MD5 of the UTF-8 text: the last 15 hex digits, as every side computes it.

    Example:
        >>> hash60("") == int(hashlib.md5(b"").hexdigest()[17:], 16)
        True
    """
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[17:], 16)


def hash32(text: str) -> int:
    """The first 32 bits of the MD5 of the UTF-8 text: where a key that is not one integer sits
    in the ranges the bisection splits."""
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:8], 16)


def same_value(kind: Kind, a: str | None, b: str | None, float_digits: int) -> bool:
    """Whether two canonical texts of one column hold the same value: exact, except floats, which
    are equal within 10^-digits, relative to the larger magnitude when that exceeds 1.

    Example:
        >>> same_value("float", "0.300000", "0.300001", 6), same_value("float", "0.3", "0.31", 6)
        (True, False)
    """
    if a == b:
        return True
    if kind != "float" or a is None or b is None:
        return False
    try:
        x, y = Decimal(a), Decimal(b)
    except InvalidOperation:
        return False
    tol = Decimal(10) ** -float_digits
    return abs(x - y) <= tol * max(Decimal(1), abs(x), abs(y)) or math.isclose(float(x), float(y), rel_tol=1e-12)
