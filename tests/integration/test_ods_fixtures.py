"""ODS results on public Debezium captures, asserting what the source projects' tests assert.

Fixtures and the expected results are described in ../shared/fixtures/README.md.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.helpers import LakeProject, fixture_lines

CUSTOMERS = """
tables:
  - source: inventory.customers
    key: [id]
"""

# README §5: kafka.slt tables s8 / s8_no_schema_field expect exactly these rows.
RISINGWAVE_FINAL = [
    {"id": 1001, "first_name": "Sally", "last_name": "Thomas", "email": "sally.thomas@acme.com"},
    {"id": 1002, "first_name": "George", "last_name": "Bailey", "email": "gbailey@foobar.com"},
    {"id": 1003, "first_name": "Edward", "last_name": "Walker", "email": "ed@walker.com"},
    {"id": 1004, "first_name": "Anne1", "last_name": "Kretchmar", "email": "annek@noanswer.org"},
    {"id": 1005, "first_name": "add", "last_name": "add2", "email": "add"},
]


def _rows(lp: LakeProject, spark: Any, table: str, cols: list[str]) -> list[dict[str, Any]]:
    return sorted(lp.rows(spark, table, cols), key=lambda r: r[cols[0]])


def test_risingwave_capture_with_schema(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    lp = LakeProject(tmp_path, CUSTOMERS)
    lp.write_cdc(fixture_lines(fixtures_dir / "risingwave" / "debezium_log.1"))
    s = lp.ingest(spark)
    assert s.totals()["customers"].upserts == 9 and s.totals()["customers"].deletes == 1
    assert _rows(lp, spark, "customers", ["id", "first_name", "last_name", "email"]) == RISINGWAVE_FINAL
    schema = dict((f.name, f.dataType.simpleString()) for f in lp.raw(spark, "customers").schema.fields)
    assert schema["id"] == "int"  # int32 in the schema block


def test_risingwave_capture_without_schema(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    lp = LakeProject(tmp_path, CUSTOMERS)
    lp.write_cdc(fixture_lines(fixtures_dir / "risingwave" / "debezium_log_no_schema_field.1"))
    lp.ingest(spark)
    assert _rows(lp, spark, "customers", ["id", "first_name", "last_name", "email"]) == RISINGWAVE_FINAL


def test_risingwave_missing_column_in_new_rows_is_null(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """Full after-image replacement: a column missing from an update's after-image is NULL."""
    lp = LakeProject(tmp_path, CUSTOMERS)
    lp.write_cdc(fixture_lines(fixtures_dir / "risingwave" / "debezium_log_missing_column_in_new_rows.1"))
    lp.ingest(spark)
    got = {r["id"]: r for r in lp.rows(spark, "customers", ["id", "first_name", "last_name", "email"])}
    assert sorted(got) == [1001, 1002, 1003, 1004, 1005]
    assert got[1001]["last_name"] == "Thomas"
    assert got[1004] == {"id": 1004, "first_name": "Anne1", "last_name": None, "email": "annek@noanswer.org"}
    assert got[1005] == {"id": 1005, "first_name": "add", "last_name": None, "email": "add"}


def test_paimon_schemaless_schema_evolution(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §4a: columns appear over three stages; delete, partial before-image, older ts_ms."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: test.product, key: [id]}\n")
    base = fixtures_dir / "paimon" / "table" / "schemaevolution"
    cols = ["id", "name", "description", "weight"]
    lp.write_cdc(fixture_lines(base / "debezium-data-1.txt"))
    lp.ingest(spark)
    assert _rows(lp, spark, "product", cols) == [
        {"id": 101, "name": "scooter", "description": "Small 2-wheel scooter", "weight": 3.14},
        {"id": 102, "name": "car battery", "description": "12V car battery", "weight": 8.1},
    ]
    lp.write_cdc(fixture_lines(base / "debezium-data-2.txt"))
    lp.ingest(spark)
    got = {r["id"]: r["age"] for r in lp.rows(spark, "product", ["id", "age"])}
    assert got == {101: None, 102: None, 103: 18, 104: 24}
    lp.write_cdc(fixture_lines(base / "debezium-data-3.txt"))
    lp.ingest(spark)
    final = _rows(lp, spark, "product", ["id", "name", "description", "weight", "age", "address"])
    assert final == [
        {"id": 102, "name": "car battery", "description": "12V car battery", "weight": 8.1, "age": None, "address": None},
        {"id": 103, "name": "12-pack drill bits", "description": "12-pack of drill bits with sizes ranging from #40 to #3", "weight": 0.8, "age": 18, "address": None},
        {"id": 104, "name": "hammer", "description": "12oz carpenter's hammer", "weight": 0.75, "age": 24, "address": None},
        {"id": 105, "name": "hammer", "description": "14oz carpenter's hammer", "weight": 0.875, "age": None, "address": "Beijing"},
        {"id": 107, "name": "rocks", "description": "box of assorted rocks", "weight": 5.3, "age": None, "address": None},
    ]


def _schema_stage(lp: LakeProject, spark: Any, base: Path, n: int) -> Any:
    lp.write_cdc(fixture_lines(base / f"debezium-data-{n}.txt"))
    return lp.ingest(spark)


def test_paimon_schema_include_type_changes(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §4b with `schema_narrowing: keep_wider`, which is what Paimon's test asserts:
    int32 age added, widened to int64, int32 again kept BIGINT, then a string → rejected."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: test.product, key: [id], schema_narrowing: keep_wider}\n")
    base = fixtures_dir / "paimon" / "table" / "schema" / "schemaevolution"
    _schema_stage(lp, spark, base, 1)
    types = dict((f.name, f.dataType.simpleString()) for f in lp.raw(spark, "product").schema.fields)
    assert (types["id"], types["name"], types["weight"]) == ("int", "string", "double")
    _schema_stage(lp, spark, base, 2)
    assert dict((f.name, f.dataType.simpleString()) for f in lp.raw(spark, "product").schema.fields)["age"] == "int"
    _schema_stage(lp, spark, base, 3)
    assert dict((f.name, f.dataType.simpleString()) for f in lp.raw(spark, "product").schema.fields)["age"] == "bigint"
    _schema_stage(lp, spark, base, 4)
    assert {r["id"]: r["age"] for r in lp.rows(spark, "product", ["id", "age"])} == {101: None, 103: 18, 104: 24, 105: 24}
    s5 = _schema_stage(lp, spark, base, 5)
    t = s5.totals()["product"]
    assert t.status == "dead_letter" and "BIGINT to STRING" in (t.reason or "")
    dead = lp.dead_letters(spark)
    assert [d["source_table"] for d in dead] == ["test.product"] and "BIGINT to STRING" in dead[0]["reason"]
    # The table keeps its stage-4 content (Paimon: the job fails; nothing is written).
    assert {r["id"]: r["description"] for r in lp.rows(spark, "product", ["id", "description"])}[105] == "14oz carpenter's hammer"


def test_paimon_narrowing_goes_to_dead_letter_by_default(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: test.product, key: [id]}\n")
    base = fixtures_dir / "paimon" / "table" / "schema" / "schemaevolution"
    for n in (1, 2, 3):
        _schema_stage(lp, spark, base, n)
    s4 = _schema_stage(lp, spark, base, 4)
    assert s4.totals()["product"].status == "dead_letter"
    assert "narrowed from BIGINT to INT" in (s4.totals()["product"].reason or "")
    assert 105 not in {r["id"] for r in lp.rows(spark, "product", ["id"])}


def test_paimon_two_tables_same_ids(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §4g: two topics → t1 and t2; for a PK-keyed upsert t2 ends with 2 rows."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: test.t1, key: [id]}\n  - {source: test.t2, key: [id]}\n")
    base = fixtures_dir / "paimon" / "database" / "schemaevolution"
    lp.write_cdc(fixture_lines(base / "topic0" / "debezium-data-1.txt") + fixture_lines(base / "topic1" / "debezium-data-1.txt"))
    lp.ingest(spark)
    assert {r["id"]: r["weight"] for r in lp.rows(spark, "t1", ["id", "weight"])} == {101: 3.14, 102: 8.1}
    assert {r["id"]: r["weight"] for r in lp.rows(spark, "t2", ["id", "weight"])} == {103: 0.8, 104: 0.75}
    lp.write_cdc(fixture_lines(base / "topic0" / "debezium-data-2.txt"))
    lp.write_cdc(fixture_lines(base / "topic1" / "debezium-data-2.txt"))
    lp.ingest(spark)
    assert {r["id"]: r["age"] for r in lp.rows(spark, "t1", ["id", "age"])} == {101: None, 102: None, 103: 19, 104: 25}
    assert lp.rows(spark, "t2", ["id", "address"]) == [{"id": 103, "address": "Beijing"}, {"id": 104, "address": "Shanghai"}]


def test_paimon_tombstone_skipped(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §4e: a Kafka tombstone (null value) between two inserts is skipped without error."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: test.test, key: [id]}\n")
    base = fixtures_dir / "paimon" / "table" / "nullvalue"
    lp.write_cdc(fixture_lines(base / "debezium-data-1.txt") + ["null"] + fixture_lines(base / "debezium-data-2.txt"))
    s = lp.ingest(spark)
    assert s.tombstones == 1 and s.dead_letter == 0
    assert lp.rows(spark, "test", ["id", "value"]) == [{"id": 1, "value": "A"}, {"id": 2, "value": "B"}]


def test_flink_changelog_ends_empty_and_orders_by_ts(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §3: same file/pos for every change; the final current-state table is empty."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: inventory.products, key: [product_id]}\n")
    lines = fixture_lines(fixtures_dir / "flink-connector-kafka" / "product_changelog.txt")
    lp.write_cdc(lines[:5])
    lp.ingest(spark)
    got = {r["product_id"]: r["product_price"] for r in lp.rows(spark, "products", ["product_id", "product_price"])}
    assert got == {"p_001": Decimal("11.99"), "p_002": Decimal("19.99")} or got == {"p_001": 11.99, "p_002": 19.99}
    lp.write_cdc(lines[5:])
    lp.ingest(spark)
    assert lp.rows(spark, "products", ["product_id"]) == []


def test_alltype_row_decodes_logical_types(tmp_path: Path, spark: Any, fixtures_dir: Path) -> None:
    """README §4d: one row with every Debezium logical type (decimals written as plain numbers)."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: paimon_sync_table.all_types_table, key: [_id], name: all_types}\n")
    lines = fixture_lines(fixtures_dir / "paimon" / "table" / "schema" / "alltype" / "debezium-data-1.txt")
    import json

    src = json.loads(lines[0])["payload"]["source"]
    if f"{src['db']}.{src['table']}" != "paimon_sync_table.all_types_table":
        (lp.root / "layers" / "ods" / "tables.yaml").write_text(
            f"tables:\n  - {{source: {src['db']}.{src['table']}, key: [_id], name: all_types}}\n"
        )
    lp.write_cdc(lines)
    s = lp.ingest(spark)
    assert s.dead_letter == 0, s.dead_reasons()
    df = lp.raw(spark, "all_types")
    types = dict((f.name, f.dataType.simpleString()) for f in df.schema.fields)
    row = df.collect()[0].asDict()
    assert types["_id"] == "int" and row["_id"] == 1
    assert types["_date"] == "date" and str(row["_date"]) == "2023-03-23"  # 19439 days
    assert types["_datetime"] == "timestamp" and str(row["_datetime"]) == "2023-03-23 14:30:05"
    assert types["_numeric"].startswith("decimal") and row["_numeric"] == Decimal("12345.110")
    assert types["_timestamp"] == "timestamp"
    assert row["_year"] == 2023
    assert row["_time"] == "10:13:23.000000"  # 36803000 ms
