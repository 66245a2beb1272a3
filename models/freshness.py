"""`freshness:` of ODS tables: how old the newest ingested source event may get before `lake
freshness` (and `lake check`, `lake run`) warn or fail, as dbt's source freshness."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(v: object) -> float:
    """`45s`, `30m`, `2h`, `1d` or a number of seconds, as seconds."""
    m = _DURATION.match(str(v)) if isinstance(v, (str, int, float)) and not isinstance(v, bool) else None
    if m is None or float(m[1]) <= 0:
        raise ValueError(f"{v!r} is not a duration{FIX_SEPARATOR}give a number and a unit: 45s, 30m, 2h or 1d")
    return float(m[1]) * _UNIT[m[2] or "s"]


def show_duration(seconds: float) -> str:
    """Seconds as the largest unit that divides them: 1800 -> 30m."""
    for unit in ("d", "h", "m"):
        if seconds >= _UNIT[unit] and seconds % _UNIT[unit] == 0:
            return f"{seconds / _UNIT[unit]:g}{unit}"
    return f"{seconds:g}s"


class FreshnessConfig(StrictModel):
    """`{warn_after: 30m, error_after: 2h}`: ages (seconds once parsed) of the newest source event
    ingested; at least one of the two."""

    warn_after: float | None = Field(default=None, description="A duration (`45s`, `30m`, `2h`, `1d`): older is a warning.")
    error_after: float | None = Field(default=None, description="A duration: older is an error (`lake freshness` and `lake check` exit 1).")

    @field_validator("warn_after", "error_after", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        return None if v is None else parse_duration(v)

    @model_validator(mode="after")
    def _ordered(self) -> FreshnessConfig:
        if self.warn_after is None and self.error_after is None:
            raise ValueError(f"neither warn_after nor error_after is set{FIX_SEPARATOR}e.g. `freshness: {{warn_after: 30m, error_after: 2h}}`")
        if self.warn_after is not None and self.error_after is not None and self.warn_after >= self.error_after:
            raise ValueError(f"warn_after ({show_duration(self.warn_after)}) is not below error_after ({show_duration(self.error_after)})"
                             f"{FIX_SEPARATOR}warn before failing: make warn_after the shorter one, or leave it out")
        return self
