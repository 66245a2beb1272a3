"""What `lake ingest --rebuild ods.T` would lose: the rows whose last event the source no longer holds.

A rebuild removes the table and reads the CDC the source still offers. A row comes back only if
its last event (the row's `_source`: where that event was read) is still there:

- Kafka (`topic/partition/offset`): the offset is at or after the partition's earliest retained
  offset. Retention (`retention.ms`, `retention.bytes`, deleted records) drops whole segments; a
  row whose last event was in one would vanish without a word (the rebuild reads with
  `failOnDataLoss` off).
- a CDC file (`file:line`): the file still exists.
- anything else (`bootstrap:` rows a dump loaded) comes back only from a dump (`--path`).

When the table is gone or unreadable there are no rows to look at; for Kafka the earliest
retained offsets are then compared with the offsets the project's ingest checkpoints started
from (Spark's `stream/sources/0/0`; offset 0 without a checkpoint): a later one means events the
table had read are gone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.ods.kafka import reader_options
from framework.project.config import Project
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.runtime.storage import storage_for
from framework.table import kinds
from framework.table.columns import live
from framework.table.lake_table import LakeTable, ProjectDefaults
from models.config import KafkaSourceConfig, OdsTable

_KAFKA_LOC = r"^(.+)/([0-9]+)/([0-9]+)$"
_FILE_LOC = r"^(.+):([0-9]+)$"
SAMPLES = 5


@dataclass
class Loss:
    """The table's rows (None: no table to count) and those a rebuild cannot bring back."""

    rows: int | None
    lost: int = 0
    samples: list[str] = field(default_factory=list)  # `_source` of a few lost rows
    where: str = ""  # what the source still holds, for the message

    def message(self, q: str) -> str:
        if self.rows is None:
            return f"{q} is gone, and the source no longer holds all the events it was built from ({self.where})"
        e_g = f" (rows last written at {', '.join(self.samples)})" if self.samples else ""
        return (f"lake ingest --rebuild {q} would lose {self.lost} of the {self.rows} rows of {q}: their last event is no "
                f"longer in the source{e_g}; {self.where}")


def loss(spark: SparkSession, project: Project, t: OdsTable) -> Loss:
    """What rebuilding `t` from the source alone would lose (see the module docstring)."""
    layout = Layout(project.warehouse)
    src = project.config.ods.source
    earliest = earliest_offsets(spark, src) if isinstance(src, KafkaSourceConfig) else None
    stored = _stored(spark, kinds.ods(layout, ProjectDefaults.of(project), t))
    if stored is None:
        if earliest is None:
            return Loss(rows=None)
        return _gone_table(layout, earliest)
    if earliest is not None:
        marked, where = _kafka_marked(spark, stored, earliest), "Kafka holds " + _describe(earliest)
    else:
        marked, where = _files_marked(spark, project, stored)
    marked = marked.persist()
    try:
        counts = marked.agg(F.count(F.lit(1)).alias("rows"), F.sum((~F.col("_lake_kept")).cast("int")).alias("lost")).first()
        assert counts is not None
        out = Loss(rows=int(counts["rows"]), lost=int(counts["lost"] or 0), where=where)
        if out.lost:
            lost = marked.where(~F.col("_lake_kept")).select("_source").orderBy("_source").limit(SAMPLES)
            out.samples = [str(r["_source"]) for r in lost.collect()]
    finally:
        marked.unpersist()
    return out


def row_count(spark: SparkSession, project: Project, t: OdsTable) -> int | None:
    """The table's live rows (None: no readable table)."""
    stored = _stored(spark, kinds.ods(Layout(project.warehouse), ProjectDefaults.of(project), t))
    return None if stored is None else stored.count()


def _stored(spark: SparkSession, table: LakeTable) -> DataFrame | None:
    """The table's live rows' `_source`, or None when there is no readable table."""
    if not table.committed():
        return None
    df = table.read(spark)
    if "_source" not in df.columns:
        return None
    return df.where(live(df)).select("_source")


def earliest_offsets(spark: SparkSession, cfg: KafkaSourceConfig) -> dict[tuple[str, int], int]:
    """The earliest offset each partition of the source's topics still holds, asked with the
    Kafka client Spark's connector brings and the same client settings the ingest uses."""
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    props = jvm.java.util.Properties()
    for k, v in reader_options(cfg).items():
        if k.startswith("kafka."):
            props.setProperty(k[len("kafka."):], v)
    for k in ("key.deserializer", "value.deserializer"):
        props.setProperty(k, "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    try:
        timeout = jvm.java.time.Duration.ofSeconds(cfg.connect_timeout_seconds)
        topics = consumer.listTopics(timeout)
        names = cfg.topics or [str(t) for t in topics.keySet() if jvm.java.util.regex.Pattern.matches(cfg.topic_pattern, t)]
        wanted = jvm.java.util.ArrayList()
        for name in names:
            for info in topics.get(name) or []:
                wanted.add(jvm.org.apache.kafka.common.TopicPartition(name, info.partition()))
        begin = consumer.beginningOffsets(wanted, timeout)
        return {(str(tp.topic()), int(tp.partition())): int(off) for tp, off in begin.items()}
    finally:
        consumer.close()


def _kafka_marked(spark: SparkSession, stored: DataFrame, earliest: dict[tuple[str, int], int]) -> DataFrame:
    """`_source` and `_lake_kept`: the row's last event is at or after its partition's earliest
    retained offset (a location that is not a Kafka one is not kept)."""
    held = spark.createDataFrame([(t, p, o) for (t, p), o in earliest.items()], "_lake_topic string, _lake_part int, _lake_earliest bigint")
    rows = stored.select(
        "_source",
        F.regexp_extract("_source", _KAFKA_LOC, 1).alias("_lake_topic"),
        F.regexp_extract("_source", _KAFKA_LOC, 2).cast("int").alias("_lake_part"),
        F.regexp_extract("_source", _KAFKA_LOC, 3).cast("bigint").alias("_lake_offset"),
    )
    joined = rows.join(F.broadcast(held), ["_lake_topic", "_lake_part"], "left")
    return joined.select("_source", F.coalesce(F.col("_lake_offset") >= F.col("_lake_earliest"), F.lit(False)).alias("_lake_kept"))


def _describe(earliest: dict[tuple[str, int], int]) -> str:
    parts = [f"{t} partition {p} from offset {o}" for (t, p), o in sorted(earliest.items())]
    return ", ".join(parts[:10]) + (f" and {len(parts) - 10} more partitions" if len(parts) > 10 else "") if parts else "no partition"


def checkpoint_starts(layout: Layout) -> dict[tuple[str, int], int]:
    """The offsets each Kafka ingest checkpoint of the warehouse started from (Spark writes them
    once, in `stream/sources/0/0`); the smallest per partition."""
    fs = layout.fs
    out: dict[tuple[str, int], int] = {}
    for ckpt in fs.children(layout.lake / "checkpoints"):
        f = ckpt / "stream" / "sources" / "0" / "0"
        if not fs.exists(f):
            continue
        text = fs.read_text(f).lstrip("\x00")
        try:
            offsets = json.loads(text.splitlines()[-1])
        except (ValueError, IndexError):
            continue
        for topic, parts in offsets.items():
            for p, o in parts.items():
                key = (topic, int(p))
                out[key] = min(out.get(key, int(o)), int(o))
    return out


def _gone_table(layout: Layout, earliest: dict[tuple[str, int], int]) -> Loss:
    starts = checkpoint_starts(layout)
    dropped = {tp: (starts.get(tp, 0), e) for tp, e in earliest.items() if e > starts.get(tp, 0)}
    if not dropped:
        return Loss(rows=None)
    what = ", ".join(f"{t} partition {p} offsets {s} to {e - 1}" for (t, p), (s, e) in sorted(dropped.items())[:10])
    return Loss(rows=None, lost=sum(e - s for s, e in dropped.values()), where=f"Kafka no longer holds {what}")


def _files_marked(spark: SparkSession, project: Project, stored: DataFrame) -> tuple[DataFrame, str]:
    """`_source` and `_lake_kept`: the CDC file of the row's last event still exists."""
    file = F.regexp_extract("_source", _FILE_LOC, 1)
    names = sorted(str(r["f"]) for r in stored.select(file.alias("f")).distinct().collect() if r["f"])
    present = [n for n in names if _exists(project, n)]
    gone = [n for n in names if n not in set(present)]
    where = f"{len(gone)} of the {len(names)} CDC files the rows come from are gone" + (f" (e.g. {', '.join(gone[:3])})" if gone else "")
    held = spark.createDataFrame([(n, True) for n in present], "_lake_file string, _lake_here boolean")
    joined = stored.withColumn("_lake_file", file).join(F.broadcast(held), "_lake_file", "left")
    return joined.select("_source", F.coalesce(F.col("_lake_here"), F.lit(False)).alias("_lake_kept")), where


def _exists(project: Project, name: str) -> bool:
    if name.startswith("bootstrap"):
        return False
    loc = Location.parse(name, project.root)
    return storage_for(loc).exists(loc)
