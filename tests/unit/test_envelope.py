"""Kafka Connect schema → column types, schema evolution rules, positions (no Spark)."""

from __future__ import annotations

import json

import pytest

from framework.errors import LakeError
from framework.ods.envelope import (
    Decoder,
    SchemaBlockError,
    column_for,
    infer_json_type,
    row_columns,
)
from framework.ods.position import parse_position, seq_at, slice_of
from framework.project.types import merge_batch_types, resolve


@pytest.mark.parametrize(
    ("field", "kind", "spark_type"),
    [
        ({"type": "int8", "field": "a"}, "plain", "tinyint"),
        ({"type": "int16", "field": "a"}, "plain", "smallint"),
        ({"type": "int32", "field": "a"}, "plain", "int"),
        ({"type": "int64", "field": "a"}, "plain", "bigint"),
        ({"type": "float", "field": "a"}, "plain", "float"),
        ({"type": "double", "field": "a"}, "plain", "double"),
        ({"type": "boolean", "field": "a"}, "plain", "boolean"),
        ({"type": "string", "field": "a"}, "plain", "string"),
        ({"type": "bytes", "field": "a"}, "bytes_b64", "binary"),
        ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "a"}, "decimal_b64", "decimal(10,2)"),
        ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "3"}, "field": "a"}, "decimal_b64", "decimal(38,3)"),
        ({"type": "int32", "name": "io.debezium.time.Date", "field": "a"}, "date_days", "date"),
        ({"type": "int32", "name": "io.debezium.time.Time", "field": "a"}, "time_ms", "string"),
        ({"type": "int64", "name": "io.debezium.time.MicroTime", "field": "a"}, "time_us", "string"),
        ({"type": "int64", "name": "io.debezium.time.Timestamp", "field": "a"}, "ts_ms", "timestamp"),
        ({"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "a"}, "ts_us", "timestamp"),
        ({"type": "int64", "name": "io.debezium.time.NanoTimestamp", "field": "a"}, "ts_ns", "timestamp"),
        ({"type": "string", "name": "io.debezium.time.ZonedTimestamp", "field": "a"}, "ts_iso", "timestamp"),
        ({"type": "int32", "name": "io.debezium.time.Year", "field": "a"}, "plain", "int"),
        ({"type": "string", "name": "io.debezium.data.Json", "field": "a"}, "plain", "string"),
        ({"type": "struct", "fields": [], "field": "a"}, "json", "string"),
    ],
)
def test_column_types(field: dict, kind: str, spark_type: str) -> None:
    c = column_for(field)
    assert (c.decoder.kind, c.decoder.spark_type) == (kind, spark_type)


def test_row_columns_from_after_or_before() -> None:
    schema = {"type": "struct", "fields": [
        {"type": "struct", "field": "before", "fields": [{"type": "int32", "field": "id"}]},
        {"type": "struct", "field": "after", "fields": [{"type": "int32", "field": "id"}, {"type": "string", "field": "n"}]},
    ]}
    assert [c.name for c in row_columns(json.dumps(schema))] == ["id", "n"]
    only_before = {"type": "struct", "fields": [schema["fields"][0]]}
    assert [c.name for c in row_columns(only_before)] == ["id"]
    with pytest.raises(SchemaBlockError):
        row_columns({"type": "struct", "fields": []})
    with pytest.raises(SchemaBlockError):
        column_for({"type": "weird", "field": "x"})


def test_infer_json_types() -> None:
    assert infer_json_type([1, 2]) == "bigint"
    assert infer_json_type([1, 2.5]) == "double"
    assert infer_json_type([True]) == "boolean"
    assert infer_json_type(["x", 1]) == "string"
    assert infer_json_type([]) == "string"
    assert infer_json_type([{"a": 1}]) == "string"


def test_evolution_rules() -> None:
    assert resolve("a", None, "int").target == "int"
    assert resolve("a", "int", "bigint").target == "bigint" and resolve("a", "int", "bigint").promoted
    assert resolve("a", "float", "double").target == "double"
    narrowed = resolve("a", "bigint", "int")
    assert narrowed.narrowing and narrowed.error and "narrowed" in narrowed.error
    bad = resolve("age", "bigint", "string")
    assert bad.target is None and "BIGINT to STRING" in (bad.error or "")
    # Paimon's stage 3→4 (int64 then int32 again): keep_wider accepts it, the default does not.
    assert merge_batch_types("age", "bigint", ["int"], keep_wider=True).target == "bigint"
    assert merge_batch_types("age", "bigint", ["int"], keep_wider=False).error
    assert merge_batch_types("age", "int", ["bigint", "int"], keep_wider=True).target == "bigint"


def test_widening_rules() -> None:
    """Lossless widenings a database makes (docs/concepts/ods.md "Schema changes"), and what stays rejected."""
    assert resolve("p", "decimal(10,2)", "decimal(12,2)").promoted  # more digits
    assert resolve("p", "decimal(10,2)", "decimal(12,4)").target == "decimal(12,4)"  # more scale that fits
    lost = resolve("p", "decimal(10,2)", "decimal(11,4)")  # 7 integer digits for 8: cannot hold every value
    assert lost.target is None and "cannot hold every DECIMAL(10,2) value" in (lost.error or "")
    assert resolve("p", "decimal(12,4)", "decimal(10,2)").narrowing  # a scale (and digit) decrease the old type holds
    assert resolve("d", "date", "timestamp").target == "timestamp"
    zoned = resolve("d", "date", "timestamp", wall_clock=False)
    assert zoned.target is None and "not exact" in (zoned.error or "")
    assert resolve("d", "timestamp", "date").narrowing
    assert resolve("i", "int", "double").promoted and resolve("i", "bigint", "double").error
    assert resolve("s", "string", "int").error and resolve("s", "int", "decimal(12,2)").error


def test_what_hudi_changes_in_place() -> None:
    """Measured on Hudi 1.2.0 (docs/concepts/ods.md "Schema changes"): DATE -> TIMESTAMP only by a rewrite."""
    from framework.project.types import in_place, key_text_kept

    assert in_place("decimal(10,2)", "decimal(12,4)") and in_place("int", "bigint") and in_place("float", "double")
    assert in_place("tinyint", "int") and in_place("smallint", "int") and in_place("int", "double")
    assert not in_place("date", "timestamp") and not in_place("decimal(10,2)", "decimal(11,4)") and not in_place("bigint", "int")
    assert key_text_kept("int", "bigint") and key_text_kept("decimal(10,2)", "decimal(12,2)")
    assert not key_text_kept("decimal(10,2)", "decimal(12,4)") and not key_text_kept("float", "double")
    assert not key_text_kept("date", "timestamp")


def test_positions() -> None:
    w = parse_position("mysql-bin.000003:1234")
    assert w == "mysql:" + "3".zfill(10) + "1234".zfill(20)
    start, length, value = slice_of(w)
    assert (start, length) == (1, 30) and value.endswith("1234")
    assert parse_position("lsn:99").startswith("lsn:")
    assert parse_position("2020-01-01T00:00:00Z") == "ts:" + str(1577836800000).zfill(15)
    assert seq_at(w).startswith(value) and len(seq_at(w)) == 73
    with pytest.raises(LakeError, match="binlog position"):
        parse_position("yesterday")


def test_decoder_is_hashable_value() -> None:
    assert Decoder("plain", "int") == Decoder("plain", "int")


def test_types_hudi_stores_alike_are_no_change() -> None:
    """Hudi keeps SMALLINT and TINYINT as INT (Avro): a later process reads INT back, and the
    source's unchanged int16 column must not be called a narrowing (issue 40, item 1)."""
    for incoming in ("smallint", "tinyint", "short", "byte"):
        r = resolve("n", "int", incoming)
        assert (r.target, r.error, r.narrowing, r.promoted) == ("int", None, False, False), incoming
    assert resolve("n", "smallint", "tinyint").error is None
    assert resolve("n", "smallint", "int").promoted  # a real widening stays one
    assert resolve("n", "bigint", "smallint").narrowing  # and so does a real narrowing
    assert merge_batch_types("n", "int", ["smallint", "smallint"], keep_wider=False).target == "int"
