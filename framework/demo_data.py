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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
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


# --------------------------------------------------------------------------- the seed tables
def _ts(name: str, nullable: bool = False) -> Column:
    return Column(name, "timestamp", nullable=nullable)


def seed_tables() -> list[Table]:
    """The tables of the seed articles: seed 004's test_db and seed 000's salesdb."""
    return [
        Table(
            "test_db",
            "user",
            [
                Column("id", "int", nullable=False),
                Column("name", "varchar"),
                Column("device_model", "varchar"),
                Column("email", "varchar"),
                Column("phone", "varchar"),
                _ts("create_time"),
                _ts("modify_time"),
            ],
            ("id",),
        ),
        Table(
            "test_db",
            "product",
            [
                Column("pid", "int", nullable=False),
                Column("pname", "varchar"),
                Column("pprice", "decimal", precision=10, scale=2),
                _ts("create_time"),
                _ts("modify_time"),
            ],
            ("pid",),
        ),
        Table(
            "test_db",
            "user_order",
            [
                Column("id", "int", nullable=False),
                Column("oid", "varchar"),
                Column("uid", "int"),
                Column("pid", "int"),
                Column("onum", "int"),
                _ts("create_time"),
                _ts("modify_time"),
            ],
            ("id",),
        ),
        Table(
            "salesdb",
            "CUSTOMER",
            [Column("CUST_ID", "bigint", nullable=False), Column("NAME", "varchar"), Column("MKTSEGMENT", "varchar")],
            ("CUST_ID",),
        ),
        Table(
            "salesdb",
            "CUSTOMER_SITE",
            [
                Column("SITE_ID", "bigint", nullable=False),
                Column("CUST_ID", "bigint"),
                Column("STATE", "varchar"),
                Column("CITY", "varchar"),
            ],
            ("SITE_ID",),
        ),
        Table(
            "salesdb",
            "SALES_ORDER_ALL",
            [
                Column("ORDER_ID", "bigint", nullable=False),
                Column("SITE_ID", "bigint"),
                Column("ORDER_DATE", "date"),
                Column("SHIP_MODE", "varchar"),
            ],
            ("ORDER_ID",),
        ),
    ]


USER = "test_db.user"
PRODUCT = "test_db.product"
USER_ORDER = "test_db.user_order"
CUSTOMER = "salesdb.CUSTOMER"
CUSTOMER_SITE = "salesdb.CUSTOMER_SITE"
SALES_ORDER_ALL = "salesdb.SALES_ORDER_ALL"

SOURCES = (USER, PRODUCT, USER_ORDER, CUSTOMER, CUSTOMER_SITE, SALES_ORDER_ALL)
DEFAULT_INITIAL_ROWS = {
    USER: 40,
    PRODUCT: 12,
    USER_ORDER: 60,
    CUSTOMER: 25,
    CUSTOMER_SITE: 40,
    SALES_ORDER_ALL: 80,
}
# How often each table is touched by random traffic (order tables are the busy ones).
_TRAFFIC = {USER: 3, PRODUCT: 1, USER_ORDER: 3, CUSTOMER: 1, CUSTOMER_SITE: 1, SALES_ORDER_ALL: 3}

_FIRST = ["Wei", "Fang", "Lei", "Min", "Jing", "Tao", "Yan", "Hui", "Alice", "Bob", "Carol", "David", "Emma", "Liam", "Noah", "Olivia"]
_LAST = ["Wang", "Li", "Zhang", "Liu", "Chen", "Yang", "Zhao", "Huang", "Smith", "Johnson", "Brown", "Garcia", "Miller"]
# (model, weight): a skewed mix so `group by device_model` has a clear ranking.
_DEVICES = [
    ("iPhone 15", 9), ("iPhone 14 Pro", 6), ("HUAWEI Mate 60", 7), ("Xiaomi 14", 6), ("Pixel 8", 3),
    ("Galaxy S24", 4), ("OPPO Find X7", 3), ("vivo X100", 3), ("OnePlus 12", 2), ("Redmi K70", 4),
]
_PRODUCTS = [
    ("wireless mouse", "59.00"), ("mechanical keyboard", "399.00"), ("27-inch monitor", "1299.00"),
    ("USB-C hub", "129.90"), ("noise-cancelling headphones", "1999.00"), ("webcam 1080p", "249.00"),
    ("laptop stand", "89.90"), ("portable SSD 1TB", "699.00"), ("smart watch", "1499.00"),
    ("power bank 20000mAh", "149.00"), ("bluetooth speaker", "299.00"), ("e-reader", "899.00"),
    ("gaming controller", "349.00"), ("desk lamp", "119.00"), ("HDMI cable 2m", "29.90"),
]
_SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
_CITIES = [
    ("WA", "Seattle"), ("WA", "Spokane"), ("CA", "San Francisco"), ("CA", "Los Angeles"), ("CA", "San Diego"),
    ("NY", "New York"), ("NY", "Buffalo"), ("TX", "Austin"), ("TX", "Houston"), ("IL", "Chicago"),
    ("MA", "Boston"), ("CO", "Denver"), ("GA", "Atlanta"), ("OR", "Portland"), ("FL", "Miami"),
]
_SHIP_MODES = ["STANDARD", "TWO-DAY", "ONE-DAY", "EXPRESS", "FREIGHT"]


# --------------------------------------------------------------------------- the simulator
class Simulator:
    """Six MySQL tables under random traffic, and the Debezium envelopes of that traffic.

    Deterministic for a seed. :meth:`state` is the source's current content, the ground truth an
    ODS table must equal after ingesting every emitted line.

    Example:
        >>> sim = Simulator(seed=1)
        >>> lines = sim.snapshot() + sim.changes(50)
        >>> len(lines) == sum(DEFAULT_INITIAL_ROWS.values()) + 50
        True
    """

    def __init__(
        self,
        seed: int,
        *,
        start: datetime = DEFAULT_START,
        binlog_index: int = 3,
        server: str = "demo",
        initial_rows: dict[str, int] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.connector = Connector(self.rng, server=server, binlog_index=binlog_index, now=start)
        self._tables = {t.qualified: t for t in seed_tables()}
        self._state: dict[str, dict[Key, Row]] = {name: {} for name in self._tables}
        self._next_id: dict[str, int] = {name: 1 for name in self._tables}
        self._freed: dict[str, list[Key]] = {name: [] for name in self._tables}
        self._makers: dict[str, Callable[[int, datetime], Row]] = {
            USER: self._new_user,
            PRODUCT: self._new_product,
            USER_ORDER: self._new_user_order,
            CUSTOMER: self._new_customer,
            CUSTOMER_SITE: self._new_site,
            SALES_ORDER_ALL: self._new_sales_order,
        }
        self._populate(DEFAULT_INITIAL_ROWS if initial_rows is None else initial_rows, start)

    # ------------------------------------------------------------------ introspection
    @property
    def tables(self) -> list[str]:
        """Qualified names (`db.table`) in a fixed order."""
        return list(self._tables)

    def table(self, db_table: str) -> Table:
        """The current definition of a table (it changes after :meth:`add_column_user_age`)."""
        try:
            return self._tables[db_table]
        except KeyError:
            raise KeyError(f"unknown table {db_table!r}; known: {', '.join(self._tables)}") from None

    def state(self, db_table: str) -> dict[Key, Row]:
        """A copy of the table's current rows: primary-key tuple -> row with Python values."""
        self.table(db_table)
        return {k: dict(v) for k, v in self._state[db_table].items()}

    # ------------------------------------------------------------------ initial content
    def _populate(self, counts: dict[str, int], start: datetime) -> None:
        """Rows that exist before capture starts, created over the previous months."""
        for name in self._tables:
            made = []
            for _ in range(counts.get(name, 0)):
                made.append(start - timedelta(seconds=self.rng.randint(3600, 180 * 86400)))
            for created in sorted(made):
                key_id = self._take_new_id(name)
                row = self._makers[name](key_id, created)
                if "modify_time" in row:
                    span = max(0, int((start - created).total_seconds()) - 60)
                    row["modify_time"] = created + timedelta(seconds=self.rng.randint(0, span))
                self._state[name][self._tables[name].key_of(row)] = row

    # ------------------------------------------------------------------ capture
    def snapshot(self, tables: Iterable[str] | None = None) -> list[str]:
        """The connector's initial snapshot of `tables` (default: all), rows in key order."""
        chosen = [self.table(t) for t in (tables if tables is not None else self._tables)]
        content = [(t, [self._state[t.qualified][k] for k in sorted(self._state[t.qualified])]) for t in chosen]
        return self.connector.snapshot(content)

    def changes(self, n: int, inserts: float = 0.5, updates: float = 0.35, deletes: float = 0.15) -> list[str]:
        """About `n` binlog row events of random single-statement transactions on all tables.

        Exactly `n` lines are returned. Updates and deletes pick existing keys (an empty table
        gets an insert instead); some statements touch several rows; some inserts reuse a
        deleted key, so re-insert-after-delete happens.
        """
        out: list[str] = []
        names = list(_TRAFFIC)
        weights = [_TRAFFIC[t] for t in names]
        while len(out) < n:
            self.connector.tick(self.rng.choice([0, 1, 1, 2, 3, 5]))
            name = self.rng.choices(names, weights)[0]
            op: Op = self.rng.choices(_CHANGE_OPS, [inserts, updates, deletes])[0]
            rows = self._statement_size(n - len(out))
            if op != "c" and not self._state[name]:
                op = "c"
            out += self._apply(name, op, rows)
        return out

    def _statement_size(self, remaining: int) -> int:
        """Rows of one statement: mostly 1, sometimes a multi-row INSERT/UPDATE/DELETE."""
        size = 1 if self.rng.random() < 0.85 else self.rng.randint(2, 3)
        return min(size, remaining)

    def _apply(self, name: str, op: Op, rows: int) -> list[str]:
        table = self._tables[name]
        state = self._state[name]
        now = self.connector.now
        images: list[tuple[Row | None, Row | None]] = []
        if op == "c":
            for _ in range(rows):
                row = self._makers[name](self._insert_id(name), now)
                state[table.key_of(row)] = row
                images.append((None, dict(row)))
        else:
            keys = self.rng.sample(list(state), min(rows, len(state)))
            for key in keys:
                before = state[key]
                if op == "u":
                    after = self._updated(name, before, now)
                    state[key] = after
                    images.append((dict(before), dict(after)))
                else:
                    del state[key]
                    self._freed[name].append(key)
                    images.append((dict(before), None))
        return self.connector.statement(table, op, images)

    def add_column_user_age(self) -> None:
        """`ALTER TABLE user ADD COLUMN age int`: later user events carry `age`; old rows NULL."""
        user = self._tables[USER]
        if any(c.name == "age" for c in user.columns):
            raise ValueError("test_db.user already has the column age")
        self._tables[USER] = replace(user, columns=[*user.columns, Column("age", "int")])
        for row in self._state[USER].values():
            row["age"] = None
        self.connector.tick(1)
        self.connector.ddl("test_db", "ALTER TABLE user ADD COLUMN age int")

    @staticmethod
    def write(lines: Iterable[str], path: Path) -> Path:
        """Write `lines` to `path` (see the module-level :func:`write`)."""
        return write(lines, path)

    # ------------------------------------------------------------------ keys
    def _take_new_id(self, name: str) -> int:
        value = self._next_id[name]
        self._next_id[name] += 1
        return value

    def _insert_id(self, name: str) -> int:
        """A fresh id, or now and then the id of a deleted row (applications reuse keys)."""
        freed = self._freed[name]
        if freed and self.rng.random() < 0.35:
            key = freed.pop(self.rng.randrange(len(freed)))
            if key not in self._state[name]:
                return int(key[0])
        return self._take_new_id(name)

    def _existing_id(self, name: str, fallback: int = 1) -> int:
        """An id present in `name` (orders reference existing users, products, sites)."""
        keys = list(self._state[name])
        return int(self.rng.choice(keys)[0]) if keys else fallback

    # ------------------------------------------------------------------ row makers
    def _has_age(self) -> bool:
        return any(c.name == "age" for c in self._tables[USER].columns)

    def _new_user(self, uid: int, now: datetime) -> Row:
        first, last = self.rng.choice(_FIRST), self.rng.choice(_LAST)
        row: Row = {
            "id": uid,
            "name": f"{first} {last}",
            "device_model": self._device(),
            "email": f"{first}.{last}{uid}@example.com".lower(),
            "phone": self._phone(),
            "create_time": now,
            "modify_time": now,
        }
        if self._has_age():
            row["age"] = self.rng.randint(16, 70) if self.rng.random() < 0.8 else None
        return row

    def _new_product(self, pid: int, now: datetime) -> Row:
        pname, price = self.rng.choice(_PRODUCTS)
        return {"pid": pid, "pname": pname, "pprice": Decimal(price), "create_time": now, "modify_time": now}

    def _new_user_order(self, oid: int, now: datetime) -> Row:
        return {
            "id": oid,
            "oid": f"{now:%Y%m%d%H%M%S}{oid:06d}",
            "uid": self._existing_id(USER),
            "pid": self._existing_id(PRODUCT),
            "onum": self.rng.randint(1, 5),
            "create_time": now,
            "modify_time": now,
        }

    def _new_customer(self, cust_id: int, now: datetime) -> Row:
        return {"CUST_ID": cust_id, "NAME": f"Customer#{cust_id:09d}", "MKTSEGMENT": self.rng.choice(_SEGMENTS)}

    def _new_site(self, site_id: int, now: datetime) -> Row:
        state, city = self.rng.choice(_CITIES)
        return {"SITE_ID": site_id, "CUST_ID": self._existing_id(CUSTOMER), "STATE": state, "CITY": city}

    def _new_sales_order(self, order_id: int, now: datetime) -> Row:
        return {
            "ORDER_ID": order_id,
            "SITE_ID": self._existing_id(CUSTOMER_SITE),
            "ORDER_DATE": now.date(),
            "SHIP_MODE": self.rng.choice(_SHIP_MODES),
        }

    def _device(self) -> str:
        models, weights = zip(*_DEVICES, strict=True)
        return self.rng.choices(models, weights)[0]

    def _phone(self) -> str:
        return "1" + self.rng.choice(["38", "39", "50", "58", "86", "77"]) + f"{self.rng.randrange(10**8):08d}"

    # ------------------------------------------------------------------ updates
    def _updated(self, name: str, before: Row, now: datetime) -> Row:
        """A changed copy of `before`: at least one business column differs; modify_time = now."""
        row = dict(before)
        for _ in range(10):
            self._mutate(name, row)
            if any(row[k] != before[k] for k in row if k != "modify_time"):
                break
        if "modify_time" in row:
            row["modify_time"] = max(now, before["modify_time"])
        return row

    def _mutate(self, name: str, row: Row) -> None:
        rng = self.rng
        if name == USER:
            if self._has_age() and rng.random() < 0.6:
                row["age"] = rng.randint(16, 70)
            choice = rng.choice(["device_model", "email", "phone", "name"])
            if choice == "device_model":
                row["device_model"] = self._device()
            elif choice == "email":
                row["email"] = f"{row['name'].split()[0]}.{rng.randrange(1000, 9999)}@example.net".lower()
            elif choice == "phone":
                row["phone"] = self._phone()
            else:
                row["name"] = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        elif name == PRODUCT:
            factor = Decimal(rng.choice(["0.80", "0.90", "0.95", "1.05", "1.10", "1.20"]))
            row["pprice"] = (row["pprice"] * factor).quantize(Decimal("0.01"))
        elif name == USER_ORDER:
            row["onum"] = rng.randint(1, 9)
        elif name == CUSTOMER:
            row["MKTSEGMENT"] = rng.choice(_SEGMENTS)
        elif name == CUSTOMER_SITE:
            row["STATE"], row["CITY"] = rng.choice(_CITIES)
        elif name == SALES_ORDER_ALL:
            row["SHIP_MODE"] = rng.choice(_SHIP_MODES)


# --------------------------------------------------------------------------- `lake init` sample
INVENTORY_CUSTOMERS = Table(
    "inventory",
    "customers",
    [
        Column("id", "int", nullable=False),
        Column("first_name", "varchar", nullable=False),
        Column("last_name", "varchar", nullable=False),
        Column("email", "varchar", nullable=False),
    ],
    ("id",),
)


def inventory_sample() -> list[str]:
    """Seven envelopes for `inventory.customers` (Debezium tutorial data).

    A snapshot of 4 rows, then insert 1005, update 1001's email, delete 1004. Final state:
    1001 (new email), 1002, 1003, 1005.
    """
    t = INVENTORY_CUSTOMERS
    rows: list[Row] = [
        {"id": 1001, "first_name": "Sally", "last_name": "Thomas", "email": "sally.thomas@acme.com"},
        {"id": 1002, "first_name": "George", "last_name": "Bailey", "email": "gbailey@foobar.com"},
        {"id": 1003, "first_name": "Edward", "last_name": "Walker", "email": "ed@walker.com"},
        {"id": 1004, "first_name": "Anne", "last_name": "Kretchmar", "email": "annek@noanswer.org"},
    ]
    conn = Connector(random.Random(0), server="dbserver1")
    lines = conn.snapshot([(t, rows)])
    conn.tick(42)
    new = {"id": 1005, "first_name": "Jane", "last_name": "Doe", "email": "jane.doe@example.com"}
    lines += conn.statement(t, "c", [(None, new)])
    conn.tick(7)
    lines += conn.statement(t, "u", [(rows[0], {**rows[0], "email": "sally.t@acme.com"})])
    conn.tick(3)
    lines += conn.statement(t, "d", [(rows[3], None)])
    return lines
