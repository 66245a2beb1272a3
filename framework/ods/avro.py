"""`format: debezium-avro`: Kafka messages in the Confluent wire format, decoded in Spark.

A message is the magic byte 0, the writer schema's id (4 bytes, big-endian) and the Avro binary
encoding, for keys and values alike. Per micro-batch the distinct ids are collected first (a batch
holds few), each id's writer schema comes from the registry (framework/ods/registry.py; fetched
once per id and process), and each id gets one Spark `from_avro` (the `spark-avro` artifact of
pyspark's version) over its own messages: no Python UDF, nothing leaves the JVM per row.

The join point with the JSON path is the envelope (framework/ods/avro_schema.py): `value` becomes
the JSON text JsonConverter would have written for the record (`to_json` of what `from_avro`
decoded with the logical types set aside) and `schema` the Kafka Connect schema block of its
writer schema, so parsing, classification, typing per schema version, ordering, deletes,
truncates, tombstones, control messages and the dead letter are the JSON path's own. A new
writer schema (a column added upstream) is a new id, hence a new schema block and version.

What cannot be decoded goes to the dead letter with the reason (`problem`), its bytes as base64
in `raw`: a message shorter than the header, a first byte that is not the magic byte, an id the
registry does not have, data its writer schema cannot read (truncated or corrupt). A value that
starts with `{` is JSON text and read as such: Debezium's schema history topic, which its
`topic_pattern` may include, is always JSON. A key that cannot be decoded only leaves `msg_key`
NULL (keys only name the record key of tables declared without `key:`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.ods.avro_schema import (
    AvroSchemaError,
    connect_schema,
    parse,
    plain_schema,
    record_fields,
)
from framework.ods.registry import SchemaRegistry

HEADER = 5
JSON_START = "7B"  # `{`: the first byte of a JSON text value
_TO_JSON = {"ignoreNullFields": "false"}  # JsonConverter writes every field, NULL ones too
_FROM_AVRO = {"mode": "PERMISSIVE"}  # unreadable data: NULL fields, not a failed job


@dataclass(frozen=True)
class Writer:
    """One schema id, ready for Spark: the schema without logical types, its top-level fields,
    its Connect schema block; or `problem`, why its messages cannot be decoded."""

    schema_id: int
    plain: str = ""
    fields: tuple[str, ...] = ()
    block: str = ""
    problem: str | None = None


def _sid(c: Column) -> Column:
    return F.conv(F.hex(F.substring(c, 2, 4)), 16, 10).cast("bigint")


def _wire(c: Column) -> Column:
    """The message is in the wire format (long enough, magic byte 0)."""
    return (F.octet_length(c) >= HEADER) & (F.hex(F.substring(c, 1, 1)) == "00")


class AvroDecoder:
    """Turns a micro-batch of Kafka records into the messages the JSON path reads (module docstring)."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self.writers: dict[int, Writer] = {}
        self._cached: DataFrame | None = None

    def _writer(self, sample: DataFrame, schema_id: int) -> Writer:
        """The id's writer, from the registry; an unknown id is asked again in a later batch."""
        if schema_id in self.writers:
            return self.writers[schema_id]
        text = self.registry.schema(schema_id)
        if text is None:
            return Writer(schema_id, problem=f"schema id {schema_id} is not in the schema registry at {self.registry.url}")
        try:
            parsed = parse(text)
            w = Writer(schema_id, plain_schema(parsed), tuple(record_fields(parsed)), connect_schema(parsed))
            sample.select(self._from_avro(F.col("value"), w)).schema  # noqa: B018 - Spark analyses the schema here
        except AvroSchemaError as e:
            w = Writer(schema_id, problem=f"writer schema id {schema_id} cannot be read: {e}")
        except Exception as e:  # Spark's analysis of the schema (py4j/AnalysisException)
            first = (str(e).strip().splitlines() or ["?"])[0][:300]
            w = Writer(schema_id, problem=f"writer schema id {schema_id} cannot be read by Spark's from_avro: {first}")
        if w.problem is None and not w.fields:
            w = Writer(schema_id, problem=f"writer schema id {schema_id} is not an Avro record (a Debezium message is)")
        self.writers[schema_id] = w
        return w

    @staticmethod
    def _from_avro(c: Column, w: Writer) -> Column:
        from pyspark.sql.avro.functions import from_avro

        return from_avro(F.substring(c, HEADER + 1, 1 << 30), w.plain, _FROM_AVRO)

    def decode(self, batch: DataFrame) -> DataFrame:
        """`batch`: Kafka records (key, value, topic, partition, offset). Returns them with `value`
        (text), `msg_key` (text), `schema` (the schema block, NULL for JSON text) and `problem`."""
        raw = batch.select("key", "value", "topic", "partition", "offset").persist(StorageLevel.MEMORY_AND_DISK)
        self._cached = raw
        pairs = raw.select(F.explode(F.array(
            F.when(_wire(F.col("value")), F.struct(F.lit("v").alias("side"), _sid(F.col("value")).alias("id"))),
            F.when(_wire(F.col("key")), F.struct(F.lit("k").alias("side"), _sid(F.col("key")).alias("id"))))).alias("p")
        ).where(F.col("p").isNotNull()).distinct().collect()
        empty = raw.limit(0)
        writers = {int(r["p"]["id"]): self._writer(empty, int(r["p"]["id"])) for r in pairs if r["p"]["side"] == "v"}
        keys = {int(r["p"]["id"]): self._writer(empty, int(r["p"]["id"])) for r in pairs if r["p"]["side"] == "k"}
        keys = {k: w for k, w in keys.items() if w.problem is None}
        # One from_avro per id, each on its own messages; a projection of its own, so the
        # checks and to_json below read its result instead of decoding again.
        staged = raw.select(
            "*",
            *[F.when(_wire(F.col("value")) & (_sid(F.col("value")) == k), self._from_avro(F.col("value"), w)).alias(f"_lake_v{k}")
              for k, w in writers.items() if w.problem is None],
            *[F.when(_wire(F.col("key")) & (_sid(F.col("key")) == k), self._from_avro(F.col("key"), w)).alias(f"_lake_k{k}") for k, w in keys.items()],
        )
        value, schema, problem = self._value(writers)
        key: Column = F.lit(None).cast("string")
        for k, w in keys.items():
            dec = F.col(f"_lake_k{k}")
            key = F.when(_readable(dec, w), F.to_json(dec, _TO_JSON)).otherwise(key)
        key = F.when(F.hex(F.substring(F.col("key"), 1, 1)) == JSON_START, F.col("key").cast("string")).otherwise(key)
        return staged.select(value.alias("value"), key.alias("msg_key"), schema.alias("schema"), problem.alias("problem"),
                             "topic", "partition", "offset")

    def _value(self, writers: dict[int, Writer]) -> tuple[Column, Column, Column]:
        """The value's text, schema block and problem (module docstring)."""
        v = F.col("value")
        sid = _sid(v)
        text: Column = F.concat(F.lit("avro-base64:"), F.base64(v))  # what the dead letter keeps of an unreadable message
        schema: Column = F.lit(None).cast("string")
        problem: Column = F.when(~_wire(v), F.when(
            F.octet_length(v) < HEADER,
            F.concat(F.lit("Avro message of "), F.octet_length(v).cast("string"), F.lit(" bytes is shorter than the 5-byte wire-format header")),
        ).otherwise(F.concat(F.lit("not in the Confluent wire format: first byte 0x"), F.hex(F.substring(v, 1, 1)),
                             F.lit(", expected the magic byte 0x00"))))
        for k, w in writers.items():
            mine = _wire(v) & (sid == k)
            if w.problem is not None:
                problem = F.when(mine, F.lit(w.problem)).otherwise(problem)
                continue
            dec = F.col(f"_lake_v{k}")
            ok = _readable(dec, w)
            text = F.when(mine & ok, F.to_json(dec, _TO_JSON)).otherwise(text)
            schema = F.when(mine & ok, F.lit(w.block)).otherwise(schema)
            problem = F.when(mine & ~ok, F.lit(f"Avro data does not match its writer schema (id {k}): truncated or corrupt")).otherwise(problem)
        is_json = F.hex(F.substring(v, 1, 1)) == JSON_START
        return (F.when(v.isNull(), F.lit(None).cast("string")).when(is_json, v.cast("string")).otherwise(text),
                F.when(v.isNull() | is_json, F.lit(None).cast("string")).otherwise(schema),
                F.when(v.isNull() | is_json, F.lit(None).cast("string")).otherwise(problem))

    def release(self) -> None:
        if self._cached is not None:
            self._cached.unpersist()
            self._cached = None


def _readable(dec: Column, w: Writer) -> Column:
    """`from_avro` in PERMISSIVE mode gives a record of NULL fields for data it cannot read; a
    Debezium record always has a non-NULL field (`op`, `ts_ms`, a key column)."""
    any_field: Column = F.lit(False)
    for f in w.fields:
        any_field = any_field | dec[f].isNotNull()
    return dec.isNotNull() & any_field
