"""A Hudi table's timeline read without Spark: completed data commits, their lake metadata and
their write statistics.

Hudi 1.x (table version 8+, timeline layout 2) names each completed instant's file
`.hoodie/timeline/<requested>_<completed>.<action>` and writes its `HoodieCommitMetadata` as an
Avro container (framework/table/avro.py). Commands that only need a table's recent commits — `lake
freshness`, `state:modified` selectors, the statistics a build records — read them here, with no
JVM on a local warehouse. Only the active timeline is read (archived instants are in
`timeline/history`, an LSM tree): enough for the last commit and the commits a model has not
consumed yet, which the cleaner's retention keeps active.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.storage import storage_for
from framework.table.avro import AvroError, read_container
from framework.table.hudi import META_PREFIX, Instant, Timeline, column_types

DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")
# An ODS commit's newest source event time (source.ts_ms of the batch's events, epoch ms), in its
# lake metadata: what `lake freshness` measures from (framework/quality/freshness.py).
EVENT_TS_MAX = "ods_event_ts_max"
REWRITES = ("COMPACT", "LOG_COMPACT", "CLUSTER")
_COMPLETED = re.compile(r"^(\d+)_(\d+)\.(" + "|".join(DATA_ACTIONS) + r")$")


@dataclass(frozen=True)
class Commit:
    """One completed data commit: lake's extra metadata (keys without `_lake_`) and the rows it
    inserted, updated and deleted (Hudi's write statistics, summed over the files it wrote)."""

    instant: Instant
    lake: dict[str, str]
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    operation: str = ""  # Hudi's WriteOperationType: UPSERT, INSERT, DELETE, COMPACT, CLUSTER, ...
    schema: str = ""  # the writer's Avro schema (the commit's `schema` extra metadata)
    cdc_files: bool = True  # every file it wrote has CDC statistics (its changes are in CDC logs)

    @property
    def types(self) -> dict[str, str]:
        """Column -> SQL type of the table as this commit wrote it ({} when it recorded none)."""
        return column_types(self.schema)

    @property
    def changed(self) -> int:
        """Rows the commit changed: its inserts, updates and deletes; none for a compaction or a
        clustering, which rewrite files without changing a row."""
        if self.operation in REWRITES:
            return 0
        return self.inserts + self.updates + self.deletes


def _dir(table: Location) -> Location:
    return table / ".hoodie" / "timeline"


def completed(table: Location) -> list[Instant]:
    """The table's completed data commits (commit, deltacommit, replacecommit), oldest first by
    completion time; empty when the table does not exist."""
    fs = storage_for(table)
    out = []
    for loc in fs.children(_dir(table)):
        m = _COMPLETED.match(loc.name)
        if m:
            out.append(Instant(m.group(1), m.group(2), m.group(3)))
    return sorted(out, key=lambda i: i.completed)


_ANY_COMPLETED = re.compile(r"^\d+_\d+\.\w+$")


def ever_completed(table: Location) -> bool:
    """Whether any instant of the table ever completed (a commit of any action, a clean, a
    rollback, or anything archived): a table of which this is false holds no data."""
    fs = storage_for(table)
    return any(_ANY_COMPLETED.match(loc.name) for loc in fs.children(_dir(table))) or bool(fs.children(_dir(table) / "history"))


def instant_time(table: Location, text: str) -> datetime:
    """An instant time (`yyyyMMddHHmmssSSS`) as an aware datetime. Hudi writes them in the
    table's `hoodie.table.timeline.timezone`: UTC, or LOCAL (the default), the writer JVM's zone,
    taken to be this machine's."""
    props = table / ".hoodie" / "hoodie.properties"
    fs = storage_for(table)
    utc = fs.exists(props) and "hoodie.table.timeline.timezone=UTC" in fs.read_text(props)
    naive = datetime.strptime(text[:17].ljust(17, "0"), "%Y%m%d%H%M%S%f")
    return naive.replace(tzinfo=timezone.utc) if utc else naive.astimezone(timezone.utc)


_CACHE: dict[str, Commit] = {}  # completed instants' files never change: read each once per process


def read_commit(table: Location, instant: Instant) -> Commit:
    """The metadata of one completed commit."""
    loc = _dir(table) / f"{instant.requested}_{instant.completed}.{instant.action}"
    if str(loc) in _CACHE:
        return _CACHE[str(loc)]
    try:
        (meta,) = read_container(storage_for(table).read_bytes(loc))
    except (AvroError, ValueError) as e:
        raise LakeError(f"cannot read the Hudi commit {loc}: {e}",
                        fix="lake reads Hudi 1.x timelines (table version 8 or later); rebuild the table with this lake") from e
    extra: dict[str, Any] = meta.get("extraMetadata") or {}
    lake = {k[len(META_PREFIX):]: str(v) for k, v in extra.items() if k.startswith(META_PREFIX)}
    stats = [s for files in (meta.get("partitionToWriteStats") or {}).values() for s in files or ()]
    total = {f: sum(int(s.get(f) or 0) for s in stats) for f in ("numInserts", "numUpdateWrites", "numDeletes")}
    cdc = bool(stats) and all(s.get("cdcStats") for s in stats)
    _CACHE[str(loc)] = Commit(instant, lake, total["numInserts"], total["numUpdateWrites"], total["numDeletes"], str(meta.get("operationType") or ""),
                              str(extra.get("schema") or ""), cdc)
    return _CACHE[str(loc)]


def last_commit(table: Location) -> Commit | None:
    """The latest completed commit a writer made, or None (no table, or no commit yet). On a
    merge-on-read table a `commit` is a compaction, which carries none of the writer's extra
    metadata: the delta commit before it does."""
    done = completed(table)
    props = table / ".hoodie" / "hoodie.properties"
    fs = storage_for(table)
    if done and fs.exists(props) and "MERGE_ON_READ" in fs.read_text(props):
        done = [i for i in done if i.action != "commit"]
    return read_commit(table, done[-1]) if done else None


def commits_between(table: Location, begin: str | None, end: str) -> list[Commit]:
    """The commits completed in (begin, end] (completion times; begin None: from the start)."""
    return [read_commit(table, i) for i in completed(table) if (begin is None or i.completed > begin) and i.completed <= end]


def properties(table: Location) -> dict[str, str]:
    """The table's `hoodie.properties` ({} when there is none: no table, or one whose creation
    never completed)."""
    fs = storage_for(table)
    props = table / ".hoodie" / "hoodie.properties"
    if not fs.exists(props):
        return {}
    out = {}
    for line in fs.read_text(props).splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


def fields(props: dict[str, str], name: str) -> list[str]:
    """A comma-separated field list of `hoodie.properties` (`recordkey`, `partition`)."""
    return [f for f in props.get(f"hoodie.table.{name}.fields", "").split(",") if f]


_CLEAN = re.compile(r"^(\d+)_(\d+)\.clean$")


def earliest_retained(table: Location) -> str | None:
    """The earliest commit (requested time) the latest completed clean kept the files of, or None
    (never cleaned, or a policy that records none): files of older commits may be gone, and a
    change read whose range holds such a commit fails. Read from the clean's Avro metadata."""
    fs = storage_for(table)
    cleans = sorted(((m.group(2), loc) for loc in fs.children(_dir(table)) if (m := _CLEAN.match(loc.name))), key=lambda p: p[0])
    if not cleans:
        return None
    loc = cleans[-1][1]
    try:
        (meta,) = read_container(fs.read_bytes(loc))
    except (AvroError, ValueError) as e:
        raise LakeError(f"cannot read the Hudi clean {loc}: {e}",
                        fix="lake reads Hudi 1.x timelines (table version 8 or later); rebuild the table with this lake") from e
    kept = meta.get("earliestCommitToRetain")
    return str(kept) if kept else None


def read(table: Location, types_at: Collection[str] = ()) -> Timeline:
    """What planning reads of a table, without a JVM: its completed data commits, the cleaner's
    earliest retained commit and the last writer commit's lake metadata; with `types_at`
    (completion times), also the column types the table had at those commits and at its latest.
    Empty when the table has no completed commit."""
    done = completed(table)
    if not done:
        return Timeline((), None, {})
    last = last_commit(table)
    types: dict[str, dict[str, str]] = {}
    at = {i.completed: i for i in done}
    wanted = [c for c in types_at if c in at and c != done[-1].completed]
    if wanted and last is not None:
        types[done[-1].completed] = last.types
        for c in wanted:
            types[c] = read_commit(table, at[c]).types
    return Timeline(tuple(done), earliest_retained(table), dict(last.lake) if last else {}, types)


def commits(table: Location) -> list[Commit]:
    """Every completed data commit of the active timeline with its metadata, oldest first."""
    return [read_commit(table, i) for i in completed(table)]


def cdc_logged(table: Location, begin: str, end: str) -> bool:
    """Every change in (begin, end] (completion times) is in a CDC log file (see hudi.cdc_logged):
    each commit in the range is a plain `commit` whose every written file has CDC statistics."""
    for i in completed(table):
        if not begin < i.completed <= end:
            continue
        if i.action != "commit" or not read_commit(table, i).cdc_files:
            return False
    return True
