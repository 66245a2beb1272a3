"""`alerts:`, `metrics:` and `lineage:` in lake.yaml: what lake tells the outside world when it
runs unattended (framework/observe/)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

# The events that open an incident, and `recovered`: not an event of its own but the choice to be
# told when a later run shows an incident fixed. What then arrives is the incident's own alert
# (same `event`, `subject`) again with `"status": "resolved"` instead of "firing" (Alertmanager's
# convention; framework/observe/alerts.py).
# `verify_failed`: `lake verify` found a model's table unequal to a full build of it (or could not build it).
# `reconcile_failed`: `lake reconcile` found an ODS table unequal to its source table (or could not compare them).
AlertEvent = Literal["build_failed", "ingest_failed", "gate_blocked", "freshness", "dead_letter", "lock_lost", "verify_failed",
                     "reconcile_failed", "recovered"]
ALERT_EVENTS: tuple[AlertEvent, ...] = ("build_failed", "ingest_failed", "gate_blocked", "freshness", "dead_letter", "lock_lost", "verify_failed",
                                        "reconcile_failed", "recovered")


def _http_url(v: str, example: str) -> str:
    if not re.match(r"^https?://[^/\s]+", v.strip()):
        raise ValueError(f"{v!r} is not an http(s) URL{FIX_SEPARATOR}give e.g. {example}")
    return v.strip()


class WebhookTarget(StrictModel):
    """POST one JSON document per alert to `url` (`format: slack`: Slack's incoming-webhook form,
    `{"text": ..., "blocks": [...]}`, which Mattermost and Teams' Slack-compatible hooks take too)."""

    kind: Literal["webhook"] = Field(description="`webhook`: POST one JSON document per alert.")
    url: str = Field(description="Where to POST; put a token in it with ${VAR}, never inline.")
    format: Literal["json", "slack"] = Field(default="json", description="`json` (lake's alert document) or `slack` (Slack's incoming-webhook form).")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers, e.g. Authorization: 'Bearer ${TOKEN}'.")
    timeout_seconds: float = Field(default=10, gt=0, description="How long one POST may take; a target that does not answer is recorded, the run goes on.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _http_url(v, "url: ${SLACK_WEBHOOK_URL}")


class CommandTarget(StrictModel):
    """Run a command per alert: the alert's JSON on its standard input, and LAKE_ALERT_EVENT,
    LAKE_ALERT_STATUS (firing or resolved), LAKE_ALERT_SUBJECT, LAKE_ALERT_RUN, LAKE_ALERT_TEXT in
    its environment (no shell)."""

    kind: Literal["command"] = Field(description="`command`: run a program per alert, the alert's JSON on its standard input.")
    command: list[str] = Field(min_length=1, description="argv, e.g. [/usr/local/bin/page-oncall, --team, data]")
    timeout_seconds: float = Field(default=30, gt=0, description="How long the command may run before it is killed.")

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        if isinstance(v, str):
            raise ValueError(f"give the command as a list of arguments{FIX_SEPARATOR}write e.g. command: [notify-send, lake] "
                             "(no shell: wrap one in [sh, -c, '...'] if you need it)")
        return v


AlertTarget = Annotated[WebhookTarget | CommandTarget, Field(discriminator="kind")]


class AlertsConfig(StrictModel):
    """`alerts:`: where incidents go, and which."""

    targets: list[AlertTarget] = Field(min_length=1, description="Where alerts go: webhooks and commands, each gets every alert.")
    # (Not `on:`: YAML 1.1, which PyYAML reads, takes the key `on` for the boolean true.)
    events: list[AlertEvent] = Field(default_factory=lambda: list(ALERT_EVENTS), description="Which incidents alert (default: all): "
                                     "those the listed events open, each with `\"status\": \"firing\"`; with `recovered`, each "
                                     "incident a later run shows fixed arrives again, the same `event` and `subject` with "
                                     "`\"status\": \"resolved\"` (no alert has the event `recovered`).")
    dead_letter_threshold: int = Field(default=0, ge=0, description="A run that sends more than this many events of one table to the "
                                       "dead letter opens an incident.")

    @field_validator("events", mode="before")
    @classmethod
    def _resolved(cls, v: object) -> object:
        if isinstance(v, list) and "resolved" in v:
            raise ValueError(f"`resolved` is a status, not an event{FIX_SEPARATOR}write `recovered` in `events:`: a fixed incident then "
                             "arrives again as its own event with \"status\": \"resolved\"")
        return v


class MetricsConfig(StrictModel):
    """`metrics:`: a Prometheus endpoint served by `lake run --continuous` and `lake schedule`,
    and/or a node_exporter textfile those processes rewrite after every run."""

    port: int | None = Field(default=None, ge=0, le=65535, description="Serve /metrics on this port (0: any free port, printed).")
    host: str = Field(default="0.0.0.0", description="The address the metrics endpoint listens on.")
    textfile: str | None = Field(default=None, description="e.g. /var/lib/node_exporter/textfile/lake.prom (relative: to the project)")

    @model_validator(mode="after")
    def _something(self) -> MetricsConfig:
        if self.port is None and self.textfile is None:
            raise ValueError(f"neither port nor textfile is set{FIX_SEPARATOR}e.g. metrics: {{port: 9464}} or "
                             "metrics: {textfile: /var/lib/node_exporter/textfile/lake.prom}")
        if self.textfile is not None and not self.textfile.endswith(".prom"):
            raise ValueError(f"node_exporter reads only files ending in .prom{FIX_SEPARATOR}name it e.g. lake.prom")
        return self


class HttpLineage(StrictModel):
    """OpenLineage's HTTP transport (Marquez, DataHub, OpenMetadata, a collector)."""

    type: Literal["http"] = Field(description="`http`: POST each event to `url` + `endpoint`.")
    url: str = Field(description="The lineage server, e.g. http://marquez:5000.")
    endpoint: str = Field(default="api/v1/lineage", description="The path events are POSTed to.")
    api_key: str | None = Field(default=None, description="Sent as a Bearer token; give it as ${VAR}.")
    timeout_seconds: float = Field(default=5, gt=0, description="How long one POST may take; a failure is recorded, the run goes on.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return _http_url(v, "url: http://marquez:5000")


class FileLineage(StrictModel):
    """OpenLineage's file transport: one JSON event per line appended to `path`."""

    type: Literal["file"] = Field(description="`file`: append each event as one JSON line to `path`.")
    path: str = Field(min_length=1, description="relative paths are from the project directory")


class LineageConfig(StrictModel):
    """`lineage:`: OpenLineage run events (START, COMPLETE, FAIL) for every ingest and build."""

    transport: Annotated[HttpLineage | FileLineage, Field(discriminator="type", description="Where events go: `type: http` or `type: file`.")]
    namespace: str | None = Field(default=None, description="Job namespace (default: the project's name).")
