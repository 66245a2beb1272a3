"""The first steps of an ODS micro-batch, over all tables at once: parse every Debezium envelope
(once), then classify each message (ok / tombstone / control / dead with a reason) against the tables.

`control`: the messages a real Debezium connector writes besides row changes, when lake subscribes
to its other topics too (a `topic_pattern` such as `dbserver1.*` does): schema-change events (the
`<prefix>` topic) and schema-history records (`ddl`), transaction metadata (`status` BEGIN/END
with an `id`; provide.transaction.metadata), heartbeats (`ts_ms` alone; heartbeat.interval.ms) and
the change events of the connector's signal table (`reconcile.sources.*.signal`).
They carry no row, so they are counted and skipped. Row events carry the column types lake needs
in their own schema block, so the DDL is not needed either.

Input messages have `value` (the text), `loc` (where it came from), `arrival` (a sortable text of
arrival order), `origin` and, from Kafka, `msg_key`; from Avro also `schema` (the writer schema's
Kafka Connect schema block, beside a bare envelope) and `problem` (why it could not be decoded).
Everything stays in the JVM (no Python UDFs): row images are parsed as map<string,string> and
decoded per table later (prepare.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.ods import decode as D
from framework.ods.routing import routing_id
from framework.ods.unavailable import DEFAULT_PLACEHOLDER, is_placeholder
from models.config import OdsTable

HEARTBEAT = "io.debezium.connector.common.Heartbeat"


def _control(has_payload: Column, schema: Column) -> Column:
    """Which Debezium control message a message without `op` is (module docstring), else NULL."""
    body = F.when(has_payload, F.col("env.payload")).otherwise(F.col("value"))
    status = F.get_json_object(body, "$.status")
    kind = (
        F.when(F.get_json_object(body, "$.ddl").isNotNull(), F.lit("schema change"))
        .when(status.isin("BEGIN", "END") & F.get_json_object(body, "$.id").isNotNull(), F.lit("transaction"))
        .when((F.get_json_object(schema, "$.name") == HEARTBEAT)
              | (F.json_object_keys(body) == F.array(F.lit("ts_ms"))), F.lit("heartbeat"))
    )
    parsed = F.col("env._corrupt").isNull() & F.col("p._corrupt").isNull()
    return F.when(F.col("p.op").isNull() & parsed & F.col("value").isNotNull(), kind)


# Debezium's ExtractNewRecordState (`transforms=unwrap`) writes the row alone, its `add.fields`
# as `__op`, `__lsn`, ... and `delete.handling.mode=rewrite` a `__deleted` flag: no before-image,
# no source block. lake needs the envelope, so such records are dead-lettered with this reason.
FLATTENED = ("a flattened record (Debezium's ExtractNewRecordState: `__op`/`__deleted` fields, no envelope): lake needs "
             "the whole change event (op, before, after, source position) to order and delete; remove the "
             "io.debezium.transforms.ExtractNewRecordState transform (`transforms=unwrap`) from the connector and let it "
             "snapshot again (these records cannot be replayed as they are)")


def _flattened(has_payload: Column) -> Column:
    """Whether a message without `op` is a flattened record (NULL for a message with `op`, which
    `classify` never asks about): each lookup parses the message's text again, so a row event,
    nearly every message, is not looked into."""
    body = F.when(has_payload, F.col("env.payload")).otherwise(F.col("value"))
    flat = F.get_json_object(body, "$.__op").isNotNull() | F.get_json_object(body, "$.__deleted").isNotNull()
    return F.when(F.col("p.op").isNull(), flat)


def envelopes(msgs: DataFrame, declared: Collection[str], signals: Collection[str] = ()) -> DataFrame:
    """One row per message: op, images, schema block, routing id (`tbl`), source positions and
    times, parse errors, whether it is a tombstone or a Debezium control message (`control`),
    and the row image as a map (`img`). `signals`: the routing ids of Debezium signal tables
    (`reconcile.sources.*.signal`), whose change events are control messages too."""
    env = F.from_json(F.col("value"), D.ENVELOPE, D.JSON_OPTS)
    df = msgs.withColumn("env", env)
    has_payload = F.col("env.payload").isNotNull()
    pay = F.from_json(F.col("env.payload"), D.PAYLOAD, D.JSON_OPTS)
    bare = F.struct(F.col("env.before").alias("before"), F.col("env.after").alias("after"), F.col("env.op").alias("op"),
                    F.col("env.ts_ms").alias("ts_ms"), F.col("env.source").alias("source"), F.lit(None).cast("string").alias("_corrupt"))
    df = df.withColumn("p", F.when(has_payload, pay).otherwise(bare))
    df = df.withColumn("src", F.from_json(F.col("p.source"), D.SOURCE))
    pos_seq = D.position_seq(F.col("src"), F.col("p.ts_ms"))
    # Avro (framework/ods/avro.py): a bare envelope with its writer schema's block in `schema`
    # (kept as `msg_schema` for the dead letter), and `problem`, why a message was not decoded.
    given = "schema" in msgs.columns
    schema = F.coalesce(F.col("schema"), F.when(has_payload, F.col("env.schema"))) if given else F.when(has_payload, F.col("env.schema"))
    tbl = routing_id(F.col("src"), declared)
    extra = [c for c in ("msg_key", "problem") if c in msgs.columns] + ([F.col("schema").alias("msg_schema")] if given else [])
    df = df.select(
        "value", "loc", "arrival", "origin", *extra,
        F.col("src"),
        F.col("p.op").alias("op"),
        # Whether the images are there, not their text: the row image is kept as `img` (the
        # message is in `value`), so the batch's cache holds the image text once less.
        F.col("p.before").isNotNull().alias("has_before"),
        F.col("p.after").isNotNull().alias("has_after"),
        F.from_json(F.when(F.col("p.op") == "d", F.col("p.before")).otherwise(F.col("p.after")), D.IMAGE_MAP).alias("img"),  # type: ignore[arg-type]
        schema.alias("schema_raw"),
        tbl.alias("tbl"),
        F.coalesce(F.col("src.ts_ms"), F.col("p.ts_ms")).alias("ts_raw"),
        pos_seq.alias("pos_seq"),
        D.source_server(F.col("src")).alias("server"),
        D.binlog_position(pos_seq, F.col("src")).alias("binlog_pos"),
        F.col("env._corrupt").alias("corrupt"),
        F.col("p._corrupt").alias("pcorrupt"),
        (F.when(tbl.isin(list(signals)), F.lit("signal")).otherwise(_control(has_payload, schema)) if signals
         else _control(has_payload, schema)).alias("control"),
        _flattened(has_payload).alias("flattened"),
        (
            F.col("value").isNull()  # a Kafka tombstone (Debezium's after a delete)
            | (F.trim(F.col("value")) == "null")
            | (F.col("env.schema").isNotNull() & F.col("env.payload").isNull() & F.col("env.op").isNull()
               & F.col("env._corrupt").isNull())
        ).alias("tombstone"),
    )
    # Years 0001-9999 only: beyond, Spark overflows or Python cannot hold the time (dead letter).
    return (df.withColumn("schema_hash", F.md5(F.col("schema_raw")))
            .withColumn("_event_ts", D.millis_to_timestamp(F.col("ts_raw"))))


def classify(df: DataFrame, tables: Iterable[OdsTable], declared: Collection[str]) -> DataFrame:
    """`status` (ok / tombstone / control / dead) and `reason` of every message, and `ord_missing`: a delete
    whose before-image lacks its table's `ordering:` columns (see prepare.ordering_prefix)."""
    tables = list(tables)
    known = F.col("tbl").isin(list(declared)) if declared else F.lit(False)
    undecoded = F.col("problem") if "problem" in df.columns else F.lit(None).cast("string")
    reason = (
        F.when(undecoded.isNotNull(), undecoded)
        .when(F.col("value").startswith("lake: line too long ("), F.regexp_extract("value", "^lake: ([^;]*)", 1))
        .when(F.col("corrupt").isNotNull() | F.col("pcorrupt").isNotNull(), F.lit("malformed JSON"))
        .when(F.col("op").isNull() & F.col("flattened"), F.lit(FLATTENED))
        .when(F.col("op").isNull(), F.lit("not a Debezium envelope: no `op` field"))
        .when(~F.col("op").isin("c", "u", "d", "r", "t"), F.concat(F.lit("unknown op '"), F.col("op"), F.lit("'")))
        .when(F.col("tbl") == "", F.lit("no source.db / source.table in the envelope"))
        .when(~known, F.concat(F.lit("table "), F.col("tbl"), F.lit(" is not declared in layers/ods/")))
        .when(F.col("op").isin("c", "u", "r") & ~F.col("has_after"), F.concat(F.lit("op '"), F.col("op"), F.lit("' without after-image")))
        .when((F.col("op") == "d") & ~F.col("has_before"), F.lit("op 'd' without before-image"))
        .when(F.col("ts_raw").isNotNull() & F.col("_event_ts").isNull(),
              F.concat(F.lit("source.ts_ms "), F.col("ts_raw").cast("string"), F.lit(" is not a time in the years 0001-9999")))
        .when((F.col("op") != "t") & F.col("img").isNull(), F.lit("row image is not a JSON object"))
        .when(F.col("op") != "t", _key_problem(tables))
    )
    ord_missing: Column = F.lit(False)
    for t in tables:
        if t.ordering:
            lacks = reduce(lambda a, b: a | b, [F.col("img").getItem(c).isNull() for c in t.ordering])
            lacks = F.coalesce(lacks, F.lit(True)) | key_only(t)
            ord_missing = F.when(F.col("tbl") == t.source, (F.col("op") == "d") & lacks).otherwise(ord_missing)
    status = (F.when(F.col("tombstone"), F.lit("tombstone")).when(F.col("control").isNotNull(), F.lit("control"))
              .when(reason.isNotNull(), F.lit("dead")).otherwise(F.lit("ok")))
    live = ~F.col("tombstone") & F.col("control").isNull()
    return df.withColumn("ord_missing", ord_missing).withColumn("reason", F.when(live, reason)).withColumn("status", status)


# The values Debezium's PostgreSQL connector puts in a delete's before-image for the NOT NULL
# columns REPLICA IDENTITY DEFAULT did not log, as JSON text: "", 0, 0.0, false, a decimal 0
# (base64 of its unscaled bytes), the epoch as a ZonedTimestamp, an empty JSON object or array.
FILLED_IN = ("", "0", "0.0", "false", "AA==", "1970-01-01T00:00:00Z", "{}", "[]")


def key_only(t: OdsTable) -> Column:
    """A PostgreSQL delete whose before-image holds only its key: every other column NULL or the
    type default Debezium fills in (REPLICA IDENTITY DEFAULT logs the key alone). Its other
    values were made up by the connector, so they cannot order it (prepare.ordering_prefix); a
    real row that holds only defaults is ordered the same safe way (by position against its key)."""
    others = F.map_filter(F.col("img"), lambda k, _v: ~k.isin(*t.key)) if t.key else F.col("img")
    made_up = F.forall(F.map_values(others), lambda v: v.isNull() | v.isin(*FILLED_IN))
    return (F.col("src.connector") == "postgresql") & F.coalesce(made_up, F.lit(False))


def _key_problem(tables: list[OdsTable]) -> Column:
    """Why an event's row image cannot give its table's record key, or NULL."""
    problem: Column = F.lit(None).cast("string")
    for t in tables:
        mine = F.col("tbl") == t.source
        if not t.key:
            problem = F.when(mine, F.lit("no record key: the table YAML declares no `key` and the Kafka message has no key")).otherwise(problem)
            continue
        missing = reduce(lambda a, b: a | b, [F.col("img").getItem(k).isNull() for k in t.key])
        # Hudi refuses an empty record key (a single empty key column, or every column empty).
        empty = reduce(lambda a, b: a & b, [F.col("img").getItem(k) == "" for k in t.key])
        problem = (F.when(mine & missing, F.lit(f"missing or NULL key column ({', '.join(t.key)})"))
                   .when(mine & empty, F.lit(f"empty key ({', '.join(t.key)}): Hudi cannot store an empty record key"))
                   .otherwise(problem))
    return problem


def summarize(parsed: DataFrame, placeholder: str = DEFAULT_PLACEHOLDER) -> list[Any]:
    """One small aggregation tells which tables, schema versions and columns the batch has: a row
    per (status, reason, table, schema version, truncate or not); `unavailable`: its events with a
    Debezium placeholder for an unchanged TOASTed value (framework/ods/unavailable.py)."""
    ok = F.col("status") == "ok"
    marked = F.exists(F.map_values("img"), lambda v: is_placeholder(v, placeholder))
    is_t = F.col("op") == "t"
    return (
        parsed.groupBy("status", "reason", "tbl", "schema_hash", is_t.alias("is_truncate"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.first("schema_raw", ignorenulls=True).alias("schema_raw"),
            F.min("arrival").alias("first_arrival"),
            F.max("pos_seq").alias("pos_max"),  # all before a bootstrap hand-off: not judged (columns.py)
            F.array_distinct(F.flatten(F.collect_set(F.when(ok & F.col("schema_raw").isNull(), F.map_keys("img"))))).alias("keys"),
            F.sum(F.col("ord_missing").cast("int")).alias("ord_missing"),
            F.sum(F.when(ok & marked, 1).otherwise(0)).alias("unavailable"),
            # The source position of the table's last truncate in this batch (position, then arrival).
            F.max(F.when(is_t, F.concat(F.col("pos_seq"), F.col("arrival")))).alias("truncate_at"),
            F.max(F.when(is_t, F.col("_event_ts"))).alias("truncate_ts"),  # its source time (history tables' validity)
            F.min("_event_ts").alias("event_ts_min"),
            F.max("_event_ts").alias("event_ts_max"),
        )
        .collect()
    )
