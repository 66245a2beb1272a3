"""A small shop in PostgreSQL for the real CDC chain (`lake demo --source postgres`, the PostgreSQL
chain test): its tables, seed rows, random transactions, and the lake project reading it.

Where PostgreSQL differs from MySQL, on purpose:
- `account` keeps REPLICA IDENTITY DEFAULT (a delete's before-image is its key and type defaults)
  and is declared with `ordering: [changed_at]`; `item` has REPLICA IDENTITY FULL; `orders` DEFAULT.
- `account.bio` (text, STORAGE EXTERNAL), `account.profile` (jsonb) and `account.avatar` (bytea) hold
  random values of 2-5 kB, stored out of line (TOASTed): an UPDATE that leaves them alone makes
  Debezium write its placeholder instead of the value. `toast_cases` makes every case happen each
  round: an update of a stored row, an insert and updates in one batch, in one transaction,
  several updates in a row, and updates after a primary-key change.
- numeric, timestamptz, boolean, jsonb, NULLs and unicode beyond the BMP.
The models are SQL that Spark and PostgreSQL both run unchanged, so PostgreSQL is their oracle.
"""

from __future__ import annotations

import json
import random
import string
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from framework.demo.postgres import DBNAME, Postgres, Statement

TABLES = ("account", "item", "orders")
KEY = {"account": "id", "item": "pid", "orders": "id"}
DDL = [  # {s}: the schema
    "CREATE TABLE {s}.account (id int PRIMARY KEY, name text NOT NULL, email text NULL, balance numeric(12,2) NOT NULL, "
    "active boolean NOT NULL, changed_at timestamptz NOT NULL, profile jsonb NULL, bio text NULL, avatar bytea NULL)",
    "ALTER TABLE {s}.account ALTER COLUMN bio SET STORAGE EXTERNAL",
    "CREATE TABLE {s}.item (pid int PRIMARY KEY, pname text NOT NULL, price numeric(10,2) NULL, stock int NULL, spec jsonb NULL)",
    "ALTER TABLE {s}.item REPLICA IDENTITY FULL",
    "CREATE TABLE {s}.orders (id int PRIMARY KEY, account_id int NOT NULL, pid int NOT NULL, qty int NOT NULL, note text NULL, "
    "placed timestamptz NOT NULL)",
]
ODS_YAML = """\
# The shop's PostgreSQL tables (schema {schema}), captured by Debezium (framework/demo/pgshop.py).
tables:
  - {{source: {db}.{schema}.account, name: account, key: [id], ordering: [changed_at]}}
  - {{source: {db}.{schema}.item, name: item, key: [pid]}}
  - {{source: {db}.{schema}.orders, name: orders, key: [id]}}
"""
MODELS = {
    "dwd/order_detail": (
        "SELECT o.id AS order_id, o.account_id, a.name AS customer, o.pid, i.pname, i.price, o.qty,\n"
        "       o.qty * i.price AS amount, o.placed, o.note\n"
        "FROM   ods.orders o\n"
        "       JOIN ods.account a ON o.account_id = a.id\n"
        "       JOIN ods.item i ON o.pid = i.pid\n",
        "description: Orders with their account and item (a 3-way join of CDC streams).\nkey: [order_id]\n",
    ),
    "dws/item_stats": (
        "SELECT pid, COUNT(*) AS orders, SUM(qty) AS units, MIN(qty) AS min_qty, MAX(qty) AS max_qty,\n"
        "       MIN(placed) AS first_order, MAX(placed) AS last_order, MAX(amount) AS top_amount\n"
        "FROM   dwd.order_detail\n"
        "GROUP  BY pid\n",
        "description: Orders, units and first/last order per item (MIN/MAX).\n",
    ),
}
_NAMES = ["Zoë Ångström", "李雷", "Ханна", "O'Brien", "José 🚀", "Søren", "Łukasz", "Ng"]
_NOTES = [None, "gift", "rush", "fragile ✓", "", "門口"]
_LETTERS = string.ascii_letters + string.digits + "äöüßéñ€漢字🙂"
START = datetime(2024, 1, 1, tzinfo=timezone.utc)


class PgShop:
    """Random but reproducible rows and transactions in schema `schema` of database `lake`; it
    keeps the keys it wrote so each statement hits a row that exists (PostgreSQL stays the truth)."""

    def __init__(self, db: Postgres, schema: str, seed: int = 7) -> None:
        self.db, self.schema, self.rnd = db, schema, random.Random(seed)
        self.keys: dict[str, set[int]] = {t: set() for t in TABLES}
        self.next_id = {t: 1 for t in TABLES}
        self.added: dict[str, dict[str, list[Any]]] = {t: {} for t in TABLES}
        self.clock = START
        self.transactions = 0

    def create(self, accounts: int = 20, items: int = 8, orders: int = 40) -> None:
        """Create the schema and tables and insert the seed rows (what the snapshot reads)."""
        self.db.execute([f"CREATE SCHEMA {self.schema}", *[d.format(s=self.schema) for d in DDL]])
        self.run([self.insert("account") for _ in range(accounts)] + [self.insert("item") for _ in range(items)])
        self.run([self.insert("orders") for _ in range(orders)])

    def q(self, table: str) -> str:
        return f"{self.schema}.{table}"

    def run(self, statements: list[Statement]) -> None:
        """One transaction."""
        self.db.transaction(statements)
        self.transactions += 1

    # -- values ------------------------------------------------------------------------------------
    def _now(self) -> datetime:
        self.clock += timedelta(seconds=self.rnd.randint(1, 90), microseconds=self.rnd.randint(0, 999_999))
        return self.clock

    def big(self, lo: int = 2500, hi: int = 5000) -> str:
        return "".join(self.rnd.choice(_LETTERS) for _ in range(self.rnd.randint(lo, hi)))

    def row(self, table: str, key: int) -> dict[str, Any]:
        r = self.rnd
        if table == "account":
            out: dict[str, Any] = {
                "id": key, "name": r.choice(_NAMES), "email": r.choice([None, f"a{key}@example.com", f"ü{key}@exämple.org"]),
                "balance": Decimal(r.randint(-10_000, 99_999_999)) / 100, "active": r.random() < 0.7, "changed_at": self._now(),
                "profile": r.choice([None, json.dumps({"k": key, "bio": self.big(2500, 3500), "tags": ["x", "ü"]}, ensure_ascii=False)]),
                "bio": r.choice([None, self.big()]), "avatar": r.choice([None, r.randbytes(r.randint(2500, 4000))]),
            }  # fmt: skip
        elif table == "item":
            out = {"pid": key, "pname": f"item {key} {r.choice(_NAMES)}", "price": r.choice([None, Decimal(r.randint(1, 999_999)) / 100]),
                   "stock": r.choice([None, r.randint(-5, 2_000_000_000)]), "spec": r.choice([None, json.dumps({"w": r.randint(1, 9)})])}
        else:
            out = {"id": key, "account_id": self._some("account", 1), "pid": self._some("item", 1), "qty": r.randint(1, 20),
                   "note": r.choice(_NOTES), "placed": START + timedelta(seconds=r.randint(0, 3 * 10**7), microseconds=r.randint(0, 999_999))}
        for col, values in self.added[table].items():
            out[col] = r.choice(values)
        return out

    def _some(self, table: str, default: int) -> int:
        keys = self.keys[table]
        return self.rnd.choice(sorted(keys)) if keys else default

    # -- statements -----------------------------------------------------------------------------------
    def insert(self, table: str, row: dict[str, Any] | None = None) -> Statement:
        row = row or self.row(table, self.next_id[table])
        key = row[KEY[table]]
        self.next_id[table] = max(self.next_id[table], key + 1)
        self.keys[table].add(key)
        return f"INSERT INTO {self.q(table)} ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})", tuple(row.values())

    def update(self, table: str, key: int, small: bool = False) -> Statement:
        """Some columns of `key`; `small`: never the large ones (their placeholders come along)."""
        row = self.row(table, key)
        large = {"profile", "bio", "avatar"}
        cols = [c for c in row if c != KEY[table] and (not small or c not in large) and self.rnd.random() < 0.5]
        if table == "account":  # the application keeps changed_at (the table's `ordering:`)
            cols = sorted(set(cols) | {"changed_at"}, key=list(row).index)
        cols = cols or [next(c for c in row if c != KEY[table] and c not in large)]
        return f"UPDATE {self.q(table)} SET {', '.join(f'{c} = %s' for c in cols)} WHERE {KEY[table]} = %s", (*(row[c] for c in cols), key)

    def delete(self, table: str, key: int) -> Statement:
        self.keys[table].discard(key)
        return f"DELETE FROM {self.q(table)} WHERE {KEY[table]} = %s", (key,)

    def rekey(self, table: str, key: int) -> Statement:
        """A primary-key change: Debezium sends a delete of the old key and a create of the new one
        (whose unchanged TOASTed values are placeholders)."""
        new = self.next_id[table]
        self.next_id[table] += 1
        self.keys[table].discard(key)
        self.keys[table].add(new)
        extra = ", changed_at = %s" if table == "account" else ""
        args = (new, self._now(), key) if table == "account" else (new, key)
        return f"UPDATE {self.q(table)} SET {KEY[table]} = %s{extra} WHERE {KEY[table]} = %s", args

    def change(self) -> list[Statement]:
        """One random change (1-2 statements) on a random table."""
        r = self.rnd
        table = r.choice(["orders", "orders", "account", "account", "item"])
        kind = r.choice(["insert", "update", "update", "update", "delete", "rekey", "reinsert"])
        if not self.keys[table] or kind == "insert":
            return [self.insert(table)]
        key = r.choice(sorted(self.keys[table]))
        if kind == "update":
            return [self.update(table, key, small=r.random() < 0.6)]
        if kind == "delete" and table != "item":
            return [self.delete(table, key)]
        if kind == "rekey":
            return [self.rekey(table, key)]
        return [self.delete(table, key), self.insert(table, self.row(table, key))]

    def changes(self, transactions: int) -> None:
        """`transactions` random transactions of 1-6 changes (some across tables)."""
        for _ in range(transactions):
            size = self.rnd.choice([1, 1, 1, 2, 3, 6])
            self.run([st for _ in range(size) for st in self.change()])

    def toast_cases(self) -> None:
        """Every way an unchanged TOASTed value reaches lake (module docstring), on accounts."""
        stored = sorted(self.keys["account"])[:3]
        for key in stored:  # rows lake stored in an earlier batch (or the snapshot)
            self.run([self.update("account", key, small=True)])
        self.run([self.insert("account")])  # an insert and updates in one batch
        fresh = self.next_id["account"] - 1
        self.run([self.update("account", fresh, small=True)])
        self.run([self.update("account", fresh, small=True)])  # several in a row
        self.run([self.insert("account"), self.update("account", self.next_id["account"] - 1, small=True)])  # one transaction
        moved = stored[0]
        self.run([self.rekey("account", moved)])  # a key change, then updates of the new key
        self.run([self.update("account", self.next_id["account"] - 1, small=True)])
        self.run([self.rekey("account", fresh), self.update("account", self.next_id["account"] - 1, small=True)])

    def alter(self) -> None:
        """Round 2: an added column, with values that use it."""
        self.db.execute(f"ALTER TABLE {self.q('account')} ADD COLUMN tier text NULL")
        self.added["account"]["tier"] = [None, "gold", "silber ✓", "青铜"]

    def refill(self, table: str = "item") -> int:
        """Round 3: TRUNCATE (Debezium op=t), then two thirds of the keys inserted again."""
        keys = sorted(self.keys[table])
        back = keys[: len(keys) * 2 // 3]
        self.db.execute(f"TRUNCATE TABLE {self.q(table)}")
        self.keys[table].clear()
        self.run([self.insert(table, self.row(table, k)) for k in back])
        return len(keys) - len(back)


def project_files(schema: str, bootstrap_servers: str, prefix: str) -> dict[str, str]:
    """The lake project reading the shop through Kafka: `lake.yaml` and `layers/`, by relative path."""
    files = {
        "lake.yaml": (
            f"name: pgshop\nwarehouse: warehouse\nspark: {{master: 'local[2]', conf: {{spark.sql.shuffle.partitions: '2'}}}}\n"
            f"ods:\n  source:\n    kind: kafka\n    bootstrap_servers: '{bootstrap_servers}'\n"
            f"    topic_pattern: '^(__debezium-heartbeat\\.)?{prefix}(\\..*)?$'\n    connect_timeout_seconds: 20\n"
        ),
        "layers/ods/shop.yaml": ODS_YAML.format(db=DBNAME, schema=schema),
    }
    for name, (sql, yaml_text) in MODELS.items():
        files[f"layers/{name}.sql"] = sql
        files[f"layers/{name}.yaml"] = yaml_text
    return files


def oracle_views(db: Postgres, schema: str) -> None:
    """Schemas `ods`, `dwd`, `dws` whose views are named and defined as lake's tables and models,
    so the models' SQL runs in PostgreSQL unchanged: its answer is the oracle."""
    statements: list[Statement] = [f"CREATE SCHEMA IF NOT EXISTS {layer}" for layer in ("ods", "dwd", "dws")]
    statements += [f"CREATE OR REPLACE VIEW ods.{t} AS SELECT * FROM {schema}.{t}" for t in TABLES]
    statements += [f"CREATE OR REPLACE VIEW {name.replace('/', '.')} AS {sql}" for name, (sql, _y) in MODELS.items()]
    db.execute(statements)
