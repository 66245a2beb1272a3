"""Every reader of an ODS table by path sees the source's final state (DESIGN.md mechanism 7):
hudi-rs (PyPI `hudi`, no Spark, no lake) reads each table after CDC with deletes, a delete and
re-create of one key, a truncate and late replays of older slices, and must find exactly the rows
the source holds, computed here by applying every distinct event once in source-position order.
Replays must not resurrect deleted keys (framework/ods/tombstones.py keeps their positions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.runtime.location import Location
from framework.table import hudi
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, key: [sku, shop], type: mor}
"""
KEYS = {"shop.users": ["id"], "shop.orders": ["id"], "shop.items": ["sku", "shop"]}


def _row(table: str, k: int, v: int) -> dict[str, Any]:
    if table == "shop.items":
        return {"sku": f"s{k}", "shop": "x", "v": v}
    row: dict[str, Any] = {"id": k, "v": v}
    if table == "shop.orders":
        row["created"] = f"2024-0{1 + (k + v) % 3}-01T00:00:00Z"
    return row


class Source:
    """Events of the three tables with increasing binlog positions."""

    def __init__(self) -> None:
        self.pos = 0

    def ev(self, op: str, table: str, k: int, v: int = 0) -> dict[str, Any]:
        self.pos += 10
        if op == "t":
            return envelope("t", table, None, None, pos=self.pos)
        row = _row(table, k, v)
        return envelope(op, table, row if op == "d" else None, None if op == "d" else row, pos=self.pos)


def final_state(batches: list[list[dict[str, Any]]]) -> dict[str, set[tuple]]:
    """The source's tables after every distinct event, applied once in source-position order."""
    events = {(e["source"]["file"], e["source"]["pos"], e["source"]["row"]): e for b in batches for e in b}
    state: dict[str, dict[tuple, dict[str, Any]]] = {t: {} for t in KEYS}
    for _, e in sorted(events.items()):
        table = f"{e['source']['db']}.{e['source']['table']}"
        if e["op"] == "t":
            state[table].clear()
            continue
        img = e["before"] if e["op"] == "d" else e["after"]
        key = tuple(img[k] for k in KEYS[table])
        if e["op"] == "d":
            state[table].pop(key, None)
        else:
            state[table][key] = img
    return {t.split(".")[1]: {tuple(sorted((c, str(v)) for c, v in r.items() if c != "created")) for r in rows.values()}
            for t, rows in state.items()}


def read_by_path(path: Location | Path) -> set[tuple]:
    """The table's rows as hudi-rs reads them (data columns other than the partition source)."""
    import pyarrow as pa
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(path)).build()
    data = pa.Table.from_batches(table.read())
    cols = [c for c in data.column_names if not c.startswith("_") and c not in ("created", "year_month")]
    rows = data.select(cols).to_pylist()
    out = [tuple(sorted((c, str(v)) for c, v in r.items())) for r in rows]
    assert len(out) == len(set(out)), f"{path}: a key twice"
    return set(out)


def test_outside_reader_sees_the_source_final_state(tmp_path: Path, spark: Any) -> None:
    pytest.importorskip("hudi")
    lp = LakeProject(tmp_path, TABLES)
    s = Source()
    tables = list(KEYS)
    first = [s.ev("c", t, k, 1) for t in tables for k in range(1, 9)]
    second = [e for t in tables for e in (
        s.ev("u", t, 1, 2), s.ev("d", t, 2), s.ev("d", t, 3),
        s.ev("d", t, 4), s.ev("c", t, 4, 3),  # deleted and re-created in one batch: no tombstone
    )]
    third = [s.ev("c", "shop.users", 20, 1), s.ev("t", "shop.users", 0), s.ev("c", "shop.users", 21, 1),
             s.ev("u", "shop.items", 5, 7), s.ev("d", "shop.orders", 6)]
    fourth = [s.ev("c", t, 3, 9) for t in tables]  # re-created after its delete (newer)
    batches = [first, second, third, fourth]
    for b in batches:
        lp.write_cdc(b)
        lp.ingest(spark)
    # Late replays of older slices: the first window (inserts of keys deleted since), the second
    # (its deletes, including the delete of key 4 a newer insert superseded) and the truncate's.
    lone_deletes = [second[i] for i in (3, 8, 13)]  # of key 4: older than its live row, no tombstone
    assert all(e["op"] == "d" for e in lone_deletes)
    for replay in (first, second, third, lone_deletes):
        lp.write_cdc(replay)
        lp.ingest(spark)
    expected = final_state(batches)
    for name in ("users", "orders", "items"):
        path = lp.layout.table(f"ods.{name}")
        assert read_by_path(path) == expected[name], name
    # Lake's own view agrees, and the tombstones hold the keys deleted (users: truncated too).
    assert len(lp.rows(spark, "users")) == len(expected["users"])
    tomb = hudi.read(spark, lp.layout.tombstones("ods.users")).select("id").collect()
    assert sorted(r.id for r in tomb) == [1, 2, 3, 4, 5, 6, 7, 8, 20]
