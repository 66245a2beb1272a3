"""Sending one alert to one target: a webhook (JSON, or Slack's incoming-webhook form) or a
command (the JSON on its standard input). Never raises: the error comes back as text."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from typing import Any

from framework.observe.redact import Redactor
from models.ops import CommandTarget, WebhookTarget

Target = WebhookTarget | CommandTarget
_ICON = {"firing": ":red_circle:", "resolved": ":large_green_circle:"}
_TITLE = {"build_failed": "build failed", "ingest_failed": "ingest failed", "gate_blocked": "quality gate blocked a commit",
          "freshness": "source past its freshness error_after", "dead_letter": "dead letters over the threshold",
          "lock_lost": "lock lost"}


def describe(target: Target, redactor: Redactor) -> str:
    """How the run record names a target (secrets as ${VAR})."""
    if isinstance(target, WebhookTarget):
        return redactor.text(f"webhook {target.url}")
    return redactor.text("command " + " ".join(target.command))


def summary(alert: dict[str, Any]) -> str:
    """One line: what, which table or model, which run."""
    what = _TITLE.get(alert["event"], alert["event"])
    if alert["status"] == "resolved":
        return f"lake {alert['project']}: recovered: {what}: {alert['subject']} (fixed by run {alert['run_id']})"
    return f"lake {alert['project']}: {what}: {alert['subject']} (run {alert['run_id']})"


def slack(alert: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook body: `text` (notifications, and hooks that read nothing else)
    and the same in `blocks`."""
    head = f"{_ICON[alert['status']]} *{summary(alert)}*"
    body = f"*Reason:* {alert['reason']}\n*Fix:* {alert['fix']}"
    return {"text": f"{summary(alert)}\nReason: {alert['reason']}\nFix: {alert['fix']}",
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": head}},
                       {"type": "section", "text": {"type": "mrkdwn", "text": body}}]}


def send(target: Target, alert: dict[str, Any]) -> str | None:
    """Deliver `alert` (already redacted); None when it went out, else why not."""
    try:
        if isinstance(target, WebhookTarget):
            return _post(target, alert)
        return _run(target, alert)
    except Exception as e:  # noqa: BLE001 - an alert that cannot go out must not stop the run
        return f"{type(e).__name__}: {e}"


def _post(target: WebhookTarget, alert: dict[str, Any]) -> str | None:
    body = json.dumps(slack(alert) if target.format == "slack" else alert).encode()
    req = urllib.request.Request(target.url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "lake-alerts", **target.headers})
    try:
        with urllib.request.urlopen(req, timeout=target.timeout_seconds) as resp:
            resp.read()
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} {e.reason}"
    except (urllib.error.URLError, OSError) as e:
        return f"cannot reach the webhook: {getattr(e, 'reason', e)}"
    return None


def _run(target: CommandTarget, alert: dict[str, Any]) -> str | None:
    env = {**os.environ, "LAKE_ALERT_EVENT": alert["event"], "LAKE_ALERT_STATUS": alert["status"], "LAKE_ALERT_SUBJECT": alert["subject"],
           "LAKE_ALERT_RUN": alert["run_id"], "LAKE_ALERT_TEXT": summary(alert)}
    try:
        r = subprocess.run(target.command, input=json.dumps(alert), text=True, capture_output=True, env=env, timeout=target.timeout_seconds)
    except FileNotFoundError:
        return f"no such command: {target.command[0]}"
    except subprocess.TimeoutExpired:
        return f"the command did not finish within {target.timeout_seconds:g} s"
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return f"the command exited {r.returncode}: {tail[0][:300]}"
    return None
