"""A small shop in MariaDB for the real CDC chain: its tables, seed rows, random transactions, and
the lake project (ODS declarations, models) that reads it through Debezium and Kafka.

Three tables whose columns cover what the chain must carry: NULLs, unicode beyond the BMP,
DECIMAL, DATETIME(3) (before 1970 too) and TIMESTAMP(3). The models are SQL that Spark and
MariaDB both run unchanged, so MariaDB itself is the oracle of every model: `oracle_views`
creates databases `ods`, `dwd` and `dws` in MariaDB whose views have the models' names and SQL.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from framework.demo.mariadb import MariaDB, Statement

TABLES = ("customer", "product", "orders")

DDL = {
    "customer": "CREATE TABLE customer (id INT PRIMARY KEY, name VARCHAR(60) NOT NULL, email VARCHAR(80) NULL, "
    "segment VARCHAR(20) NOT NULL, created DATETIME(3) NOT NULL, updated TIMESTAMP(3) NULL)",
    "product": "CREATE TABLE product (pid INT PRIMARY KEY, pname VARCHAR(60) NOT NULL, price DECIMAL(10,2) NULL, stock INT NULL)",
    "orders": "CREATE TABLE orders (id INT PRIMARY KEY, cust_id INT NOT NULL, pid INT NOT NULL, qty INT NOT NULL, "
    "note VARCHAR(20) NULL, placed DATETIME(3) NOT NULL, paid TIMESTAMP(3) NULL)",
}

ODS_YAML = """\
# The shop's MariaDB tables, captured by Debezium (see framework/demo/shop.py).
tables:
  - {{source: {db}.customer, name: customer, key: [id]}}
  - {{source: {db}.product, name: product, key: [pid]}}
  - {{source: {db}.orders, name: orders, key: [id]}}
"""

# Spark and MariaDB both run these unchanged (the oracle views use the same text).
MODELS = {
    "dwd/order_detail": (
        "SELECT o.id AS order_id, o.cust_id, c.name AS customer, c.segment, o.pid, p.pname, p.price, o.qty,\n"
        "       o.qty * p.price AS amount, o.placed, o.paid, o.note\n"
        "FROM   ods.orders o\n"
        "       JOIN ods.customer c ON o.cust_id = c.id\n"
        "       JOIN ods.product p ON o.pid = p.pid\n",
        "description: Orders with their customer and product (a 3-way join of CDC streams).\nkey: [order_id]\n",
    ),
    "dws/product_stats": (
        "SELECT pid, COUNT(*) AS orders, SUM(qty) AS units, SUM(amount) AS revenue, MIN(qty) AS min_qty,\n"
        "       MAX(qty) AS max_qty, MIN(placed) AS first_order, MAX(placed) AS last_order, MAX(order_id) AS last_order_id\n"
        "FROM   dwd.order_detail\n"
        "GROUP  BY pid\n",
        "description: Orders, units, revenue and first/last order per product.\n",
    ),
    "dws/segment_reach": (
        "SELECT c.segment, COUNT(DISTINCT o.pid) AS products, COUNT(DISTINCT o.cust_id) AS buyers, COUNT(*) AS orders\n"
        "FROM   ods.orders o\n"
        "       JOIN ods.customer c ON o.cust_id = c.id\n"
        "GROUP  BY c.segment\n",
        "description: Distinct products and buyers per customer segment.\n",
    ),
}

_NAMES = ["Zoë Ångström", "李雷", "Ханна", "O'Brien", "Ana-María", "Søren", "José 🚀", "Ng", "Ölçer", "Émile", "Dvořák", "Łukasz"]
_SEGMENTS = ["retail", "wholesale", "online", "b2b"]
_PRODUCTS = ["mouse", "keyboard", "monitor", "USB-C hub", "headphones", "webcam", "stand", "SSD", "watch", "speaker",
             "lamp", "cable", "e-reader", "controller"]
_NOTES = [None, "gift", "rush", "fragile ✓", "", "call first", "門口"]
EPOCH = datetime(2024, 1, 1)


def _ms(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class Shop:
    """Random but reproducible rows and transactions for the shop in database `database`; it keeps
    the keys it wrote so each statement hits a row that exists (MariaDB stays the truth)."""

    def __init__(self, db: MariaDB, database: str, seed: int = 7) -> None:
        self.db = db
        self.database = database
        self.rnd = random.Random(seed)
        self.keys: dict[str, set[int]] = {t: set() for t in TABLES}
        self.next_id = {t: 1 for t in TABLES}
        self.added: dict[str, dict[str, list[Any]]] = {t: {} for t in TABLES}  # ADD COLUMN: values drawn
        self.transactions = 0
        self.notes = list(_NOTES)  # longer ones once `orders.note` is widened

    def create(self, customers: int = 30, products: int = 12, orders: int = 80) -> None:
        """Create the database and tables and insert the seed rows (what the snapshot reads)."""
        self.db.execute(f"CREATE DATABASE {self.database} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        self.db.execute([DDL[t] for t in TABLES], database=self.database)
        self.run([self.insert("customer") for _ in range(customers)] + [self.insert("product") for _ in range(products)])
        self.run([self.insert("orders") for _ in range(orders)])

    def run(self, statements: list[Statement]) -> None:
        """One transaction."""
        self.db.transaction(statements, database=self.database)
        self.transactions += 1

    def ddl(self, statement: str, table: str | None = None, added: tuple[str, list[Any]] | None = None) -> None:
        """An ALTER TABLE (or any DDL); `added`: a new column of `table` and the values to draw for it."""
        self.db.execute(statement, database=self.database)
        if table and added:
            self.added[table][added[0]] = added[1]

    def truncate(self, table: str) -> None:
        self.db.execute(f"TRUNCATE TABLE {table}", database=self.database)
        self.keys[table].clear()

    def alter(self) -> None:
        """Round 2 of the chain: an added column and a widened VARCHAR, with values that use them."""
        self.ddl("ALTER TABLE customer ADD COLUMN tier VARCHAR(12) NULL", "customer", ("tier", [None, "gold", "silber ✓", "青铜"]))
        self.ddl("ALTER TABLE orders MODIFY note VARCHAR(200) NULL")
        self.notes += ["a note longer than the twenty characters it had ✓", "長い注文メモ" * 5]

    def refill(self, table: str = "product") -> int:
        """Round 3 of the chain: TRUNCATE (Debezium op=t), then two thirds of the keys inserted
        again with new values; the rest must disappear. Returns how many keys did not come back."""
        keys = sorted(self.keys[table])
        back = keys[: len(keys) * 2 // 3]
        self.truncate(table)
        self.run([self.insert(table, self.row(table, k)) for k in back])
        return len(keys) - len(back)

    # -- rows and statements -------------------------------------------------------------------
    def row(self, table: str, key: int) -> dict[str, Any]:
        r = self.rnd

        def at(lo: int, hi: int) -> str:
            return _ms(EPOCH + timedelta(seconds=r.randint(lo, hi), milliseconds=r.randint(0, 999)))

        if table == "customer":
            out: dict[str, Any] = {"id": key, "name": r.choice(_NAMES), "segment": r.choice(_SEGMENTS),
                                   "email": r.choice([None, f"c{key}@example.com", f"ü{key}@exämple.org"]),
                                   "created": at(-2 * 10**9, 10**7),  # DATETIME: before 1970 too
                                   "updated": r.choice([None, at(0, 10**8)])}  # TIMESTAMP: 1970-2038
        elif table == "product":
            out = {"pid": key, "pname": f"{r.choice(_PRODUCTS)} {key}",
                   "price": r.choice([None, Decimal(r.randint(-100, 99_999_999)) / 100, Decimal("99999999.99")]),
                   "stock": r.choice([None, r.randint(-5, 2_000_000_000)])}
        else:
            out = {"id": key, "cust_id": self._some("customer", 1), "pid": self._some("product", 1), "qty": r.randint(1, 20),
                   "note": r.choice(self.notes), "placed": at(0, 3 * 10**7), "paid": r.choice([None, at(0, 3 * 10**7)])}
        for col, values in self.added[table].items():
            out[col] = r.choice(values)
        return out

    def _some(self, table: str, default: int) -> int:
        keys = self.keys[table]
        return self.rnd.choice(sorted(keys)) if keys else default

    def insert(self, table: str, row: dict[str, Any] | None = None) -> Statement:
        key = self.next_id[table]
        row = row or self.row(table, key)
        self.next_id[table] = max(self.next_id[table], row[_KEY[table]] + 1)
        self.keys[table].add(row[_KEY[table]])
        return f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})", tuple(row.values())

    def update(self, table: str, key: int) -> Statement:
        row = self.row(table, key)
        cols = [c for c in row if c != _KEY[table] and self.rnd.random() < 0.6] or [c for c in row if c != _KEY[table]][:1]
        return (f"UPDATE {table} SET {', '.join(f'{c} = %s' for c in cols)} WHERE {_KEY[table]} = %s",
                (*(row[c] for c in cols), key))

    def delete(self, table: str, key: int) -> Statement:
        self.keys[table].discard(key)
        return f"DELETE FROM {table} WHERE {_KEY[table]} = %s", (key,)

    def rekey(self, table: str, key: int) -> Statement:
        """A primary-key change: Debezium sends a delete of the old key and a create of the new."""
        new = self.next_id[table]
        self.next_id[table] += 1
        self.keys[table].discard(key)
        self.keys[table].add(new)
        return f"UPDATE {table} SET {_KEY[table]} = %s WHERE {_KEY[table]} = %s", (new, key)

    def change(self) -> list[Statement]:
        """One random change (1-2 statements) on a random table, weighted to the busy `orders`."""
        r = self.rnd
        table = r.choice(["orders", "orders", "orders", "customer", "product"])
        kind = r.choice(["insert", "insert", "update", "update", "update", "delete", "rekey", "reinsert"])
        if not self.keys[table] or kind == "insert":
            return [self.insert(table)]
        key = r.choice(sorted(self.keys[table]))
        if kind == "update":
            return [self.update(table, key)]
        if kind == "delete" and table != "product":  # products stay: the joins keep most orders
            return [self.delete(table, key)]
        if kind == "rekey":
            return [self.rekey(table, key)]
        return [self.delete(table, key), self.insert(table, self.row(table, key))]  # delete, then re-insert the key

    def changes(self, transactions: int) -> None:
        """`transactions` random transactions, each of 1-6 changes (some across tables)."""
        for _ in range(transactions):
            size = self.rnd.choice([1, 1, 1, 2, 3, 6])
            self.run([st for _ in range(size) for st in self.change()])


_KEY = {"customer": "id", "product": "pid", "orders": "id"}


def project_files(database: str, bootstrap_servers: str, prefix: str, models: bool = True, pattern: str | None = None) -> dict[str, str]:
    """The lake project reading the shop through Kafka: `lake.yaml` and `layers/`, by relative path.

    The topic pattern takes every topic the connector writes: the tables', the schema changes
    (`<prefix>`), the schema history, transaction metadata and heartbeats; lake uses the rows
    and skips the rest. `pattern`: another topic pattern; `models`: False for the ODS tables alone."""
    # Anchored: Spark's Kafka source searches the pattern in each topic name (Scala findFirstIn),
    # so `chain(\..*)?` alone would also take another connector's `pgchain.*` topics.
    pattern = pattern or rf"^(__debezium-heartbeat\.)?{prefix}(\..*)?$"
    files = {
        "lake.yaml": (
            f"name: shop\nwarehouse: warehouse\nspark: {{master: 'local[2]', conf: {{spark.sql.shuffle.partitions: '2'}}}}\n"
            f"ods:\n  source:\n    kind: kafka\n    bootstrap_servers: '{bootstrap_servers}'\n"
            f"    topic_pattern: '{pattern}'\n    connect_timeout_seconds: 20\n"
        ),
        "layers/ods/shop.yaml": ODS_YAML.format(db=database),
    }
    for name, (sql, yaml_text) in MODELS.items() if models else ():
        files[f"layers/{name}.sql"] = sql
        files[f"layers/{name}.yaml"] = yaml_text
    return files


def oracle_views(db: MariaDB, database: str) -> None:
    """Databases `ods`, `dwd`, `dws` in MariaDB whose views are named and defined as lake's tables
    and models, so the models' SQL runs there unchanged: MariaDB's answer is the oracle."""
    statements: list[Statement] = [f"CREATE DATABASE IF NOT EXISTS {layer}" for layer in ("ods", "dwd", "dws")]
    statements += [f"CREATE OR REPLACE VIEW ods.{t} AS SELECT * FROM {database}.{t}" for t in TABLES]
    statements += [f"CREATE OR REPLACE VIEW {name.replace('/', '.')} AS {sql}" for name, (sql, _y) in MODELS.items()]
    db.execute(statements)
