"""Rewriting an ODS table in wider column types that Hudi cannot take in place: DATE → TIMESTAMP
(Hudi 1.2.0 refuses it in every write mode), or a key column whose text changes (a DECIMAL's
scale, FLOAT → DOUBLE), since Hudi's record key is that text (framework/project/types.py).

1. Stage: the table's rows (every column, lake's included, `_seq` unchanged) cast to the new types
   are bulk-inserted into a fresh Hudi table, `_lake/staging/ods_<name>`, whose one commit carries
   the table's lake metadata (stream and batch, key, high-water mark, hand-off watermark); its
   tombstone table likewise when a key column changes. Nothing is registered in a catalog.
2. A marker, `_lake/staging/ods_<name>.json`, says the staged copy is complete.
3. Swap: the table's folder is removed, the staged folder renamed into its place, the marker
   removed, and the rebuild recorded (framework/runtime/rebuilds.py): models reading the table rebuild
   fully, saying why.

A crash before 2 leaves the table as it was (the next attempt removes the staged copy); after 2,
`recover`, run before a micro-batch first reads the table, finishes the swap. Between the removal
and the rename readers find no table (a rename is instant on a local disk or HDFS, a copy on S3).
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.ods.context import BatchContext, TableState
from framework.runtime import rebuilds
from framework.runtime.faults import failpoint
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi
from models.config import OdsTable

# Commit metadata a table's state is read from (framework/ods/batch.py), carried into the rewrite.
CARRIED = ("ods_stream", "ods_batch", "ods_key", "ods_high_water", "ods_tombstones", "bootstrap_watermark")


def marker(layout: Layout, qualified: str) -> Location:
    staged = layout.staging(qualified)
    return staged.parent / f"{staged.name}.json"


def rewrite(ctx: BatchContext, t: OdsTable, st: TableState, changes: dict[str, tuple[str, str]], options: dict[str, str]) -> None:
    """Rewrite table `t` with `changes` (column -> (stored type, new type)); `options`: its Hudi
    write options. `st` learns the new types."""
    q, layout, fs = t.qualified_name, ctx.layout, ctx.layout.fs
    staged = layout.staging(q)
    fs.delete(staged)  # a staged copy of an attempt that did not finish
    casts = {c: new for c, (_old, new) in changes.items()}
    path = layout.table(q)
    meta: dict[str, str] = {}
    for _inst, m in hudi.commit_metadata(ctx.spark, path):
        meta.update({k: v for k, v in m.items() if k in CARRIED})
    said = ", ".join(f"{c} {old.upper()} → {new.upper()}" for c, (old, new) in sorted(changes.items()))
    meta["ods_rewritten"] = said
    opts = {k: v for k, v in options.items() if not k.startswith("hoodie.datasource.hive_sync.")}
    _stage(ctx.spark, path, staged / "table", casts, {**opts, "hoodie.datasource.write.operation": "bulk_insert"}, meta)
    tomb = layout.tombstones(q)
    if any(c in t.key for c in casts) and hudi.table_exists(tomb) and hudi.completed_instants(ctx.spark, tomb):
        topts = hudi.write_options(name=f"{t.table_name}_tombstones", key=t.key, ordering="_seq", partition=None, cdc=False,
                                   local=ctx.local, extra=ctx.project.config.hudi)
        _stage(ctx.spark, tomb, staged / "tombstones", casts, {**topts, "hoodie.datasource.write.operation": "bulk_insert"}, {})
    reason = f"{q} was rewritten: column {said}, which Hudi cannot change in place"
    fs.write_text(marker(layout, q), json.dumps({"table": q, "reason": reason}))
    failpoint("after_rewrite_staged")
    recover(ctx.spark, layout, q)
    st.columns.update(casts)


def _stage(spark: SparkSession, src: Location, dst: Location, casts: dict[str, str], options: dict[str, str], meta: dict[str, str]) -> None:
    rows: DataFrame = hudi.read(spark, src)
    rows = rows.select(*[(F.col(f"`{c}`").cast(casts[c]).alias(c) if c in casts else F.col(f"`{c}`"))
                         for c in rows.columns if c not in hudi.HOODIE_META_COLUMNS])
    if "_hoodie_is_deleted" not in rows.columns:
        rows = rows.withColumn("_hoodie_is_deleted", F.lit(False))
    hudi.write(rows, dst, options, meta)


def recover(spark: SparkSession, layout: Layout, qualified: str) -> bool:
    """Finish a rewrite of `qualified` whose staged copy is complete (its marker exists): put the
    staged tables in place of the old ones. True when there was one."""
    done = marker(layout, qualified)
    fs = layout.fs
    if not fs.exists(done):
        return False
    reason = json.loads(fs.read_text(done))["reason"]
    staged = layout.staging(qualified)
    for part, dest in (("table", layout.table(qualified)), ("tombstones", layout.tombstones(qualified))):
        if fs.exists(staged / part):  # else already moved (a crash after this rename)
            fs.delete(dest)
            fs.rename(staged / part, dest)
        failpoint("after_rewrite_swap")
    first = hudi.completed_instants(spark, layout.table(qualified))[0].completed
    rebuilds.record(layout, qualified, first, reason)
    fs.delete(done)
    fs.delete(staged)
    return True
