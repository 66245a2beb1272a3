"""The rows of a unit test: read from YAML, CSV text or a file, written as text, and typed.

Values travel as text from here to Spark, where a CAST gives them their column's type, so YAML
and CSV rows are typed the same way. A column's type is the one the test declares (`columns:`),
else the upstream's declaration (an ODS table's `columns:`), else inferred from its values:
integers BIGINT, other numbers DOUBLE, true/false BOOLEAN, dates (`2024-05-01`) DATE, date-times
TIMESTAMP (UTC), anything else (and a column without any value) STRING. In YAML, quoted values
are strings; in CSV every cell is inferred and an empty cell is NULL. Lists and mappings become
JSON text (as ODS keeps nested values).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from models.unit_test import RowSet

Row = dict[str, Any]

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
_TS = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d{1,9})?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$")
_BOOL = {"true", "false"}
_SPARK_BOOL = {"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"}
_RANGES = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "integer": 2**31, "bigint": 2**63}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


class RowsError(ValueError):
    """Rows that cannot be read: `field` under the row set, where (file, line) and the fix."""

    def __init__(self, problem: str, fix: str, field: str = "", file: str | None = None, line: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.fix, self.field, self.file, self.line = problem, fix, field, file, line


@dataclass(frozen=True)
class Rows:
    """Rows as read: values as YAML gives them, or text (`csv`: every cell is text to infer)."""

    rows: tuple[Row, ...]
    csv: bool
    file: str | None = None  # the file they came from (project-relative), if any


def read_rows(spec: RowSet, base: Path, root: Path) -> Rows:
    """The rows of a `rows:` / `file:` entry; `base` is the folder of the YAML declaring it."""
    if spec.file is None:
        if isinstance(spec.rows, str):
            return Rows(_csv(spec.rows, "rows", None), True)
        return Rows(tuple(dict(r) for r in spec.rows or []), False)
    path = (base / spec.file).resolve()
    rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise RowsError(f"cannot read {rel}: {e.strerror}", f"give `file:` relative to the YAML file ({base})", "file") from None
    if spec.format == "csv" or path.suffix.lower() == ".csv":
        return Rows(_csv(text, "file", rel), True, rel)
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        raise RowsError(f"{rel} is neither CSV nor YAML/JSON", "name it .csv (a header line, then rows) or .yaml/.json (a list of mappings)", "file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RowsError(f"{rel} is not valid YAML: {getattr(e, 'problem', e)}", "fix the file: a list of mappings, one per row", "file") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise RowsError(f"{rel} does not hold a list of mappings", "write one mapping per row, e.g. `- {id: 1, name: a}`", "file")
    return Rows(tuple(dict(r) for r in data), False, rel)


def _csv(text: str, field: str, file: str | None) -> tuple[Row, ...]:
    """CSV with a header line; an empty cell is NULL."""
    reader = csv.reader(io.StringIO(text.strip("\n")))
    lines = [r for r in reader if r]
    if not lines:
        raise RowsError("the CSV has no header line", "put the column names on the first line: `id,name`", field, file, 1)
    header = [h.strip() for h in lines[0]]
    if any(not h for h in header) or len(set(h.lower() for h in header)) != len(header):
        raise RowsError(f"the CSV header {','.join(header)!r} has an empty or repeated column name", "name each column once", field, file, 1)
    out = []
    for i, cells in enumerate(lines[1:], start=2):
        if len(cells) != len(header):
            raise RowsError(f"CSV line {i} has {len(cells)} cells, the header {len(header)}", "give every line one cell per column (empty for NULL)", field, file, i)
        out.append({h: (c if c != "" else None) for h, c in zip(header, cells, strict=True)})
    return tuple(out)


def text(value: Any) -> str | None:
    """A value as the text Spark casts to its column's type."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | dict):
        return json.dumps(value, default=str, sort_keys=True)
    return str(value)


def kind_of(value: Any, from_csv: bool) -> str | None:
    """The Spark type a single value suggests (None: NULL says nothing)."""
    if value is None:
        return None
    if not from_csv or not isinstance(value, str):
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "bigint"
        if isinstance(value, float):
            return "double"
        if isinstance(value, datetime):
            return "timestamp"
        if isinstance(value, date):
            return "date"
        return "string"
    v = value.strip()
    if _INT.match(v) and abs(int(v)) < 2**63:
        return "bigint"
    if _FLOAT.match(v):
        return "double"
    if v.lower() in _BOOL:
        return "boolean"
    if _DATE.match(v):
        return "date"
    if _TS.match(v):
        return "timestamp"
    return "string"


def infer(kinds: list[str | None]) -> str | None:
    """One type for a column from its values' kinds: numbers widen to DOUBLE, dates to
    TIMESTAMP, anything else mixed is STRING; None when no value is known."""
    found = {k for k in kinds if k is not None}
    if not found:
        return None
    if len(found) == 1:
        return found.pop()
    if found <= {"bigint", "double"}:
        return "double"
    if found <= {"date", "timestamp"}:
        return "timestamp"
    return "string"


def check_value(value: str, sql_type: str) -> str | None:
    """Why Spark's CAST of `value` to `sql_type` would give NULL (a wrong value), or None."""
    t, v = sql_type.strip().lower(), value.strip()
    if t in _RANGES:
        bound = _RANGES[t]
        return None if _INT.match(v) and -bound <= int(v) < bound else f"is not a {t}"
    if t in ("float", "double"):
        try:
            float(v)
        except ValueError:
            return f"is not a {t}"
        return None
    m = _DECIMAL.match(t)
    if m:
        return _decimal_problem(v, int(m[1]), int(m[2]))
    if t == "boolean":
        return None if v.lower() in _SPARK_BOOL else "is not a boolean (true or false)"
    if t == "date":
        return None if _DATE.match(v) and _valid_date(v) else "is not a date (YYYY-MM-DD)"
    if t == "timestamp":
        return None if _TS.match(v) and _valid_date(v[:10].split("T")[0].split(" ")[0]) else "is not a timestamp (YYYY-MM-DD HH:MM:SS, UTC unless an offset is given)"
    return None


def _decimal_problem(v: str, precision: int, scale: int) -> str | None:
    try:
        d = Decimal(v)
    except InvalidOperation:
        return f"is not a decimal({precision},{scale})"
    if not d.is_finite():
        return f"is not a decimal({precision},{scale})"
    whole = len(str(abs(int(d)))) if int(d) else 0
    return None if whole <= precision - scale else f"has more than {precision - scale} digits before the point for decimal({precision},{scale})"


def _valid_date(v: str) -> bool:
    try:
        y, m, d = (int(x) for x in v.split("-"))
        date(y, m, d)
    except ValueError:
        return False
    return True


def canonical_float(v: float) -> str:
    """A DOUBLE/FLOAT as compared: 12 significant digits, so 0.1 + 0.2 equals 0.3."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return format(v, ".12g")
