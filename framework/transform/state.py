"""Reading the :class:`~framework.transform.plan.State` of a selection from its Hudi tables.

One timeline read per table (commits, the cleaner's earliest retained commit, the latest commit's
lake metadata, an upstream's column types at the models' checkpoints and now), its last rebuild
(framework/runtime/rebuilds.py) and, where a model may be recomputed, one file listing for its upstream's size.
Every read is of the timeline's files (framework/table/timeline.py), so a local warehouse needs no
JVM: `lake plan` runs without one, built or not. The commit of a build compares with the record
read here (`TargetState.recorded`) instead of reading the table's metadata again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from framework.errors import LakeError
from framework.runtime import rebuilds
from framework.runtime.paths import Layout
from framework.table import hudi, hudi_layout, timeline
from framework.transform import external, holders
from framework.transform.plan import State, TargetState, UpstreamState
from models.commit_meta import ModelCheckpoint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.project.config import Project
    from framework.project.externals import ExternalTable
    from framework.transform.selector import LastResults, Recorded


def read_state(spark: SparkSession | None, layout: Layout, upstreams: Iterable[str], targets: Iterable[str], sized: Iterable[str] = (),
               externals: Mapping[str, ExternalTable] | None = None) -> State:
    """The state of `upstreams` (read by the models) and `targets` (the models' own tables);
    `sized`: upstreams whose size planning may compare; `externals`: the project's external
    tables, of which the upstreams among them have a version instead (framework/transform/external.py).
    `spark` may be None when none of the tables exists yet."""
    sized = set(sized)
    externals = externals or {}
    upstreams = list(dict.fromkeys(upstreams))
    versions: dict[str, str] = {}
    absent: dict[str, tuple[str, str]] = {}
    for u in upstreams:
        if u in externals:
            try:
                versions[u] = external.version(externals[u])
            except LakeError as e:  # nothing to read yet: planned as a missing upstream
                absent[u] = (e.message, e.fix or "")
    tgts: dict[str, TargetState] = {}
    for name in dict.fromkeys(targets):
        own = _timeline(layout, name)
        meta = own.last_meta
        ckpt = ModelCheckpoint.from_meta(meta)
        tgts[name] = TargetState(ckpt.checkpoint if ckpt else None, ckpt.fingerprint if ckpt else None, ckpt.hidden if ckpt else None,
                                 holders.threshold(meta, own.instants), ckpt, meta.get(hudi_layout.META_KEY))
    ups: dict[str, UpstreamState] = {}
    for u in upstreams:
        if u in externals:
            continue
        # The column types at the targets' checkpoints: a change read since one must not span a type change.
        tl = _timeline(layout, u, {t.checkpoint[u] for t in tgts.values() if t.checkpoint and u in t.checkpoint})
        rec = rebuilds.read(layout, u) if tl.instants else None
        pin = layout.pinned(u)  # an environment reads production as of its pinned instant
        instants = tl.instants if pin is None else tuple(i for i in tl.instants if i.completed <= pin)
        ups[u] = UpstreamState(instants, tl.earliest_retained, hudi.table_bytes(layout.table(u)) if u in sized else 0,
                               (rec.first, rec.reason) if rec else None, tl.types)
    return State(ups, tgts, versions, absent)


def _timeline(layout: Layout, name: str, types_at: Collection[str] = ()) -> hudi.Timeline:
    """One table's timeline, read from its files (framework/table/timeline.py): no JVM on a local
    warehouse; a remote one reads through Hadoop's file system (a session that is running)."""
    return timeline.read(layout.table(name), types_at)


def recorded(project: Project) -> Recorded:
    """What `state:` selectors compare models with: the data and metadata fingerprints the last
    commit of each model's table records (None: no commit). Read from the timeline's files, so
    a local warehouse needs no Spark; a remote one starts it on first use (Hadoop's file system)."""
    layout = Layout(project.warehouse)

    def read(name: str) -> tuple[str | None, str | None] | None:
        if not project.warehouse.is_local:
            from framework.table.session import ensure_storage

            ensure_storage(project)
        last = timeline.last_commit(layout.table(name))
        return None if last is None else (last.lake.get("fingerprint"), last.lake.get("metadata"))

    return read


def last_results(project: Project) -> LastResults:
    """What `result:` selectors compare with: the model results of the newest build or run in
    the run history that built any model (read when a selector asks, not before)."""

    def read() -> tuple[str, dict[str, str]] | None:
        from framework.runtime import history

        if not project.warehouse.is_local:
            from framework.table.session import ensure_storage

            ensure_storage(project)
        rec = history.latest(Layout(project.warehouse), lambda r: r.command in ("build", "run") and bool(r.models))
        return None if rec is None else (rec.run_id, {m.model: m.mode for m in rec.models})

    return read
