"""ODS semantics on real Hudi tables: routing, deletes, re-inserts, late replays, ordering columns,
truncate, dead letter, bootstrap hand-off, partition moves, MOR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.errors import IngestFailed
from framework.ods.parse import FLATTENED
from framework.table import hudi
from tests.helpers import LakeProject, envelope

SHOP = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, key: [sku, shop], type: mor}
"""


def test_routing_deletes_reinsert_and_late_replay(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, SHOP)
    first = [
        envelope("c", "shop.users", None, {"id": 1, "name": "ann"}, pos=100),
        envelope("c", "shop.users", None, {"id": 2, "name": "bob"}, pos=110),
        envelope("c", "shop.users", None, {"id": 3, "name": "cid"}, pos=120),
        envelope("c", "shop.orders", None, {"id": 10, "created": "2024-01-05T10:00:00Z", "amount": 5}, pos=130),
        envelope("c", "shop.orders", None, {"id": 11, "created": "2024-02-05T10:00:00Z", "amount": 7}, pos=140),
        envelope("c", "shop.items", None, {"sku": "A", "shop": "s1", "qty": 1}, pos=150),
        envelope("c", "shop.items", None, {"sku": "B", "shop": "s1", "qty": 2}, pos=160),
    ]
    lp.write_cdc(first)
    s1 = lp.ingest(spark)
    assert {t: r.upserts for t, r in s1.totals().items()} == {"users": 3, "orders": 2, "items": 2}
    lp.write_cdc([
        envelope("u", "shop.users", {"id": 1, "name": "ann"}, {"id": 1, "name": "ANN"}, pos=200),
        envelope("d", "shop.users", {"id": 2, "name": "bob"}, None, pos=210),
        envelope("u", "shop.orders", {"id": 10, "created": "2024-01-05T10:00:00Z", "amount": 5},
                 {"id": 10, "created": "2024-03-01T00:00:00Z", "amount": 6}, pos=220),
        envelope("d", "shop.items", {"sku": "A", "shop": "s1", "qty": 1}, None, pos=230),
    ])
    lp.ingest(spark)
    # Re-insert of a deleted key (newer), then a replay of the whole first window (older).
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 2, "name": "bob again"}, pos=300)] + first)
    s3 = lp.ingest(spark)
    assert s3.dead_letter == 0
    assert lp.rows(spark, "users", ["id", "name"]) == [{"id": 1, "name": "ANN"}, {"id": 2, "name": "bob again"}, {"id": 3, "name": "cid"}]
    assert lp.rows(spark, "items", ["sku", "shop", "qty"]) == [{"sku": "B", "shop": "s1", "qty": 2}]
    orders = lp.raw(spark, "orders").where("NOT _deleted").select("id", "amount", "year_month").collect()
    assert sorted((r.id, r.amount, r.year_month) for r in orders) == [(10, 6, "2024-03"), (11, 7, "2024-02")]
    # The partition move left no copy behind in the old partition, deleted or not.
    assert lp.raw(spark, "orders").where("id = 10").count() == 1
    assert (lp.layout.table("ods.orders") / "year_month=2024-03").local.is_dir()
    # Deleted keys are gone from the table (Hudi deletes); the tombstone keeps the delete's
    # position, which dropped the replayed inserts of users 2 and items A.
    assert lp.raw(spark, "items").where("sku = 'A'").count() == 0
    tomb = hudi.read(spark, lp.layout.tombstones("ods.items")).select("sku", "shop").collect()
    assert [(r.sku, r.shop) for r in tomb] == [("A", "s1")]
    assert {t: r.replayed for t, r in s3.totals().items()} == {"users": 1, "orders": 0, "items": 1}


def test_configured_ordering_column_beats_arrival(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, """
        tables:
          - source: test_db.user
            key: [id]
            ordering: [modify_time]
            columns: {modify_time: timestamp}
        """)
    lp.write_cdc([
        envelope("c", "test_db.user", None, {"id": 1, "name": "a", "modify_time": "2024-01-01T10:00:00Z"}, pos=100),
        envelope("u", "test_db.user", None, {"id": 1, "name": "new", "modify_time": "2024-01-01T10:05:00Z"}, pos=200),
        # Later in the log but older by modify_time (e.g. a replica replaying): loses.
        envelope("u", "test_db.user", None, {"id": 1, "name": "stale", "modify_time": "2024-01-01T10:01:00Z"}, pos=300),
    ])
    lp.ingest(spark)
    assert lp.rows(spark, "user", ["id", "name"]) == [{"id": 1, "name": "new"}]
    # A delete carries the row's last modify_time and a later position: it wins the tie.
    lp.write_cdc([envelope("d", "test_db.user", {"id": 1, "name": "new", "modify_time": "2024-01-01T10:05:00Z"}, None, pos=400)])
    lp.ingest(spark)
    assert lp.rows(spark, "user", ["id"]) == []


def test_truncate_deletes_rows_before_it(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 4, "name": "d"}, pos=50)])
    lp.ingest(spark)
    truncate = envelope("t", "shop.users", None, None, pos=120)
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1, "name": "a"}, pos=100),
        envelope("c", "shop.users", None, {"id": 2, "name": "b"}, pos=110),
        truncate,
        envelope("c", "shop.users", None, {"id": 3, "name": "c"}, pos=130),
    ])
    s = lp.ingest(spark)
    assert s.totals()["users"].truncated == 2
    assert lp.rows(spark, "users", ["id"]) == [{"id": 3}]


def test_dead_letter_reasons_and_other_tables_continue(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, """
        tables:
          - {source: shop.users, key: [id], columns: {age: int}}
          - {source: shop.orders, key: [id]}
        """)
    good = envelope("c", "shop.orders", None, {"id": 1}, pos=10)
    lines = [
        '{"op": "c", "after": {"id": 1',                                       # 1 malformed
        '{"foo": 1}',                                                           # 2 no op
        envelope("x", "shop.users", None, {"id": 1}, pos=1),                    # 3 unknown op
        envelope("c", "shop.users", None, None, pos=2),                         # 4 c without after
        envelope("d", "shop.users", None, None, pos=3),                         # 5 d without before
        envelope("c", "shop.users", None, {"name": "no id"}, pos=4),            # 6 missing key
        envelope("c", "shop.users", None, {"id": None, "name": "x"}, pos=5),    # 7 NULL key
        envelope("c", "shop.nobody", None, {"id": 1}, pos=6),                   # 8 undeclared
        envelope("c", "shop.users", None, {"id": 7, "age": "abc"}, pos=7),      # 9 bad value
        envelope("c", "shop.users", None, {"id": 8, "age": 30}, pos=8),         # 10 fine
        good,                                                                   # 11 fine
        # 12 a flattened record (ExtractNewRecordState with add.fields and rewritten deletes)
        '{"id": 9, "name": "flat", "__op": "u", "__lsn": 123, "__source_ts_ms": 1700000000000, "__deleted": "false"}',
    ]
    lp.write_cdc(lines, name="bad.json")
    s = lp.ingest(spark)
    assert s.dead_letter == 10  # the undecodable value (line 9) counts too
    reasons = {d["loc"]: d["reason"] for d in lp.dead_letters(spark)}
    assert reasons == {
        "cdc/bad.json:1": "malformed JSON",
        "cdc/bad.json:2": "not a Debezium envelope: no `op` field",
        "cdc/bad.json:3": "unknown op 'x'",
        "cdc/bad.json:4": "op 'c' without after-image",
        "cdc/bad.json:5": "op 'd' without before-image",
        "cdc/bad.json:6": "missing or NULL key column (id)",
        "cdc/bad.json:7": "missing or NULL key column (id)",
        "cdc/bad.json:8": "table shop.nobody is not declared in layers/ods/",
        "cdc/bad.json:9": "column age: value cannot be read as INT",
        "cdc/bad.json:12": FLATTENED,
    }
    assert lp.rows(spark, "users", ["id", "age"]) == [{"id": 8, "age": 30}]
    assert lp.rows(spark, "orders", ["id"]) == [{"id": 1}]
    # Replaying the same file changes nothing: dead letters are keyed by location.
    lp.write_cdc(lines, name="bad2.json")
    lp.ingest(spark)
    dead = lp.dead_letters(spark)
    assert sorted(d["loc"] for d in dead) == sorted([k for k in reasons] + [k.replace("bad.json", "bad2.json") for k in reasons]), [(d["loc"], d["reason"]) for d in dead]


def test_max_dead_letter_ratio_blocks_the_batch(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n", lake_extra="ods:\n  max_dead_letter_ratio: 0.2\n")
    lp.write_cdc(["{oops", "{oops", envelope("c", "shop.users", None, {"id": 1}, pos=1)])
    with pytest.raises(IngestFailed, match="max_dead_letter_ratio"):
        lp.ingest(spark)
    assert not (lp.layout.table("ods.users") / ".hoodie").local.exists()
    # Raise the ratio: the same batch is retried, nothing was lost.
    (lp.root / "lake.yaml").write_text("name: t\nwarehouse: warehouse\nspark: {master: 'local[2]'}\nods:\n  max_dead_letter_ratio: 0.9\n")
    lp.ingest(spark)
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]
    assert len(lp.dead_letters(spark)) == 2


def test_bootstrap_then_cdc_hand_off(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    dump = tmp_path / "dump"
    spark.createDataFrame([(1, "a-dump"), (2, "b-dump"), (3, "c-dump")], "id int, name string").write.parquet(str(dump))
    res = run_bootstrap(spark, lp.project, lp.project.ods_table("ods.users"), dump, position="mysql-bin.000002:500")
    assert res.rows == 3
    lp.write_cdc([
        envelope("u", "shop.users", None, {"id": 1, "name": "older file"}, pos=900, file="mysql-bin.000001"),
        envelope("c", "shop.users", None, {"id": 9, "name": "before dump"}, pos=400, file="mysql-bin.000002"),
        envelope("u", "shop.users", None, {"id": 2, "name": "after dump"}, pos=600, file="mysql-bin.000002"),
        envelope("d", "shop.users", {"id": 3, "name": "c-dump"}, None, pos=700, file="mysql-bin.000002"),
    ])
    s = lp.ingest(spark)
    assert s.totals()["users"].before_bootstrap == 2
    assert lp.rows(spark, "users", ["id", "name"]) == [{"id": 1, "name": "a-dump"}, {"id": 2, "name": "after dump"}]


def test_tables_filter_uses_its_own_checkpoint(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, SHOP)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1}, pos=1), envelope("c", "shop.orders", None, {"id": 5, "created": "2024-01-01T00:00:00Z"}, pos=2)])
    lp.ingest(spark, tables=["ods.users"])
    assert not (lp.layout.table("ods.orders") / ".hoodie").local.exists()
    lp.ingest(spark)  # the full job has its own checkpoint: nothing is lost for orders
    assert lp.rows(spark, "orders", ["id"]) == [{"id": 5}]
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]


def test_nothing_new_writes_nothing(tmp_path: Path, spark: Any) -> None:
    from framework.table import hudi

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1}, pos=1)])
    lp.ingest(spark)
    before = hudi.completed_instants(spark, lp.layout.table("ods.users"))
    s = lp.ingest(spark)
    assert s.batches == []
    assert hudi.completed_instants(spark, lp.layout.table("ods.users")) == before


def test_auto_create_undeclared_tables(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n",
                     lake_extra="ods:\n  auto_create: {enabled: true, key: [id]}\n")
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1}, pos=1),
        envelope("c", "shop.coupons", None, {"id": 7, "code": "X"}, pos=2),
        envelope("c", "other.users", None, {"id": 9}, pos=3),          # name clash → ods.other_users
        envelope("c", "shop.no_key", None, {"code": "Y"}, pos=4),      # no `id` → dead letter
    ], name="auto.json")
    s = lp.ingest(spark)
    assert lp.rows(spark, "coupons", ["id", "code"]) == [{"id": 7, "code": "X"}]
    assert lp.rows(spark, "other_users", ["id"]) == [{"id": 9}]
    assert {d["loc"]: d["reason"] for d in lp.dead_letters(spark)} == {"cdc/auto.json:4": "missing or NULL key column (id)"}
    assert set(s.totals()) == {"users", "coupons", "other_users"}


def test_bootstrap_from_csv_with_types_from_yaml(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.items, key: [sku], columns: {price: 'decimal(10,2)'}}\n")
    dump = tmp_path / "items.csv"
    dump.write_text("sku,price,name\nA,1.10,apple\nB,2.25,bread\n")
    res = run_bootstrap(spark, lp.project, lp.project.ods_table("ods.items"), dump, position="2024-01-01T00:00:00Z")
    assert res.rows == 2 and res.position == "ts:" + str(1704067200000).zfill(15)
    lp.write_cdc([
        envelope("u", "shop.items", None, {"sku": "A", "price": "9.99", "name": "old"}, pos=5, ts=1703000000000),  # before the dump
        envelope("u", "shop.items", None, {"sku": "B", "price": "3.50", "name": "bread"}, pos=6, ts=1705000000000),
    ])
    lp.ingest(spark)
    from decimal import Decimal

    assert lp.rows(spark, "items", ["sku", "price"]) == [{"sku": "A", "price": Decimal("1.10")}, {"sku": "B", "price": Decimal("3.50")}]


def test_continuous_mode_picks_up_new_files_and_stops_cleanly(tmp_path: Path, spark: Any) -> None:
    import threading
    import time

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1}, pos=1)])
    stop = threading.Event()
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(lp.ingest(spark, continuous=True, trigger_seconds=1, stop_event=stop)))
    worker.start()
    try:
        deadline = time.time() + 120
        from framework.table import hudi

        while time.time() < deadline and not hudi.completed_instants(spark, lp.layout.table("ods.users")):
            time.sleep(0.5)
        lp.write_cdc([envelope("c", "shop.users", None, {"id": 2}, pos=2), envelope("d", "shop.users", {"id": 1}, None, pos=3)])
        while time.time() < deadline and lp.rows(spark, "users", ["id"]) != [{"id": 2}]:
            time.sleep(1)
    finally:
        stop.set()
        worker.join(timeout=120)
    assert not worker.is_alive()
    (summary,) = done
    assert summary.status == "ok" and len(summary.batches) >= 2
    assert lp.rows(spark, "users", ["id"]) == [{"id": 2}]
