"""`LakeTable`: the one owner of a lake Hudi table.

A lake table is a Hudi table lake writes: an ODS table, its tombstones, the dead letter, a model,
its hidden groups, a quarantine, a rewrite's staged copy (framework/table/kinds.py makes each).
Its `LakeTable` knows

- its spec (`TableSpec`: Hudi name, SQL name, key, ordering, partition, layout, CDC on or off,
  which failpoints surround its commits) and the project's defaults (`ProjectDefaults`: local or
  cluster parallelism, the project's `hudi:` options, the catalog), so no caller passes them;
- how to commit a DataFrame with a typed record (models/commit_meta.py) in the same Hudi commit;
- its timeline and `hoodie.properties`, read without a JVM (framework/table/timeline.py);
- what to do with a table whose creation never completed (`settle`): a `kill -9` while Hudi
  creates a table leaves `.hoodie/` without `hoodie.properties`, or with it but without a
  completed commit, and Hudi then fails on every later write. Such a table holds no data
  (nothing was ever committed): its folder is removed, saying so, and the write goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from framework.runtime.faults import failpoint, watch_creation
from framework.runtime.location import Location
from framework.runtime.storage import storage_for
from framework.table import hudi, timeline
from framework.table.hudi import Instant, Timeline
from framework.table.timeline import Commit
from models.catalog import CatalogConfig
from models.layout import TableLayout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from framework.project.config import Project
    from models.commit_meta import CommitRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableSpec:
    """What a lake table is, independent of where and for which project."""

    kind: str  # ods, tombstones, dead_letter, model, hidden, quarantine, staged (framework/table/kinds.py)
    name: str  # hoodie.table.name
    key: tuple[str, ...]
    ordering: str | None = None
    partition: str | None = None
    layout: TableLayout | None = None  # type, index, compaction; recorded in every commit
    table_type: str = "cow"  # without a layout
    cdc: bool = True  # downstream models read its changes
    sql_name: str | None = None  # `<database>.<table>` registered in the catalog; None: never registered
    before: str | None = None  # failpoint names around its commits (framework/runtime/faults.py)
    after: str | None = None
    first_operation: str | None = None  # the Hudi operation of its first commit (None: upsert)


@dataclass(frozen=True)
class ProjectDefaults:
    """What every table of one project is written with."""

    local: bool = True  # local Spark: shuffle parallelism 2, else 200
    extra: dict[str, str] = field(default_factory=dict)  # the project's `hudi:` options, last word
    catalog: CatalogConfig | None = None

    @classmethod
    def of(cls, project: Project) -> ProjectDefaults:
        cfg = project.config
        return cls(cfg.spark.master.startswith("local"), dict(cfg.hudi), cfg.catalog)


class LakeTable:
    """One lake table at one location, written with one project's defaults."""

    def __init__(self, spec: TableSpec, location: Location, defaults: ProjectDefaults) -> None:
        self.spec, self.location, self.defaults = spec, location, defaults

    def __repr__(self) -> str:
        return f"LakeTable({self.spec.kind} {self.spec.sql_name or self.spec.name} at {self.location})"

    def at(self, location: Location, **changes: object) -> LakeTable:
        """The same table elsewhere (a staged copy), its spec changed by `changes`."""
        return LakeTable(replace(self.spec, **changes), location, self.defaults)  # type: ignore[arg-type]

    # -- writing ---------------------------------------------------------------------------------

    def options(self, operation: str | None = None) -> dict[str, str]:
        """The Hudi write options of an upsert (or `operation`) into this table."""
        s, d = self.spec, self.defaults
        opts = hudi.write_options(name=s.name, key=list(s.key), ordering=s.ordering, partition=s.partition,
                                  table_type=s.table_type, cdc=s.cdc, local=d.local, extra=d.extra,
                                  catalog=d.catalog if s.sql_name else None, sql_name=s.sql_name, layout=s.layout)
        if operation:
            opts["hoodie.datasource.write.operation"] = operation
        if operation == "bulk_insert" and s.partition:
            # Sort mode NONE (Hudi's default) keeps a Parquet writer open for every table partition
            # a task meets: a first load into ~1,000+ partitions ran a 4 GB driver out of memory
            # (HUDI-4261). PARTITION_SORT shuffles rows by partition path and sorts each task's
            # rows by it, so a task writes its partitions one after another, one writer open.
            opts["hoodie.bulkinsert.sort.mode"] = "PARTITION_SORT"
        return opts

    def commit(self, df: DataFrame, record: CommitRecord | None = None, *, operation: str | None = None,
               options: dict[str, str] | None = None) -> Instant:
        """Write `df` (upserts; rows with `_hoodie_is_deleted` true are deletes) and `record` in
        one Hudi commit; the table's first commit uses the spec's `first_operation` unless
        `operation` says otherwise. `options` override the write options. Returns the latest
        completed instant after the commit."""
        new = not self.committed()
        if new:
            self.settle()
        opts = self.options(operation or (self.spec.first_operation if new else None))
        opts.update(options or {})
        scope = self.spec.sql_name or self.spec.name  # failpoints `<name>@<scope>` (framework/runtime/faults.py)
        if self.spec.before:
            failpoint(self.spec.before, scope)
        local = self.location.local if self.location.is_local else None
        with watch_creation(self.spec.kind, local, scope) if new else nullcontext():
            hudi.write(df, self.location, opts, record.to_meta() if record is not None else {})
        if self.spec.after:
            failpoint(self.spec.after, scope)
        done = timeline.completed(self.location)
        return done[-1]

    def settle(self) -> bool:
        """Remove the remains of a creation that never completed (`.hoodie/` without a completed
        commit); True when there were some. Called by writers only, under the table's lock."""
        fs = storage_for(self.location)
        if not fs.exists(self.location / ".hoodie") or timeline.ever_completed(self.location):
            return False
        what = "hoodie.properties but no completed commit" if timeline.properties(self.location) else "no hoodie.properties"
        log.warning("%s: %s holds a table whose creation never completed (%s); it holds no data: removed, the write goes on",
                    self.spec.sql_name or self.spec.name, self.location, what)
        fs.delete(self.location)
        return True

    def drop(self) -> None:
        """Remove the table's folder."""
        storage_for(self.location).delete(self.location)

    # -- reading, without a JVM --------------------------------------------------------------------

    def exists(self) -> bool:
        """`hoodie.properties` is there (the table may still have no completed commit)."""
        return hudi.table_exists(self.location)

    def committed(self) -> bool:
        """The table has a completed data commit: it holds data a reader can see."""
        return bool(timeline.completed(self.location))

    def instants(self) -> list[Instant]:
        """Completed data commits, oldest first by completion time."""
        return timeline.completed(self.location)

    def last_commit(self) -> Commit | None:
        """The latest commit a writer made (not a compaction), with its lake metadata."""
        return timeline.last_commit(self.location)

    def commits(self) -> list[Commit]:
        """Every commit of the active timeline with its lake metadata, oldest first."""
        return timeline.commits(self.location)

    def timeline(self, types_at: Collection[str] = ()) -> Timeline:
        """What planning reads (timeline.read)."""
        return timeline.read(self.location, types_at)

    def record_key(self) -> list[str]:
        """The record key fields the table was created with (hoodie.properties)."""
        return timeline.fields(timeline.properties(self.location), "recordkey")

    def partition_fields(self) -> list[str]:
        return timeline.fields(timeline.properties(self.location), "partition")

    def is_mor(self) -> bool:
        return timeline.properties(self.location).get("hoodie.table.type") == "MERGE_ON_READ"

    # -- reading data ------------------------------------------------------------------------------

    def read(self, spark: SparkSession, as_of: str | None = None) -> DataFrame:
        """A snapshot read (as of the completion time `as_of`, if given)."""
        r = spark.read.format("hudi")
        return (r.option("as.of.instant", as_of) if as_of else r).load(str(self.location))

    def schema(self, spark: SparkSession) -> StructType:
        return self.read(spark).schema
