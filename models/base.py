"""The base of every config record: unknown keys are errors, instances are immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for config records: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
