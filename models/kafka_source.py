"""The Kafka source of ODS (`ods.source` with `kind: kafka` in lake.yaml)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR
from models.registry import SchemaRegistryConfig


class KafkaSourceConfig(StrictModel):
    """Kafka topics carrying Debezium envelopes: one topic per table (`server.db.table`) or all
    tables of a database in one topic — events are routed by their `source` block either way.

    Security settings never go in YAML: every environment variable `LAKE_KAFKA_<NAME>` becomes
    the Kafka client option `<name>` (lower case, `_` -> `.`), e.g. `LAKE_KAFKA_SASL_JAAS_CONFIG`
    -> `sasl.jaas.config`. They are passed to Spark and never logged or stored.
    """

    kind: Literal["kafka"] = Field(description="Kafka topics.")
    bootstrap_servers: str = Field(min_length=1, description="`host:port` of the brokers, comma-separated.")
    topics: list[str] | None = Field(default=None, description="The topics to read; give this or `topic_pattern`.")
    topic_pattern: str | None = Field(default=None, description="A Java regex of the topics to read, e.g. `dbserver1\\.inventory\\..*`.")
    starting_offsets: Literal["earliest", "latest"] = Field(default="earliest", description="Where the first start reads from; "
                                                            "then the streaming checkpoint's offsets.")
    format: Literal["debezium-json", "debezium-avro"] = Field(default="debezium-json", description="`debezium-json`: JsonConverter "
                                                                "values, with or without schemas; `debezium-avro`: the Confluent wire format.")
    schema_registry: SchemaRegistryConfig | None = Field(default=None, description="Where `debezium-avro` finds writer schemas.")
    max_offsets_per_trigger: int | None = Field(default=None, ge=1, description="Cap a micro-batch at this many messages.")
    fail_on_data_loss: bool = Field(default=True, description="Fail when retention deleted offsets before lake read them (Kafka's default).")
    connect_timeout_seconds: int = Field(default=30, ge=1, description="How long `lake ingest` retries reaching the brokers "
                                         "before it stops with an error.")
    options: dict[str, str] = Field(default_factory=dict, description="Other, non-secret Kafka consumer options, e.g. `{client.id: lake}`; "
                                    "secrets go in `LAKE_KAFKA_<NAME>` environment variables.")

    @model_validator(mode="after")
    def _one_of_topics(self) -> KafkaSourceConfig:
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError("give exactly one of `topics: [...]` or `topic_pattern: ...`")
        if (self.format == "debezium-avro") != (self.schema_registry is not None):
            raise ValueError(f"`format: debezium-avro` needs the schema registry the writer schemas come from{FIX_SEPARATOR}add "
                             "`schema_registry: {url: http://registry:8081}` under ods.source" if self.schema_registry is None else
                             f"`schema_registry` is only read with `format: debezium-avro`{FIX_SEPARATOR}set it, or remove `schema_registry`")
        return self

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if re.search(r"password|jaas|secret|token|\.key$", k, re.IGNORECASE):
                env = "LAKE_KAFKA_" + k.upper().replace(".", "_")
                raise ValueError(f"{k!r} is a secret: set it in the environment variable {env} instead of lake.yaml")
        return {str(k): str(val) for k, val in v.items()}

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, v: str) -> str:
        for hp in v.split(","):
            host, _, port = hp.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"{hp.strip()!r} is not host:port; give e.g. `localhost:9092` (several: comma-separated)")
        return v
