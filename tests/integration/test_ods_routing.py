"""Which ODS table an event lands in: auto-created names from awkward source names, and
Postgres/SQL Server schemas (`source.schema`) kept apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import LakeProject, envelope


def _event(db: str, table: str, row: dict[str, Any], pos: int) -> dict[str, Any]:
    """A MySQL envelope whose source db/table may contain any character (even '.')."""
    e = envelope("c", "x.y", None, row, pos=pos)
    e["source"].update(db=db, table=table)
    return e


def test_auto_create_sanitizes_names_and_dead_letters_what_it_cannot_name(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(
        tmp_path,
        "tables:\n  - {source: shop.users, key: [id]}\n  - {source: crm.contacts, name: other_users, key: [id]}\n",
        lake_extra="ods:\n  auto_create: {enabled: true, key: [id]}\n",
    )
    lp.write_cdc([
        _event("shop", "2024_orders", {"id": 1}, pos=1),    # starts with a digit -> shop_2024_orders
        _event("shop", "it's-odd", {"id": 2}, pos=2),       # quote, dash -> it_s_odd
        _event("other", "users", {"id": 3}, pos=3),         # users and other_users are declared
        _event("shop", "my.table", {"id": 4}, pos=4),       # a '.' in the table: no `source:` can name it
        _event("we.ird", "t", {"id": 5}, pos=5),            # a '.' in the db: likewise
        _event("shop", "users", {"id": 6}, pos=6),
    ], name="odd.json")
    s = lp.ingest(spark)
    tables = {name for name in s.totals()}
    assert tables >= {"users", "shop_2024_orders", "it_s_odd"}
    hashed = [n for n in tables if n.startswith("other_users_")]  # declared names are never reused
    assert len(hashed) == 1 and len(tables) == 4, tables
    assert lp.rows(spark, "shop_2024_orders", ["id"]) == [{"id": 1}]
    assert lp.rows(spark, "it_s_odd", ["id"]) == [{"id": 2}]
    assert lp.rows(spark, hashed[0], ["id"]) == [{"id": 3}]
    assert lp.rows(spark, "users", ["id"]) == [{"id": 6}]
    assert not lp.layout.table("ods.other_users").local.exists()
    dead = {d["loc"]: d["reason"] for d in lp.dead_letters(spark)}
    assert dead == {
        "cdc/odd.json:4": "table shop.my.table is not declared in layers/ods/",
        "cdc/odd.json:5": "table we.ird.t is not declared in layers/ods/",
    }
    # The same names again in a new run (a new writer): deterministic, no second table.
    lp.write_cdc([_event("other", "users", {"id": 7}, pos=7), _event("shop", "2024_orders", {"id": 8}, pos=8)])
    s2 = lp.ingest(spark)
    assert set(s2.totals()) == {hashed[0], "shop_2024_orders"}
    assert lp.rows(spark, hashed[0], ["id"]) == [{"id": 3}, {"id": 7}]


def _pg(schema: str, table: str, row: dict[str, Any], lsn: int, *, db: str = "inv", connector: str = "postgresql") -> dict[str, Any]:
    """A Debezium Postgres envelope (source has `schema` and `lsn`; no binlog position)."""
    return {
        "before": None,
        "after": row,
        "source": {"version": "2.5.0.Final", "connector": connector, "name": "pg", "ts_ms": 1_700_000_000_000 + lsn,
                   "snapshot": "false", "db": db, "sequence": f'["{lsn - 1}","{lsn}"]', "schema": schema,
                   "table": table, "txId": 700 + lsn, "lsn": lsn, "xmin": None},
        "op": "c",
        "ts_ms": 1_700_000_000_100 + lsn,
    }


def test_schemas_route_apart(tmp_path: Path, spark: Any) -> None:
    tables = """
        tables:
          - {source: inv.customers, key: [id]}
          - {source: inv.sales.customers, name: sales_customers, key: [id]}
        """
    lp = LakeProject(tmp_path / "both", tables)
    events = [
        _pg("public", "customers", {"id": 1, "who": "public"}, lsn=100),
        _pg("sales", "customers", {"id": 1, "who": "sales"}, lsn=110),
        _pg("sales", "customers", {"id": 2, "who": "sales"}, lsn=120),
        _pg("dbo", "customers", {"id": 3, "who": "dbo"}, lsn=130, connector="sqlserver"),
        envelope("c", "inv.customers", None, {"id": 4, "who": "mysql"}, pos=140),
        _pg("hr", "customers", {"id": 5, "who": "hr"}, lsn=150),
    ]
    lp.write_cdc(events, name="pg.json")
    lp.ingest(spark)
    assert lp.rows(spark, "customers", ["id", "who"]) == [
        {"id": 1, "who": "public"}, {"id": 3, "who": "dbo"}, {"id": 4, "who": "mysql"}]
    assert lp.rows(spark, "sales_customers", ["id", "who"]) == [{"id": 1, "who": "sales"}, {"id": 2, "who": "sales"}]
    assert [(d["loc"], d["reason"], d["source_table"]) for d in lp.dead_letters(spark)] == [
        ("cdc/pg.json:6", "table inv.hr.customers is not declared in layers/ods/", "inv.hr.customers")]

    # Without the sales declaration its events are not declared (never merged into inv.customers).
    lp2 = LakeProject(tmp_path / "public_only", "tables:\n  - {source: inv.customers, key: [id]}\n")
    lp2.write_cdc(events, name="pg.json")
    lp2.ingest(spark)
    assert lp2.rows(spark, "customers", ["id", "who"]) == [
        {"id": 1, "who": "public"}, {"id": 3, "who": "dbo"}, {"id": 4, "who": "mysql"}]
    assert {d["loc"]: d["reason"] for d in lp2.dead_letters(spark)} == {
        "cdc/pg.json:2": "table inv.sales.customers is not declared in layers/ods/",
        "cdc/pg.json:3": "table inv.sales.customers is not declared in layers/ods/",
        "cdc/pg.json:6": "table inv.hr.customers is not declared in layers/ods/",
    }

    # A declared public three-part name takes the public events; auto_create keeps schemas apart.
    lp3 = LakeProject(tmp_path / "auto", "tables:\n  - {source: inv.public.customers, name: pub, key: [id]}\n",
                      lake_extra="ods:\n  auto_create: {enabled: true, key: [id]}\n")
    lp3.write_cdc(events + [_pg("public", "orders", {"id": 9}, lsn=160), _pg("sales", "orders", {"id": 8}, lsn=170)])
    s3 = lp3.ingest(spark)
    assert set(s3.totals()) == {"pub", "customers", "sales_customers", "hr_customers", "orders", "sales_orders"}
    assert lp3.rows(spark, "pub", ["id", "who"]) == [{"id": 1, "who": "public"}]
    # No public three-part declaration for these: the default-schema (dbo) and MySQL events share inv.customers.
    assert lp3.rows(spark, "customers", ["id", "who"]) == [{"id": 3, "who": "dbo"}, {"id": 4, "who": "mysql"}]
    assert lp3.rows(spark, "hr_customers", ["id"]) == [{"id": 5}]
    assert lp3.rows(spark, "orders", ["id"]) == [{"id": 9}]
    assert lp3.rows(spark, "sales_orders", ["id"]) == [{"id": 8}]
    assert lp3.dead_letters(spark) == []
