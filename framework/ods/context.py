"""What the steps of an ODS micro-batch share: the session, the project, where tables live, the
stream's id (written into every commit to recognise replays) and the run id; and what the writer
knows about each table between batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import LakeTable, ProjectDefaults
from models.commit_meta import HighWater
from models.config import OdsTable

__all__ = ["BatchContext", "HighWater", "TableState", "utc"]


@dataclass(frozen=True)
class BatchContext:
    spark: SparkSession
    project: Project
    layout: Layout
    stream_id: str
    run_id: str
    # A dead-letter replay's batch: refuse events older than an expired tombstone (tombstones.py).
    replay_guard: bool = False

    @property
    def local(self) -> bool:
        return self.project.config.spark.master.startswith("local")

    @property
    def defaults(self) -> ProjectDefaults:
        return ProjectDefaults.of(self.project)

    def threads(self, tables: int) -> int:
        """How many of `tables` tables are prepared, or written, at once (`ods.commit_threads`)."""
        return max(1, min(self.project.config.ods.commit_threads, tables))

    def table(self, t: OdsTable) -> LakeTable:
        """The ODS table of `t`."""
        return kinds.ods(self.layout, self.defaults, t)

    def tombstones(self, t: OdsTable) -> LakeTable:
        return kinds.tombstones(self.layout, self.defaults, t)

    @property
    def dead_letter(self) -> LakeTable:
        return kinds.dead_letter(self.layout, self.defaults)


@dataclass
class TableState:
    """What the writer knows about one ODS table between batches."""

    columns: dict[str, str] = field(default_factory=dict)  # data column -> spark type
    last_stream: str | None = None
    last_batch: int = -1
    watermark: str | None = None  # bootstrap hand-off position (events at or before it are dropped)
    key: list[str] = field(default_factory=list)  # the key a table without `key:` was created with
    high_water: HighWater | None = None  # the newest binlog position written, and its server
    migrated: bool = False  # its deletes are tombstones: no soft-deleted row left (tombstones.MARKER)
    loaded: bool = False

    def has(self, stream_id: str, batch_id: int) -> bool:
        """This table committed that batch of that stream already (a replay after a crash)."""
        return self.last_stream == stream_id and self.last_batch >= batch_id


def utc(ts: datetime) -> datetime:
    """Spark returns naive datetimes in the driver's local zone; make them aware UTC."""
    return ts.astimezone(timezone.utc) if ts.tzinfo is None else ts
