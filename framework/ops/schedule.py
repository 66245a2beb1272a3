"""`lake schedule`: run the `schedules:` of lake.yaml on their cron times (APScheduler 3).

Each schedule is one APScheduler job with a :class:`CronTrigger`, ``max_instances=1`` (a run
still going when the next fire time comes makes that fire time a skip, never a second copy),
``coalesce=True`` (fire times missed while the process was paused or busy run once, not once
each) and a ``misfire_grace_time``. The job calls an injected ``run_step(schedule) -> exit
code``; the CLI's is :class:`SubprocessSteps`, which runs the `lake` command in a child process
so a failing or crashing build cannot take the scheduler down with it. SIGTERM/SIGINT stop new
runs, wait for the running ones, and exit 0; a second signal passes SIGTERM on to the children.

Fire times missed while no scheduler ran are run or skipped at start by each schedule's
`catchup:` (framework/ops/catchup.py). With `metrics:` in lake.yaml the scheduler serves the
metrics of its children's runs (their records come back through a spool directory) and its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.background import BackgroundScheduler

from framework.errors import LakeError
from framework.observe.metrics import Metrics
from framework.observe.observer import SPOOL_ENV, Observer
from framework.ops import catchup
from framework.project.config import Project
from framework.project.cron import cron_trigger
from framework.runtime.signals import on_stop_signals
from models.config import ScheduleConfig
from models.records import RunRecord

StepRunner = Callable[[ScheduleConfig], int]
Say = Callable[[str], None]


def lake_commands(s: ScheduleConfig) -> list[list[str]]:
    """The `lake` commands (arguments after the global options) one run of a schedule executes."""
    lock = ["--lock-timeout", f"{s.lock_timeout:g}"] if s.lock_timeout is not None else []
    if s.what == "ingest":
        tables = ["--tables", ",".join(s.select)] if s.select else []
        return [["ingest", "--once", *tables, *lock]]
    if s.what == "compact":
        return [["compact", *s.select, *lock]]
    if s.what == "verify":
        return [["verify", *s.select, *[a for e in s.exclude for a in ("--exclude", e)],
                 *(["--sample", s.sample] if s.sample else []), *(["--repair"] if s.repair else []), *lock]]
    if s.what == "reconcile":
        return [["reconcile", *s.select, *(["--repair"] if s.repair else []), *lock]]
    build = ["build", *s.select, *(["--incremental"] if s.incremental else [])]
    for e in s.exclude:
        build += ["--exclude", e]
    build += lock
    return [["ingest", "--once", *lock], build] if s.what == "run" else [build]


def next_fire_times(s: ScheduleConfig, count: int, now: datetime | None = None) -> list[datetime]:
    """The next `count` times the schedule fires after `now`, in its own time zone."""
    trigger = cron_trigger(s.cron, s.timezone)
    out: list[datetime] = []
    prev: datetime | None = None
    current = now or datetime.now(timezone.utc)
    for _ in range(count):
        nxt = trigger.get_next_fire_time(prev, current)
        if nxt is None:
            break
        out.append(nxt)
        prev, current = nxt, nxt
    return out


def check(project: Project, schedules: list[ScheduleConfig]) -> None:
    """Selectors and ODS tables named by the schedules exist (did-you-mean errors otherwise)."""
    from framework.transform.dag import build_graph, select
    from framework.transform.loader import load_models

    models = load_models(project)
    graph = build_graph(project, models)
    for s in schedules:
        try:
            if s.what == "ingest":
                for t in s.select:
                    project.ods_table(t)
            elif s.what == "compact":
                from framework.commands.compact import chosen

                chosen(project, s.select)
            else:
                select(graph, models, s.select, s.exclude, project=project, recorded=lambda _name: None)  # the grammar, not the state
        except LakeError as e:
            raise LakeError(f"lake.yaml: schedules: {s.name}: {e.message}", fix=e.fix) from e


class SubprocessSteps:
    """`run_step` running each `lake` command of a schedule as a child process.

    Children get their own session, so a Ctrl-C at the terminal reaches the scheduler only
    and the running build can finish. The commands of a `run` stop at the first failure.
    """

    def __init__(self, project_dir: Path, say: Say, target: str | None = None, observer: Observer | None = None,
                 spool: Path | None = None) -> None:
        self.project_dir = project_dir
        self.say = say
        self.target = target  # the scheduler's target: its children run with it, whatever their environment
        self.observer, self.spool = observer, spool  # children's run records come back through `spool`
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def collect(self) -> None:
        """Count the run records the children handed back (metrics), then drop them."""
        if self.spool is None or not self.spool.is_dir():
            return
        for f in sorted(self.spool.glob("*.json")):
            try:
                rec = RunRecord.model_validate_json(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if self.observer is not None:
                self.observer.count(rec)
            f.unlink(missing_ok=True)

    def argv(self, args: list[str]) -> list[str]:
        target = ["--target", self.target] if self.target else []
        return [sys.executable, "-m", "framework.cli", "--project", str(self.project_dir), *target, *args]

    def __call__(self, s: ScheduleConfig) -> int:
        env = {**os.environ, SPOOL_ENV: str(self.spool)} if self.spool is not None else None
        for args in lake_commands(s):
            proc = subprocess.Popen(self.argv(args), start_new_session=True, env=env)
            with self._lock:
                self._running.add(proc)
            try:
                code = proc.wait()
            finally:
                with self._lock:
                    self._running.discard(proc)
                self.collect()
            if code != 0:
                self.say(f"{s.name}: `lake {' '.join(args)}` exited {code}")
                return code
        return 0

    def terminate(self) -> None:
        """SIGTERM every running child (ingest and build finish their batch or model, then stop)."""
        with self._lock:
            for proc in self._running:
                proc.terminate()


class Scheduler:
    """The schedules as APScheduler jobs in a background thread pool. `state_dir`: where each
    schedule's last fire time is kept (catch-up at start); `metrics`: the scheduler's own."""

    def __init__(self, schedules: list[ScheduleConfig], run_step: StepRunner, say: Say, state_dir: Path | None = None,
                 metrics: Metrics | None = None) -> None:
        self.run_step = run_step
        self.say = say
        self.schedules, self.state_dir, self.metrics = schedules, state_dir, metrics
        self._busy = {s.name: threading.Lock() for s in schedules}  # a catch-up run and a cron run never overlap
        self._aps = BackgroundScheduler(timezone="UTC")
        for s in schedules:
            self._aps.add_job(self._run, trigger=cron_trigger(s.cron, s.timezone), args=[s], id=s.name,
                              name=s.name, max_instances=1, coalesce=True,
                              misfire_grace_time=s.misfire_grace_seconds)
        self._aps.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR)

    def _run(self, s: ScheduleConfig, wait: bool = False) -> int:
        busy = self._busy[s.name]
        if not busy.acquire(blocking=wait):
            self.say(f"{s.name}: skipped: the previous run is still going")
            self._count(s.name, "skipped")
            return 0
        try:
            if self.state_dir is not None:
                catchup.remember(self.state_dir, s.name, datetime.now(timezone.utc))
            self.say(f"{s.name}: started ({' && '.join('lake ' + ' '.join(c) for c in lake_commands(s))})")
            t0 = time.monotonic()
            code = self.run_step(s)
            # Counted before it is said: whoever reads the line finds the metric already there.
            self._count(s.name, "ok" if code == 0 else "failed")
            self.say(f"{s.name}: {'ok' if code == 0 else f'failed (exit {code})'} in {time.monotonic() - t0:.1f} s")
            return code
        finally:
            busy.release()

    def _catch_up(self, s: ScheduleConfig, runs: int) -> None:
        for _ in range(runs):
            self._run(s, wait=True)

    def catch_up(self) -> None:
        """Deal with the fire times missed while no scheduler ran, by each schedule's `catchup:`
        policy (saying which); from then on they count as handled."""
        if self.state_dir is None:
            return
        now = datetime.now(timezone.utc)
        for s in self.schedules:
            todo = catchup.plan(s, catchup.last_fire(self.state_dir, s.name), now)
            if todo.message:
                self.say(todo.message)
                self._count(s.name, "caught_up" if todo.runs else "missed", len(todo.missed))
            catchup.remember(self.state_dir, s.name, now)
            if todo.runs:
                self._aps.add_job(self._catch_up, args=[s, todo.runs], id=f"{s.name}.catchup", name=f"{s.name} catch-up")

    def _count(self, name: str, result: str, n: int = 1) -> None:
        if self.metrics is not None:
            self.metrics.schedule_runs.labels(name, result).inc(n)

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self.say(f"{event.job_id}: skipped: the previous run is still going")
            self._count(event.job_id, "skipped")
        elif event.code == EVENT_JOB_MISSED:
            self._count(event.job_id, "missed")
            self.say(f"{event.job_id}: missed its {event.scheduled_run_time:%Y-%m-%d %H:%M:%S %Z} run "
                     "(later than misfire_grace_seconds)")
        elif event.code == EVENT_JOB_ERROR:
            exc: Any = getattr(event, "exception", None)
            self.say(f"{event.job_id}: crashed: {type(exc).__name__}: {exc}")

    def start(self, *, paused: bool = False) -> None:
        self._aps.start(paused=paused)
        self.catch_up()

    def pause(self) -> None:
        """Stop firing; fire times passing meanwhile are coalesced into one run on resume."""
        self._aps.pause()

    def resume(self) -> None:
        self._aps.resume()

    def shutdown(self) -> None:
        """Start nothing new; return when the running steps have finished."""
        self._aps.shutdown(wait=True)

    def next_runs(self) -> dict[str, datetime | None]:
        return {job.id: job.next_run_time for job in self._aps.get_jobs()}


def serve(scheduler: Scheduler, say: Say, on_second_signal: Callable[[], None]) -> int:
    """Run until SIGTERM/SIGINT, then let running steps finish and return 0 (main thread only)."""
    stop = threading.Event()

    def handle(sig: signal.Signals) -> None:
        name = sig.name
        if stop.is_set():
            say(f"{name} again: asking the running steps to stop")
            on_second_signal()
            return
        say(f"{name}: no new runs; waiting for the running ones to finish")
        stop.set()

    with on_stop_signals(handle):
        scheduler.start()
        for name, when in sorted(scheduler.next_runs().items()):
            say(f"{name}: next run {when:%Y-%m-%d %H:%M:%S %Z}" if when else f"{name}: no next run")
        while not stop.wait(1.0):  # a timeout keeps the main thread responsive to signals
            pass
        scheduler.shutdown()
        say("stopped")
        return 0
