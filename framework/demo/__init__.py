"""The demo and test infrastructure: simulated Debezium sources (`cdc`, `seed`, `simulator`), a
real single-node Kafka broker (`broker`) and `lake demo` itself (`run`, `project`). Nothing in
the core imports it; only the CLI's `lake demo` and `lake init` (whose sample CDC comes from
here) do (tests/unit/test_architecture.py).

The package's own namespace is the simulator's API (pure Python, no Spark)."""

from __future__ import annotations

from framework.demo.cdc import (
    DEFAULT_START,
    Column,
    Connector,
    Row,
    Table,
    decode_decimal,
    encode_decimal,
    encode_row,
    encode_value,
    text_value,
    write,
)
from framework.demo.seed import (
    CUSTOMER,
    CUSTOMER_SITE,
    DEFAULT_INITIAL_ROWS,
    PRODUCT,
    SALES_ORDER_ALL,
    SOURCES,
    USER,
    USER_ORDER,
    inventory_sample,
    seed_tables,
)
from framework.demo.simulator import Simulator

__all__ = ["CUSTOMER", "CUSTOMER_SITE", "DEFAULT_INITIAL_ROWS", "DEFAULT_START", "PRODUCT", "SALES_ORDER_ALL", "SOURCES", "USER",
           "USER_ORDER", "Column", "Connector", "Row", "Simulator", "Table", "decode_decimal", "encode_decimal", "encode_row",
           "encode_value", "inventory_sample", "seed_tables", "text_value", "write"]
