"""The SQL `lake reconcile` runs in a source database, per dialect: each column's canonical text
(framework/reconcile/canonical.py has the rules), the row's 60-bit hash, the range coordinate of
a key, the one aggregate query per range (count and hash sum per sub-range) and the row reads at
the end of the bisection. Pure text: no connection here (framework/reconcile/source.py runs it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from framework.reconcile.canonical import NULL_MARK, SEPARATOR, ColumnSpec, Kind


@dataclass(frozen=True)
class Ranged:
    """How a table's keys map to the integer coordinate the bisection splits: the key itself
    (one integer key column: the primary key's index serves each range) or the first 32 bits of
    the MD5 of the key's canonical text (any other key: each range query scans the table)."""

    key: tuple[ColumnSpec, ...]

    @property
    def by_value(self) -> bool:
        return len(self.key) == 1 and self.key[0].kind == "int"


class Dialect:
    """The canonical text and checksum queries in one database's SQL."""

    name = "?"

    def quote(self, ident: str) -> str:
        raise NotImplementedError

    def text(self, c: ColumnSpec, float_digits: int, *, raw_float: bool = False) -> str:
        raise NotImplementedError

    def framed(self, e: str) -> str:
        raise NotImplementedError

    def concat(self, parts: Sequence[str]) -> str:
        raise NotImplementedError

    def hash60(self, e: str) -> str:
        raise NotImplementedError

    def hash32(self, e: str) -> str:
        raise NotImplementedError

    def div(self, e: str, width: int) -> str:
        raise NotImplementedError

    def table(self, parts: Sequence[str]) -> str:
        return ".".join(self.quote(p) for p in parts)

    def row_text(self, cols: Sequence[ColumnSpec], float_digits: int) -> str:
        """The canonical row text (framed values joined by '|')."""
        sep = f"'{SEPARATOR}'"
        parts: list[str] = []
        for i, c in enumerate(cols):
            if i:
                parts.append(sep)
            parts.append(self.framed(self.text(c, float_digits)))
        return self.concat(parts)

    def coordinate(self, r: Ranged, float_digits: int) -> str:
        if r.by_value:
            return self.quote(r.key[0].source_name)
        return self.hash32(self.row_text(r.key, float_digits))

    def checksum_sql(self, table: str, r: Ranged, cols: Sequence[ColumnSpec], float_digits: int, lo: int, hi: int, width: int) -> str:
        """One aggregate query: rows and hash sum of each sub-range [lo + b*width, lo + (b+1)*width) of [lo, hi)."""
        c = self.coordinate(r, float_digits)
        h = self.hash60(self.row_text(cols, float_digits))
        return (f"SELECT {self.div(f'{c} - ({lo})', width)} AS b, COUNT(*) AS n, SUM({h}) AS s FROM {table} "
                f"WHERE {c} >= {lo} AND {c} < {hi} GROUP BY 1")

    def bounds_sql(self, table: str, r: Ranged) -> str:
        c = self.quote(r.key[0].source_name)
        return f"SELECT MIN({c}), MAX({c}) FROM {table}"

    def rows_sql(self, table: str, r: Ranged, cols: Sequence[ColumnSpec], float_digits: int, lo: int, hi: int, *,
                 raw_float: bool = False) -> str:
        """The coordinate and each column's text of every row in [lo, hi)."""
        c = self.coordinate(r, float_digits)
        texts = ", ".join(self.text(col, float_digits, raw_float=raw_float) for col in cols)
        return f"SELECT {c}, {texts} FROM {table} WHERE {c} >= {lo} AND {c} < {hi}"

    def keyed_sql(self, table: str, r: Ranged, cols: Sequence[ColumnSpec], float_digits: int, n_keys: int, *,
                  raw_float: bool = False) -> str:
        """Each column's text of the rows of `n_keys` keys, given as parameters (each key's
        columns' canonical texts, in order)."""
        c = self.coordinate(r, float_digits)
        texts = ", ".join(self.text(col, float_digits, raw_float=raw_float) for col in cols)
        one = " AND ".join(f"{self.text(k, float_digits)} = %s" for k in r.key)
        if r.by_value:  # the index serves it
            one = f"{self.quote(r.key[0].source_name)} = %s"
        where = " OR ".join(f"({one})" for _ in range(n_keys))
        return f"SELECT {c}, {texts} FROM {table} WHERE {where}"


class MySql(Dialect):
    """MariaDB and MySQL (the session's time zone set to UTC)."""

    name = "mysql"

    def quote(self, ident: str) -> str:
        return "`" + ident.replace("`", "``") + "`"

    def text(self, c: ColumnSpec, float_digits: int, *, raw_float: bool = False) -> str:
        q = self.quote(c.source_name)
        d = float_digits
        by_kind: dict[Kind, str] = {
            "int": f"CAST({q} AS CHAR)",
            "bool": f"CASE WHEN {q} IS NULL THEN NULL WHEN {q} <> 0 THEN '1' ELSE '0' END",
            "decimal": f"CAST(CAST({q} AS DECIMAL(65,{c.scale})) AS CHAR)",
            "float": f"CAST({q} AS CHAR)" if raw_float else f"CAST(CAST(ROUND({q}, {d}) AS DECIMAL(65,{d})) AS CHAR)",
            "string": f"CONVERT({q} USING utf8mb4)",
            "time": f"TIME_FORMAT({q}, '%%H:%%i:%%s.%%f')",
            "date": f"DATE_FORMAT({q}, '%%Y-%%m-%%d')",
            "timestamp": f"CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q}) AS CHAR)",
            "binary": f"HEX({q})",
        }
        return by_kind[c.kind]

    def framed(self, e: str) -> str:
        return f"CASE WHEN ({e}) IS NULL THEN '{NULL_MARK}' ELSE CONCAT(CHAR_LENGTH({e}), ':', {e}) END"

    def concat(self, parts: Sequence[str]) -> str:
        return f"CONCAT({', '.join(parts)})"

    def hash60(self, e: str) -> str:
        return f"CAST(CONV(SUBSTRING(MD5({e}), 18), 16, 10) AS UNSIGNED)"

    def hash32(self, e: str) -> str:
        return f"CAST(CONV(LEFT(MD5({e}), 8), 16, 10) AS SIGNED)"

    def div(self, e: str, width: int) -> str:
        return f"({e}) DIV {width}"


class Postgres(Dialect):
    """PostgreSQL (14 or later: `extract(epoch ...)` is exact numeric)."""

    name = "postgres"

    def quote(self, ident: str) -> str:
        return '"' + ident.replace('"', '""') + '"'

    def text(self, c: ColumnSpec, float_digits: int, *, raw_float: bool = False) -> str:
        q = self.quote(c.source_name)
        d = float_digits
        by_kind: dict[Kind, str] = {
            "int": f"({q})::text",
            "bool": f"CASE WHEN {q} IS NULL THEN NULL WHEN ({q})::boolean THEN '1' ELSE '0' END",
            "decimal": f"round(({q})::numeric, {c.scale})::text",
            "float": f"({q})::text" if raw_float else f"round(({q})::numeric, {d})::text",
            "string": f"({q})::text",
            "time": f"to_char({q}, 'HH24:MI:SS.US')",
            "date": f"to_char({q}, 'YYYY-MM-DD')",
            "timestamp": f"(extract(epoch FROM {q}) * 1000000)::numeric(30,0)::text",
            "binary": f"upper(encode({q}, 'hex'))",
        }
        return by_kind[c.kind]

    def framed(self, e: str) -> str:
        return f"CASE WHEN ({e}) IS NULL THEN '{NULL_MARK}' ELSE char_length({e})::text || ':' || ({e}) END"

    def concat(self, parts: Sequence[str]) -> str:
        return "(" + " || ".join(parts) + ")"

    def hash60(self, e: str) -> str:
        return f"('x' || substr(md5({e}), 18))::bit(60)::bigint"

    def hash32(self, e: str) -> str:
        return f"('x' || substr(md5({e}), 1, 8))::bit(32)::bigint"

    def div(self, e: str, width: int) -> str:
        return f"(({e})::bigint / {width})"


def dialect(name: str) -> Dialect:
    """The SQL of a `reconcile.sources.*.dialect`."""
    return Postgres() if name == "postgres" else MySql()
