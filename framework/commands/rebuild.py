"""`lake ingest --rebuild ods.T`: one ODS table written anew (framework/ods/rebuild.py), under its
lock, with a run record; the other tables and the ingest checkpoints are not touched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from framework.commands.common import locked, recorded
from framework.errors import LakeError
from framework.ods.rebuild import rebuild
from framework.project.config import Project
from framework.runtime.lock import table_lock
from framework.table.session import spark_session
from models.records import LockHolder, RebuildResult


def run_rebuild_command(*, project: Project, table: str, path: Path | None, position: str | None, fmt: str, lock_timeout: float,
                        argv: Sequence[str], on_stale: Callable[[str, LockHolder], None] | None = None,
                        accept_loss: bool = False) -> RebuildResult:
    t = project.ods_table(table)
    if position and path is None:
        raise LakeError("--position is the position of a dump: it needs --path DUMP",
                        fix=f"lake ingest --rebuild {t.qualified_name} --path DUMP --position mysql-bin.000003:154, or leave out --position")
    with locked(project, [table_lock(t.qualified_name)], lock_timeout, argv, on_stale):
        spark = spark_session(project)
        with recorded(project, "ingest", argv) as rec:
            res = rebuild(spark, project, t, dump=path, position=position, fmt=fmt, run_id=rec.run_id, accept_loss=accept_loss)
            rec.ingest = res.ingest
    return res
