"""What every command that writes shares: the project locks it holds, the run record it leaves
(framework/runtime/history.py), and the `--trigger` duration."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from framework.errors import LakeError
from framework.observe.observer import Observer
from framework.project.config import Project
from framework.runtime import history
from framework.runtime.lock import hold
from framework.runtime.paths import Layout
from models.records import LockHolder, RunRecord


def locked(project: Project, names: list[str], timeout: float, argv: Sequence[str],
           on_stale: Callable[[str, LockHolder], None] | None = None) -> contextlib.AbstractContextManager[Any]:
    """Hold the project locks of the tables (and checkpoint) a command writes (framework/runtime/lock.py)."""
    return hold(Layout(project.warehouse).locks, names, command=shlex.join(["lake", *argv]), timeout=timeout, on_stale=on_stale,
                settings=project.config.locks, spark_conf=project.config.spark.conf)


def recorded(project: Project, command: str, argv: Sequence[str], observer: Observer | None = None) -> contextlib.AbstractContextManager[RunRecord]:
    """A run record for the block, stored whatever happens (run history), observed as lake.yaml
    says (`alerts:`, `lineage:`; framework/observe/)."""
    obs = observer or Observer(project)
    return history.recorded(Layout(project.warehouse), command, list(argv), project.target, start=obs.started, finish=obs.finish)


def parse_seconds(text: str) -> int:
    """`10s`, `2m` or `30` as seconds (a `--trigger`)."""
    t = text.strip().lower()
    mult = 1
    if t.endswith("ms"):
        raise LakeError(f"--trigger {text}: sub-second triggers are not supported", fix="use e.g. --trigger 10s")
    if t.endswith("s"):
        t = t[:-1]
    elif t.endswith("m"):
        t, mult = t[:-1], 60
    if not t.isdigit() or int(t) <= 0:
        raise LakeError(f"--trigger {text!r} is not a duration", fix="use seconds or minutes, e.g. --trigger 10s or --trigger 1m")
    return int(t) * mult
