"""The seed articles' source tables (seed 004's test_db, seed 000's salesdb) with the values the
simulator draws from, and the `lake init` sample (Debezium's tutorial `inventory.customers`)."""

from __future__ import annotations

import random

from framework.demo.cdc import Column, Connector, Row, Table


# --------------------------------------------------------------------------- the seed tables
def _ts(name: str, nullable: bool = False) -> Column:
    return Column(name, "timestamp", nullable=nullable)


def seed_tables() -> list[Table]:
    """The tables of the seed articles: seed 004's test_db and seed 000's salesdb."""
    return _test_db() + _salesdb()


def _test_db() -> list[Table]:
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
    ]


def _salesdb() -> list[Table]:
    return [
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
