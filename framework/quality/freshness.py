"""Source freshness, as dbt's `source freshness`: how old the newest source event ingested into
each ODS table is, against its `freshness: {warn_after, error_after}`.

Each ODS commit records the newest `source.ts_ms` of the events it took (framework/ods/commit.py,
`timeline.EVENT_TS_MAX`); the age is now minus the newest of those over the table's active
timeline. A table none of whose commits records one — only a bootstrap load so far (the source
has been quiet since), or written before lake recorded them — is measured from its last commit,
and says so. Read from the timeline's files: no Spark on a local warehouse.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Literal

from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table import timeline
from models.config import OdsTable
from models.freshness import FreshnessConfig
from models.records import SourceFreshness


def policy(project: Project, t: OdsTable) -> FreshnessConfig | None:
    """The table's own `freshness:` (also an explicit `null`), else `ods.freshness`."""
    return t.freshness if "freshness" in t.model_fields_set else project.config.ods.freshness


def measure(project: Project, tables: Iterable[OdsTable], now: datetime | None = None) -> list[SourceFreshness]:
    """The freshness of each table now (or at `now`)."""
    layout = Layout(project.warehouse)
    at = now or datetime.now(timezone.utc)
    return [_one(layout, t, policy(project, t), at) for t in tables]


def _one(layout: Layout, t: OdsTable, p: FreshnessConfig | None, now: datetime) -> SourceFreshness:
    path = layout.table(t.qualified_name)
    done = timeline.completed(path)
    stamps = [int(c.lake[timeline.EVENT_TS_MAX]) for c in (timeline.read_commit(path, i) for i in done) if timeline.EVENT_TS_MAX in c.lake]
    newest = datetime.fromtimestamp(max(stamps) / 1000, timezone.utc) if stamps else None
    last = timeline.instant_time(path, done[-1].completed) if done else None
    if newest is not None:
        source, age = "source.ts_ms", (now - newest).total_seconds()
    elif last is not None:
        source, age = "last commit", (now - last).total_seconds()
    else:
        source, age = "nothing", None
    out = SourceFreshness(table=t.qualified_name, status="none", measured_from=source, age_s=None if age is None else round(age, 3),
                          newest_event_at=newest, last_commit_at=last, checked_at=now)
    if p is None:
        return out
    out.warn_after_s, out.error_after_s = p.warn_after, p.error_after
    out.status = status(p, age)
    return out


def status(p: FreshnessConfig, age: float | None) -> Literal["ok", "warn", "error"]:
    """ok, warn or error for an age in seconds (None: nothing ingested, the worst configured)."""
    if age is None:
        return "error" if p.error_after is not None else "warn"
    if p.error_after is not None and age > p.error_after:
        return "error"
    if p.warn_after is not None and age > p.warn_after:
        return "warn"
    return "ok"


def declared(project: Project, names: Iterable[str] | None = None) -> list[OdsTable]:
    """The ODS tables (all, or those named) that have a freshness policy."""
    wanted = None if names is None else set(names)
    return [t for t in project.ods_tables if (wanted is None or t.qualified_name in wanted) and policy(project, t) is not None]
