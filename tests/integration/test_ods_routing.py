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
    assert not lp.layout.table("ods.other_users").exists()
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
