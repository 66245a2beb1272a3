"""`schedules:` in lake.yaml: what `lake schedule` runs, and when."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR


class ScheduleConfig(StrictModel):
    """One entry of `schedules:` in `lake.yaml`: what `lake schedule` runs, and when."""

    name: str = Field(description="Names the job and the Airflow DAG (`lake_<name>`).")
    # A 6th field for seconds is for tests and demos; Airflow cannot take it.
    cron: str = Field(description="5-field crontab: minute hour day month day-of-week (0 or 7 = Sunday); a 6th field in front adds seconds.")
    timezone: str = Field(default="UTC", description="IANA time zone of the cron times, e.g. Europe/Berlin.")
    what: Literal["ingest", "build", "run", "compact", "verify", "reconcile"] = Field(
        description="`ingest` (ingest --once), `build`, `run` (ingest --once, then build), `compact` (lake compact), `verify` (lake verify) "
                    "or `reconcile` (lake reconcile).")
    select: list[str] = Field(default_factory=list, description="build, verify: model selectors; ingest, reconcile: ODS tables (ods.user); "
                              "compact: tables.")
    exclude: list[str] = Field(default_factory=list, description="build, verify: selectors to leave out.")
    incremental: bool = Field(default=False, description="build: `--incremental`.")
    sample: str | None = Field(default=None, description="verify: `--sample`, e.g. `1%` of keys.")
    repair: bool = Field(default=False, description="verify: `--repair` (rebuild a model that differs in full); reconcile: `--repair` "
                         "(write the differing keys from the source).")
    lock_timeout: float | None = Field(default=None, ge=0, description="`--lock-timeout` of the commands (default: theirs, 30 s).")
    misfire_grace_seconds: int = Field(default=300, ge=1, description="A run delayed by at most this still starts.")
    catchup: Literal["latest", "all", "none"] = Field(
        default="latest", description="Fire times missed while no `lake schedule` ran (Airflow's catchup): `latest` runs once for "
        "them at start, `all` once per missed time, `none` skips them; the scheduler says which.")

    @field_validator("catchup", mode="before")
    @classmethod
    def _airflow_bool(cls, v: object) -> object:
        return {True: "all", False: "latest"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", v):
            raise ValueError(f"must be letters, digits, '_', '-' or '.'{FIX_SEPARATOR}rename it; it names the job and the Airflow DAG")
        return v

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        # Whether it is a cron expression the scheduler reads is framework/project/config.py's check, made
        # with the scheduler library's own parser before this type is validated.
        return " ".join(v.split())

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown time zone {v!r}{FIX_SEPARATOR}use an IANA name such as UTC or Europe/Berlin") from e
        return v

    @model_validator(mode="after")
    def _fits_what(self) -> ScheduleConfig:
        if self.what in ("ingest", "compact") and (self.exclude or self.incremental):
            raise ValueError(f"`exclude` and `incremental` apply to builds{FIX_SEPARATOR}remove them from an {self.what} schedule")
        if self.what not in ("verify", "reconcile") and (self.sample is not None or self.repair):
            raise ValueError(f"`sample` and `repair` apply to verify{FIX_SEPARATOR}remove them from a {self.what} schedule, or use what: verify")
        if self.what == "reconcile" and (self.sample is not None or self.exclude):
            raise ValueError(f"`sample` and `exclude` apply to verify and builds{FIX_SEPARATOR}remove them from a reconcile schedule")
        if self.what in ("verify", "reconcile") and self.incremental:
            raise ValueError(f"`incremental` applies to builds{FIX_SEPARATOR}remove it from a {self.what} schedule")
        if self.what in ("ingest", "reconcile"):
            bad = [t for t in self.select if not t.startswith("ods.")]
            if bad:
                raise ValueError(f"an {self.what} schedule selects ODS tables, not {bad[0]!r}{FIX_SEPARATOR}use e.g. select: [ods.user], or what: build")
        return self
