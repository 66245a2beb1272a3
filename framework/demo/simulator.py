"""The simulator: the seed tables under random inserts, updates and deletes, kept in memory as the
source's state, and the Debezium envelopes of that traffic (framework/demo/cdc.py)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

from framework.demo.cdc import (
    _CHANGE_OPS,
    DEFAULT_START,
    Column,
    Connector,
    Key,
    Op,
    Row,
    Table,
    write,
)
from framework.demo.seed import (
    _CITIES,
    _DEVICES,
    _FIRST,
    _LAST,
    _PRODUCTS,
    _SEGMENTS,
    _SHIP_MODES,
    _TRAFFIC,
    CUSTOMER,
    CUSTOMER_SITE,
    DEFAULT_INITIAL_ROWS,
    PRODUCT,
    SALES_ORDER_ALL,
    USER,
    USER_ORDER,
    seed_tables,
)


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


