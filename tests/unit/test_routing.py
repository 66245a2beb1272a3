"""Names `auto_create` gives undeclared source tables (no Spark)."""

from __future__ import annotations

import hashlib

from framework.ods.routing import auto_table_name, undeclared_parts
from models.config import _IDENT


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_auto_table_names_are_identifiers_and_avoid_taken_names() -> None:
    assert auto_table_name("shop.Coupons", ["shop", "Coupons"], set()) == "coupons"
    assert auto_table_name("shop.2024", ["shop", "2024"], set()) == "shop_2024"
    assert auto_table_name("9db.1t", ["9db", "1t"], set()) == "t_9db_1t_" + _hash("9db.1t")[:8]
    assert auto_table_name("shop.订单", ["shop", "订单"], set()) == "shop___"
    # Taken names (declared tables, tables made earlier) are never reused.
    assert auto_table_name("b.users", ["b", "users"], {"users"}) == "b_users"
    taken = {"users", "b_users"}
    name = auto_table_name("b.users", ["b", "users"], taken)
    assert name == "b_users_" + _hash("b.users")[:8]
    assert auto_table_name("b.users", ["b", "users"], taken | {name}) == "b_users_" + _hash("b.users")[:9]
    for n in ("coupons", "shop_2024", name):
        assert _IDENT.match(n)
    # A '.' inside the db or table: no `source:` can name it, so no table is made.
    assert auto_table_name("shop.my.t", ["shop", "my.t"], set()) is None
    assert auto_table_name("a.b.t", ["a.b", "t"], set()) is None


def test_auto_table_names_of_schemas() -> None:
    assert undeclared_parts("inv", None, "users") == ["inv", "users"]
    assert undeclared_parts("inv", "public", "users") == ["inv", "users"]
    assert undeclared_parts("inv", "dbo", "users") == ["inv", "users"]
    assert undeclared_parts("inv", "sales", "users") == ["inv", "sales", "users"]
    three = ["inv", "sales", "users"]
    assert auto_table_name("inv.sales.users", three, set()) == "users"
    assert auto_table_name("inv.sales.users", three, {"users"}) == "sales_users"
    assert auto_table_name("inv.sales.users", three, {"users", "sales_users"}) == "inv_sales_users"
