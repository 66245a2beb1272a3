"""One table's share of a micro-batch, made ready to commit: column types resolved per schema
version, row images decoded, the ordering sequence computed, truncates and the bootstrap hand-off
applied, and every event that cannot be taken set aside for the dead letter with its reason.

`_seq` is [ordering prefix] · source position (73 digits, decode.position_seq) · arrival. Hudi
merges on it with event-time ordering, so a late or replayed older event never wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from framework.ods import contract, history, tombstones, unavailable
from framework.ods import decode as D
from framework.ods.columns import Columns, resolve_columns
from framework.ods.context import BatchContext, HighWater, TableState, utc
from framework.ods.envelope import Decoder
from framework.ods.tablecheck import table_config_problem
from framework.project.types import normalize, stored
from framework.runtime.location import Location
from framework.table import hudi
from framework.table.columns import live
from models.config import OdsTable
from models.records import TableBatchResult

# A replayed event of the same server may carry a later time than the newest position (a long
# transaction starts before commits that precede it in the binlog); only a lead of more than this
# means the server's binlog restarted (RESET MASTER).
SAME_SERVER_SLACK_MS = 3_600_000
_HW = "struct<pos:string,server:string,ts_ms:bigint>"
# The message columns the steps after decoding read (sequencing, the bootstrap hand-off, the
# high-water mark, the dead-letter join).
_SEQUENCING = ["loc", "op", "_event_ts", "pos_seq", "arrival", "binlog_pos", "server", "ts_raw", "ord_missing"]
# Helper columns of the rows until they are written: placeholders (unavailable.py), source order.
_HELPERS = ["_lake_truncated", "_lake_hw", "_lake_replayed", "_unavail", "_lake_pos", "_lake_pair", "_lake_orig_seq", "_lake_orig_op",
            "_lake_orig_ts"]


@dataclass
class Prepared:
    """One table's share of a micro-batch, decoded and sequenced, not yet committed."""

    table: OdsTable
    result: TableBatchResult
    rows: DataFrame | None = None  # what to write (deletes flagged `_deleted`); None: nothing
    target: dict[str, str] = field(default_factory=dict)  # column types after this batch
    dead: list[DataFrame] = field(default_factory=list)  # events to dead-letter, with `reason`
    dead_reasons: dict[str, int] = field(default_factory=dict)
    high_water: HighWater | None = None  # the table's after this commit
    migrated: int = 0  # soft deletes of a table written before tombstones, moved by this commit
    rewrite: dict[str, tuple[str, str]] = field(default_factory=dict)  # columns the table takes by a rewrite (rewrite.py)
    events: DataFrame | None = None  # every event of the batch for the history table (history.py); None: none kept


def prepare(ctx: BatchContext, parsed: DataFrame, t: OdsTable, rows: list[Any], st: TableState, batch_id: int,
            started_at: datetime, cache: list[DataFrame]) -> Prepared:
    """Table `t`'s rows of the batch (`rows`: its summary rows), ready to commit."""
    p = Prepared(t, TableBatchResult(table=t.qualified_name, events=sum(r["n"] for r in rows)))
    tr = p.result
    stamps = [r[c] for r in rows for c in ("event_ts_min", "event_ts_max") if r[c] is not None]
    if stamps:  # source event times (for freshness: event time -> commit time downstream)
        tr.event_ts_min, tr.event_ts_max = (utc(min(stamps)), utc(max(stamps)))
    if st.has(ctx.stream_id, batch_id):
        # A replay after a crash: this table has the batch already. Checked before anything else,
        # so a schema change the first run took is not judged again against the table it produced.
        tr.status = "already_committed"
        return p
    mine = parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok"))
    path = ctx.layout.table(t.qualified_name)
    file = ctx.project.ods_files.get(t.table_name, "layers/ods/")
    cols = _columns(parsed, t, rows, st, file)
    problem = table_config_problem(t, cols.target, file)
    if problem:  # this table's `ordering:` / `partition_by` cannot serve its events: its alone
        p.dead.append(mine.where(F.col("op") != "t").withColumn("reason", F.lit(problem)))
        tr.status, tr.reason = "dead_letter", problem
        tr.dead_letter = p.dead_reasons[problem] = sum(r["n"] for r in rows if not r["is_truncate"])
        return p
    p.target, p.rewrite = cols.target, cols.rewrite
    mine = _reject_versions(p, mine, rows, cols)
    delete_all = ctx.project.config.ods.truncate == "delete_all"
    truncate = max(((r["truncate_at"], r["truncate_ts"]) for r in rows if r["is_truncate"] and r["truncate_at"]), default=None, key=lambda x: x[0]) if delete_all else None
    # Decoded once, and cached with only what sequencing needs: the message text, raw images and
    # image map stay in the batch's cache (parse.py) instead of being copied into this one.
    placeholder = ctx.project.config.ods.unavailable_value_placeholder
    decoded = mine.where(F.col("op") != "t").select(*_SEQUENCING, *_decoded(cols.target, cols.versions, _unfit(ctx, t, st, file)),
                                                    unavailable.unavailable_columns(F.col("img"), cols.target, placeholder).alias("_unavail"))
    decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
    cache.append(decoded)  # decoded once: rows to write and bad rows to dead-letter
    bad_rows = decoded.where(F.col("_bad").isNotNull())
    # The dead letter wants whole messages: the bad ones, by their location (unique in a batch),
    # from the batch's messages; evaluated only when the batch has a dead letter to write.
    bad_locs = bad_rows.select(F.col("loc"), F.col("_bad").alias("_lake_bad"))
    p.dead.append(mine.join(bad_locs, "loc").select(*[c for c in parsed.columns if c != "reason"], F.col("_lake_bad").alias("reason")))
    good = decoded.where(F.col("_bad").isNull())
    if st.watermark:
        # Bootstrap hand-off: events before the dump's position are already in it.
        older = watermark_older(st.watermark)
        tr.before_bootstrap = good.where(older).count()
        good = good.where(~older)
    migrate = not st.migrated and hudi.table_exists(path)
    out = _sequenced(ctx, t, cols.target, good, path, sum(r["ord_missing"] or 0 for r in rows), truncate, started_at, batch_id,
                     migrate=migrate)
    horizon = tombstones.expired_horizon(ctx.layout, t.qualified_name) if ctx.replay_guard else None
    if any(r["unavailable"] for r in rows):  # unchanged TOASTed values: keep the key's value
        out = unavailable.fill(out, t.key, cols.target, hudi.read(ctx.spark, path) if hudi.table_exists(path) else None)
    out = tombstones.mark_replayed(ctx, t, out, migrate, horizon)
    if horizon is not None:
        out = _refuse_expired(ctx, p, mine, out, parsed.columns, cache)
    out = out.persist(StorageLevel.MEMORY_AND_DISK)
    cache.append(out)
    out = _unfilled(p, mine, out, placeholder) if any(r["unavailable"] for r in rows) else out
    _tally(p, out, bad_rows, st)
    p.rows, p.events = out.where(~F.col("_lake_replayed")).drop(*_HELPERS), history.events(out) if t.history else None
    return p


def _columns(parsed: DataFrame, t: OdsTable, rows: list[Any], st: TableState, file: str) -> Columns:
    """The table's columns after the batch: widened by its events, or under its contract the
    declared ones, never widened by an event (framework/ods/contract.py)."""
    if t.contract == "enforced":
        return contract.contracted_columns(t, rows, st.columns, st.watermark, file)
    return resolve_columns(parsed, t, rows, st.columns, st.watermark, file)


def _unfit(ctx: BatchContext, t: OdsTable, st: TableState, file: str) -> Column:
    """Why an event cannot be taken before its values are read (else NULL): its position went
    backwards, or it has a column the table's contract does not declare."""
    backwards = _backwards(ctx, t, st.high_water)
    return F.coalesce(backwards, contract.undeclared(t, file)) if t.contract == "enforced" else backwards


def _refuse_expired(ctx: BatchContext, p: Prepared, mine: DataFrame, out: DataFrame, columns: list[str],
                    cache: list[DataFrame]) -> DataFrame:
    """A replay's events that could re-insert a key deleted after them, its tombstone expired
    (tombstones.refuse_expired), go back to the dead letter with the reason and the fix."""
    refused = tombstones.refuse_expired(ctx, p.table, out).persist(StorageLevel.MEMORY_AND_DISK)
    cache.append(refused)
    n = refused.count()
    if not n:
        return out.drop("_lake_at_risk")
    reason = tombstones.refused_reason(ctx, p.table)
    p.dead.append(mine.join(refused, "loc").select(*[c for c in columns if c != "reason"], F.lit(reason).alias("reason")))
    p.result.dead_letter += n
    p.result.expired_refused = n
    p.dead_reasons[reason] = n
    return out.join(refused, out["_source"] == refused["loc"], "left_anti").drop("_lake_at_risk")


def _unfilled(p: Prepared, mine: DataFrame, out: DataFrame, placeholder: str) -> DataFrame:
    """`out` without the events whose placeholder no earlier value of their key could replace:
    those go to the dead letter."""
    unfilled = (F.size(F.col("_unavail")) > 0) & ~F.col("_deleted") & ~F.col("_lake_replayed")
    rows = out.where(unfilled)
    why = F.concat(F.lit("column(s) "), F.array_join(F.col("_unavail"), ", "), F.lit(
        f" arrived as Debezium's unavailable-value placeholder ({placeholder!r}: PostgreSQL did not log an unchanged TOASTed "
        f"value) and {p.table.qualified_name} has no earlier value of the key to keep. Fix: set REPLICA IDENTITY FULL on the "
        f"source table, or re-create the ODS table from a snapshot (lake ingest --rebuild {p.table.qualified_name}), "
        "then replay the dead letter"))
    bad = rows.select(F.col("_source").alias("loc"), why.alias("_lake_bad"))
    counts = bad.groupBy("_lake_bad").count().collect()
    if not counts:
        return out
    p.dead.append(mine.join(bad, "loc").drop("reason").withColumnRenamed("_lake_bad", "reason"))
    for r in counts:
        p.result.dead_letter += r["count"]
        p.dead_reasons[r["_lake_bad"]] = p.dead_reasons.get(r["_lake_bad"], 0) + r["count"]
    return out.where(~unfilled)


def _reject_versions(p: Prepared, mine: DataFrame, rows: list[Any], cols: Columns) -> DataFrame:
    """Set aside the events of schema versions the table cannot take; the rest goes on."""
    if not cols.rejected:
        return mine
    version = F.coalesce(F.col("schema_hash"), F.lit(""))
    reason: Column = F.lit(None).cast("string")
    for h, why in cols.rejected.items():
        reason = F.when(version == h, F.lit(why)).otherwise(reason)
        p.dead_reasons[why] = sum(r["n"] for r in rows if (r["schema_hash"] or "") == h and not r["is_truncate"])
    p.dead.append(mine.where(version.isin(list(cols.rejected))).withColumn("reason", reason))
    p.result.status, p.result.reason = "dead_letter", next(iter(cols.rejected.values()))
    p.result.dead_letter = sum(p.dead_reasons.values())
    return mine.where(~version.isin(list(cols.rejected)))


def _sequenced(ctx: BatchContext, t: OdsTable, target: dict[str, str], good: DataFrame, path: Location, missing: int,
               truncate: tuple[str, datetime | None] | None, started_at: datetime, batch_id: int, *, migrate: bool) -> DataFrame:
    """The rows to write: data columns, `_seq` and lake's columns. A truncate (its position and
    source time) turns every row and event before its position into a delete carrying the
    truncate's position, so the rows (and their replays) are gone, while rows newer than it, on a
    replay, stay. `migrate`: the stored soft deletes of a table written before tombstones join the
    batch as deletes."""
    truncate_at, truncate_ts = truncate if truncate else (None, None)
    exists = hudi.table_exists(path)
    good, prefix, width = ordering_prefix(ctx, t, target, good, path if exists else None, missing)
    here = F.concat(F.col("pos_seq"), F.col("arrival"))
    cancelled = here < F.lit(truncate_at) if truncate_at is not None else F.lit(False)
    out = good.select(
        *[F.col("_row")[c].alias(c) for c in target],
        F.when(cancelled, F.lit("t")).otherwise(F.col("op")).alias("_op"),
        F.when(cancelled & F.lit(truncate_ts is not None), F.lit(truncate_ts).cast("timestamp")).otherwise(F.col("_event_ts")).alias("_event_ts"),
        F.concat(prefix, F.when(cancelled, F.lit(truncate_at)).otherwise(here)).alias("_seq"),
        F.lit(started_at).alias("_ingested_at"),
        (cancelled | (F.col("op") == "d")).alias("_deleted"),
        F.col("loc").alias("_source"),
        F.when(cancelled, F.lit(1)).otherwise(F.lit(0)).alias("_lake_truncated"),
        F.when(F.col("binlog_pos").isNotNull() & F.col("server").isNotNull() & F.col("ts_raw").isNotNull(),
               F.struct(F.col("binlog_pos").alias("pos"), F.col("server"), F.col("ts_raw").alias("ts_ms"))).alias("_lake_hw"),
        F.col("_unavail"), here.alias("_lake_pos"), F.col("pos_seq").alias("_lake_pair"),
        F.concat(prefix, here).alias("_lake_orig_seq"), F.col("op").alias("_lake_orig_op"),  # a cancelled event's own (history.py)
        F.col("_event_ts").alias("_lake_orig_ts"),
    )
    if truncate is not None and exists:
        out = out.unionByName(_wiped(ctx, path, target, width, truncate, started_at, batch_id))
    soft = tombstones.soft_deleted(ctx, t, target) if migrate else None
    if soft is not None:
        out = out.unionByName(_no_helpers(soft.withColumn("_lake_hw", F.lit(None).cast(_HW)), width))
    if t.partition_by:
        pb = t.partition_by
        fmt = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[pb.granularity]
        out = out.withColumn(pb.derived_name, F.date_format(F.col(pb.column).cast("timestamp"), fmt))
    return out


def _wiped(ctx: BatchContext, path: Location, target: dict[str, str], width: int, truncate: tuple[str, datetime | None],
           started_at: datetime, batch_id: int) -> DataFrame:
    """Deletes of the table's live rows whose position is before the truncate's, at the
    truncate's position and source time."""
    truncate_at, truncate_ts = truncate
    stored = hudi.read(ctx.spark, path)
    existing = stored.where(live(stored))
    older_row = F.substring(F.col("_seq"), width + 1, 10_000) < F.lit(truncate_at)
    return existing.where(older_row).select(
        *[F.col(c) if c in existing.columns else F.lit(None).cast(target[c]).alias(c) for c in target],
        F.lit("t").alias("_op"),
        F.coalesce(F.lit(truncate_ts).cast("timestamp"), F.col("_event_ts")).alias("_event_ts"),
        F.concat(F.substring(F.col("_seq"), 1, width), F.lit(truncate_at)).alias("_seq"),
        F.lit(started_at).alias("_ingested_at"),
        F.lit(True).alias("_deleted"),
        F.lit(f"truncate@batch{batch_id}").alias("_source"),
        F.lit(2).alias("_lake_truncated"),
        F.lit(None).cast(_HW).alias("_lake_hw"),
    ).transform(lambda df: _no_helpers(df, width))


def _no_helpers(df: DataFrame, width: int) -> DataFrame:
    """Rows lake makes itself (truncate deletes, moved soft deletes) carry no placeholder."""
    return df.select("*", F.array().cast("array<string>").alias("_unavail"), F.substring(F.col("_seq"), width + 1, 10_000).alias("_lake_pos"),
                     F.lit(None).cast("string").alias("_lake_pair"), F.lit(None).cast("string").alias("_lake_orig_seq"),
                     F.lit(None).cast("string").alias("_lake_orig_op"), F.lit(None).cast("timestamp").alias("_lake_orig_ts"))


def _tally(p: Prepared, out: DataFrame, bad_rows: DataFrame, st: TableState) -> None:
    """Counts of the table's batch result, and its binlog high-water mark after the commit."""
    tr = p.result
    p.high_water = st.high_water
    # One Spark job for both tallies: the rows' kinds and the bad rows' reasons, as one union.
    hw_type = out.schema["_lake_hw"].dataType
    rows = out.groupBy("_deleted", "_lake_truncated", "_lake_replayed").agg(F.count(F.lit(1)).alias("count"), F.max("_lake_hw").alias("hw"))
    bad = bad_rows.groupBy("_bad").agg(F.count(F.lit(1)).alias("count")).select(
        F.lit(None).cast("boolean").alias("_deleted"), F.lit(None).cast("int").alias("_lake_truncated"),
        F.lit(None).cast("boolean").alias("_lake_replayed"), F.col("count"), F.lit(None).cast(hw_type).alias("hw"), F.col("_bad"))
    for r in rows.withColumn("_bad", F.lit(None).cast("string")).unionByName(bad).collect():
        if r["_bad"] is not None:
            tr.dead_letter += r["count"]
            p.dead_reasons[r["_bad"]] = p.dead_reasons.get(r["_bad"], 0) + r["count"]
            continue
        if r["_lake_replayed"]:
            tr.replayed += r["count"]
            continue
        if r["_lake_truncated"] == 3:
            p.migrated += r["count"]
            continue
        if r["hw"] is not None and (p.high_water is None or r["hw"]["pos"] > p.high_water.pos):
            p.high_water = HighWater(server=r["hw"]["server"], pos=r["hw"]["pos"], ts_ms=r["hw"]["ts_ms"])
        if r["_lake_truncated"] == 1:
            tr.truncated += r["count"]
        if r["_deleted"]:
            tr.deletes += r["count"]
        else:
            tr.upserts += r["count"]


def _backwards(ctx: BatchContext, t: OdsTable, hw: HighWater | None) -> Column:
    """Why an event cannot be ordered by its binlog position (else NULL): it is newer, by its
    source time, than the table's newest position, yet its position is lower, after a change of
    server (failover) or a binlog restart (RESET MASTER). Position order would silently let the
    older rows win; such events go to the dead letter with this reason instead."""
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
           f"dump taken on the current server (remove {ctx.layout.table(t.qualified_name)}, then lake ingest --bootstrap "
           f"{t.qualified_name} --path DUMP --position FILE:POS), or order it by a column the source updates (`ordering:`)")
    return F.when(backwards, F.lit(why))


def _decoded(target: dict[str, str], versions: dict[str, dict[str, Decoder]], bad: Column) -> list[Column]:
    """`_row`, every column of the table decoded from the row image (a column missing from an
    image is NULL: full after-image semantics), and `_bad`, why the event cannot be taken (`bad`,
    or a value that cannot be read)."""
    data_cols: list[Column] = []
    unreadable: Column = F.lit(None).cast("string")
    for name, typ in target.items():
        text = F.col("img").getItem(name)
        expr: Column | None = None
        for h, dec in versions.items():
            d = dec.get(name)
            value = F.lit(None) if d is None else D.decode(text, d)
            cond = F.col("schema_hash") == h if h else F.col("schema_hash").isNull()
            expr = F.when(cond, value) if expr is None else expr.when(cond, value)
        typed = (F.lit(None) if expr is None else expr).cast(typ)  # out of the type's range: NULL, unreadable below
        # Written as the type Hudi stores (TINYINT and SMALLINT as INT): Hudi's row writer (bulk
        # insert) has no writer for TINYINT at all ("Unsupported type: ByteType").
        data_cols.append((typed if stored(typ) == normalize(typ) else typed.cast(stored(typ))).alias(name))
        # A CASE WHEN chain, not nested coalesce(): Spark's common-subexpression search walks
        # every branch of nested coalesce/CASE children again at each level, exponential in the
        # number of columns (a 20-column table hung a task for minutes).
        unreadable = F.when(text.isNotNull() & typed.isNull() & F.lit(typ != "string"),
                            F.lit(f"column {name}: value cannot be read as {typ.upper()}")).otherwise(unreadable)
    # Data columns live in a struct so they cannot clash with message columns (`value`, `op`...).
    return [F.struct(*data_cols).alias("_row"), F.when(bad.isNotNull(), bad).otherwise(unreadable).alias("_bad")]


def ordering_prefix(ctx: BatchContext, t: OdsTable, target: dict[str, str], good: DataFrame, path: Location | None, missing: int) -> tuple[DataFrame, Column, int]:
    """The `_seq` prefix of the configured ordering columns and its width (and `good`, joined to
    what the prefix needs).

    A delete whose before-image lacks an ordering column (Postgres REPLICA IDENTITY DEFAULT,
    minimal row images) would sort first and lose to the row it deletes. It takes the greatest
    prefix its key has, stored or in this batch, so its position decides against those rows, as
    it does between any two events of one ordering value."""
    if not t.ordering:
        return good, F.lit(""), 0
    types = [target.get(c, "string") for c in t.ordering]
    prefix = F.concat(*[D.ordering_prefix(F.col("_row")[c], typ) for c, typ in zip(t.ordering, types, strict=True)])
    width = sum(D.ordering_width(typ) for typ in types)
    if not missing:
        return good, prefix, width
    zeros = F.lit("0" * width)
    # parse.classify: a delete whose before-image lacks the columns or was filled in by the connector.
    lacking = F.col("ord_missing") & (F.col("op") == "d")
    best = F.max(F.when(~lacking, prefix)).over(Window.partitionBy(*[F.col("_row")[k] for k in t.key]))
    known = F.coalesce(best, zeros)
    if path is not None:
        stored = hudi.read(ctx.spark, path).select(*[F.col(f"`{k}`").alias(f"_lake_k{i}") for i, k in enumerate(t.key)],
                                                   F.substring(F.col("_seq"), 1, width).alias("_lake_stored"))
        on = [F.col("_row")[k].eqNullSafe(F.col(f"_lake_k{i}")) for i, k in enumerate(t.key)]
        good = good.join(stored, reduce(lambda a, b: a & b, on), "left")
        known = F.greatest(known, F.coalesce(F.col("_lake_stored"), zeros))
    return good, F.when(lacking, known).otherwise(prefix), width


def watermark_older(watermark: str) -> Column:
    """Events strictly before a bootstrap position (see framework.ods.position)."""
    from framework.ods.position import slice_of

    start, length, value = slice_of(watermark)
    return F.substring(F.col("pos_seq"), start, length) < F.lit(value)
