"""Has ODS taken every change the source database committed before a position? `lake reconcile`
waits for that before it re-reads a differing key, so a change still on its way through the
stream is in flight, never a difference, however long ingest lags.

Two positions decide it, both kept by the chain itself:

1. **The connector's.** Kafka Connect commits a source offset (Debezium's binlog file and
   position, or the PostgreSQL commit LSN) only after the broker acknowledged every record
   before it; it is read over Connect's REST API (`GET /connectors/<name>/offsets`, Kafka 3.5+).
   Once it has reached the database's position P, every change committed before P is in Kafka.
   An idle database never moves the offset past P, so when the connector has a signal table lake
   first writes a `log` signal into it (a no-op for the connector, a captured write after P).
2. **lake's.** The Kafka offsets of the last micro-batch the ODS stream committed (Spark's
   checkpoint, `offsets/<n>` once `commits/<n>` exists). At the moment of (1), the messages beyond
   them that carry the table's events (routed as ingest routes them) are what ODS must still take;
   it has caught up when its committed offsets pass the last of them. None: caught up already, so
   a reconcile run after ingest has stopped is exact too.

Without `reconcile.sources.<db>.connect`, with CDC files instead of Kafka, or before the ODS stream
has committed a micro-batch, there is no position to wait for and reconcile falls back to
re-reading after `settle_seconds`."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.ods.ingest import STREAM_CHECKPOINT
from framework.ods.kafka import KafkaSource, reader_options
from framework.ods.parse import envelopes
from framework.ods.position import parse_position
from framework.project.config import Project
from framework.reconcile.source import SourceTable
from framework.reconcile.target import signal_sources
from framework.runtime.paths import Layout
from framework.runtime.storage import storage_for
from models.config import KafkaSourceConfig, OdsTable
from models.reconcile import ConnectSettings

Offsets = dict[str, dict[str, int]]  # topic -> partition -> next offset


def connector_offset(c: ConnectSettings) -> dict[str, Any]:
    """The connector's committed source offset ({} before its first)."""
    url = f"{c.url.rstrip('/')}/connectors/{c.connector}/offsets"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=15) as r:
            body = json.loads(r.read() or b"{}")
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise LakeError(f"cannot read the offsets of the connector {c.connector} at {c.url}: {e}",
                        fix="check reconcile.sources.<db>.connect (Kafka Connect's REST address and the connector's name; Kafka 3.5 or later)") from e
    offsets = body.get("offsets") or []
    return dict(offsets[0].get("offset") or {}) if offsets else {}


def reached(offset: Mapping[str, Any], position: str) -> bool:
    """Whether a Debezium source offset is at or past a database position (`file:pos` as SHOW
    MASTER STATUS gives it, or `lsn:N`). An offset inside a snapshot has not reached anything."""
    if not offset or str(offset.get("snapshot", "false")).lower() not in ("false", "none", ""):
        return False
    want = parse_position(position)
    if want.startswith("lsn:"):
        done = [int(offset[k]) for k in ("lsn_commit", "lsn", "lsn_proc") if offset.get(k) is not None]
        return bool(done) and max(done) >= int(want[4:])
    if "file" not in offset or "pos" not in offset:
        return False
    have = parse_position(f"{offset['file']}:{int(offset['pos'])}")
    return have >= want  # the same fixed width: file number, then position


def committed(project: Project) -> Offsets | None:
    """The Kafka offsets up to which the ODS stream (`lake ingest`'s default checkpoint) has
    committed everything; None before its first committed micro-batch."""
    base = Layout(project.warehouse).checkpoint("ods") / STREAM_CHECKPOINT
    fs = storage_for(base)
    done = [int(p.name) for p in fs.children(base / "commits") if p.name.isdigit()]
    if not done:
        return None
    lines = fs.read_text(base / "offsets" / str(max(done))).splitlines()
    # 'v1', the batch's metadata, then one line per source: the Kafka source's {topic: {partition: offset}}.
    found: Offsets = {}
    for line in lines[2:]:
        if line.strip().startswith("{"):
            for topic, parts in json.loads(line).items():
                found[topic] = {str(p): int(o) for p, o in parts.items()}
    return found


def pending(spark: SparkSession, project: Project, t: OdsTable, start: Offsets) -> Offsets:
    """Where the messages beyond `start` that carry `t`'s events end, per topic partition (only
    the partitions that have such messages): one Spark read of whatever lies beyond `start`, with
    lake's own Kafka settings, each message routed as ingest routes it (Avro decoded first).
    Heartbeats, transaction markers, signals and other tables' events do not hold the wait up."""
    cfg = project.config.ods.source
    assert isinstance(cfg, KafkaSourceConfig)
    opts = {k: v for k, v in reader_options(cfg).items() if k not in ("subscribe", "subscribePattern", "maxOffsetsPerTrigger", "startingOffsets")}
    opts.update({"assign": json.dumps({topic: [int(p) for p in ps] for topic, ps in start.items()}), "startingOffsets": json.dumps(start),
                 "endingOffsets": "latest", "failOnDataLoss": "false"})
    source = KafkaSource(project, cfg)
    try:
        msgs = source.messages(spark, spark.read.format("kafka").options(**opts).load(), 0)
        env = envelopes(msgs, {x.source for x in project.ods_tables}, signal_sources(project))
        at = F.split(F.col("loc"), "/")
        rows = (env.where(F.col("tbl") == t.source).select(at.getItem(0).alias("topic"), at.getItem(1).alias("partition"), at.getItem(2).cast("bigint").alias("offset"))
                .groupBy("topic", "partition").agg(F.max("offset").alias("last")).collect())
    finally:
        source.release()
    out: Offsets = {}
    for r in rows:
        out.setdefault(r["topic"], {})[str(r["partition"])] = int(r["last"]) + 1
    return out


def _behind(now: Offsets | None, target: Offsets) -> int:
    """Messages ODS has still to take to reach `target`."""
    if now is None:
        return sum(sum(ps.values()) for ps in target.values())
    return sum(max(0, o - now.get(t, {}).get(p, 0)) for t, ps in target.items() for p, o in ps.items())


def has_positions(project: Project) -> bool:
    """Whether ODS follows Kafka and its stream has committed a micro-batch: lake's side of the
    positions the wait compares."""
    return isinstance(project.config.ods.source, KafkaSourceConfig) and committed(project) is not None


class CatchUp:
    """Waits until ODS has taken every change the source committed before the moment of the call;
    `__call__(seconds)` returns None once it has, else why not (out of time, no checkpoint)."""

    def __init__(self, spark: SparkSession, project: Project, t: OdsTable, src: SourceTable, connect: ConnectSettings, *,
                 poll: float = 0.5, sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.spark, self.project, self.t, self.src, self.connect = spark, project, t, src, connect
        self.poll, self.sleep, self.clock = poll, sleep, clock

    @classmethod
    def of(cls, spark: SparkSession, project: Project, t: OdsTable, src: SourceTable) -> CatchUp | None:
        """The wait for `t`'s source, or None when there are no positions to compare: no
        `connect:` for its database, CDC files instead of Kafka, or no micro-batch the ODS stream
        has committed yet (reconcile then re-reads after `settle_seconds`)."""
        connect = src.settings.connect
        return cls(spark, project, t, src, connect) if connect is not None and has_positions(project) else None

    def __call__(self, seconds: float) -> str | None:
        deadline = self.clock() + seconds
        position = self.src.position()
        if self.src.settings.signal:  # a captured write after the position, so an idle database moves the connector past it
            self.src.log_signal(self.src.settings.signal, f"lake reconcile: waiting for the stream to reach {position}")
        while not reached(connector_offset(self.connect), position):
            if self.clock() >= deadline:
                return f"the connector {self.connect.connector} had not reached the database's position {position}"
            self.sleep(self.poll)
        start = committed(self.project) or {}
        target = pending(self.spark, self.project, self.t, start)
        while (behind := _behind(committed(self.project), target)) > 0:
            if self.clock() >= deadline:
                return (f"ODS had {behind} message(s) of {self.t.source} still to take to reach the database's position {position} "
                        "(is `lake ingest` running?)")
            self.sleep(self.poll)
        return None
