"""`lake compact`: Hudi compaction of merge-on-read tables, as a table service.

A merge-on-read table appends each change to log files; readers merge them with the base files
until a compaction writes new base files. Tables with `compact_every: N` compact inline every N
delta commits; `compact_every: 0` leaves it to this command (run by hand or by a `what: compact`
schedule), so ingest and builds never pay for it.

Each table is compacted under its table lock (one writer at a time, framework/runtime/lock.py) with
Hudi's `run_compaction` procedure (`scheduleAndExecute`): it plans a compaction of every file
group with log files and runs it. lake reads its own commit metadata from the delta commits,
never from a compaction (hudi._last_write), so checkpoints and fingerprints are untouched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from framework.commands.common import locked
from framework.errors import LakeError
from framework.project.config import Project
from framework.runtime import lock
from framework.runtime.location import Location
from framework.runtime.lock import table_lock
from framework.runtime.paths import Layout
from framework.table import hudi
from framework.table.catalog import quote_literal
from framework.table.session import spark_session
from framework.transform.loader import load_models
from models.layout import TableLayout
from models.records import CompactResult, LockHolder

# The writer settings lake's tables are written with that the procedure's own write client
# would otherwise default differently (a metadata table, a timeline server); and compact every
# file group that has a log file, whatever the inline trigger.
_OPTIONS = "hoodie.metadata.enable=false,hoodie.embed.timeline.server=false,hoodie.compact.inline.max.delta.commits=1"


def mor_tables(project: Project) -> dict[str, TableLayout]:
    """Every table of the project declared merge-on-read: ODS tables and models, by name."""
    out: dict[str, TableLayout] = {t.qualified_name: t for t in project.ods_tables if t.type == "mor"}
    out.update({name: m.config for name, m in load_models(project).items() if m.config.type == "mor"})
    return out


def chosen(project: Project, names: Sequence[str]) -> list[str]:
    """The tables `lake compact NAME...` means (all merge-on-read tables without names); a name that
    is not a merge-on-read table is an error that says what is."""
    tables = mor_tables(project)
    for n in names:
        if n not in tables:
            known = ", ".join(sorted(tables)) or "none: declare `type: mor` on a table or model first"
            raise LakeError(f"{n} is not a merge-on-read table of this project (merge-on-read tables: {known})",
                            fix="name an ODS table or model declared `type: mor`, or leave the names out to compact them all")
    return list(names) or sorted(tables)


def run_compact(*, project: Project, names: Sequence[str], lock_timeout: float, argv: Sequence[str],
                on_stale: Callable[[str, LockHolder], None] | None = None) -> list[CompactResult]:
    """Compact the chosen merge-on-read tables that exist; one result per table."""
    tables = chosen(project, names)
    layout = Layout(project.warehouse)
    spark = spark_session(project)
    out: list[CompactResult] = []
    for name in tables:
        path = layout.table(name)
        if not hudi.table_exists(path):
            out.append(CompactResult(table=name, status="absent"))
            continue
        with locked(project, [table_lock(name)], lock_timeout, argv, on_stale):
            out.append(compact(spark, name, path))
    return out


def compact(spark: SparkSession, name: str, path: Location) -> CompactResult:
    """Plan and run a compaction of the table at `path` (nothing to do: status `nothing`)."""
    before = {i.requested for i in hudi.completed_instants(spark, path) if i.action == "commit"}
    started = time.monotonic()
    lock.assert_held(f"the compaction of {name}")
    spark.sql(f"CALL run_compaction(op => 'scheduleAndExecute', path => {quote_literal(str(path))}, "
              f"options => {quote_literal(_OPTIONS)})").collect()
    seconds = time.monotonic() - started
    done = [i for i in hudi.completed_instants(spark, path) if i.action == "commit" and i.requested not in before]
    if not done:
        return CompactResult(table=name, status="nothing", seconds=round(seconds, 2))
    return CompactResult(table=name, status="compacted", instant=done[-1].completed, seconds=round(seconds, 2))
