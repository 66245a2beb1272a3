"""`format: debezium-avro` without Spark: its configuration, registry credentials, and the Avro
writer schema -> Kafka Connect schema block mapping that types the columns (framework/ods/avro_schema.py).

The expected column types are Debezium's documented ones for MySQL/MariaDB (decimal.handling.mode
precise, time.precision.mode adaptive_time_microseconds), written out here, not derived from lake."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from framework.errors import ConfigError, EnvironmentProblem
from framework.ods.avro_refs import inline
from framework.ods.avro_schema import AvroSchemaError, connect_schema, plain_schema, record_fields
from framework.ods.envelope import row_columns
from framework.ods.registry import auth_header
from framework.project.config import load_project
from models.registry import SchemaRegistryConfig

# The shape the Avro converters give a Debezium MariaDB envelope: `before` defines the Value
# record, `after` refers to it by name; optional fields are ["null", T] unions.
VALUE = {
    "type": "record", "name": "Envelope", "namespace": "avro.t_avro.types", "connect.name": "avro.t_avro.types.Envelope",
    "fields": [
        {"name": "before", "default": None, "type": ["null", {
            "type": "record", "name": "Value", "connect.name": "avro.t_avro.types.Value", "fields": [
                {"name": "id", "type": "int"},
                {"name": "d", "default": None, "type": ["null", {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}]},
                {"name": "dt6", "default": None, "type": ["null", {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}]},
                {"name": "amount", "default": None, "type": ["null", {
                    "type": "bytes", "scale": 4, "precision": 20, "connect.version": 1, "logicalType": "decimal",
                    "connect.parameters": {"scale": "4", "connect.decimal.precision": "20"}, "connect.name": "org.apache.kafka.connect.data.Decimal"}]},
                {"name": "small", "default": None, "type": ["null", {"type": "int", "connect.type": "int16"}]},
                {"name": "tiny", "default": None, "type": ["null", {"type": "int", "connect.type": "int8"}]},
                {"name": "big", "default": None, "type": ["null", "long"]},
                {"name": "ratio", "default": None, "type": ["null", "double"]},
                {"name": "bin", "default": None, "type": ["null", "bytes"]},
                {"name": "txt", "default": None, "type": ["null", "string"]},
                {"name": "born", "default": None, "type": ["null", {"type": "int", "logicalType": "date"}]},
                {"name": "seen", "default": None, "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
                {"name": "price", "default": None, "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}]},
            ]}]},
        {"name": "after", "default": None, "type": ["null", "Value"]},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "default": None, "type": ["null", "long"]},
    ],
}


def test_a_writer_schema_types_the_columns_as_debeziums_json_schema_block_would() -> None:
    cols = {c.name: (c.decoder.kind, c.decoder.spark_type) for c in row_columns(connect_schema(VALUE))}
    assert cols == {
        "id": ("plain", "int"),
        "d": ("date_days", "date"),
        "dt6": ("ts_us", "timestamp"),
        "amount": ("decimal_b64", "decimal(20,4)"),
        "small": ("plain", "smallint"),
        "tiny": ("plain", "tinyint"),
        "big": ("plain", "bigint"),
        "ratio": ("plain", "double"),
        "bin": ("bytes_b64", "binary"),
        "txt": ("plain", "string"),
        # Plain Avro logical types (no connect.name): their Kafka Connect equivalents.
        "born": ("date_days", "date"),
        "seen": ("ts_ms", "timestamp"),
        "price": ("decimal_b64", "decimal(8,2)"),
    }
    block = json.loads(connect_schema(VALUE))
    assert block["name"] == "avro.t_avro.types.Envelope" and [f["field"] for f in block["fields"]] == ["before", "after", "op", "ts_ms"]
    assert block["fields"][0]["optional"] and not block["fields"][2]["optional"]


def test_the_reader_schema_keeps_the_encoding_and_drops_logical_types() -> None:
    plain = json.loads(plain_schema(VALUE))
    assert "logicalType" not in json.dumps(plain)
    amount = plain["fields"][0]["type"][1]["fields"][3]["type"][1]
    assert amount["type"] == "bytes" and amount["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    assert "logicalType" in json.dumps(VALUE)  # the input is left as it was
    assert record_fields(VALUE) == ["before", "after", "op", "ts_ms"] and record_fields({"type": "string"}) == []


def test_an_unknown_named_type_is_an_error() -> None:
    with pytest.raises(AvroSchemaError, match="unknown type 'Nope'"):
        connect_schema({"type": "record", "name": "E", "fields": [{"name": "after", "type": ["null", "Nope"]}]})


def _lake(tmp_path: Path, source: str) -> Path:
    (tmp_path / "lake.yaml").write_text("name: t\nods:\n  source:\n    kind: kafka\n    bootstrap_servers: 'h:9092'\n    topics: [a]\n" + source)
    return tmp_path


def test_configuration_errors_name_the_file_the_field_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_project(_lake(tmp_path, "    format: debezium-avro\n"))
    assert "lake.yaml" in str(e.value) and "schema_registry: {url:" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_project(_lake(tmp_path, "    schema_registry: {url: 'http://r:8081'}\n"))
    assert "only read with `format: debezium-avro`" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_project(_lake(tmp_path, "    format: debezium-avro\n    schema_registry: {url: 'http://u:pw@r:8081'}\n"))
    assert "schema_registry.url" in str(e.value) and "basic_auth: ${VAR}" in str(e.value) and "pw" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_project(_lake(tmp_path, "    format: debezium-avro\n    schema_registry: {url: 'r:8081'}\n"))
    assert "not an http(s) URL" in str(e.value)


def test_credentials_come_from_the_environment_and_are_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REG_AUTH", "lake:s3cret")
    project = load_project(_lake(tmp_path, "    format: debezium-avro\n    schema_registry: {url: 'http://r:8081/', basic_auth: '${REG_AUTH}'}\n"))
    cfg = project.config.ods.source.schema_registry  # type: ignore[union-attr]
    assert cfg is not None and cfg.url == "http://r:8081"
    assert "s3cret" not in repr(cfg) and "s3cret" not in cfg.model_dump_json()
    assert auth_header(cfg, {}) == "Basic " + base64.b64encode(b"lake:s3cret").decode()
    bare = SchemaRegistryConfig(url="http://r:8081")
    assert auth_header(bare, {}) is None
    assert auth_header(bare, {"LAKE_SCHEMA_REGISTRY_BEARER_TOKEN": "tok"}) == "Bearer tok"
    assert auth_header(SchemaRegistryConfig(url="http://r", basic_auth_env="MINE"), {"MINE": "a:b"}) == "Basic " + base64.b64encode(b"a:b").decode()
    with pytest.raises(EnvironmentProblem, match="LAKE_SCHEMA_REGISTRY_BASIC_AUTH is not `user:password`"):
        auth_header(bare, {"LAKE_SCHEMA_REGISTRY_BASIC_AUTH": "no-colon"})


def test_referenced_types_are_defined_at_their_first_use() -> None:
    """A writer schema naming a type kept as another subject (Debezium's `Source`, shared by every
    table of a connector) becomes one self-contained schema: the definition at the first use, by
    full name or by a short name in the same namespace, a name at later uses."""
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.mariadb",
              "fields": [{"name": "file", "type": "string"}, {"name": "pos", "type": "long"}]}
    value = {"type": "record", "name": "Envelope", "namespace": "shop.t", "fields": [
        {"name": "source", "type": "io.debezium.connector.mariadb.Source"},
        {"name": "again", "type": ["null", "io.debezium.connector.mariadb.Source"], "default": None},
        {"name": "op", "type": "string"}]}
    out = json.loads(inline(json.dumps(value), {"io.debezium.connector.mariadb.Source": source}))
    assert out["fields"][0]["type"] == source and out["fields"][1]["type"] == ["null", "io.debezium.connector.mariadb.Source"]
    short = {"type": "record", "name": "Envelope", "namespace": "io.debezium.connector.mariadb",
             "fields": [{"name": "source", "type": {"type": "array", "items": "Source"}}]}
    assert json.loads(inline(json.dumps(short), {"io.debezium.connector.mariadb.Source": source}))["fields"][0]["type"]["items"] == source
    assert inline(json.dumps(value), {}) == json.dumps(value)
    plain_schema(inline(json.dumps(value), {"io.debezium.connector.mariadb.Source": source}))  # parses: every name defined
