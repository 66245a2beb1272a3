"""Alerts once per incident: a finished run's problems open incidents (each alerted once), a
later run that shows one fixed closes it (and says so when `events:` lists `recovered`: the
incident's own alert again, with status `resolved`). The open incidents live in
`<warehouse>/_lake/alerts/incidents.json`, beside the run history, under a project lock: a failing
model rebuilt every cycle of `lake run --continuous` alerts once, not every cycle. An alert that a
target did not take is sent to that target again after the next run; every attempt that failed,
and every alert that went out, is in the run record (`deliveries`)."""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from framework.observe import deliver
from framework.observe.incidents import Problem, problems, resolves
from framework.observe.redact import Redactor
from framework.project.config import Project
from framework.runtime.lock import hold
from framework.runtime.paths import Layout
from models.ops import AlertsConfig
from models.records import Delivery, Incident, RunRecord


class IncidentState(BaseModel):
    """The open incidents, by key."""

    open: dict[str, Incident] = Field(default_factory=dict)


def state_file(layout: Layout) -> Any:
    return layout.lake / "alerts" / "incidents.json"


def load(layout: Layout) -> IncidentState:
    path = state_file(layout)
    if not layout.fs.exists(path):
        return IncidentState()
    return IncidentState.model_validate_json(layout.fs.read_text(path))


def _alert(project: Project, inc: Incident, status: str, rec: RunRecord, r: Redactor) -> dict[str, Any]:
    return {"project": project.config.name, "status": status, "event": inc.event, "subject": inc.subject, "run_id": rec.run_id,
            "opened_by_run": inc.run_id, "opened_at": inc.opened_at.isoformat(), "reason": r.text(inc.reason), "fix": r.text(inc.fix),
            "command": rec.command, "target": project.target, "host": socket.gethostname()}


def _open(p: Problem, rec: RunRecord) -> Incident:
    return Incident(key=p.key, event=p.event, subject=p.subject, reason=p.reason, fix=p.fix, run_id=rec.run_id,
                    opened_at=rec.finished_at or datetime.now(timezone.utc))


def process(project: Project, cfg: AlertsConfig, rec: RunRecord, redactor: Redactor) -> None:
    """Open, re-send and close incidents for the finished run `rec`; deliveries go into it."""
    layout = Layout(project.warehouse)
    with hold(layout.locks, ["alerts"], command="lake alerts", timeout=60, settings=project.config.locks,
              spark_conf=project.config.spark.conf):
        state = load(layout)
        outbox: list[tuple[Incident, str]] = []
        now = problems(rec, cfg)
        for p in now:
            if p.key not in state.open:
                state.open[p.key] = _open(p, rec)
        keys = {p.key for p in now}
        for key, inc in list(state.open.items()):
            if key not in keys and resolves(rec, inc, cfg):
                del state.open[key]
                if "recovered" in cfg.events:
                    outbox.append((inc, "resolved"))
            else:
                outbox.append((inc, "firing"))
        for inc, status in outbox:
            _send(project, cfg, inc, status, rec, redactor)
        layout.fs.write_text(state_file(layout), state.model_dump_json(indent=2))


def _send(project: Project, cfg: AlertsConfig, inc: Incident, status: str, rec: RunRecord, redactor: Redactor) -> None:
    """Send to each target that has not had it (firing), or to every target (resolved)."""
    alert = _alert(project, inc, status, rec, redactor)
    for i, target in enumerate(cfg.targets):
        name = f"targets[{i}]"
        if status == "firing" and name in inc.delivered:
            continue
        error = deliver.send(target, alert)
        if error is None and status == "firing":
            inc.delivered.append(name)
        rec.deliveries.append(Delivery(channel="alert", target=f"{name} {deliver.describe(target, redactor)}",
                                       what=f"{'recovered ' if status == 'resolved' else ''}{inc.key}", ok=error is None,
                                       error=redactor.maybe(error), at=datetime.now(timezone.utc)))
