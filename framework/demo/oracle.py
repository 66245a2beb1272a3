"""The source database as the oracle of the real CDC chain (MariaDB or PostgreSQL): each ODS table
must hold exactly the rows of `SELECT * FROM` its source table, and each model the rows the
database gives for the model's own SQL (framework.demo.shop / pgshop `oracle_views`).

Values are compared as text made the same way on both sides: timestamps as
`YYYY-MM-DD HH:MM:SS.ffffff` in UTC (Spark's session time zone and the database session's are
both UTC), numbers without trailing zeros (a DECIMAL(10,2) 59.00 and a SUM's 59 are one value),
bytes as hex, JSON as the text the database prints (Debezium sends that text), strings and NULLs
as they are.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Row = tuple[str | None, ...]


class Database(Protocol):
    def query(self, sql: str, database: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]: ...


def canon(v: Any) -> str | None:
    """One value as comparable text (see the module docstring)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, Decimal)):
        d = Decimal(v)
        return str(int(d)) if d == d.to_integral_value() else format(d.normalize(), "f")
    if isinstance(v, datetime):
        if v.tzinfo is not None:  # PostgreSQL's timestamptz: the same instant in UTC
            v = v.astimezone(timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return str(v)


@dataclass
class Comparison:
    """One lake table against its oracle: rows only on one side (with their count)."""

    name: str
    columns: list[str]
    expected: int
    actual: int
    missing: list[Row] = field(default_factory=list)  # in the database, not in lake
    extra: list[Row] = field(default_factory=list)  # in lake, not in the database
    problem: str | None = None

    @property
    def equal(self) -> bool:
        return self.problem is None and not self.missing and not self.extra

    def describe(self, limit: int = 5) -> str:
        if self.equal:
            return f"{self.name}: {self.actual} rows, equal"
        if self.problem:
            return f"{self.name}: {self.problem}"
        return (f"{self.name}: {self.actual} rows in lake, {self.expected} in the database; columns {self.columns}\n"
                f"  only in the database ({len(self.missing)}): {self.missing[:limit]}\n  only in lake ({len(self.extra)}): {self.extra[:limit]}")


def compare(name: str, expected: tuple[list[str], list[tuple[Any, ...]]], spark: SparkSession) -> Comparison:
    """The lake table `name` (registered: `ods.x`, `dwd.y`) against the database's (columns, rows)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    columns, rows = expected
    df = spark.table(name)
    have = {c.lower(): c for c in df.columns if not c.startswith("_")}
    lacking = [c for c in columns if c.lower() not in have]
    surplus = sorted(set(have) - {c.lower() for c in columns})
    if lacking or surplus:
        return Comparison(name, columns, len(rows), df.count(),
                          problem=f"columns differ: lake lacks {lacking}, lake has more {surplus}")
    exprs = [F.date_format(F.col(have[c.lower()]), "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c)
             if isinstance(df.schema[have[c.lower()]].dataType, TimestampType) else F.col(have[c.lower()]).alias(c)
             for c in columns]
    mine = Counter(tuple(canon(v) for v in r) for r in df.select(*exprs).collect())
    theirs = Counter(tuple(canon(v) for v in r) for r in rows)
    missing = sorted((theirs - mine).elements(), key=str)
    extra = sorted((mine - theirs).elements(), key=str)
    return Comparison(name, columns, sum(theirs.values()), sum(mine.values()), missing, extra)


def compare_all(spark: SparkSession, warehouse: Any, db: Database, database: str, tables: list[str], models: list[str]) -> list[Comparison]:
    """Every ODS table (`ods.<t>` against `SELECT * FROM <database>.<t>`: a MariaDB database or a
    PostgreSQL schema) and every model (`<layer>.<name>` against the view of the same name and SQL)."""
    from framework.runtime.paths import Layout
    from framework.table.catalog import register_ods

    registered = set(register_ods(spark, Layout(warehouse)))
    out = []
    for name in [f"ods.{t}" for t in tables] + models:
        source = f"{database}.{name.split('.', 1)[1]}" if name.startswith("ods.") else name
        if name not in registered:
            out.append(Comparison(name, [], 0, 0, problem="not in the warehouse"))
            continue
        out.append(compare(name, db.query(f"SELECT * FROM {source}"), spark))
    return out
