"""One ODS micro-batch: parse Debezium envelopes, route by source table, upsert every Hudi table.

Input is a DataFrame of messages with columns `value` (the message text), `loc` (where it came
from: `file:line` or `topic/partition/offset`), `arrival` (a sortable text of arrival order) and
`origin` (file or topic, for the dead letter). The steps:

1. parse the envelope once for all tables and classify each message (ok / tombstone / dead with a
   reason); one small aggregation tells which tables, schema versions and columns the batch has;
2. per table: resolve column types (schema block, table YAML, existing table, inference), decode
   the row image, compute the ordering sequence, and upsert with `_deleted` soft deletes;
3. write bad messages to the dead-letter table.

Exactly once: each table's commit records the stream id and batch id. A replayed batch (after a
crash) skips the tables that already committed it, so a rerun leaves the same tables as one run.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import reduce
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from framework import hudi
from framework.config import Project
from framework.errors import QualityGateError
from framework.faults import failpoint
from framework.ods import decode as D
from framework.ods.envelope import (
    Decoder,
    SchemaBlockError,
    decoder_for_sql_type,
    infer_json_type,
    row_columns,
)
from framework.ods.evolution import merge_batch_types, normalize
from framework.ods.gate import BatchBlocked, check_table
from framework.ods.routing import auto_table_name, routing_id, undeclared_parts
from framework.ods.tablecheck import table_config_problem
from framework.paths import Layout
from models.config import OdsTable
from models.records import BatchResult, TableBatchResult

log = logging.getLogger(__name__)

META_COLUMNS = ["_op", "_event_ts", "_seq", "_ingested_at", "_deleted", "_source"]
DEAD_LETTER_KEY = ["loc"]


@dataclass
class Prepared:
    """One table's share of a micro-batch, decoded and sequenced, not yet committed."""

    table: OdsTable
    result: TableBatchResult
    rows: DataFrame | None = None  # what to upsert (deletes as `_deleted` rows); None: nothing
    target: dict[str, str] = field(default_factory=dict)  # column types after this batch
    dead: list[DataFrame] = field(default_factory=list)  # events to dead-letter, with `reason`
    dead_reasons: dict[str, int] = field(default_factory=dict)
    high_water: HighWater | None = None  # the table's after this commit


class HighWater(BaseModel):
    """The greatest binlog position a table has taken (`pos`: file number and position as in
    `pos_seq`), the server that wrote it and its source time; kept in the commit metadata."""

    server: str
    pos: str
    ts_ms: int


# A replayed event of the same server may carry a later time than the newest position (a long
# transaction starts before commits that precede it in the binlog); only a lead of more than this
# means the server's binlog restarted (RESET MASTER).
SAME_SERVER_SLACK_MS = 3_600_000


@dataclass
class TableState:
    """What the writer knows about one ODS table between batches."""

    columns: dict[str, str] = field(default_factory=dict)  # data column -> spark type
    last_stream: str | None = None
    last_batch: int = -1
    watermark: str | None = None  # bootstrap hand-off position (events at or before it are dropped)
    key: list[str] = field(default_factory=list)  # the key a table without `key:` was created with
    high_water: HighWater | None = None  # the newest binlog position written, and its server
    loaded: bool = False


def _utc(ts: datetime) -> datetime:
    """Spark returns naive datetimes in the driver's local zone; make them aware UTC."""
    return ts.astimezone(timezone.utc) if ts.tzinfo is None else ts


class OdsBatchWriter:
    """Writes micro-batches of CDC messages into the project's ODS tables."""

    def __init__(self, spark: SparkSession, project: Project, stream_id: str, only: set[str] | None = None, run_id: str | None = None) -> None:
        from framework.history import new_run_id

        self.run_id = run_id or new_run_id()  # labels quality results and quarantined events
        self.spark = spark
        self.project = project
        self.layout = Layout(project.warehouse)
        self.stream_id = stream_id
        self.only = only
        self.tables = {t.source: t for t in project.ods_tables if only is None or t.table_name in only}
        self.all_sources = {t.source for t in project.ods_tables}
        self.state: dict[str, TableState] = {}
        self.local = project.config.spark.master.startswith("local")

    # ------------------------------------------------------------------ state
    def _state(self, t: OdsTable) -> TableState:
        st = self.state.setdefault(t.table_name, TableState())
        if st.loaded:
            return st
        path = self.layout.table(t.qualified_name)
        if hudi.table_exists(path):
            schema = hudi.read(self.spark, path).schema
            st.columns = {
                f.name: normalize(f.dataType.simpleString())
                for f in schema.fields
                if f.name not in hudi.HOODIE_META_COLUMNS and f.name not in META_COLUMNS
                and not (t.partition_by and f.name == t.partition_by.derived_name)
            }
            for _inst, meta in hudi.commit_metadata(self.spark, path):
                if "bootstrap_watermark" in meta:
                    st.watermark = meta["bootstrap_watermark"]
                if meta.get("ods_key"):
                    st.key = meta["ods_key"].split(",")
                if meta.get("ods_high_water"):
                    st.high_water = HighWater.model_validate_json(meta["ods_high_water"])
                if "ods_stream" in meta:
                    st.last_stream = meta["ods_stream"]
                    st.last_batch = int(meta.get("ods_batch", "-1"))
        st.loaded = True
        return st

    # ------------------------------------------------------------------ parse
    def parse(self, msgs: DataFrame) -> DataFrame:
        """Classify every message; keep what per-table decoding needs."""
        env = F.from_json(F.col("value"), D.ENVELOPE, D.JSON_OPTS)
        df = msgs.withColumn("env", env)
        has_payload = F.col("env.payload").isNotNull()
        pay = F.from_json(F.col("env.payload"), D.PAYLOAD, D.JSON_OPTS)
        df = df.withColumn(
            "p",
            F.when(has_payload, pay).otherwise(
                F.struct(
                    F.col("env.before").alias("before"),
                    F.col("env.after").alias("after"),
                    F.col("env.op").alias("op"),
                    F.col("env.ts_ms").alias("ts_ms"),
                    F.col("env.source").alias("source"),
                    F.lit(None).cast("string").alias("_corrupt"),
                )
            ),
        )
        df = df.withColumn("src", F.from_json(F.col("p.source"), D.SOURCE))
        df = df.select(
            "value",
            "loc",
            "arrival",
            "origin",
            F.col("p.op").alias("op"),
            F.col("p.before").alias("before_raw"),
            F.col("p.after").alias("after_raw"),
            F.when(has_payload, F.col("env.schema")).alias("schema_raw"),
            routing_id(F.col("src"), self.all_sources).alias("tbl"),
            F.coalesce(F.col("src.ts_ms"), F.col("p.ts_ms")).alias("ts_raw"),
            D.position_seq(F.col("src"), F.col("p.ts_ms")).alias("pos_seq"),
            D.source_server(F.col("src")).alias("server"),
            D.binlog_position(D.position_seq(F.col("src"), F.col("p.ts_ms")), F.col("src")).alias("binlog_pos"),
            F.col("env._corrupt").alias("corrupt"),
            F.col("p._corrupt").alias("pcorrupt"),
            (
                F.col("value").isNull()  # a Kafka tombstone (Debezium's after a delete)
                | (F.trim(F.col("value")) == "null")
                | (F.col("env.schema").isNotNull() & F.col("env.payload").isNull() & F.col("env.op").isNull()
                   & F.col("env._corrupt").isNull())
            ).alias("tombstone"),
        )
        image_raw = F.when(F.col("op") == "d", F.col("before_raw")).otherwise(F.col("after_raw"))
        img = F.from_json(image_raw, D.IMAGE_MAP)  # type: ignore[arg-type]
        # Years 0001-9999 only: beyond, Spark overflows or Python cannot hold the time (dead letter).
        df = df.withColumn("img", img).withColumn("schema_hash", F.md5(F.col("schema_raw"))).withColumn("_event_ts", D.millis_to_timestamp(F.col("ts_raw")))
        declared = F.col("tbl").isin(list(self.all_sources)) if self.all_sources else F.lit(False)
        key_problem: Column = F.lit(None).cast("string")
        for t in self.tables.values():
            if not t.key:
                key_problem = F.when(F.col("tbl") == t.source, F.lit("no record key: the table YAML declares no `key` and the Kafka message has no key")).otherwise(key_problem)
                continue
            cond: Column | None = None
            for k in t.key:
                missing = F.col("img").getItem(k).isNull()
                cond = missing if cond is None else (cond | missing)
            assert cond is not None
            # Hudi refuses an empty record key (a single empty key column, or every column empty).
            empty = reduce(lambda a, b: a & b, [F.col("img").getItem(k) == "" for k in t.key])
            key_problem = (F.when((F.col("tbl") == t.source) & cond, F.lit(f"missing or NULL key column ({', '.join(t.key)})"))
                           .when((F.col("tbl") == t.source) & empty, F.lit(f"empty key ({', '.join(t.key)}): Hudi cannot store an empty record key"))
                           .otherwise(key_problem))
        reason = (
            F.when(F.col("value").startswith("lake: line too long ("), F.regexp_extract("value", "^lake: ([^;]*)", 1))
            .when(F.col("corrupt").isNotNull() | F.col("pcorrupt").isNotNull(), F.lit("malformed JSON"))
            .when(F.col("op").isNull(), F.lit("not a Debezium envelope: no `op` field"))
            .when(~F.col("op").isin("c", "u", "d", "r", "t"), F.concat(F.lit("unknown op '"), F.col("op"), F.lit("'")))
            .when(F.col("tbl") == "", F.lit("no source.db / source.table in the envelope"))
            .when(~declared, F.concat(F.lit("table "), F.col("tbl"), F.lit(" is not declared in layers/ods/")))
            .when(F.col("op").isin("c", "u", "r") & F.col("after_raw").isNull(), F.concat(F.lit("op '"), F.col("op"), F.lit("' without after-image")))
            .when((F.col("op") == "d") & F.col("before_raw").isNull(), F.lit("op 'd' without before-image"))
            .when(F.col("ts_raw").isNotNull() & F.col("_event_ts").isNull(),
                  F.concat(F.lit("source.ts_ms "), F.col("ts_raw").cast("string"), F.lit(" is not a time in the years 0001-9999")))
            .when((F.col("op") != "t") & F.col("img").isNull(), F.lit("row image is not a JSON object"))
            .when(F.col("op") != "t", key_problem)
        )
        # Deletes whose before-image lacks an ordering column (see `_ordering_prefix`).
        ord_missing: Column = F.lit(False)
        for t in self.tables.values():
            if t.ordering:
                lacks = reduce(lambda a, b: a | b, [F.col("img").getItem(c).isNull() for c in t.ordering])
                ord_missing = F.when(F.col("tbl") == t.source, (F.col("op") == "d") & F.coalesce(lacks, F.lit(True))).otherwise(ord_missing)
        df = df.withColumn("ord_missing", ord_missing)
        status = F.when(F.col("tombstone"), F.lit("tombstone")).when(reason.isNotNull(), F.lit("dead")).otherwise(F.lit("ok"))
        return df.withColumn("reason", F.when(~F.col("tombstone"), reason)).withColumn("status", status)

    # ------------------------------------------------------------------ batch
    def _auto_create(self, msgs: DataFrame) -> None:
        """Declare (for this writer) the undeclared source tables of the batch, with the
        configured key; events whose images lack the key still go to the dead letter."""
        auto = self.project.config.ods.auto_create
        if not auto.enabled or self.only is not None:
            return
        env = F.from_json(F.col("value"), D.ENVELOPE, D.JSON_OPTS)
        src = F.coalesce(F.from_json(env["payload"], D.PAYLOAD)["source"], env["source"])
        s = F.from_json(src, D.SOURCE)
        found = (
            msgs.select(routing_id(s, self.all_sources).alias("tbl"), s["db"].alias("db"), s["schema"].alias("schema"), s["table"].alias("table"))
            .where((F.length("db") > 0) & (F.length("table") > 0))
            .distinct()
            .collect()
        )
        names = {t.table_name for t in self.project.ods_tables} | {t.table_name for t in self.tables.values()}
        # Sorted: within a batch the names do not depend on the order Spark returns the rows.
        for tbl, db, schema, table in sorted((r["tbl"], r["db"], r["schema"] or "", r["table"]) for r in found):
            if tbl in self.all_sources:
                continue
            name = auto_table_name(tbl, undeclared_parts(db, schema, table), names)
            if name is None:  # undeclared: its events go to the dead letter as such
                log.warning("auto_create: no ODS table for %s: a `.` in its db, schema or table name", tbl)
                continue
            t = OdsTable(source=tbl, name=name, key=list(auto.key), type=auto.type)
            self.tables[tbl] = t
            self.all_sources.add(tbl)
            names.add(name)

    def _resolve_keys(self, msgs: DataFrame) -> None:
        """Tables declared without `key:` take the fields of the Kafka message key (Debezium's
        key struct, with or without a schema block); once written, the table keeps its key."""
        keyless = [t for t in self.tables.values() if not t.key]
        if not keyless:
            return
        missing = []
        for t in keyless:
            st = self._state(t)
            if st.key:
                self.tables[t.source] = t.model_copy(update={"key": list(st.key)})
            else:
                missing.append(t.source)
        if not missing or "msg_key" not in msgs.columns:
            return
        env = F.from_json(F.col("value"), D.ENVELOPE, D.JSON_OPTS)
        src = F.from_json(F.coalesce(F.from_json(env["payload"], D.PAYLOAD)["source"], env["source"]), D.SOURCE)
        kmap = F.from_json(F.col("msg_key"), D.IMAGE_MAP)  # type: ignore[arg-type]
        inner = F.from_json(kmap.getItem("payload"), D.IMAGE_MAP)  # type: ignore[arg-type]
        fields = F.when(kmap.getItem("schema").isNotNull() & inner.isNotNull(), F.map_keys(inner)).otherwise(F.map_keys(kmap))
        found = (
            msgs.where(F.col("msg_key").isNotNull())
            .select(routing_id(src, self.all_sources).alias("tbl"), fields.alias("fields"))
            .where(F.col("tbl").isin(missing) & (F.size("fields") > 0))
            .groupBy("tbl").agg(F.first("fields").alias("fields"))
            .collect()
        )
        for r in found:
            self.tables[r["tbl"]] = self.tables[r["tbl"]].model_copy(update={"key": list(r["fields"])})

    def process(self, msgs: DataFrame, batch_id: int) -> BatchResult:
        started = datetime.now(timezone.utc)
        self._auto_create(msgs)
        self._resolve_keys(msgs)
        parsed = self.parse(msgs).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            return self._process(parsed, batch_id, started)
        finally:
            parsed.unpersist()

    def _process(self, parsed: DataFrame, batch_id: int, started: datetime) -> BatchResult:
        """Prepare every table (decode, sequence, truncate), check the dead-letter ratio, then
        commit table by table: a batch that fails the ratio commits nothing."""
        ok = F.col("status") == "ok"
        is_t = F.col("op") == "t"
        summary = (
            parsed.groupBy("status", "reason", "tbl", "schema_hash", is_t.alias("is_truncate"))
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.first("schema_raw", ignorenulls=True).alias("schema_raw"),
                F.min("arrival").alias("first_arrival"),
                F.array_distinct(F.flatten(F.collect_set(F.when(ok & F.col("schema_raw").isNull(), F.map_keys("img"))))).alias("keys"),
                F.sum(F.when(F.col("op") == "d", 1).otherwise(0)).alias("deletes"),
                F.sum(F.col("ord_missing").cast("int")).alias("ord_missing"),
                # The source position of the table's last truncate in this batch (position, then arrival).
                F.max(F.when(is_t, F.concat(F.col("pos_seq"), F.col("arrival")))).alias("truncate_at"),
                F.min("_event_ts").alias("event_ts_min"),
                F.max("_event_ts").alias("event_ts_max"),
            )
            .collect()
        )
        result = BatchResult(batch_id=batch_id, started_at=started)
        by_table: dict[str, list[Any]] = {}
        parse_dead: dict[str, int] = {}  # source table -> its events dead-lettered while parsing
        for r in summary:
            result.events += r["n"]
            if r["status"] == "tombstone":
                result.tombstones += r["n"]
            elif r["status"] == "dead":
                result.dead_letter += r["n"]
                result.dead_reasons[r["reason"]] = result.dead_reasons.get(r["reason"], 0) + r["n"]
                parse_dead[r["tbl"]] = parse_dead.get(r["tbl"], 0) + r["n"]
            elif r["tbl"] in self.tables:
                by_table.setdefault(r["tbl"], []).append(r)
        cache: list[DataFrame] = []
        blocked: list[QualityGateError] = []
        try:
            prepared = [self._prepare(parsed, self.tables[s], rows, batch_id, started, cache) for s, rows in sorted(by_table.items())]
            self._check_dead_letter_ratio(batch_id, result, prepared, parse_dead)
            for p in prepared:  # the batch's dead letters: parsing, plus each table's own
                result.dead_letter += p.result.dead_letter
                for reason, n in p.dead_reasons.items():
                    result.dead_reasons[reason] = result.dead_reasons.get(reason, 0) + n
            for p in prepared:
                self._commit(p, batch_id, cache, blocked)
                result.tables[p.table.table_name] = p.result
            dead = [d for p in prepared for d in p.dead]
            if result.dead_letter:
                self._write_dead_letter(parsed, dead, batch_id)
        finally:
            for df in cache:
                df.unpersist()
        result.finished_at = datetime.now(timezone.utc)
        if blocked:
            # Raised after the other tables and the dead letter committed: the micro-batch fails,
            # the streaming checkpoint stays before it, and the next run replays it (committed
            # tables and the dead letter recognise the replay by their ods_batch metadata).
            raise BatchBlocked(batch_id, blocked, result)
        return result

    def _check_dead_letter_ratio(self, batch_id: int, result: BatchResult, prepared: list[Prepared], parse_dead: dict[str, int]) -> None:
        """`ods.max_dead_letter_ratio`, over every dead letter (parsing, decoding, schema changes),
        for the batch and for each table; raised before any table commits."""
        ratio = self.project.config.ods.max_dead_letter_ratio
        if ratio is None:
            return
        from framework.errors import IngestFailed

        reasons = dict(result.dead_reasons)
        for p in prepared:
            for reason, n in p.dead_reasons.items():
                reasons[reason] = reasons.get(reason, 0) + n
        counted = result.events - result.tombstones
        dead = result.dead_letter + sum(p.result.dead_letter for p in prepared)
        over = [(f"micro-batch {batch_id}", dead, counted)] if counted and dead / counted > ratio else []
        for p in prepared:
            n = p.result.dead_letter + parse_dead.get(p.table.source, 0)
            total = p.result.events + parse_dead.get(p.table.source, 0)
            if total and n / total > ratio:
                over.append((f"{p.table.qualified_name} in micro-batch {batch_id}", n, total))
        if over:
            what, n, total = over[0]
            listed = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
            raise IngestFailed(
                f"{what}: {n} of {total} events are bad ({n / total:.1%} > max_dead_letter_ratio {ratio:.1%}); "
                f"nothing was committed. Reasons: {listed}",
                fix="fix the input (see the reasons), or raise ods.max_dead_letter_ratio in lake.yaml, then rerun",
            )

    # ------------------------------------------------------------------ per table
    def _resolve_columns(self, parsed: DataFrame, t: OdsTable, rows: list[Any], st: TableState) -> tuple[dict[str, str], dict[str, dict[str, Decoder]], dict[str, str]]:
        """Target types of the table after this batch, decoders per schema version ("" for events
        without a schema block), and the versions the table cannot take with the reason. Versions
        are taken in arrival order; one the table cannot take is rejected on its own (its events
        go to the dead letter), the others are written."""
        versions: dict[str, dict[str, Decoder]] = {}
        rejected: dict[str, str] = {}
        keep_wider = t.schema_narrowing == "keep_wider"
        target = dict(st.columns)

        def take(version: str, dec: dict[str, Decoder]) -> None:
            candidate = dict(target)
            for name, d in dec.items():
                res = merge_batch_types(name, candidate.get(name), [d.spark_type], keep_wider=keep_wider)
                if res.error:
                    fix = ("set `schema_narrowing: keep_wider` on the table to keep the wider type" if res.narrowing else
                           f"the events stay in the dead letter; fix the source, or re-create the table (remove "
                           f"{self.layout.table(t.qualified_name)} and re-bootstrap it with lake ingest --bootstrap {t.qualified_name})")
                    rejected[version] = f"incompatible schema change in {t.source}: {res.error} ({fix})"
                    return
                assert res.target is not None
                candidate[name] = res.target
            versions[version] = dec
            target.update(candidate)

        schemaless_keys: set[str] = set()
        for r in sorted(rows, key=lambda r: r["first_arrival"] or ""):
            if r["is_truncate"]:
                continue
            if not r["schema_raw"]:
                schemaless_keys.update(r["keys"] or [])
                continue
            try:
                cols = row_columns(r["schema_raw"])
            except SchemaBlockError as e:
                rejected[r["schema_hash"]] = f"unreadable schema block: {e}"
                continue
            dec = {c.name: (decoder_for_sql_type(t.columns[c.name]) if c.name in t.columns and c.decoder.kind == "plain" else c.decoder) for c in cols}
            take(r["schema_hash"], dec)
        if schemaless_keys:
            unknown = [k for k in schemaless_keys if k not in st.columns and k not in t.columns]
            inferred = self._infer(parsed, t, unknown) if unknown else {}
            take("", {k: decoder_for_sql_type(t.columns.get(k) or st.columns.get(k) or inferred.get(k, "string")) for k in sorted(schemaless_keys)})
        return target, versions, rejected

    def _infer(self, parsed: DataFrame, t: OdsTable, keys: list[str]) -> dict[str, str]:
        """Types of new columns of schema-less events, from a sample of their JSON values."""
        sample = (
            parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok") & F.col("schema_raw").isNull())
            .select(F.when(F.col("op") == "d", F.col("before_raw")).otherwise(F.col("after_raw")).alias("raw"))
            .limit(200)
            .collect()
        )
        values: dict[str, list[Any]] = {k: [] for k in keys}
        for (raw,) in sample:
            try:
                obj = json.loads(raw)
            except (TypeError, json.JSONDecodeError):
                continue
            for k in keys:
                if isinstance(obj, dict) and obj.get(k) is not None:
                    values[k].append(obj[k])
        return {k: infer_json_type(v) for k, v in values.items()}

    def _prepare(self, parsed: DataFrame, t: OdsTable, rows: list[Any], batch_id: int, started_at: datetime, cache: list[DataFrame]) -> Prepared:
        """One table's rows of the batch, ready to commit: typed, sequenced, truncates applied."""
        st = self._state(t)
        n = sum(r["n"] for r in rows)
        p = Prepared(t, TableBatchResult(table=t.qualified_name, events=n))
        tr = p.result
        stamps = [r[c] for r in rows for c in ("event_ts_min", "event_ts_max") if r[c] is not None]
        if stamps:  # source event times (for freshness: event time -> commit time downstream)
            tr.event_ts_min, tr.event_ts_max = (_utc(min(stamps)), _utc(max(stamps)))
        if st.last_stream == self.stream_id and st.last_batch >= batch_id:
            # A replay after a crash: this table has the batch already. Checked before anything
            # else, so a schema change the first run took is not judged again against the table
            # it produced (spurious dead letters).
            tr.status = "already_committed"
            return p
        mine = parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok"))
        target, versions, rejected = self._resolve_columns(parsed, t, rows, st)
        problem = table_config_problem(t, target, self.project.ods_files.get(t.table_name, "layers/ods/"))
        if problem:  # this table's `ordering:` / `partition_by` cannot serve its events: its alone
            p.dead.append(mine.where(F.col("op") != "t").withColumn("reason", F.lit(problem)))
            tr.status, tr.reason = "dead_letter", problem
            tr.dead_letter = p.dead_reasons[problem] = sum(r["n"] for r in rows if not r["is_truncate"])
            return p
        p.target = target
        if rejected:
            version = F.coalesce(F.col("schema_hash"), F.lit(""))
            reason: Column = F.lit(None).cast("string")
            for h, why in rejected.items():
                reason = F.when(version == h, F.lit(why)).otherwise(reason)
                p.dead_reasons[why] = sum(r["n"] for r in rows if (r["schema_hash"] or "") == h and not r["is_truncate"])
            p.dead.append(mine.where(version.isin(list(rejected))).withColumn("reason", reason))
            mine = mine.where(~version.isin(list(rejected)))
            tr.status, tr.reason = "dead_letter", next(iter(rejected.values()))
            tr.dead_letter = sum(p.dead_reasons.values())
        delete_all = self.project.config.ods.truncate == "delete_all"
        truncate_at = max((r["truncate_at"] for r in rows if r["is_truncate"] and r["truncate_at"]), default=None) if delete_all else None
        events = mine.where(F.col("op") != "t")
        decoded = events.select("*", *self._decoded(target, versions, self._backwards(t, st.high_water))).persist(StorageLevel.MEMORY_AND_DISK)
        cache.append(decoded)  # decoded once: rows to write and bad rows to dead-letter
        bad_rows = decoded.where(F.col("_bad").isNotNull())
        p.dead.append(bad_rows.select(*[c for c in parsed.columns if c != "reason"], F.col("_bad").alias("reason")))
        good = decoded.where(F.col("_bad").isNull())
        if st.watermark:
            # Bootstrap hand-off: events before the dump's position are already in it.
            older = watermark_older(st.watermark)
            tr.before_bootstrap = good.where(older).count()
            good = good.where(~older)
        path = self.layout.table(t.qualified_name)
        exists = hudi.table_exists(path)
        good, prefix, width = self._ordering_prefix(t, target, good, path if exists else None, sum(r["ord_missing"] or 0 for r in rows))
        # `_seq`: [ordering prefix] · source position (73) · arrival. A truncate turns every row and
        # event before its position into a delete carrying the truncate's position, so the rows
        # (and their replays) are gone, while rows newer than it, on a replay, stay.
        here = F.concat(F.col("pos_seq"), F.col("arrival"))
        cancelled = here < F.lit(truncate_at) if truncate_at is not None else F.lit(False)
        out = good.select(
            *[F.col("_row")[c].alias(c) for c in target],
            F.when(cancelled, F.lit("t")).otherwise(F.col("op")).alias("_op"),
            F.col("_event_ts"),
            F.concat(prefix, F.when(cancelled, F.lit(truncate_at)).otherwise(here)).alias("_seq"),
            F.lit(started_at).alias("_ingested_at"),
            (cancelled | (F.col("op") == "d")).alias("_deleted"),
            F.col("loc").alias("_source"),
            F.when(cancelled, F.lit(1)).otherwise(F.lit(0)).alias("_lake_truncated"),
            F.when(F.col("binlog_pos").isNotNull() & F.col("server").isNotNull() & F.col("ts_raw").isNotNull(),
                   F.struct(F.col("binlog_pos").alias("pos"), F.col("server"), F.col("ts_raw").alias("ts_ms"))).alias("_lake_hw"),
        )
        if truncate_at is not None and exists:
            existing = hudi.read(self.spark, path).where(~F.col("_deleted"))
            older_row = F.substring(F.col("_seq"), width + 1, 10_000) < F.lit(truncate_at)
            wipe = existing.where(older_row).select(
                *[F.col(c) if c in existing.columns else F.lit(None).cast(target[c]).alias(c) for c in target],
                F.lit("t").alias("_op"),
                F.col("_event_ts"),
                F.concat(F.substring(F.col("_seq"), 1, width), F.lit(truncate_at)).alias("_seq"),
                F.lit(started_at).alias("_ingested_at"),
                F.lit(True).alias("_deleted"),
                F.lit(f"truncate@batch{batch_id}").alias("_source"),
                F.lit(2).alias("_lake_truncated"),
                F.lit(None).cast("struct<pos:string,server:string,ts_ms:bigint>").alias("_lake_hw"),
            )
            out = out.unionByName(wipe)
        if t.partition_by:
            pb = t.partition_by
            fmt = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[pb.granularity]
            out = out.withColumn(pb.derived_name, F.date_format(F.col(pb.column).cast("timestamp"), fmt))
        out = out.persist(StorageLevel.MEMORY_AND_DISK)
        cache.append(out)
        p.high_water = st.high_water
        for r in out.groupBy("_deleted", "_lake_truncated").agg(F.count(F.lit(1)).alias("count"), F.max("_lake_hw").alias("hw")).collect():
            if r["hw"] is not None and (p.high_water is None or r["hw"]["pos"] > p.high_water.pos):
                p.high_water = HighWater(server=r["hw"]["server"], pos=r["hw"]["pos"], ts_ms=r["hw"]["ts_ms"])
            if r["_lake_truncated"] == 1:
                tr.truncated += r["count"]
            if r["_deleted"]:
                tr.deletes += r["count"]
            else:
                tr.upserts += r["count"]
        for r in bad_rows.groupBy("_bad").count().collect():
            tr.dead_letter += r["count"]
            p.dead_reasons[r["_bad"]] = p.dead_reasons.get(r["_bad"], 0) + r["count"]
        p.rows = out.drop("_lake_truncated", "_lake_hw")
        return p

    def _backwards(self, t: OdsTable, hw: HighWater | None) -> Column:
        """Why an event cannot be ordered by its binlog position (else NULL): it is newer, by its
        source time, than the table's newest position, yet its position is lower, after a change
        of server (failover) or a binlog restart (RESET MASTER). Position order would silently
        let the older rows win; such events go to the dead letter with this reason instead."""
        if hw is None:
            return F.lit(None).cast("string")
        lower = F.col("binlog_pos") < F.lit(hw.pos)
        other = F.col("server") != F.lit(hw.server)
        lead = F.col("ts_raw") - F.lit(hw.ts_ms)
        backwards = F.col("binlog_pos").isNotNull() & F.col("server").isNotNull() & lower & (
            (other & (lead > 0)) | (~other & (lead > SAME_SERVER_SLACK_MS)))
        file_no, pos = int(hw.pos[:10]), int(hw.pos[10:])
        why = (f"binlog position went backwards for {t.source}: the event is newer (source.ts_ms) than the newest one "
               f"{t.qualified_name} holds (server {hw.server}, binlog file {file_no} position {pos}) but has a lower "
               "position; after a failover or RESET MASTER positions cannot order events. Fix: re-create the table from a "
               f"dump taken on the current server (remove {self.layout.table(t.qualified_name)}, then lake ingest --bootstrap "
               f"{t.qualified_name} --path DUMP --position FILE:POS), or order it by a column the source updates (`ordering:`)")
        return F.when(backwards, F.lit(why))

    def _decoded(self, target: dict[str, str], versions: dict[str, dict[str, Decoder]], bad: Column) -> list[Column]:
        """`_row`, every column of the table decoded from the row image (a column missing from
        an image is NULL: full after-image semantics), and `_bad`, why the event cannot be taken
        (`bad`, or a value that cannot be read)."""
        data_cols: list[Column] = []
        for name, typ in target.items():
            text = F.col("img").getItem(name)
            expr: Column | None = None
            for h, dec in versions.items():
                d = dec.get(name)
                value = F.lit(None) if d is None else D.decode(text, d)
                cond = F.col("schema_hash") == h if h else F.col("schema_hash").isNull()
                expr = F.when(cond, value) if expr is None else expr.when(cond, value)
            typed = (F.lit(None) if expr is None else expr).cast(typ)
            data_cols.append(typed.alias(name))
            bad = F.coalesce(bad, F.when(text.isNotNull() & typed.isNull() & F.lit(typ != "string"),
                                         F.lit(f"column {name}: value cannot be read as {typ.upper()}")))
        # Data columns live in a struct so they cannot clash with message columns (`value`, `op`...).
        return [F.struct(*data_cols).alias("_row"), bad.alias("_bad")]

    def _ordering_prefix(self, t: OdsTable, target: dict[str, str], good: DataFrame, path: Path | None, missing: int) -> tuple[DataFrame, Column, int]:
        """The `_seq` prefix of the configured ordering columns and its width (and `good`, joined
        to what the prefix needs).

        A delete whose before-image lacks an ordering column (Postgres REPLICA IDENTITY DEFAULT,
        minimal row images) would sort first and lose to the row it deletes. It takes the
        greatest prefix its key has, stored or in this batch, so its position decides against
        those rows, as it does between any two events of one ordering value."""
        if not t.ordering:
            return good, F.lit(""), 0
        types = [target.get(c, "string") for c in t.ordering]
        prefix = F.concat(*[D.ordering_prefix(F.col("_row")[c], typ) for c, typ in zip(t.ordering, types, strict=True)])
        width = sum(D.ordering_width(typ) for typ in types)
        if not missing:
            return good, prefix, width
        zeros = F.lit("0" * width)
        lacking = (F.col("op") == "d") & reduce(lambda a, b: a | b, [F.col("_row")[c].isNull() for c in t.ordering])
        best = F.max(F.when(~lacking, prefix)).over(Window.partitionBy(*[F.col("_row")[k] for k in t.key]))
        known = F.coalesce(best, zeros)
        if path is not None:
            stored = hudi.read(self.spark, path).select(*[F.col(f"`{k}`").alias(f"_lake_k{i}") for i, k in enumerate(t.key)],
                                                        F.substring(F.col("_seq"), 1, width).alias("_lake_stored"))
            on = [F.col("_row")[k].eqNullSafe(F.col(f"_lake_k{i}")) for i, k in enumerate(t.key)]
            good = good.join(stored, reduce(lambda a, b: a & b, on), "left")
            known = F.greatest(known, F.coalesce(F.col("_lake_stored"), zeros))
        return good, F.when(lacking, known).otherwise(prefix), width

    def _commit(self, p: Prepared, batch_id: int, cache: list[DataFrame], blocked: list[QualityGateError]) -> None:
        """Gate and upsert one prepared table, recording the batch in the same Hudi commit."""
        t, tr = p.table, p.result
        if p.rows is None:
            return
        status: Literal["ok", "dead_letter"] = "dead_letter" if tr.status == "dead_letter" else "ok"
        if tr.upserts + tr.deletes == 0:
            tr.status = status
            return
        commit = p.rows
        if t.checks:
            gate = check_table(self.spark, self.project, t, p.rows, self.run_id, cache)
            tr.checks, tr.quarantined = gate.checks, gate.quarantined
            if gate.error is not None:
                tr.status, tr.reason = "blocked", f"quality gate: {', '.join(gate.error.failed)} failed"
                blocked.append(gate.error)
                return
            commit = gate.rows
            tr.upserts -= gate.quarantined
        opts = hudi.write_options(
            name=t.table_name,
            key=t.key,
            ordering="_seq",
            partition=t.partition_by.derived_name if t.partition_by else None,
            table_type=t.type,
            local=self.local,
            extra=self.project.config.hudi,
        )
        failpoint("before_table_commit")
        meta = {"ods_stream": self.stream_id, "ods_batch": str(batch_id), "ods_key": ",".join(t.key)}
        if p.high_water is not None:
            meta["ods_high_water"] = p.high_water.model_dump_json()
        hudi.write(commit, self.layout.table(t.qualified_name), opts, meta)
        failpoint("after_table_commit")
        st = self._state(t)
        st.columns = dict(p.target)
        st.key = list(t.key)
        st.last_stream, st.last_batch = self.stream_id, batch_id
        st.high_water = p.high_water
        tr.status = status

    # ------------------------------------------------------------------ dead letter
    def _write_dead_letter(self, parsed: DataFrame, extra: list[DataFrame], batch_id: int) -> None:
        """Upsert the batch's bad messages into the dead letter, which every stream shares.

        Concurrent ingests of disjoint `--tables` each write it: its lock, held for this write
        only, keeps two Hudi writers off it at once (in Hudi's single-writer mode one rolls back
        the other's in-flight commit). A replay is recognised by any commit of this stream with
        this batch or a later one: other streams' commits may have come in between.
        """
        from framework.faults import pausepoint
        from framework.lock import LockHeldError, hold, table_lock

        wait = 300  # seconds; another stream's dead-letter write takes seconds
        dead = parsed.where(F.col("status") == "dead")
        for e in extra:
            dead = dead.unionByName(e.select(*parsed.columns))
        path = self.layout.dead_letter
        out = dead.select(
            F.col("loc"),
            F.col("value").alias("raw"),
            F.col("reason"),
            F.when(F.col("tbl") != "", F.col("tbl")).alias("source_table"),
            F.col("origin"),
            F.col("arrival").alias("_seq"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            F.current_timestamp().alias("dead_at"),
        )
        opts = hudi.write_options(name="dead_letter", key=DEAD_LETTER_KEY, ordering="_seq", partition=None, cdc=False, local=self.local, extra=self.project.config.hudi)
        pausepoint("before_dead_letter_lock")
        try:
            with hold(self.layout.locks, [table_lock("_lake.dead_letter")], timeout=wait,
                      command=f"lake ingest (dead letter of micro-batch {batch_id})"):
                if any(meta.get("ods_stream") == self.stream_id and int(meta.get("ods_batch", "-1")) >= batch_id
                       for _inst, meta in hudi.commit_metadata(self.spark, path)):
                    return
                hudi.write(out, path, opts, {"ods_stream": self.stream_id, "ods_batch": str(batch_id)})
        except LockHeldError as e:
            raise LockHeldError(
                f"micro-batch {batch_id} cannot write the dead letter {path}: {e.message}",
                fix="another ingest is writing it; if that process hangs, stop it (its lock is released when it "
                "exits), then rerun: the tables that committed this micro-batch recognise its replay",
            ) from e


def watermark_older(watermark: str) -> Column:
    """Events strictly before a bootstrap position (see framework.ods.position)."""
    from framework.ods.position import slice_of

    start, length, value = slice_of(watermark)
    return F.substring(F.col("pos_seq"), start, length) < F.lit(value)


def resolve_source_path(project: Project, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else project.root / p
