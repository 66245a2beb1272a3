"""`lake verify`: each selected model's table against a full build of it as of its checkpoint
(framework/transform/verify.py), with a run record and, with `--repair`, a full rebuild of each
model that differs through the normal build path (gate, commit, checkpoint), after which the
models reading it are verified too."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import networkx as nx

from framework.commands.common import locked, recorded
from framework.observe.observer import Observer
from framework.project.config import Project
from framework.runtime.lock import table_lock
from framework.table.session import ensure_storage, spark_session
from framework.transform.evaluate import Evaluator
from framework.transform.options import BuildOptions
from framework.transform.runner import Selection, build
from framework.transform.verify import repair_note, verify_model
from models.records import BUILT_MODES, LockHolder, ModelResult, RunRecord
from models.verify import VERIFY_MODE, ModelVerify


def run_verify(*, project: Project, selection: Selection, sample: float | None, repair: bool, lock_timeout: float,
               argv: Sequence[str], on_result: Callable[[ModelVerify], None] | None = None,
               on_stale: Callable[[str, LockHolder], None] | None = None) -> RunRecord:
    """Verify the selection, upstreams first; the run record holds each model's result
    (`verified`) and a repair's build result (`models`). Failed when any model differs or could
    not be verified."""
    ensure_storage(project)
    spark = spark_session(project)
    obs = Observer(project)
    with recorded(project, "verify", argv, obs) as rec:
        ev = Evaluator(spark, project, selection.models, run_id=rec.run_id)
        pending = list(selection.chosen)
        order = {n: i for i, n in enumerate(nx.topological_sort(selection.graph))}
        while pending:
            name = pending.pop(0)
            res = verify_model(ev, selection.models[name], sample)
            rec.models.append(ModelResult(model=name, strategy=ev.analyses.of(selection.models[name]).strategy, mode=VERIFY_MODE[res.status],
                                          reason=res.reason, upstream=res.upstream, seconds=res.seconds))
            if repair and res.status == "differs":
                built = _repair(project, selection, res, rec, lock_timeout, argv, on_stale)
                res = res.model_copy(update={"repaired": built.mode in BUILT_MODES, "reason": f"{res.reason}; repair: {built.reason}"})
                rec.models.append(built)
                readers = [r for r in _readers(selection, name) if r not in pending and r not in {v.model for v in rec.verified}]
                pending = sorted([*pending, *readers], key=lambda n: order[n])
            rec.verified.append(res)
            if on_result is not None:
                on_result(res)
        bad = [v.model for v in rec.verified if v.status in ("differs", "failed")]
        if bad:
            rec.status, rec.error = "failed", f"not equal to a full build: {', '.join(bad)}"
    return rec


def _repair(project: Project, selection: Selection, res: ModelVerify, rec: RunRecord, lock_timeout: float, argv: Sequence[str],
            on_stale: Callable[[str, LockHolder], None] | None) -> ModelResult:
    """Rebuild one model in full (`lake build MODEL`: its upstreams as they are now, the gate,
    only differing rows written), under its table lock, the reason in its commit."""
    spark = spark_session(project)
    with locked(project, [table_lock(res.model)], lock_timeout, argv, on_stale):
        (built,) = build(spark, project, [res.model], [], False, run_id=rec.run_id, loaded=selection,
                         options=BuildOptions(note=repair_note(res)))
    return built


def _readers(selection: Selection, name: str) -> list[str]:
    """The models reading `name`'s table (or its history table)."""
    g, out = selection.graph, []
    for d in g.successors(name):
        out += list(g.successors(d)) if g.nodes[d].get("kind") == "history" else [d]
    return [n for n in out if n in selection.models]
