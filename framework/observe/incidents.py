"""What a finished run says is wrong (problems, each an incident to open) and which open
incidents it shows fixed. Pure functions of the run record: no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.ops import AlertsConfig
from models.records import Incident, ModelResult, RunRecord
from models.verify import VERIFY_MODES

_GATE_ERRORS = ("QualityGateError", "BatchBlocked")
_LOST = re.compile(r"holds the lock (\S+)")  # LockLostError: "... no longer safely holds the lock table-x (where): why"


@dataclass(frozen=True)
class Problem:
    event: str  # build_failed | ingest_failed | gate_blocked | freshness | dead_letter | lock_lost | verify_failed | reconcile_failed
    subject: str  # the model, ODS table or lock
    reason: str
    fix: str

    @property
    def key(self) -> str:
        return f"{self.event} {self.subject}"


def split_fix(error: str | None, reason: str) -> tuple[str, str | None]:
    """A LakeError's text is `message\\n  fix: ...`: the two parts (reason when no error)."""
    text = error or reason
    msg, sep, fix = text.partition("\n  fix: ")
    return msg.strip(), (fix.strip() or None) if sep else None


def _model(r: ModelResult, run_id: str) -> Problem | None:
    if r.mode != "failed":
        return None
    reason, fix = split_fix(r.error, r.reason)
    if any(c.severity == "error" and not c.success for c in r.checks):
        return Problem("gate_blocked", r.model, reason, fix or f"fix the data or the check in the model's YAML, then `lake retry` (run {run_id})")
    return Problem("build_failed", r.model, reason, fix or f"`lake runs show {run_id}` has the error; fix it, then `lake retry`")


def _ingest(rec: RunRecord, threshold: int) -> list[Problem]:
    out: list[Problem] = []
    if rec.ingest is None:
        return out
    totals = {t.table: t for t in rec.ingest.totals().values()}  # by qualified name (ods.users)
    for name, t in sorted(totals.items()):
        if t.status == "blocked":
            reason, fix = split_fix(None, t.reason or "an error check blocked the commit")
            out.append(Problem("gate_blocked", name, reason, rec.fix or fix or
                               "fix the check in the table's YAML under layers/ods/ (severity warn, or drop), then rerun `lake ingest`"))
        if t.dead_letter > threshold:
            out.append(_dead(name, t.dead_letter, threshold))
    unrouted = rec.ingest.dead_letter - sum(t.dead_letter for t in totals.values())
    if unrouted > threshold:
        out.append(_dead("(unrouted)", unrouted, threshold, ", ".join(sorted(rec.ingest.dead_reasons())) or None))
    return out


def _dead(table: str, n: int, threshold: int, reasons: str | None = None) -> Problem:
    where = f" --table {table}" if table.startswith("ods.") else ""
    return Problem("dead_letter", table, f"{n} events went to the dead letter in this run (threshold {threshold})"
                   + (f": {reasons}" if reasons else ""),
                   f"`lake dead-letter list{where}` shows them and why; fix the cause, then `lake dead-letter replay{where}`")


def _verify(rec: RunRecord) -> list[Problem]:
    """`lake verify`: each model whose table is not what a full build gives, or that it could not build."""
    out = []
    for v in rec.verified:
        if v.status in ("differs", "failed"):
            fix = (f"`lake runs show {rec.run_id}` has the differing keys; `lake verify {v.model} --repair` rebuilds it in full"
                   if v.status == "differs" else f"`lake runs show {rec.run_id}` has the error; `lake build {v.model}` rebuilds it in full")
            out.append(Problem("verify_failed", v.model, f"{v.model}: {v.reason}", fix))
    return out


def _reconcile(rec: RunRecord) -> list[Problem]:
    """`lake reconcile`: each ODS table not equal to its source table, or that it could not compare."""
    out = []
    for r in rec.reconciled:
        if r.status in ("differs", "failed"):
            fix = (f"`lake runs show {rec.run_id}` has the differing keys; `lake reconcile {r.table} --repair` writes them from the source"
                   if r.status == "differs" else f"`lake runs show {rec.run_id}` has the error")
            out.append(Problem("reconcile_failed", r.table, f"{r.table}: {r.reason}", fix))
    return out


def _failure(rec: RunRecord) -> Problem | None:
    """The run's own error, when no model or table result already names it."""
    if rec.status != "failed" or rec.error_type is None or rec.error_type in _GATE_ERRORS:
        return None
    reason, fix = split_fix(rec.error, "failed")
    if rec.error_type == "LockLostError":
        m = _LOST.search(reason)
        return Problem("lock_lost", m[1] if m else "lock", reason, rec.fix or fix or "rerun the command")
    event = "ingest_failed" if rec.command in ("ingest", "run") and (rec.ingest is None or rec.ingest.status != "ok") else "build_failed"
    subject = "ingest" if event == "ingest_failed" else rec.command
    return Problem(event, subject, reason, rec.fix or fix or f"`lake runs show {rec.run_id}` has the error; fix it, then `lake retry`")


def problems(rec: RunRecord, cfg: AlertsConfig) -> list[Problem]:
    """Every problem the finished run shows, of the events `cfg.events` alerts on."""
    found = [p for r in rec.models if (p := _model(r, rec.run_id))]
    found += _ingest(rec, cfg.dead_letter_threshold)
    found += _verify(rec)
    found += _reconcile(rec)
    for f in rec.sources.values():
        if f.status == "error":
            age = "nothing ingested yet" if f.age_s is None else f"its newest source event is {f.age_s:.0f} s old"
            found.append(Problem("freshness", f.table, f"{f.table} is past its freshness error_after ({f.error_after_s:g} s): {age}",
                                 "check that the source database, its CDC connector and the topic are running and that `lake run` "
                                 "or `lake ingest` is scheduled; `lake freshness` shows every table"))
    failure = _failure(rec)
    if failure is not None:
        found.append(failure)
    seen: set[str] = set()
    return [p for p in found if p.event in cfg.events and not (p.key in seen or seen.add(p.key))]  # type: ignore[func-returns-value]


def resolves(rec: RunRecord, inc: Incident, cfg: AlertsConfig) -> bool:
    """Whether the finished run shows the open incident fixed (it must have looked at the
    subject: a run that did not build the model or ingest the table says nothing about it)."""
    ev, subject = inc.event, inc.subject
    models = {r.model: r for r in rec.models if r.mode not in VERIFY_MODES}  # a verified model was not built
    totals = {t.table: t for t in rec.ingest.totals().values()} if rec.ingest is not None else {}
    if ev in ("build_failed", "gate_blocked") and subject in models:
        return models[subject].mode not in ("failed", "skipped")
    if ev == "gate_blocked" and subject in totals:
        return totals[subject].status not in ("blocked", "pending")
    if ev == "build_failed" and subject == rec.command == "build":
        return rec.status == "ok"
    if ev == "ingest_failed":
        return rec.command in ("ingest", "run") and rec.ingest is not None and rec.ingest.status == "ok"
    if ev == "freshness" and subject in rec.sources:
        return rec.sources[subject].status != "error"
    if ev == "dead_letter" and rec.ingest is not None:
        if subject == "(unrouted)":
            unrouted = rec.ingest.dead_letter - sum(t.dead_letter for t in totals.values())
            return rec.ingest.events > 0 and unrouted <= cfg.dead_letter_threshold
        return subject in totals and totals[subject].dead_letter <= cfg.dead_letter_threshold
    if ev == "verify_failed":
        return any(v.model == subject and v.status == "equal" for v in rec.verified)
    if ev == "reconcile_failed":
        return any(r.table == subject and r.status == "equal" for r in rec.reconciled)
    if ev == "lock_lost":
        return rec.status == "ok"
    return False
