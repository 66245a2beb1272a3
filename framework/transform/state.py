"""Reading the :class:`~framework.transform.plan.State` of a selection from its Hudi tables.

One timeline read per table (commits, the cleaner's earliest retained commit, the latest commit's
lake metadata, an upstream's column types at the models' checkpoints and now), its last rebuild
(framework/runtime/rebuilds.py) and, where a model may be recomputed, one file listing for its upstream's size.
A project whose tables do not exist yet needs no Spark: `lake plan` on an unbuilt project runs
without a JVM.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from framework.runtime import rebuilds
from framework.runtime.paths import Layout
from framework.table import hudi, timeline
from framework.transform import holders
from framework.transform.plan import State, TargetState, UpstreamState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.project.config import Project
    from framework.transform.selector import LastResults, Recorded


def read_state(spark: SparkSession | None, layout: Layout, upstreams: Iterable[str], targets: Iterable[str], sized: Iterable[str] = ()) -> State:
    """The state of `upstreams` (read by the models) and `targets` (the models' own tables);
    `sized`: upstreams whose size planning may compare. `spark` may be None when none of the
    tables exists yet."""
    sized = set(sized)
    tgts: dict[str, TargetState] = {}
    for name in dict.fromkeys(targets):
        own = _timeline(spark, layout, name)
        meta = own.last_meta
        ckpt = json.loads(meta["ckpt"]) if "ckpt" in meta else None
        tgts[name] = TargetState(ckpt, meta.get("fingerprint") if ckpt is not None else None, meta.get("hidden") if ckpt is not None else None,
                                 holders.threshold(meta, own.instants))
    ups: dict[str, UpstreamState] = {}
    for u in dict.fromkeys(upstreams):
        # The column types at the targets' checkpoints: a change read since one must not span a type change.
        tl = _timeline(spark, layout, u, {t.checkpoint[u] for t in tgts.values() if t.checkpoint and u in t.checkpoint})
        rec = rebuilds.read(layout, u) if tl.instants else None
        pin = layout.pinned(u)  # an environment reads production as of its pinned instant
        instants = tl.instants if pin is None else tuple(i for i in tl.instants if i.completed <= pin)
        ups[u] = UpstreamState(instants, tl.earliest_retained, hudi.table_bytes(layout.table(u)) if u in sized else 0,
                               (rec.first, rec.reason) if rec else None, tl.types)
    return State(ups, tgts)


def _timeline(spark: SparkSession | None, layout: Layout, name: str, types_at: Collection[str] = ()) -> hudi.Timeline:
    path = layout.table(name)
    if not hudi.table_exists(path):
        return hudi.Timeline((), None, {})
    if spark is None:
        raise ValueError(f"reading the timeline of {name} needs a SparkSession")
    return hudi.timeline(spark, path, types_at)


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
