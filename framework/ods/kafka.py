"""Kafka as the ODS source: Spark Structured Streaming's Kafka connector.

Offsets live in the streaming checkpoint, like file names do for the file source; a replayed
micro-batch is recognised by the stream and batch ids in each table's commit (batch.py), so a
crash mid-batch and a restart give the tables of one clean run. Both topic layouts work without
configuration: events are routed by their `source` block, not by topic. `format: debezium-avro`
reads the Confluent wire format with a schema registry (framework/ods/avro.py).
"""

from __future__ import annotations

import os
import socket
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.errors import EnvironmentProblem
from framework.ods.avro import AvroDecoder
from framework.ods.registry import SchemaRegistry
from framework.project.config import Project
from models.config import KafkaSourceConfig

ENV_PREFIX = "LAKE_KAFKA_"


def env_options(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Kafka client options from `LAKE_KAFKA_<NAME>` variables (SASL/SSL settings, secrets)."""
    env = os.environ if environ is None else environ
    return {
        name[len(ENV_PREFIX):].lower().replace("_", "."): value
        for name, value in env.items()
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX)
    }


def reader_options(cfg: KafkaSourceConfig, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Options of Spark's Kafka source. Contains secrets: never print or store the result."""
    opts = {
        "kafka.bootstrap.servers": cfg.bootstrap_servers,
        "startingOffsets": cfg.starting_offsets,
        "failOnDataLoss": str(cfg.fail_on_data_loss).lower(),
        "includeHeaders": "false",
    }
    if cfg.topics:
        opts["subscribe"] = ",".join(cfg.topics)
    else:
        assert cfg.topic_pattern is not None
        opts["subscribePattern"] = cfg.topic_pattern
    if cfg.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(cfg.max_offsets_per_trigger)
    for k, v in {**cfg.options, **env_options(environ)}.items():
        opts[f"kafka.{k}"] = v
    return opts


def reachable(servers: str, timeout: float) -> str | None:
    """None when a TCP connection to one of the brokers succeeds, else the last error."""
    last = "no servers"
    for hp in servers.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except OSError as e:
            last = f"{hp.strip()}: {e.strerror or e}"
    return last


class KafkaSource:
    """Debezium envelopes from Kafka topics; one message per event, tombstones have no value."""

    def __init__(self, project: Project, cfg: KafkaSourceConfig) -> None:
        self.cfg = cfg
        self.project = project
        self.avro: AvroDecoder | None = None
        if cfg.format == "debezium-avro":
            assert cfg.schema_registry is not None  # the config model requires it
            self.avro = AvroDecoder(SchemaRegistry(cfg.schema_registry))

    def check(self) -> None:
        """Fail with a clear error when no broker (or, for Avro, no schema registry) answers within
        `connect_timeout_seconds`."""
        deadline = time.monotonic() + self.cfg.connect_timeout_seconds
        delay = 0.5
        while True:
            problem = reachable(self.cfg.bootstrap_servers, timeout=min(5.0, self.cfg.connect_timeout_seconds))
            if problem is None:
                break
            if time.monotonic() + delay > deadline:
                raise EnvironmentProblem(
                    f"no Kafka broker reachable at {self.cfg.bootstrap_servers} after "
                    f"{self.cfg.connect_timeout_seconds} s ({problem})",
                    fix="start the broker or fix ods.source.bootstrap_servers in lake.yaml "
                    "(ods.source.connect_timeout_seconds sets how long to retry)",
                )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        if self.avro is not None:  # a wrong or unreachable registry stops the run here, before the stream
            self.avro.registry.check(retry_seconds=self.cfg.connect_timeout_seconds)

    def stream(self, spark: SparkSession) -> DataFrame:
        return spark.readStream.format("kafka").options(**reader_options(self.cfg)).load()

    def messages(self, spark: SparkSession, batch: DataFrame, batch_id: int) -> DataFrame:
        """`loc` is topic/partition/offset; arrival orders a partition by offset (Debezium keys
        a table's events by primary key, so one row's events share a partition). Avro: decoded
        to the JSON path's messages, with `schema` and `problem` (framework/ods/avro.py)."""
        if self.avro is not None:
            batch = self.avro.decode(batch)
            text = [F.col("value"), F.col("msg_key"), F.col("schema"), F.col("problem")]
        else:
            text = [F.col("value").cast("string").alias("value"), F.col("key").cast("string").alias("msg_key")]
        return batch.select(
            *text,
            F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string")).alias("loc"),
            F.concat(
                F.lpad(F.lit(str(batch_id)), 12, "0"),
                F.lpad(F.col("partition").cast("string"), 6, "0"),
                F.lpad(F.col("offset").cast("string"), 20, "0"),
            ).alias("arrival"),
            F.col("topic").alias("origin"),
        )

    def release(self) -> None:
        """Free the Avro micro-batch's cached records (JSON: nothing cached)."""
        if self.avro is not None:
            self.avro.release()
