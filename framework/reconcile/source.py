"""The source side of `lake reconcile`: one connection to the database an ODS table mirrors
(PyMySQL for MariaDB/MySQL, pg8000 for PostgreSQL, the clients lake's demo and tests use), its
column types, the checksum queries, row reads and the current log position."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from framework.errors import LakeError
from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.rows import OneByOne, Row, Sums
from framework.reconcile.sql import Dialect, Ranged, dialect
from models.reconcile import SourceDatabase

_CHUNK = 200  # keys per keyed read


def _driver(d: str) -> Any:
    try:
        if d == "postgres":
            import pg8000.dbapi

            return pg8000.dbapi
        import pymysql

        return pymysql
    except ImportError as e:
        client = "pg8000" if d == "postgres" else "pymysql"
        raise LakeError(f"lake reconcile needs the Python client {client} for a {d} source",
                        fix=f"pip install 'lake[reconcile]' (or pip install {client})") from e


class SourceTable:
    """One source table over one open connection; a context manager (closes it)."""

    def __init__(self, db: SourceDatabase, db_name: str, parts: Sequence[str], float_digits: int) -> None:
        self.settings, self.parts, self.float_digits = db, tuple(parts), float_digits
        self.sql: Dialect = dialect(db.dialect)
        self.ref = self.sql.table(parts)
        self.queries = 0
        self.fetched = 0
        drv = _driver(db.dialect)
        database = db.database or db_name
        try:
            if db.dialect == "postgres":
                self.conn = drv.connect(host=db.host, port=db.port_or_default, user=db.user, password=db.password, database=database, timeout=30)
                self.conn.autocommit = True
                self._run("SET TIME ZONE 'UTC'")
            else:
                self.conn = drv.connect(host=db.host, port=db.port_or_default, user=db.user, password=db.password or "", database=database,
                                        autocommit=True, charset="utf8mb4", init_command="SET time_zone = '+00:00'", connect_timeout=30)
        except Exception as e:  # the driver's own error: say where and why
            raise LakeError(f"cannot connect to the {db.dialect} source {db.user}@{db.host}:{db.port_or_default}/{database}: "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                            fix="check reconcile.sources in lake.yaml and the variables it reads (${...})") from e

    def __enter__(self) -> SourceTable:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.conn.close()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql, tuple(params))  # always formatted: '%%' in the SQL is '%'
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
        finally:
            cur.close()

    def columns(self) -> dict[str, str]:
        """Column name -> lower-case `data_type` (information_schema), in table order."""
        if self.settings.dialect == "postgres":
            schema, table = self.parts
            sql = ("SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                   "ORDER BY ordinal_position")
        else:
            schema, table = self.parts
            sql = ("SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                   "ORDER BY ORDINAL_POSITION")
        rows = self._run(sql, (schema, table))
        if not rows:
            raise LakeError(f"the source table {'.'.join(self.parts)} does not exist (or the user may not see it)",
                            fix="check the table's `source:` in layers/ods/ and the user's grants")
        return {str(n): str(t).lower() for n, t in rows}

    def bounds(self, r: Ranged) -> tuple[int | None, int | None]:
        self.queries += 1
        ((lo, hi),) = self._run(self.sql.bounds_sql(self.ref, r))
        return (None if lo is None else int(lo)), (None if hi is None else int(hi))

    def checksums(self, r: Ranged, cols: Sequence[ColumnSpec], lo: int, hi: int, width: int) -> Sums:
        self.queries += 1
        rows = self._run(self.sql.checksum_sql(self.ref, r, cols, self.float_digits, lo, hi, width))
        return {int(b): (int(n), int(s)) for b, n, s in rows}

    def rows(self, r: Ranged, cols: Sequence[ColumnSpec], lo: int, hi: int) -> dict[tuple[str | None, ...], Row]:
        got = self._run(self.sql.rows_sql(self.ref, r, cols, self.float_digits, lo, hi, raw_float=True))
        self.fetched += len(got)
        return _by_key(r, cols, got)

    def keyed(self, r: Ranged, cols: Sequence[ColumnSpec], keys: Sequence[tuple[str | None, ...]]) -> dict[tuple[str | None, ...], Row]:
        """The rows of these keys (canonical key texts), floats as the database prints them."""
        out: dict[tuple[str | None, ...], Row] = {}
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            params: list[Any] = [int(k[0]) if r.by_value and k[0] is not None else v for k in chunk for v in (k[:1] if r.by_value else k)]
            got = self._run(self.sql.keyed_sql(self.ref, r, cols, self.float_digits, len(chunk), raw_float=True), params)
            self.fetched += len(got)
            out.update(_by_key(r, cols, got))
        return out

    def signal(self, table: str, ident: str, data: str, kind: str = "execute-snapshot") -> None:
        """Insert one signal into the connector's signal table (`<db>.<table>`, `<schema>.<table>`
        on PostgreSQL): id, type, data, Debezium's three columns in order."""
        ref = self.sql.table(table.split("."))
        try:
            self._run(f"INSERT INTO {ref} VALUES (%s, %s, %s)", (ident, kind, data))
        except Exception as e:  # the driver's own error: say which table and what it needs
            raise LakeError(f"cannot write the snapshot signal into {table} on {self.settings.host}: "
                            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                            fix=f"create the signal table (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048)), "
                                f"set the connector's signal.data.collection to {table}, and GRANT INSERT on it to {self.settings.user}") from e

    def log_signal(self, table: str, message: str) -> None:
        """A `log` signal (the connector writes `message` to its log and does nothing else): a
        captured write that moves the connector's offset on an otherwise idle database."""
        self.signal(table, "lake-log-" + uuid.uuid4().hex[:32], json.dumps({"message": message}), kind="log")

    def position(self) -> str:
        """The database's current log position, as `lake ingest --position` takes it: `mysql-bin.000003:1234`
        or `lsn:123456`."""
        if self.settings.dialect == "postgres":
            ((lsn,),) = self._run("SELECT pg_current_wal_lsn()::text")
            hi, lo = str(lsn).split("/")
            return f"lsn:{(int(hi, 16) << 32) + int(lo, 16)}"
        for stmt in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"):
            try:
                rows = self._run(stmt)
            except Exception:  # noqa: BLE001 - MySQL 8.4 renamed the statement
                continue
            if rows:
                return f"{rows[0][0]}:{rows[0][1]}"
        raise LakeError(f"the source {self.settings.host} has no binary log position (SHOW MASTER STATUS is empty)",
                        fix="reconcile --repair needs the binlog Debezium reads: enable log_bin, and grant the user REPLICATION CLIENT")


def _by_key(r: Ranged, cols: Sequence[ColumnSpec], got: list[tuple[Any, ...]]) -> dict[tuple[str | None, ...], Row]:
    names = [c.name for c in cols]
    key_at = [names.index(k.name) for k in r.key]
    out: dict[tuple[str | None, ...], Row] = {}
    for rec in got:
        texts = tuple(None if v is None else str(v) for v in rec[1:])
        key = tuple(texts[i] for i in key_at)
        out[key] = Row(coordinate=int(rec[0]), values=texts)
    return out


class SourceSide(OneByOne):
    """A source table as the bisection's `Side` over the compared columns: one query per range
    (an index range scan of an integer key)."""

    def __init__(self, table: SourceTable, r: Ranged, cols: Sequence[ColumnSpec]) -> None:
        self.table, self.r, self.cols = table, r, tuple(cols)

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        return self.table.checksums(self.r, self.cols, lo, hi, width)

    def rows(self, lo: int, hi: int) -> dict[tuple[str | None, ...], Row]:
        return self.table.rows(self.r, self.cols, lo, hi)

    def keyed(self, keys: Sequence[tuple[str | None, ...]]) -> dict[tuple[str | None, ...], Row]:
        return self.table.keyed(self.r, self.cols, keys)
