"""Simulated MySQL sources as Debezium 2.x captures them (JsonConverter, ``schemas.enable=true``).

Pure Python, no Spark. `lake demo`, `lake init` and the tests need CDC that looks like the real
thing (schema block, binlog coordinates, snapshot then binlog, Kafka Connect logical types) *and*
a known final source state to compare the ODS tables against. :class:`Simulator` keeps the
source tables in memory, applies random inserts, updates and deletes to them, and emits exactly
the envelopes the Debezium MySQL connector would write for those statements.

Layers:

- :class:`Column` / :class:`Table`: a MySQL table definition and its Kafka Connect schema;
- :func:`encode_value` / :func:`decode_decimal`: the wire format of each column kind;
- :class:`Connector`: the binlog (file, position, clock) and the envelope writer;
- :class:`Simulator`: the six tables of the seed articles and random traffic on them.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

ColumnKind = Literal["int", "bigint", "varchar", "decimal", "timestamp", "date", "datetime"]
Key = tuple[Any, ...]
Row = dict[str, Any]
Op = Literal["r", "c", "u", "d"]
_CHANGE_OPS: list[Op] = ["c", "u", "d"]

DEBEZIUM_VERSION = "2.5.0.Final"
DEFAULT_START = datetime(2024, 3, 1, 10, 0, 0, tzinfo=timezone.utc)
EPOCH_DAY = date(1970, 1, 1)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_LOGICAL = {
    "timestamp": ("string", "io.debezium.time.ZonedTimestamp"),
    "date": ("int32", "io.debezium.time.Date"),
    "datetime": ("int64", "io.debezium.time.Timestamp"),
}
_PRIMITIVE = {"int": "int32", "bigint": "int64", "varchar": "string"}


# --------------------------------------------------------------------------- table definitions
@dataclass(frozen=True)
class Column:
    """One MySQL column. `precision`/`scale` only matter for DECIMAL."""

    name: str
    kind: ColumnKind
    nullable: bool = True
    precision: int = 10
    scale: int = 0

    def field_schema(self) -> dict[str, Any]:
        """The Kafka Connect field schema Debezium writes for this column."""
        out: dict[str, Any]
        if self.kind == "decimal":
            out = {
                "type": "bytes",
                "optional": self.nullable,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": str(self.scale), "connect.decimal.precision": str(self.precision)},
            }
        elif self.kind in _LOGICAL:
            typ, name = _LOGICAL[self.kind]
            out = {"type": typ, "optional": self.nullable, "name": name, "version": 1}
        else:
            out = {"type": _PRIMITIVE[self.kind], "optional": self.nullable}
        out["field"] = self.name
        return out


@dataclass
class Table:
    """A MySQL table: `db.name`, its columns in DDL order and its primary key."""

    db: str
    name: str
    columns: list[Column]
    key: tuple[str, ...]

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    def key_of(self, row: Row) -> Key:
        return tuple(row[k] for k in self.key)

    def envelope_schema(self, server: str) -> dict[str, Any]:
        """The envelope `schema` block: before/after/source/op/ts_ms/transaction."""
        value_name = f"{server}.{self.db}.{self.name}.Value"
        fields = [c.field_schema() for c in self.columns]
        image = {"type": "struct", "fields": fields, "optional": True, "name": value_name}
        return {
            "type": "struct",
            "fields": [
                {**image, "field": "before"},
                {**image, "field": "after"},
                _SOURCE_SCHEMA,
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
                _TRANSACTION_SCHEMA,
            ],
            "optional": False,
            "name": f"{server}.{self.db}.{self.name}.Envelope",
            "version": 1,
        }


def _f(typ: str, field_name: str, optional: bool = False, **extra: Any) -> dict[str, Any]:
    """A Kafka Connect field schema, keys in the order JsonConverter writes them."""
    return {"type": typ, "optional": optional, **extra, "field": field_name}


# io.debezium.connector.mysql.Source as of Debezium 2.5 (ts_us/ts_ns arrived in 2.6).
_SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        _f("string", "version"),
        _f("string", "connector"),
        _f("string", "name"),
        _f("int64", "ts_ms"),
        _f(
            "string",
            "snapshot",
            True,
            name="io.debezium.data.Enum",
            version=1,
            parameters={"allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},
            default="false",
        ),
        _f("string", "db"),
        _f("string", "sequence", True),
        _f("string", "table", True),
        _f("int64", "server_id"),
        _f("string", "gtid", True),
        _f("string", "file"),
        _f("int64", "pos"),
        _f("int32", "row"),
        _f("int64", "thread", True),
        _f("string", "query", True),
    ],
    "optional": False,
    "name": "io.debezium.connector.mysql.Source",
    "field": "source",
}
_TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [_f("string", "id"), _f("int64", "total_order"), _f("int64", "data_collection_order")],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


# --------------------------------------------------------------------------- value encoding
def decimal_bytes(unscaled: int) -> bytes:
    """Big-endian two's complement in the fewest bytes, as Java's BigInteger.toByteArray()."""
    length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def encode_decimal(value: Decimal, scale: int) -> str:
    """Kafka Connect Decimal (decimal.handling.mode=precise): base64 of the unscaled integer.

    Example:
        >>> encode_decimal(Decimal("12.34"), 2)
        'BNI='
    """
    quantum = Decimal(1).scaleb(-scale)
    exact = value.quantize(quantum)
    if exact != value:
        raise ValueError(f"{value} has more than {scale} decimal places")
    return base64.b64encode(decimal_bytes(int(exact.scaleb(scale)))).decode("ascii")


def decode_decimal(text: str, scale: int) -> Decimal:
    """Inverse of :func:`encode_decimal`.

    Example:
        >>> decode_decimal("BNI=", 2)
        Decimal('12.34')
    """
    unscaled = int.from_bytes(base64.b64decode(text), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


def zoned_timestamp(value: datetime) -> str:
    """io.debezium.time.ZonedTimestamp text of a MySQL TIMESTAMP (always UTC, ``Z`` suffix)."""
    utc = value.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def encode_value(column: Column, value: Any) -> Any:
    """The JSON value Debezium writes for `value` in `column` (None stays null)."""
    if value is None:
        return None
    if column.kind == "decimal":
        return encode_decimal(value, column.scale)
    if column.kind == "timestamp":
        return zoned_timestamp(value)
    if column.kind == "date":
        return (value - EPOCH_DAY).days
    if column.kind == "datetime":
        # DATETIME has no zone; Debezium writes its wall-clock value as if it were UTC.
        wall = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
        return (wall - EPOCH) // timedelta(milliseconds=1)
    return value


def encode_row(table: Table, row: Row | None) -> Row | None:
    """A row image in column order (binlog_row_image=FULL: every column is present)."""
    if row is None:
        return None
    return {c.name: encode_value(c, row.get(c.name)) for c in table.columns}


def text_value(column: Column, value: Any) -> str | None:
    """Canonical text of a source value, for comparing with a table read back as text.

    Timestamps are ISO-8601 UTC with ``Z``, dates ``YYYY-MM-DD``, decimals with exactly
    `scale` places (what Spark prints for ``CAST(decimal AS STRING)``).

    Example:
        >>> text_value(Column("p", "decimal", scale=2), Decimal("5"))
        '5.00'
    """
    if value is None:
        return None
    if column.kind == "timestamp":
        return zoned_timestamp(value)
    if column.kind == "datetime":
        return value.strftime("%Y-%m-%dT%H:%M:%S")
    if column.kind == "date":
        return value.isoformat()
    if column.kind == "decimal":
        return f"{value:.{column.scale}f}"
    return str(value)


def to_json(message: dict[str, Any]) -> str:
    """One Kafka message value as JsonConverter writes it (compact, no spaces)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def write(lines: Iterable[str], path: Path) -> Path:
    """Write messages one per line (the `files` source format), creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(line + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the connector
@dataclass
class Connector:
    """The MySQL server's binlog and the Debezium connector reading it.

    Keeps the binlog coordinates and the server clock. Positions follow MySQL: a transaction
    is GTID + BEGIN + TABLE_MAP + ROWS + XID events; the envelope's `pos` is the ROWS event's
    position and every row of one ROWS event shares it with `row` counting up.
    """

    rng: random.Random
    server: str = "demo"
    binlog_index: int = 3
    pos: int = 157  # just after the FORMAT_DESCRIPTION and PREVIOUS_GTIDS events
    now: datetime = DEFAULT_START
    _emitted_ms: int = field(default=0, repr=False)

    @property
    def file(self) -> str:
        return f"mysql-bin.{self.binlog_index:06d}"

    def tick(self, seconds: float) -> datetime:
        """Advance the server clock; binlog timestamps have second resolution."""
        self.now = (self.now + timedelta(seconds=seconds)).replace(microsecond=0)
        return self.now

    def _envelope_ms(self, source_ms: int) -> int:
        """When the connector handled the event: a few ms after it, never going back."""
        self._emitted_ms = max(self._emitted_ms + self.rng.randint(0, 2), source_ms + self.rng.randint(3, 250))
        return self._emitted_ms

    def _message(self, table: Table, op: Op, before: Row | None, after: Row | None, source: dict[str, Any]) -> str:
        payload = {
            "before": encode_row(table, before),
            "after": encode_row(table, after),
            "source": source,
            "op": op,
            "ts_ms": self._envelope_ms(source["ts_ms"]),
            "transaction": None,
        }
        return to_json({"schema": table.envelope_schema(self.server), "payload": payload})

    def _source(self, table: Table, ts_ms: int, snapshot: str, pos: int, row: int, server_id: int) -> dict[str, Any]:
        return {
            "version": DEBEZIUM_VERSION,
            "connector": "mysql",
            "name": self.server,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": table.db,
            "sequence": None,
            "table": table.name,
            "server_id": server_id,
            "gtid": None,
            "file": self.file,
            "pos": pos,
            "row": row,
            "thread": None,
            "query": None,
        }

    def snapshot(self, tables: list[tuple[Table, list[Row]]]) -> list[str]:
        """Initial snapshot: `op` r, all at the binlog position read when the snapshot started.

        The last record is marked `snapshot: "last"`. Snapshot reads carry server_id 0 (no binlog
        event was read), as the real connector writes.
        """
        out: list[str] = []
        started = self.now + timedelta(milliseconds=self.rng.randint(100, 900))
        ms = (started - EPOCH) // timedelta(milliseconds=1)
        total = sum(len(rows) for _, rows in tables)
        for table, rows in tables:
            for row in rows:
                ms += self.rng.randint(0, 3)
                marker = "last" if len(out) == total - 1 else "true"
                source = self._source(table, ms, marker, self.pos, 0, 0)
                out.append(self._message(table, "r", None, row, source))
        # Binlog traffic resumes after the snapshot's reads, on the next whole second.
        self.now = EPOCH + timedelta(seconds=ms // 1000 + 1)
        return out

    def statement(self, table: Table, op: Op, images: list[tuple[Row | None, Row | None]]) -> list[str]:
        """One single-statement transaction changing `images` (before, after) rows."""
        ts_ms = (self.now - EPOCH) // timedelta(milliseconds=1)
        rows_pos = self.pos + 79 + _query_event_size(table.db, "BEGIN") + _table_map_size(table)
        rows_size = 29 + (len(table.columns) + 7) // 8 + 4
        for before, after in images:
            rows_size += sum(_image_size(table, img) for img in (before, after) if img is not None)
        out = []
        for i, (before, after) in enumerate(images):
            source = self._source(table, ts_ms, "false", rows_pos, i, 1)
            out.append(self._message(table, op, before, after, source))
        self.pos = rows_pos + rows_size + 31  # + XID
        return out

    def ddl(self, db: str, sql: str) -> None:
        """A DDL statement: it takes binlog space (GTID + QUERY) but emits no row event."""
        self.pos += 79 + _query_event_size(db, sql)


def _query_event_size(db: str, sql: str) -> int:
    # header 19 + post-header 13 + status variables ~30 + db + NUL + statement + checksum 4
    return 19 + 13 + 30 + len(db) + 1 + len(sql) + 4


def _table_map_size(table: Table) -> int:
    return 19 + 8 + len(table.db) + 2 + len(table.name) + 2 + 2 * len(table.columns) + 8 + 4


def _image_size(table: Table, row: Row) -> int:
    """Bytes of one row image in a ROWS event (MySQL's binary encoding, approximately)."""
    size = (len(table.columns) + 7) // 8
    for c in table.columns:
        v = row.get(c.name)
        if v is None:
            continue
        size += {"int": 4, "bigint": 8, "timestamp": 4, "date": 3, "datetime": 5}.get(c.kind, 0)
        if c.kind == "varchar":
            size += 1 + len(str(v).encode("utf-8"))
        elif c.kind == "decimal":
            size += (c.precision + 1) // 2
    return size
