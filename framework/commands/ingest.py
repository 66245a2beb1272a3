"""`lake ingest`: one streaming job for every ODS table (or `--tables`), or a bootstrap load."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from framework.commands.common import locked, recorded
from framework.ods.bootstrap import BootstrapResult, run_bootstrap
from framework.ods.ingest import checkpoint_name, run_ingest
from framework.project.config import Project
from framework.quality.ods_gate import BatchBlocked
from framework.runtime import preload
from framework.runtime.lock import ingest_lock, table_lock
from framework.table.session import spark_session
from models.records import BatchResult, IngestSummary, LockHolder


def run_ingest_command(*, project: Project, continuous: bool, tables: list[str] | None, trigger_seconds: int | None,
                       lock_timeout: float, argv: Sequence[str], on_batch: Callable[[BatchResult], None] | None = None,
                       on_stale: Callable[[str, LockHolder], None] | None = None) -> IngestSummary:
    """Ingest under the locks of the streaming checkpoint and the tables it writes, with a run
    record; an `error` check that blocks a table raises BatchBlocked after recording the run."""
    only = sorted({t.strip().removeprefix("ods.") for t in tables}) if tables else None
    writes = only or [t.table_name for t in project.ods_tables]
    names = [ingest_lock(checkpoint_name(only)), *(table_lock(f"ods.{t}") for t in writes)]
    with locked(project, names, lock_timeout, argv, on_stale):
        if any(t.checks for t in project.ods_tables if t.table_name in writes):
            preload.start([preload.QUALITY])  # imported while the JVM starts (framework/runtime/preload.py)
        spark = spark_session(project)
        with recorded(project, "ingest", argv) as rec:
            try:
                summary = run_ingest(spark, project, continuous=continuous, tables=tables, trigger_seconds=trigger_seconds,
                                     on_batch=on_batch, run_id=rec.run_id)
            except BatchBlocked as e:
                rec.ingest = e.summary  # the tables that committed, and the checks' outcomes
                raise
            rec.ingest = summary
    return summary


def run_bootstrap_command(*, project: Project, table: str, path: Path, position: str | None, fmt: str, lock_timeout: float,
                          argv: Sequence[str], on_stale: Callable[[str, LockHolder], None] | None = None) -> BootstrapResult:
    """Bulk-load a dump into one ODS table under its lock."""
    t = project.ods_table(table)
    with locked(project, [table_lock(t.qualified_name)], lock_timeout, argv, on_stale):
        return run_bootstrap(spark_session(project), project, t, path, position=position, fmt=fmt)
