"""Debezium envelope schemas (Kafka Connect JsonConverter, schemas.enable=true) → column types.

Pure logic, no Spark: given the `schema` block of an event, say for each column of the row image
which Spark SQL type it lands as and how its JSON value is decoded (:class:`Decoder`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Kafka Connect primitive → Spark SQL type.
_PRIMITIVE = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
}

# Debezium / Kafka Connect logical types: name → (decoder kind, Spark type).
_LOGICAL = {
    "io.debezium.time.Date": ("date_days", "date"),
    "org.apache.kafka.connect.data.Date": ("date_days", "date"),
    "io.debezium.time.Time": ("time_ms", "string"),
    "org.apache.kafka.connect.data.Time": ("time_ms", "string"),
    "io.debezium.time.MicroTime": ("time_us", "string"),
    "io.debezium.time.NanoTime": ("time_ns", "string"),
    "io.debezium.time.ZonedTime": ("plain", "string"),
    "io.debezium.time.Timestamp": ("ts_ms", "timestamp"),
    "org.apache.kafka.connect.data.Timestamp": ("ts_ms", "timestamp"),
    "io.debezium.time.MicroTimestamp": ("ts_us", "timestamp"),
    "io.debezium.time.NanoTimestamp": ("ts_ns", "timestamp"),
    "io.debezium.time.ZonedTimestamp": ("ts_iso", "timestamp"),
    "io.debezium.time.Year": ("plain", "int"),
    "io.debezium.data.Json": ("plain", "string"),
    "io.debezium.data.Enum": ("plain", "string"),
    "io.debezium.data.EnumSet": ("plain", "string"),
    "io.debezium.data.Uuid": ("plain", "string"),
    "io.debezium.data.Xml": ("plain", "string"),
    "io.debezium.data.Bits": ("bytes_b64", "binary"),
}

DECIMAL = "org.apache.kafka.connect.data.Decimal"


@dataclass(frozen=True)
class Decoder:
    """How one column's JSON text becomes a typed value.

    kind: plain (cast the text), decimal_b64 (base64 big-endian two's-complement unscaled value),
    date_days, time_ms/us/ns (→ 'HH:MM:SS.ffffff' text), ts_ms/us/ns (epoch → timestamp),
    ts_iso (ISO-8601 text → timestamp), bytes_b64 (base64 → binary), json (nested value kept as
    JSON text).
    """

    kind: str
    spark_type: str
    scale: int = 0


@dataclass(frozen=True)
class Column:
    name: str
    decoder: Decoder
    optional: bool = True


class SchemaBlockError(ValueError):
    """The `schema` block is not a Kafka Connect envelope schema we can read."""


def column_for(field: dict[str, Any]) -> Column:
    """Map one Kafka Connect field schema to a column."""
    name = field.get("field")
    if not isinstance(name, str):
        raise SchemaBlockError("a field of the row schema has no `field` name")
    typ = field.get("type")
    logical = field.get("name")
    optional = bool(field.get("optional", True))
    if logical == DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        precision = max(1, min(precision, 38))
        return Column(name, Decoder("decimal_b64", f"decimal({precision},{scale})", scale), optional)
    if logical == "io.debezium.data.VariableScaleDecimal":
        return Column(name, Decoder("json", "string"), optional)
    if isinstance(logical, str) and logical in _LOGICAL:
        kind, spark_type = _LOGICAL[logical]
        return Column(name, Decoder(kind, spark_type), optional)
    if typ in ("struct", "array", "map"):
        return Column(name, Decoder("json", "string"), optional)
    if typ == "bytes":
        return Column(name, Decoder("bytes_b64", "binary"), optional)
    if isinstance(typ, str) and typ in _PRIMITIVE:
        return Column(name, Decoder("plain", _PRIMITIVE[typ]), optional)
    raise SchemaBlockError(f"field {name!r} has unsupported type {typ!r}")


def row_columns(schema: dict[str, Any] | str) -> list[Column]:
    """Columns of the row image (`after`, else `before`) described by an envelope `schema` block."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaBlockError(f"schema block is not JSON: {e.msg}") from e
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise SchemaBlockError("schema block is not a struct")
    images = {f.get("field"): f for f in schema.get("fields", []) if isinstance(f, dict)}
    image = images.get("after") or images.get("before")
    if image is None:
        raise SchemaBlockError("schema block has neither an `after` nor a `before` struct")
    return [column_for(f) for f in image.get("fields", [])]


def infer_json_type(values: list[Any]) -> str:
    """Spark type for a column of a schema-less envelope, from sample JSON values (not None)."""
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("boolean")
        elif isinstance(v, int):
            kinds.add("bigint")
        elif isinstance(v, float):
            kinds.add("double")
        elif isinstance(v, str):
            kinds.add("string")
        else:
            kinds.add("json")
    if not kinds:
        return "string"
    if kinds == {"boolean"}:
        return "boolean"
    if kinds <= {"bigint"}:
        return "bigint"
    if kinds <= {"bigint", "double"}:
        return "double"
    return "string"


def decoder_for_sql_type(spark_type: str) -> Decoder:
    """Decoder for a declared or inferred Spark type of a schema-less column."""
    t = spark_type.lower().replace(" ", "")
    if t == "json":
        return Decoder("json", "string")
    if t.startswith("decimal"):
        return Decoder("plain", t)
    return Decoder("plain", {"integer": "int"}.get(t, t))
