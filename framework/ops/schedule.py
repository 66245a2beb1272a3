"""`lake schedule`: run the `schedules:` of lake.yaml on their cron times (APScheduler 3).

Each schedule is one APScheduler job with a :class:`CronTrigger`, ``max_instances=1`` (a run
still going when the next fire time comes makes that fire time a skip, never a second copy),
``coalesce=True`` (fire times missed while the process was paused or busy run once, not once
each) and a ``misfire_grace_time``. The job calls an injected ``run_step(schedule) -> exit
code``; the CLI's is :class:`SubprocessSteps`, which runs the `lake` command in a child process
so a failing or crashing build cannot take the scheduler down with it. SIGTERM/SIGINT stop new
runs, wait for the running ones, and exit 0; a second signal passes SIGTERM on to the children.
"""

from __future__ import annotations

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
from framework.project.config import Project
from framework.project.cron import cron_trigger
from framework.runtime.signals import on_stop_signals
from models.config import ScheduleConfig

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

    def __init__(self, project_dir: Path, say: Say, target: str | None = None) -> None:
        self.project_dir = project_dir
        self.say = say
        self.target = target  # the scheduler's target: its children run with it, whatever their environment
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def argv(self, args: list[str]) -> list[str]:
        target = ["--target", self.target] if self.target else []
        return [sys.executable, "-m", "framework.cli", "--project", str(self.project_dir), *target, *args]

    def __call__(self, s: ScheduleConfig) -> int:
        for args in lake_commands(s):
            proc = subprocess.Popen(self.argv(args), start_new_session=True)
            with self._lock:
                self._running.add(proc)
            try:
                code = proc.wait()
            finally:
                with self._lock:
                    self._running.discard(proc)
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
    """The schedules as APScheduler jobs in a background thread pool."""

    def __init__(self, schedules: list[ScheduleConfig], run_step: StepRunner, say: Say) -> None:
        self.run_step = run_step
        self.say = say
        self._aps = BackgroundScheduler(timezone="UTC")
        for s in schedules:
            self._aps.add_job(self._run, trigger=cron_trigger(s.cron, s.timezone), args=[s], id=s.name,
                              name=s.name, max_instances=1, coalesce=True,
                              misfire_grace_time=s.misfire_grace_seconds)
        self._aps.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR)

    def _run(self, s: ScheduleConfig) -> int:
        self.say(f"{s.name}: started ({' && '.join('lake ' + ' '.join(c) for c in lake_commands(s))})")
        t0 = time.monotonic()
        code = self.run_step(s)
        self.say(f"{s.name}: {'ok' if code == 0 else f'failed (exit {code})'} in {time.monotonic() - t0:.1f} s")
        return code

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self.say(f"{event.job_id}: skipped: the previous run is still going")
        elif event.code == EVENT_JOB_MISSED:
            self.say(f"{event.job_id}: missed its {event.scheduled_run_time:%Y-%m-%d %H:%M:%S %Z} run "
                     "(later than misfire_grace_seconds)")
        elif event.code == EVENT_JOB_ERROR:
            exc: Any = getattr(event, "exception", None)
            self.say(f"{event.job_id}: crashed: {type(exc).__name__}: {exc}")

    def start(self, *, paused: bool = False) -> None:
        self._aps.start(paused=paused)

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
