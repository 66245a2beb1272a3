"""Hudi table access: write options, the timeline and commit extra metadata.

Commit extra metadata is where lake keeps progress (the batch an ODS table has taken, a model's
upstream checkpoints): Hudi writes every write option whose key starts with `_` into the commit
(`hoodie.datasource.write.commitmeta.key.prefix`), so data and progress commit atomically.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.runtime import lock
from framework.runtime.location import Location, as_location
from framework.runtime.storage import storage_for
from framework.table import hudi_layout
from models.layout import DEFAULT_COMPACT_EVERY, TableLayout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from models.catalog import CatalogConfig

META_PREFIX = "_lake_"
# Commits whose files the cleaner keeps (`hoodie.clean.commits.retained`) unless the project's
# `hudi:` options say otherwise: how far an incremental reader may lag (HUDI_NOTES §2.5, §3.4).
CLEAN_RETAINED = 50
HOODIE_META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "_hoodie_operation",
)


@dataclass(frozen=True)
class Instant:
    requested: str
    completed: str
    action: str


def table_exists(path: Location | Path) -> bool:
    where = as_location(path)
    return storage_for(where).exists(where / ".hoodie" / "hoodie.properties")


def table_bytes(path: Location | Path) -> int:
    """Bytes of a table's latest file slices: per file group its newest base file plus the data
    log files written on it (CDC logs and superseded versions the cleaner keeps are not data a
    query reads). A file listing, no Spark job; 0 when the table does not exist."""
    path = as_location(path)
    if not table_exists(path):
        return 0
    base: dict[str, tuple[str, int]] = {}  # file id -> (instant, bytes)
    logs: dict[tuple[str, str], int] = {}  # (file id, base instant) -> bytes
    root = str(path).rstrip("/") + "/"
    for loc, size in storage_for(path).files(path):
        folders = str(loc)[len(root):].split("/")[:-1]
        if any(d.startswith(".") for d in folders):  # .hoodie (timeline, metadata table)
            continue
        f = loc.name
        if f.endswith(".parquet") and not f.startswith("."):
            file_id, _, rest = f.partition("_")
            instant = rest.rsplit("_", 1)[-1].removesuffix(".parquet")
            if file_id not in base or instant > base[file_id][0]:
                base[file_id] = (instant, size)
        elif f.startswith(".") and ".log." in f and not f.endswith((".cdc", ".crc")):
            file_id, _, rest = f[1:].partition("_")
            key = (file_id, rest.split(".log.", 1)[0])
            logs[key] = logs.get(key, 0) + size
    return sum(size for _, size in base.values()) + sum(n for (fid, inst), n in logs.items() if fid not in base or inst >= base[fid][0])


# Rows Hudi's upsert puts in one new file group (`hoodie.copyonwrite.insert.split.size`).
INSERT_SPLIT_ROWS = 500_000


def insert_files(rows: int) -> int:
    """How many files a bulk insert of `rows` rows into a new table (partition) should write: as
    many as an upsert would, so the first load leaves the files later upserts expect, not one per
    Spark partition (a bulk insert with sort mode NONE writes each Spark partition as it is)."""
    return max(1, -(-rows // INSERT_SPLIT_ROWS))


def write_options(
    *,
    name: str,
    key: list[str],
    ordering: str | None,
    partition: str | None,
    table_type: str = "cow",
    cdc: bool = True,
    local: bool = True,
    extra: dict[str, str] | None = None,
    catalog: CatalogConfig | None = None,
    sql_name: str | None = None,
    layout: TableLayout | None = None,
) -> dict[str, str]:
    """Options for an upsert into a lake-managed Hudi table; with a Hive `catalog`, the commit
    also registers the table as `sql_name` (`<database>.<table>`) in the metastore. A `layout`
    (models/layout.py) sets the table type, index and compaction, and is recorded in the commit."""
    if layout is not None:
        table_type = layout.type
    par = "2" if local else "200"
    opts = {
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ" if table_type == "mor" else "COPY_ON_WRITE",
        "hoodie.datasource.write.recordkey.field": ",".join(key),
        "hoodie.datasource.write.partitionpath.field": partition or "",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.table.cdc.enabled": "true" if cdc else "false",
        "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        "hoodie.write.set.null.for.missing.columns": "true",
        "hoodie.datasource.write.commitmeta.key.prefix": "_",
        "hoodie.upsert.shuffle.parallelism": par,
        "hoodie.insert.shuffle.parallelism": par,
        "hoodie.bulkinsert.shuffle.parallelism": par,
        "hoodie.delete.shuffle.parallelism": par,
        "hoodie.embed.timeline.server": "false",
        "hoodie.metadata.enable": "false",
        # Record-key bloom filters in every base file serve only the BLOOM indexes; lake uses
        # SIMPLE / GLOBAL_SIMPLE, and building the filters was ~8 % of a small incremental
        # cycle's CPU (JFR profile, BENCHMARKS.md). Hudi's doc: "set to false in non bloom
        # index cases for CPU resource saving".
        "hoodie.index.type": "SIMPLE",
        "hoodie.parquet.bloom.filter.enabled": "false",
        # Downstream models read CDC files: keep them long enough (cleaner retention bounds
        # how far behind an incremental consumer may be; HUDI_NOTES §2.5, §3.4).
        "hoodie.clean.commits.retained": str(CLEAN_RETAINED),
        "hoodie.keep.min.commits": "60",
        "hoodie.keep.max.commits": "80",
    }
    opts.update(_layout_options(key, ordering, partition, table_type))
    if layout is not None:
        opts.update(hudi_layout.options(layout, key))
        opts[META_PREFIX + hudi_layout.META_KEY] = layout.layout_tag
    if catalog is not None and catalog.kind == "hive":
        if not sql_name:
            raise ValueError(f"the Hudi table {name} is written with a Hive catalog but without its SQL name")
        opts.update(hive_sync_options(catalog, sql_name, partition))
    opts.update(extra or {})
    return opts


def hive_sync_options(catalog: CatalogConfig, sql_name: str, partition: str | None) -> dict[str, str]:
    """Hudi's Hive sync in HMS mode: after each commit the writer creates or alters the table
    `sql_name` in the metastore (new columns, new partitions), as an external table whose
    properties make Spark read it through Hudi and Trino/Presto/Hive through Hudi's input format.
    A merge-on-read table is registered twice, Hudi's convention: `<t>_rt` (snapshot) and `<t>_ro`
    (read-optimized: compacted data only)."""
    database, _, table = sql_name.partition(".")
    return {
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.metastore.uris": catalog.uri or "",
        "hoodie.datasource.hive_sync.database": database,
        "hoodie.datasource.hive_sync.table": table,
        "hoodie.datasource.hive_sync.partition_fields": partition or "",
        "hoodie.datasource.hive_sync.partition_extractor_class": (
            "org.apache.hudi.hive.MultiPartKeysValueExtractor" if partition else "org.apache.hudi.hive.NonPartitionedExtractor"
        ),
        # TIMESTAMP columns, not their bigint microseconds, for engines that read the Hive schema.
        "hoodie.datasource.hive_sync.support_timestamp": "true",
        "hoodie.datasource.hive_sync.auto_create_database": "true",
    }


def _layout_options(key: list[str], ordering: str | None, partition: str | None, table_type: str) -> dict[str, str]:
    """Key generator, merge mode, the index a partitioned table needs, MOR compaction."""
    opts: dict[str, str] = {}
    if len(key) > 1:
        opts["hoodie.datasource.write.keygenerator.class"] = (
            "org.apache.hudi.keygen.ComplexKeyGenerator" if partition else "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
        )
    elif partition:
        opts["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.SimpleKeyGenerator"
    else:
        opts["hoodie.datasource.write.keygenerator.class"] = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if ordering:
        opts["hoodie.table.ordering.fields"] = ordering
        opts["hoodie.write.record.merge.mode"] = "EVENT_TIME_ORDERING"
    else:
        opts["hoodie.write.record.merge.mode"] = "COMMIT_TIME_ORDERING"
    if partition:
        # A row whose partition value changes must move, not be duplicated.
        opts["hoodie.index.type"] = "GLOBAL_SIMPLE"
        opts["hoodie.simple.index.update.partition.path"] = "true"
    if table_type == "mor":
        opts.update(hudi_layout.compaction(DEFAULT_COMPACT_EVERY))
    return opts


def clean_retained(extra: dict[str, str] | None) -> int:
    """The cleaner retention lake's tables are written with, given the project's `hudi:` options."""
    extra = extra or {}
    for k in ("hoodie.clean.commits.retained", "hoodie.cleaner.commits.retained"):
        if k in extra:
            return int(extra[k])
    return CLEAN_RETAINED


def write(df: DataFrame, path: Location | Path, options: dict[str, str], commit_meta: dict[str, str]) -> None:
    """Upsert `df` into the table at `path`, recording `commit_meta` in the same commit; refused
    when this process no longer safely holds its locks (an S3 lease lost: `lock.assert_held`)."""
    lock.assert_held(f"the commit to {path}")
    opts = dict(options)
    for k, v in commit_meta.items():
        opts[META_PREFIX + k] = v
    df.write.format("hudi").options(**opts).mode("append").save(str(path))


def _meta_client(spark: SparkSession, path: Location | Path) -> Any:
    jvm: Any = spark._jvm
    conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConf(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    return jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder().setConf(conf).setBasePath(str(path)).build()


def completed_instants(spark: SparkSession, path: Location | Path) -> list[Instant]:
    """Completed data commits of a table, oldest first (by completion time)."""
    if not table_exists(path):
        return []
    tl = _meta_client(spark, path).getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    out = [Instant(i.requestedTime(), i.getCompletionTime(), i.getAction()) for i in tl.getInstants().toArray()]
    return sorted(out, key=lambda i: i.completed)


def earliest_retained(spark: SparkSession, path: Location | Path) -> str | None:
    """The earliest commit (requested time) the table's latest completed clean kept the files
    of, or None (never cleaned, or a clean policy that records none). Files written by older
    commits may be gone: a change read whose range holds such a commit fails."""
    if not table_exists(path):
        return None
    at = _meta_client(spark, path).getActiveTimeline()
    last = at.getCleanerTimeline().filterCompletedInstants().lastInstant()
    if not last.isPresent():
        return None
    kept = at.readCleanMetadata(last.get()).getEarliestCommitToRetain()
    return str(kept) if kept else None


@dataclass(frozen=True)
class Timeline:
    """A table's timeline as planning reads it, from one meta client."""

    instants: tuple[Instant, ...]  # completed data commits, oldest first (by completion time)
    earliest_retained: str | None  # see `earliest_retained`
    last_meta: dict[str, str]  # lake extra metadata of the latest completed commit
    types: dict[str, dict[str, str]] = field(default_factory=dict)  # completion time -> column types (`column_types`)


def timeline(spark: SparkSession, path: Location | Path, types_at: Collection[str] = ()) -> Timeline:
    """Completed commits, the cleaner's earliest retained commit and the latest commit's lake
    metadata, in one read of the timeline; empty when the table does not exist. With `types_at`
    (completion times), also the column types the table had at those commits and at its latest."""
    if not table_exists(path):
        return Timeline((), None, {})
    mc = _meta_client(spark, path)
    at = mc.getActiveTimeline()
    tl = at.getCommitsTimeline().filterCompletedInstants()
    raw = {i.getCompletionTime(): i for i in tl.getInstants().toArray()}
    instants = tuple(sorted((Instant(i.requestedTime(), i.getCompletionTime(), i.getAction()) for i in raw.values()), key=lambda i: i.completed))
    meta: dict[str, str] = {}
    types: dict[str, dict[str, str]] = {}
    last = _last_write(mc, tl)
    if last is not None:
        extra = dict(at.readCommitMetadata(last).getExtraMetadata())
        meta = {str(k)[len(META_PREFIX):]: str(v) for k, v in extra.items() if str(k).startswith(META_PREFIX)}
        wanted = [c for c in types_at if c in raw and c != instants[-1].completed]
        if wanted:
            types[instants[-1].completed] = column_types(str(extra.get("schema") or ""))
            for c in wanted:
                types[c] = column_types(str(dict(at.readCommitMetadata(raw[c]).getExtraMetadata()).get("schema") or ""))
    clean = at.getCleanerTimeline().filterCompletedInstants().lastInstant()
    kept = at.readCleanMetadata(clean.get()).getEarliestCommitToRetain() if clean.isPresent() else None
    return Timeline(instants, str(kept) if kept else None, meta, types)


_AVRO = {"int": "INT", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "STRING", "boolean": "BOOLEAN", "bytes": "BINARY"}


def column_types(schema: str) -> dict[str, str]:
    """Column -> type (as SQL text) of a commit's Avro writer schema (the `schema` of its commit
    metadata); {} when it has none."""
    import json

    try:
        record = json.loads(schema) if schema else {}
    except json.JSONDecodeError:
        return {}
    out = {}
    for f in record.get("fields", []) if isinstance(record, dict) else []:
        t = f.get("type")
        if isinstance(t, list):  # a nullable field: ["null", type]
            t = next((x for x in t if x != "null"), "null")
        if isinstance(t, dict):
            logical = t.get("logicalType")
            if logical == "decimal":
                t = f"DECIMAL({t.get('precision')},{t.get('scale', 0)})"
            elif logical == "date":
                t = "DATE"
            elif logical in ("timestamp-micros", "timestamp-millis"):
                t = "TIMESTAMP"
            elif logical in ("local-timestamp-micros", "local-timestamp-millis"):
                t = "TIMESTAMP_NTZ"
            else:
                t = json.dumps({k: v for k, v in t.items() if k not in ("name", "namespace", "doc")}, sort_keys=True)
        out[str(f.get("name"))] = _AVRO.get(str(t), str(t))
    return out


def _last_write(mc: Any, tl: Any) -> Any:
    """The latest completed instant a writer made: on a merge-on-read table a `commit` is a
    compaction, which carries none of the writer's extra metadata (lake's checkpoint,
    fingerprint, hidden-groups instant): the delta commit before it does."""
    instants = list(tl.getInstants().toArray())
    if str(mc.getTableType().name()) == "MERGE_ON_READ":
        instants = [i for i in instants if str(i.getAction()) != "commit"]
    return instants[-1] if instants else None


def last_commit_metadata(spark: SparkSession, path: Location | Path, key_filter: str = META_PREFIX) -> tuple[Instant | None, dict[str, str]]:
    """The latest completed commit and its lake extra metadata (keys without the prefix)."""
    if not table_exists(path):
        return None, {}
    mc = _meta_client(spark, path)
    tl = mc.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    inst = _last_write(mc, tl)
    if inst is None:
        return None, {}
    meta = mc.getActiveTimeline().readCommitMetadata(inst).getExtraMetadata()
    lake = {str(k)[len(key_filter) :]: str(v) for k, v in dict(meta).items() if str(k).startswith(key_filter)}
    return Instant(inst.requestedTime(), inst.getCompletionTime(), inst.getAction()), lake


def cdc_logged(spark: SparkSession, path: Location | Path, begin: str, end: str) -> bool:
    """Every change in (begin, end] (completion times) is in a CDC log file, so the CDC query reads
    only those logs and its images are Hudi's own Avro JSON. False when any commit in the range
    created a file group (pure inserts: Hudi infers their images from the new base file) or is
    not a plain commit (replace, delta commit, compaction): images inferred from base files."""
    if not table_exists(path):
        return False
    at = _meta_client(spark, path).getActiveTimeline()
    for i in at.getCommitsTimeline().filterCompletedInstants().getInstants().toArray():
        if not begin < i.getCompletionTime() <= end:
            continue
        if i.getAction() != "commit":
            return False
        for stat in at.readCommitMetadata(i).getWriteStats().toArray():
            cdc = stat.getCdcStats()
            if cdc is None or cdc.isEmpty():
                return False
    return True


def record_key(spark: SparkSession, path: Location | Path) -> list[str]:
    """The record key fields the table was created with (hoodie.properties); [] if none."""
    if not table_exists(path):
        return []
    fields = _meta_client(spark, path).getTableConfig().getRecordKeyFields()
    return [str(f) for f in fields.get()] if fields.isPresent() else []


def partition_fields(spark: SparkSession, path: Location | Path) -> list[str]:
    """The partition fields the table was created with (hoodie.properties); [] if none."""
    if not table_exists(path):
        return []
    fields = _meta_client(spark, path).getTableConfig().getPartitionFields()
    return [str(f) for f in fields.get()] if fields.isPresent() else []


def commit_metadata(spark: SparkSession, path: Location | Path) -> list[tuple[Instant, dict[str, str]]]:
    """Every completed commit with its lake extra metadata, oldest first."""
    if not table_exists(path):
        return []
    mc = _meta_client(spark, path)
    at = mc.getActiveTimeline()
    tl = at.getCommitsTimeline().filterCompletedInstants()
    out = []
    for i in tl.getInstants().toArray():
        meta = dict(at.readCommitMetadata(i).getExtraMetadata())
        lake = {str(k)[len(META_PREFIX) :]: str(v) for k, v in meta.items() if str(k).startswith(META_PREFIX)}
        out.append((Instant(i.requestedTime(), i.getCompletionTime(), i.getAction()), lake))
    return sorted(out, key=lambda p: p[0].completed)


def read(spark: SparkSession, path: Location | Path) -> DataFrame:
    """Snapshot read of a table."""
    return spark.read.format("hudi").load(str(path))
