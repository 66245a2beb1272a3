"""`lake build`: the selected models, under their table locks, with a run record."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framework.commands.common import locked, recorded
from framework.config import Project
from framework.history import settle_models
from framework.lock import table_lock
from framework.session import spark_session
from framework.transform.runner import Selection, build
from models.records import LockHolder, ModelResult, RunRecord


def run_build(*, project: Project, selection: Selection, incremental: bool, lock_timeout: float, argv: Sequence[str],
              on_start: Callable[[str], None] | None = None, on_result: Callable[[ModelResult], None] | None = None,
              on_stale: Callable[[str, LockHolder], None] | None = None) -> RunRecord:
    """Build the selection (one writer per model: its table lock, taken before Spark starts)."""
    with locked(project, [table_lock(n) for n in selection.chosen], lock_timeout, argv, on_stale):
        spark = spark_session(project)
        with recorded(project, "build", argv) as rec:
            results = build(spark, project, list(selection.chosen), [], incremental, on_start=on_start, on_result=on_result,
                            run_id=rec.run_id, loaded=selection)
            settle_models(rec, results)
    return rec
