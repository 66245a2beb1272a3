"""Run history: one JSON record per `lake ingest` / `lake build` run, append-only files under
`<warehouse>/_lake/runs/` (written to a temporary name, then renamed: a crash leaves no torn file)."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from models.records import ModelResult, RunRecord


def new_run_id(now: datetime | None = None) -> str:
    """A run id: UTC start time then 6 random hex digits (ids sort by time)."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]


def new_run(command: str, args: list[str], target: str | None = None) -> RunRecord:
    now = datetime.now(timezone.utc)
    return RunRecord(run_id=new_run_id(now), command=command, args=args, started_at=now, pid=os.getpid(),
                     host=socket.gethostname(), target=target)


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _settle(record: RunRecord) -> RunRecord:
    """A record still `running` whose process (on this host) is gone crashed: say so."""
    if record.status == "running" and record.pid and record.host == socket.gethostname() and not process_alive(record.pid):
        record.status = "crashed"
        record.error = record.error or f"process {record.pid} ended without finishing the run (killed or crashed); committed tables are consistent, rerun to continue"
    return record


@contextlib.contextmanager
def recorded(layout: Layout, command: str, args: list[str], target: str | None = None,
             start: Callable[[RunRecord], None] | None = None, finish: Callable[[RunRecord], None] | None = None) -> Iterator[RunRecord]:
    """A run record for the block, stored whatever happens: first as `running` (a killed process
    leaves that, read back as `crashed`), then `ok`, or `failed` with the error (its class and
    its fix too). `start` sees the new record, `finish` the finished one before it is stored
    (alerts, lineage: what it adds is stored with it); neither may raise."""
    rec = new_run(command, args, target)
    save(layout, rec)
    try:
        if start is not None:
            start(rec)
        yield rec
        if rec.status == "running":
            rec.status = "ok"
    except BaseException as e:
        rec.status, rec.error = "failed", str(e)
        rec.error_type = type(e).__name__
        rec.fix = getattr(e, "fix", None)
        raise
    finally:
        rec.finished_at = datetime.now(timezone.utc)
        if finish is not None:
            finish(rec)
        save(layout, rec)


def save(layout: Layout, record: RunRecord) -> Location:
    path = layout.runs / f"{record.run_id}.json"
    layout.fs.write_text(path, record.model_dump_json(indent=2))
    return path


def _files(layout: Layout) -> list[Location]:
    return [p for p in layout.fs.children(layout.runs) if p.name.endswith(".json") and not p.name.startswith(".")]


def runs(layout: Layout, last: int | None = None) -> list[RunRecord]:
    files = _files(layout)
    if last:
        files = files[-last:]
    return [_settle(RunRecord.model_validate_json(layout.fs.read_text(f))) for f in files]


def latest(layout: Layout, wanted: Callable[[RunRecord], bool]) -> RunRecord | None:
    """The newest run record `wanted` accepts (read newest first, stopping at the first)."""
    for f in reversed(_files(layout)):
        rec = _settle(RunRecord.model_validate_json(layout.fs.read_text(f)))
        if wanted(rec):
            return rec
    return None


def get(layout: Layout, run_id: str) -> RunRecord:
    matches = [p for p in _files(layout) if p.name.startswith(run_id)]
    if len(matches) != 1:
        known = [r.run_id for r in runs(layout, 5)]
        raise LakeError(f"no single run matches {run_id!r}" + (" (ambiguous)" if matches else ""),
                        fix=f"recent runs: {', '.join(known) or 'none'} (lake runs)")
    return _settle(RunRecord.model_validate_json(layout.fs.read_text(matches[0])))


def settle_models(rec: RunRecord, results: list[ModelResult], *, list_skipped: bool = False) -> None:
    """Put model results into a run record: failed when a model failed or was skipped; the error
    lists the failed models (and, with `list_skipped`, the skipped ones)."""
    rec.models = results
    bad = [r for r in results if r.mode == "failed" or (r.mode == "skipped")]
    if bad:
        rec.status = "failed"
        rec.error = "; ".join(f"{r.model}: {r.reason}" for r in bad if list_skipped or r.mode == "failed")
