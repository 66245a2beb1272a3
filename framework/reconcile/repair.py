"""`lake reconcile --repair` over JDBC: the differing keys' rows read from the source database
and upserted into the ODS table, and the extra keys deleted (a tombstone, then a Hudi delete), in
one ODS commit each way, as `lake ingest` writes them.

Ordering stays exact: the rows get the `_seq` of the database's log position taken *before* they
were read (after any `ordering:` prefix, as a bootstrap's rows do), so any event the database
writes after the read is newer and wins over the repair, and an event already read is older and
loses to it; where that position does not rank above the stored row, just above the stored row's
own `_seq` (`_above`). On PostgreSQL the position sits in the change-LSN slot of `_seq`, below the
commit order that ranks every streamed event, so a repair there wins over the stored row and over
no later event. A delete is ranked the same way, so it wins over the stored row and never over a
later re-insert, and its tombstone keeps a late older event from resurrecting the key (framework/ods/tombstones.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.ods import decode as D
from framework.ods.batch import META_COLUMNS
from framework.ods.position import parse_position, seq_at
from framework.project.config import Project
from framework.reconcile import signal
from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.compare import KeyDiff
from framework.reconcile.ods import text
from framework.reconcile.rows import Key
from framework.reconcile.source import SourceTable
from framework.reconcile.sql import Ranged
from framework.reconcile.table import ods_table
from framework.reconcile.target import SourceTarget, settings_of
from framework.runtime.paths import Layout
from framework.table import hudi, kinds
from framework.table.lake_table import ProjectDefaults
from models.commit_meta import OdsCommit, TombstoneMark
from models.config import OdsTable

_ARRIVAL = "0" * 27  # the arrival slot after the position (bootstrap's rows have it so too)


def typed(c: ColumnSpec, text: Column) -> Column:
    """A column's value from the text the source printed for it (canonical.py's rules, floats
    as the database prints them)."""
    k = c.kind
    if k == "bool":
        return F.when(text == "1", F.lit(True)).when(text == "0", F.lit(False))
    if k == "timestamp":
        return F.timestamp_micros(text.cast("bigint"))
    if k == "binary":
        return F.unhex(text)
    if k in ("string", "time"):
        return text
    return text.cast(c.spark_type)


def _key_filter(t_key: Sequence[str], cols: Sequence[ColumnSpec], keys: Sequence[Key], digits: int) -> Column:
    """The rows of these keys (their canonical texts)."""
    by_name = {c.name: c for c in cols}
    return reduce(lambda a, b: a | b, [
        reduce(lambda x, y: x & y, [text(by_name[k], digits).eqNullSafe(F.lit(v)) for k, v in zip(t_key, key, strict=True)])
        for key in keys])


@dataclass(frozen=True)
class Repaired:
    """What `--repair` did to one table: keys written into ODS (upserts and deletes), keys asked
    of the connector's incremental snapshot, and the signals that asked."""

    written: int = 0
    requested: int = 0
    signals: tuple[str, ...] = ()

    def describe(self, table: str) -> str:
        parts = []
        if self.requested:
            parts.append(f"{self.requested} key(s) asked of the connector as an incremental snapshot (signal "
                         f"{', '.join(self.signals)}): they reach {table} through the stream, with the next ingest")
        if self.written or not self.requested:
            parts.append(f"{self.written} key(s) written into {table} from the source")
        return "; ".join(parts)


def repair(spark: SparkSession, project: Project, t: OdsTable, target: SourceTarget, cols: Sequence[ColumnSpec], r: Ranged,
           differences: Sequence[KeyDiff], run_id: str) -> Repaired:
    """Bring the differing keys' source rows into ODS (through the connector's incremental
    snapshot when `reconcile.sources.<db>.signal` names its signal table and the dialect's
    snapshot reads carry a position, else read here and upserted) and delete its extra keys. The
    caller holds the table's lock."""
    upsert = [d.key for d in differences if d.kind in ("missing", "changed")]
    extra = [d.key for d in differences if d.kind == "extra"]
    cfg = settings_of(project)
    signals: list[str] = []
    with SourceTable(target.settings, target.db_name, target.parts, cfg.float_digits) as src:
        position = src.position()  # before the reads: whatever they see is at or after it
        if upsert and target.settings.signal and signal.snapshot_ranks(target.settings.dialect):
            signals = _request(src, target, cols, r, upsert, cfg.float_digits)
            requested, upsert = len(upsert), []
        else:
            requested = 0
        rows = src.keyed(r, cols, upsert) if upsert else {}
        still_there = src.keyed(r, cols, extra) if extra else {}
    extra = [k for k in extra if k not in still_there]  # re-inserted since: the stream brings it
    seq = seq_at(parse_position(position)) + _ARRIVAL
    table = ods_table(project, t)
    stored = table.read(spark)
    data_cols = [f for f in stored.schema.fields if not f.name.startswith("_") and not (t.partition_by and f.name == t.partition_by.derived_name)]
    by_name = {c.name: c for c in cols}
    now = datetime.now(timezone.utc)
    written = 0
    if rows:
        schema = T.StructType([T.StructField(c.name, T.StringType()) for c in cols])
        raw = spark.createDataFrame([row.values for row in rows.values()], schema)
        data = raw.select(*[typed(by_name[f.name], F.col(f"`{f.name}`")).cast(f.dataType).alias(f.name) if f.name in by_name
                            else F.lit(None).cast(f.dataType).alias(f.name) for f in data_cols])
        prefix = _prefix(t, data)
        out = data.select("*", F.lit("r").alias("_op"), F.lit(None).cast("timestamp").alias("_event_ts"),
                          F.concat(prefix, F.lit(seq)).alias("_seq"), F.lit(now).alias("_ingested_at"), F.lit(False).alias("_deleted"),
                          F.lit(f"reconcile:{run_id}").alias("_source"))
        before = stored.select(*[F.col(f"`{k}`") for k in t.key], F.col("_seq").alias("_lake_stored"))
        out = out.join(before, list(t.key), "left").withColumn("_seq", _above(F.col("_seq"), F.col("_lake_stored")))
        out = out.select(*[F.col(f"`{f.name}`") for f in data_cols], *[F.col(c) for c in META_COLUMNS])
        _commit(project, t, _partitioned(t, out), f"{len(rows)} key(s) read from the source at {position}")
        written += len(rows)
    if extra:
        gone = stored.where(_key_filter([k.name for k in r.key], cols, extra, cfg.float_digits))
        width = sum(D.ordering_width(dict(stored.dtypes)[c]) for c in t.ordering)
        deletes = gone.select(*[F.col(f"`{f.name}`") for f in data_cols], F.lit("d").alias("_op"), F.lit(None).cast("timestamp").alias("_event_ts"),
                              _above(F.concat(F.substring(F.col("_seq"), 1, width), F.lit(seq)), F.col("_seq")).alias("_seq"), F.lit(now).alias("_ingested_at"),
                              F.lit(True).alias("_deleted"), F.lit(f"reconcile:{run_id}").alias("_source"),
                              *([F.col(f"`{t.partition_by.derived_name}`")] if t.partition_by else [])).persist()
        try:
            n = deletes.count()
            if n:
                keys = [F.col(f"`{k}`") for k in t.key]
                tomb = deletes.select(*keys, F.col("_seq"), F.col("_ingested_at").alias("_deleted_at"), F.lit(False).alias("_hoodie_is_deleted"))
                kinds.tombstones(Layout(project.warehouse), ProjectDefaults.of(project), t).commit(
                    tomb.coalesce(hudi.insert_files(n)), TombstoneMark(stream=f"reconcile:{run_id}", batch=0, oldest=None))
                _commit(project, t, deletes, f"{n} extra key(s) deleted at {position}")
                written += n
        finally:
            deletes.unpersist()
    return Repaired(written=written, requested=requested, signals=tuple(signals))


def _request(src: SourceTable, target: SourceTarget, cols: Sequence[ColumnSpec], r: Ranged, keys: Sequence[Key], digits: int) -> list[str]:
    """Signal the connector to snapshot exactly `keys`; the signals' ids."""
    assert target.settings.signal is not None
    coll = signal.collection(target)
    conditions = signal.key_conditions(src.sql, r.key, keys, digits)
    ids = []
    for data in signal.payloads(coll, conditions, target.settings.signal_max_chars):
        ident = signal.signal_id()
        src.signal(target.settings.signal, ident, data)
        ids.append(ident)
    return ids


def _above(at_position: Column, stored: Column) -> Column:
    """The repair's `_seq`: its source position's, or just above the stored row's `_seq` when that
    is greater (`<stored>1` is greater than the stored row and smaller than every later event,
    whose `_seq` is greater at some digit). On MariaDB/MySQL the binlog position read before the
    rows is the greater; on PostgreSQL it sits below every streamed event (the commit-order slot is
    empty), so a repair there overtakes the stored row and nothing newer."""
    return F.greatest(at_position, F.concat(stored, F.lit("1")))


def _prefix(t: OdsTable, data: DataFrame) -> Column:
    """The `ordering:` columns' part of `_seq` (empty without them), from the rows' own values."""
    if not t.ordering:
        return F.lit("")
    types = dict(data.dtypes)
    return F.concat(*[D.ordering_prefix(F.col(f"`{c}`"), types[c]) for c in t.ordering])


def _partitioned(t: OdsTable, out: DataFrame) -> DataFrame:
    if not t.partition_by:
        return out
    p = t.partition_by
    fmt = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[p.granularity]
    return out.withColumn(p.derived_name, F.date_format(F.col(f"`{p.column}`").cast("timestamp"), fmt))


def _commit(project: Project, t: OdsTable, rows: DataFrame, note: str) -> None:
    """One ODS commit of repaired rows (deletes as Hudi deletes, as ingest writes them)."""
    out = rows.withColumn("_hoodie_is_deleted", F.col("_deleted")).withColumn("_deleted", F.lit(False))
    ods_table(project, t).commit(out, OdsCommit(key=list(t.key), tombstones=True, repaired=f"reconcile --repair: {note}"))
