"""`lake run`: ingest, then build incrementally the selected models the new events reach; with
`--continuous`, every trigger interval until SIGTERM / Ctrl-C (framework/ops/continuous.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from framework.commands.common import locked
from framework.observe.observer import Observer, exposing
from framework.ods.ingest import checkpoint_name
from framework.ops.continuous import run_continuous
from framework.project.config import Project
from framework.runtime import preload
from framework.runtime.lock import ingest_lock, table_lock
from framework.table.session import spark_session
from framework.transform.runner import Selection
from models.records import LockHolder, ModelResult, RunRecord


def run_run(*, project: Project, selection: Selection, cycles: int | None, trigger_seconds: int, lock_timeout: float, argv: Sequence[str],
            on_cycle: Callable[[RunRecord], None] | None = None, on_result: Callable[[ModelResult], None] | None = None,
            on_stale: Callable[[str, LockHolder], None] | None = None, say: Callable[[str], None] | None = None,
            continuous: bool = False) -> list[RunRecord]:
    """Cycles under the locks of the ingest checkpoint, every ODS table and the selected models,
    held for the whole loop (like `ingest --continuous`). `continuous`: also serve the metrics
    lake.yaml asks for (`metrics:`) while it runs; `say` hears where."""
    names = [ingest_lock(checkpoint_name(None)), *(table_lock(t.qualified_name) for t in project.ods_tables),
             *(table_lock(n) for n in selection.chosen)]
    with locked(project, names, lock_timeout, argv, on_stale):
        if any(t.checks for t in project.ods_tables) or any(selection.models[n].config.checks for n in selection.chosen if n in selection.models):
            preload.start([preload.QUALITY])  # imported while the JVM starts (framework/runtime/preload.py)
        spark = spark_session(project)
        exposed = exposing(project, say or (lambda _text: None)) if continuous else contextlib.nullcontext(Observer(project))
        with exposed as observer:
            return run_continuous(spark, project, list(selection.chosen), [], list(argv), trigger_seconds, on_cycle=on_cycle,
                                  on_result=on_result, max_cycles=cycles, loaded=selection, observer=observer)
