"""`lake retry`: what to rerun from the last ingest, build or run in the run history (dbt's
`retry`): its failed and skipped models, or, when it failed before any model had a result, the
whole command."""

from __future__ import annotations

from dataclasses import dataclass

from framework.errors import LakeError
from framework.project.config import Project
from framework.runtime import history
from framework.runtime.paths import Layout
from framework.table.session import ensure_storage
from models.records import RunRecord

COMMANDS = ("ingest", "build", "run")


@dataclass(frozen=True)
class Retry:
    """`models`: rebuild these (in dependency order); else `argv`: rerun that command; neither: nothing."""

    last: RunRecord
    text: str
    models: tuple[str, ...] = ()
    incremental: bool = False
    unit_tests: bool = False
    argv: tuple[str, ...] = ()


def command_part(rec: RunRecord) -> tuple[str, ...]:
    """The recorded command line from the command word on (global options such as --project
    are the retrying process's own)."""
    args = list(rec.args)
    return tuple(args[args.index(rec.command):]) if rec.command in args else (rec.command,)


def plan_retry(project: Project) -> Retry:
    ensure_storage(project)
    last = history.latest(Layout(project.warehouse), lambda r: r.command in COMMANDS and r.status != "running")
    if last is None:
        raise LakeError("nothing to retry: the run history has no ingest, build or run", fix="`lake runs` lists the history")
    if last.status == "ok":
        return Retry(last, f"nothing to retry: the last {last.command}, run {last.run_id}, succeeded")
    failed = [m.model for m in last.models if m.mode == "failed"]
    skipped = [m.model for m in last.models if m.mode == "skipped"]
    if failed or skipped:
        text = (f"retrying run {last.run_id} ({last.command}): {len(failed)} failed ({', '.join(failed) or '-'}), "
                f"{len(skipped)} skipped ({', '.join(skipped) or '-'})")
        incremental = last.command == "run" or "--incremental" in last.args
        unit_tests = last.command == "build" and "--skip-tests" not in last.args
        return Retry(last, text, tuple(failed + skipped), incremental, unit_tests)
    argv = command_part(last)
    why = last.error.splitlines()[0] if last.error else last.status
    return Retry(last, f"retrying run {last.run_id}: it {last.status} before any model had a result ({why}); rerunning `lake {' '.join(argv)}`",
                 argv=argv)
