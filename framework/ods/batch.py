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
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
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
from framework.paths import Layout
from models.config import OdsTable
from models.records import BatchResult, TableBatchResult

log = logging.getLogger(__name__)

META_COLUMNS = ["_op", "_event_ts", "_seq", "_ingested_at", "_deleted", "_source"]
DEAD_LETTER_KEY = ["loc"]


@dataclass
class TableState:
    """What the writer knows about one ODS table between batches."""

    columns: dict[str, str] = field(default_factory=dict)  # data column -> spark type
    last_stream: str | None = None
    last_batch: int = -1
    watermark: str | None = None  # bootstrap hand-off position (events at or before it are dropped)
    key: list[str] = field(default_factory=list)  # the key a table without `key:` was created with
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
            F.concat_ws(".", F.col("src.db"), F.col("src.table")).alias("tbl"),
            F.timestamp_millis(F.coalesce(F.col("src.ts_ms"), F.col("p.ts_ms"))).alias("_event_ts"),
            D.position_seq(F.col("src"), F.col("p.ts_ms")).alias("pos_seq"),
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
        df = df.withColumn("img", img).withColumn("schema_hash", F.md5(F.col("schema_raw")))
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
            key_problem = F.when((F.col("tbl") == t.source) & cond, F.lit(f"missing or NULL key column ({', '.join(t.key)})")).otherwise(key_problem)
        reason = (
            F.when(F.col("corrupt").isNotNull() | F.col("pcorrupt").isNotNull(), F.lit("malformed JSON"))
            .when(F.col("op").isNull(), F.lit("not a Debezium envelope: no `op` field"))
            .when(~F.col("op").isin("c", "u", "d", "r", "t"), F.concat(F.lit("unknown op '"), F.col("op"), F.lit("'")))
            .when(F.col("tbl") == "", F.lit("no source.db / source.table in the envelope"))
            .when(~declared, F.concat(F.lit("table "), F.col("tbl"), F.lit(" is not declared in layers/ods/")))
            .when(F.col("op").isin("c", "u", "r") & F.col("after_raw").isNull(), F.concat(F.lit("op '"), F.col("op"), F.lit("' without after-image")))
            .when((F.col("op") == "d") & F.col("before_raw").isNull(), F.lit("op 'd' without before-image"))
            .when((F.col("op") != "t") & F.col("img").isNull(), F.lit("row image is not a JSON object"))
            .when(F.col("op") != "t", key_problem)
        )
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
        found = msgs.select(F.concat_ws(".", s["db"], s["table"]).alias("tbl")).where("tbl LIKE '%_._%'").distinct().collect()
        names = {t.table_name for t in self.project.ods_tables} | {t.table_name for t in self.tables.values()}
        for (tbl,) in found:
            if tbl in self.all_sources:
                continue
            db, table = tbl.split(".", 1)
            name = re.sub(r"[^a-z0-9_]", "_", table.lower())
            if name in names:
                name = re.sub(r"[^a-z0-9_]", "_", f"{db}_{table}".lower())
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
            .select(F.concat_ws(".", src["db"], src["table"]).alias("tbl"), fields.alias("fields"))
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
        ok = F.col("status") == "ok"
        summary = (
            parsed.groupBy("status", "reason", "tbl", "schema_hash", (F.col("op") == "t").alias("is_truncate"))
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.first("schema_raw", ignorenulls=True).alias("schema_raw"),
                F.min("arrival").alias("first_arrival"),
                F.max("arrival").alias("last_arrival"),
                F.array_distinct(F.flatten(F.collect_set(F.when(ok & F.col("schema_raw").isNull(), F.map_keys("img"))))).alias("keys"),
                F.sum(F.when(F.col("op") == "d", 1).otherwise(0)).alias("deletes"),
                F.min("_event_ts").alias("event_ts_min"),
                F.max("_event_ts").alias("event_ts_max"),
            )
            .collect()
        )
        result = BatchResult(batch_id=batch_id, started_at=started)
        by_table: dict[str, list] = {}
        for r in summary:
            result.events += r["n"]
            if r["status"] == "tombstone":
                result.tombstones += r["n"]
            elif r["status"] == "dead":
                result.dead_letter += r["n"]
                result.dead_reasons[r["reason"]] = result.dead_reasons.get(r["reason"], 0) + r["n"]
            elif r["tbl"] in self.tables:
                by_table.setdefault(r["tbl"], []).append(r)
        ratio = self.project.config.ods.max_dead_letter_ratio
        counted = result.events - result.tombstones
        if ratio is not None and counted and result.dead_letter / counted > ratio:
            from framework.errors import IngestFailed

            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(result.dead_reasons.items()))
            raise IngestFailed(
                f"micro-batch {batch_id}: {result.dead_letter} of {counted} events are bad "
                f"({result.dead_letter / counted:.1%} > max_dead_letter_ratio {ratio:.1%}); nothing was committed. Reasons: {reasons}",
                fix="fix the input (see the reasons), or raise ods.max_dead_letter_ratio in lake.yaml, then rerun",
            )
        extra_dead: list[DataFrame] = []
        self._cached: list[DataFrame] = []
        self._blocked: list[QualityGateError] = []
        try:
            for source, rows in sorted(by_table.items()):
                t = self.tables[source]
                tr = self._write_table(parsed, t, rows, batch_id, started, extra_dead)
                result.tables[t.table_name] = tr
            if result.dead_letter or any(tr.dead_letter for tr in result.tables.values()):
                self._write_dead_letter(parsed, extra_dead, batch_id)
        finally:
            for df in self._cached:
                df.unpersist()
        result.finished_at = datetime.now(timezone.utc)
        if self._blocked:
            # Raised after the other tables and the dead letter committed: the micro-batch fails,
            # the streaming checkpoint stays before it, and the next run replays it (committed
            # tables and the dead letter recognise the replay by their ods_batch metadata).
            raise BatchBlocked(batch_id, self._blocked, result)
        return result

    # ------------------------------------------------------------------ per table
    def _resolve_columns(self, parsed: DataFrame, t: OdsTable, rows: list, st: TableState) -> tuple[dict[str, str], dict[str, dict[str, Decoder]], str | None]:
        """Target types of the table after this batch, decoders per schema version, or an error."""
        versions: dict[str, dict[str, Decoder]] = {}
        seen: dict[str, list[str]] = {}
        schemaless_keys: set[str] = set()
        for r in sorted(rows, key=lambda r: r["first_arrival"] or ""):
            if r["is_truncate"]:
                continue
            if r["schema_raw"]:
                try:
                    cols = row_columns(r["schema_raw"])
                except SchemaBlockError as e:
                    return {}, {}, f"unreadable schema block: {e}"
                dec = {c.name: c.decoder for c in cols}
                versions[r["schema_hash"]] = dec
                for name, d in dec.items():
                    if name in t.columns:
                        d = decoder_for_sql_type(t.columns[name]) if d.kind == "plain" else d
                        dec[name] = d
                    seen.setdefault(name, []).append(d.spark_type)
            else:
                schemaless_keys.update(r["keys"] or [])
        if schemaless_keys:
            dec = {}
            unknown = [k for k in schemaless_keys if k not in st.columns and k not in t.columns]
            inferred = self._infer(parsed, t, unknown) if unknown else {}
            for k in sorted(schemaless_keys):
                typ = t.columns.get(k) or st.columns.get(k) or inferred.get(k, "string")
                dec[k] = decoder_for_sql_type(typ)
                seen.setdefault(k, []).append(dec[k].spark_type)
            versions[""] = dec
        target = dict(st.columns)
        for name, types in seen.items():
            res = merge_batch_types(name, st.columns.get(name), types, keep_wider=t.schema_narrowing == "keep_wider")
            if res.error:
                fix = (
                    "set `schema_narrowing: keep_wider` on the table to keep the wider type"
                    if res.narrowing
                    else "recreate the ODS table (lake ingest --rebuild) or fix the source"
                )
                return {}, {}, f"incompatible schema change in {t.source}: {res.error} ({fix})"
            assert res.target is not None
            target[name] = res.target
        return target, versions, None

    def _infer(self, parsed: DataFrame, t: OdsTable, keys: list[str]) -> dict[str, str]:
        """Types of new columns of schema-less events, from a sample of their JSON values."""
        sample = (
            parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok") & F.col("schema_raw").isNull())
            .select(F.when(F.col("op") == "d", F.col("before_raw")).otherwise(F.col("after_raw")).alias("raw"))
            .limit(200)
            .collect()
        )
        values: dict[str, list] = {k: [] for k in keys}
        for (raw,) in sample:
            try:
                obj = json.loads(raw)
            except (TypeError, json.JSONDecodeError):
                continue
            for k in keys:
                if isinstance(obj, dict) and obj.get(k) is not None:
                    values[k].append(obj[k])
        return {k: infer_json_type(v) for k, v in values.items()}

    def _write_table(
        self, parsed: DataFrame, t: OdsTable, rows: list, batch_id: int, started_at: datetime, extra_dead: list[DataFrame]
    ) -> TableBatchResult:
        st = self._state(t)
        n = sum(r["n"] for r in rows)
        tr = TableBatchResult(table=t.qualified_name, events=n)
        stamps = [r[c] for r in rows for c in ("event_ts_min", "event_ts_max") if r[c] is not None]
        if stamps:  # source event times (for freshness: event time -> commit time downstream)
            tr.event_ts_min, tr.event_ts_max = (_utc(min(stamps)), _utc(max(stamps)))
        mine = parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok"))
        target, versions, error = self._resolve_columns(parsed, t, rows, st)
        if error:
            tr.status = "dead_letter"
            tr.reason = error
            tr.dead_letter = n
            extra_dead.append(mine.withColumn("reason", F.lit(error)))
            return tr
        truncates = [r for r in rows if r["is_truncate"]]
        truncate_at = max((r["last_arrival"] for r in truncates), default=None)
        events = mine.where(F.col("op") != "t")
        if truncate_at is not None and self.project.config.ods.truncate == "delete_all":
            dropped = events.where(F.col("arrival") < F.lit(truncate_at))
            tr.truncated = dropped.count()
            events = events.where(F.col("arrival") > F.lit(truncate_at))
        # Decode every column of the table (missing image keys are NULL: full after-image semantics).
        data_cols: list[Column] = []
        bad: Column = F.lit(None).cast("string")
        for name, typ in target.items():
            text = F.col("img").getItem(name)
            expr: Column | None = None
            for h, dec in versions.items():
                d = dec.get(name)
                value = F.lit(None) if d is None else D.decode(text, d)
                cond = F.col("schema_hash") == h if h else F.col("schema_hash").isNull()
                expr = F.when(cond, value) if expr is None else expr.when(cond, value)
            if expr is None:
                expr = F.lit(None)
            typed = expr.cast(typ)
            data_cols.append(typed.alias(name))
            bad = F.when(text.isNotNull() & typed.isNull() & F.lit(typ != "string"),
                         F.lit(f"column {name}: value cannot be read as {typ.upper()}")).otherwise(bad)
        # Data columns live in a struct so they cannot clash with message columns (`value`, `op`...).
        decoded = events.select("*", F.struct(*data_cols).alias("_row"), bad.alias("_bad")).persist(StorageLevel.MEMORY_AND_DISK)
        self._cached.append(decoded)  # decoded once: rows to write and bad rows to dead-letter
        bad_rows = decoded.where(F.col("_bad").isNotNull())
        extra_dead.append(bad_rows.select(*[c for c in parsed.columns if c != "reason"], F.col("_bad").alias("reason")))
        good = decoded.where(F.col("_bad").isNull())
        if st.watermark:
            # Bootstrap hand-off: events before the dump's position are already in it.
            older = watermark_older(st.watermark)
            tr.before_bootstrap = good.where(older).count()
            good = good.where(~older)
        seq = F.col("pos_seq")
        if t.ordering:
            prefix = F.concat(*[D.ordering_prefix(F.col("_row")[c], target.get(c, "string")) for c in t.ordering])
            seq = F.concat(prefix, seq)
        seq = F.concat(seq, F.col("arrival"))
        out = good.select(
            *[F.col("_row")[c].alias(c) for c in target],
            F.col("op").alias("_op"),
            F.col("_event_ts"),
            seq.alias("_seq"),
            F.lit(started_at).alias("_ingested_at"),
            (F.col("op") == "d").alias("_deleted"),
            F.col("loc").alias("_source"),
        )
        path = self.layout.table(t.qualified_name)
        if truncate_at is not None and self.project.config.ods.truncate == "delete_all" and hudi.table_exists(path):
            existing = hudi.read(self.spark, path).where(~F.col("_deleted"))
            wipe = existing.select(
                *[F.col(c) if c in existing.columns else F.lit(None).cast(target[c]).alias(c) for c in target],
                F.lit("t").alias("_op"),
                F.col("_event_ts"),
                F.concat(F.col("_seq"), F.lit("~")).alias("_seq"),
                F.lit(started_at).alias("_ingested_at"),
                F.lit(True).alias("_deleted"),
                F.lit(f"truncate@batch{batch_id}").alias("_source"),
            )
            out = out.unionByName(wipe)
        if t.partition_by:
            p = t.partition_by
            fmt = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[p.granularity]
            out = out.withColumn(p.derived_name, F.date_format(F.col(p.column).cast("timestamp"), fmt))
        out = out.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            counts = out.groupBy("_deleted").count().collect()
            for r in counts:
                if r["_deleted"]:
                    tr.deletes = r["count"]
                else:
                    tr.upserts = r["count"]
            tr.dead_letter = bad_rows.count()
            if st.last_stream == self.stream_id and st.last_batch >= batch_id:
                tr.status = "already_committed"  # a replay after a crash: this table has it
                return tr
            if tr.upserts + tr.deletes == 0:
                tr.status = "ok"
                return tr
            commit = out
            if t.checks:
                gate = check_table(self.spark, self.project, t, out, self.run_id, self._cached)
                tr.checks, tr.quarantined = gate.checks, gate.quarantined
                if gate.error is not None:
                    tr.status, tr.reason = "blocked", f"quality gate: {', '.join(gate.error.failed)} failed"
                    self._blocked.append(gate.error)
                    return tr
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
            hudi.write(commit, path, opts, {"ods_stream": self.stream_id, "ods_batch": str(batch_id), "ods_key": ",".join(t.key)})
            failpoint("after_table_commit")
        finally:
            out.unpersist()
        st.columns = dict(target)
        st.key = list(t.key)
        st.last_stream, st.last_batch = self.stream_id, batch_id
        tr.status = "ok"
        return tr

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
