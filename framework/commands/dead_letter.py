"""`lake dead-letter list|replay|purge` (framework/ods/dead_letter.py): the session, the locks and
the run record around each. Table names are checked before Spark starts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from framework.commands.common import locked, recorded
from framework.ods import dead_letter
from framework.project.config import Project
from framework.table.session import spark_session
from models.config import OdsTable
from models.records import DeadLetterGroup, IngestSummary, LockHolder, PurgeResult, ReplayResult


def _table(project: Project, table: str | None) -> OdsTable | None:
    return project.ods_table(table) if table else None


def run_dead_letter_list(*, project: Project, table: str | None, reason: str | None, samples: int) -> list[DeadLetterGroup]:
    t = _table(project, table)
    return dead_letter.groups(spark_session(project), project, t, reason, samples)


def run_dead_letter_replay(*, project: Project, table: str | None, reason: str | None, lock_timeout: float, argv: Sequence[str],
                           on_stale: Callable[[str, LockHolder], None] | None = None, allow_expired: bool = False) -> list[ReplayResult]:
    """Replay under the replay lock and the locks of the ODS tables the selected events go to,
    with a run record (its `ingest` holds the replay's micro-batches)."""
    t = _table(project, table)
    spark = spark_session(project)
    with recorded(project, "dead-letter", argv) as rec:
        summary = IngestSummary(run_id=rec.run_id, started_at=datetime.now(timezone.utc))
        rec.ingest = summary
        out = dead_letter.replay(spark, project, t, reason, lambda names: locked(project, names, lock_timeout, argv, on_stale), rec.run_id,
                                 allow_expired)
        summary.batches = [r.batch for r in out if r.batch is not None]
        summary.finished_at, summary.status = datetime.now(timezone.utc), "ok"
    return out


def run_dead_letter_purge(*, project: Project, table: str | None, reason: str | None, apply: bool, include_pending: bool,
                          lock_timeout: float, argv: Sequence[str], on_stale: Callable[[str, LockHolder], None] | None = None) -> PurgeResult:
    t = _table(project, table)
    spark = spark_session(project)

    def lock(names: list[str]) -> contextlib.AbstractContextManager[Any]:
        return locked(project, names, lock_timeout, argv, on_stale)

    if not apply:
        return dead_letter.purge(spark, project, t, reason, False, lock, include_pending)
    with recorded(project, "dead-letter", argv):
        return dead_letter.purge(spark, project, t, reason, True, lock, include_pending)
