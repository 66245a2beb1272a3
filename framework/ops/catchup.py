"""Fire times missed while no `lake schedule` was running, and what the schedule's `catchup:`
policy does about them (Airflow's `catchup`): `latest` runs once, `all` once per missed time,
`none` runs nothing; the scheduler says which.

The last fire time of each schedule is kept in `<local state>/schedules/<name>.json` (a local
warehouse's `_lake/`, else the project's `out/lake/`): the state of this machine's scheduler.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from framework.project.cron import cron_trigger
from models.config import ScheduleConfig

_SHOWN = 3  # missed fire times named in the message; the rest are counted


@dataclass(frozen=True)
class Catchup:
    """What to do at start for one schedule's missed fire times."""

    schedule: str
    missed: tuple[datetime, ...]
    runs: int  # how many runs to start now for them
    message: str | None  # None: nothing was missed


def state_path(state_dir: Path, name: str) -> Path:
    return state_dir / "schedules" / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".json")


def last_fire(state_dir: Path, name: str) -> datetime | None:
    p = state_path(state_dir, name)
    try:
        return datetime.fromisoformat(json.loads(p.read_text(encoding="utf-8"))["last_fire"])
    except (OSError, ValueError, KeyError):
        return None


def remember(state_dir: Path, name: str, when: datetime) -> None:
    """Record that the schedule fired (or its missed times were dealt with) at `when`."""
    p = state_path(state_dir, name)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps({"last_fire": when.isoformat()}), encoding="utf-8")
    tmp.replace(p)


def missed(s: ScheduleConfig, since: datetime, now: datetime, limit: int = 100_000) -> list[datetime]:
    """The schedule's fire times in (since, now]."""
    trigger = cron_trigger(s.cron, s.timezone)
    out: list[datetime] = []
    prev: datetime | None = since
    nxt = trigger.get_next_fire_time(prev, since)
    while nxt is not None and nxt <= since:  # the trigger may return `since` itself
        prev, nxt = nxt, trigger.get_next_fire_time(nxt, nxt)
    while nxt is not None and nxt <= now and len(out) < limit:
        out.append(nxt)
        prev, nxt = nxt, trigger.get_next_fire_time(nxt, nxt)
    return out


def plan(s: ScheduleConfig, last: datetime | None, now: datetime) -> Catchup:
    """The schedule's catch-up at start: nothing when it never fired here before (a new schedule
    starts from now), else by its `catchup:` policy."""
    times = tuple(missed(s, last, now)) if last is not None else ()
    if not times:
        return Catchup(s.name, (), 0, None)
    shown = ", ".join(f"{t:%Y-%m-%d %H:%M:%S %Z}" for t in times[-_SHOWN:])
    more = f" (and {len(times) - _SHOWN} earlier)" if len(times) > _SHOWN else ""
    head = f"{s.name}: missed {len(times)} run(s) while no scheduler was running: {shown}{more}; catchup: {s.catchup}"
    if s.catchup == "none":
        return Catchup(s.name, times, 0, f"{head}: skipping them; next run at its next fire time")
    if s.catchup == "latest":
        return Catchup(s.name, times, 1, f"{head}: running once now for them")
    return Catchup(s.name, times, len(times), f"{head}: running {len(times)} time(s) now, one per missed fire time")
