"""A restatement's range (`lake build MODEL --restate START..END`): the partition values of a
partitioned model to recompute, both ends included, written as the partition column's values
(`2026-11-01..2026-11-07` for a DATE column, `2026-10..2026-11` for a `yyyy-MM` string)."""

from __future__ import annotations

from pydantic import Field

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR


class RestateRange(StrictModel):
    start: str = Field(min_length=1, description="The first partition value to recompute.")
    end: str = Field(min_length=1, description="The last partition value to recompute (included).")

    @classmethod
    def parse(cls, text: str) -> RestateRange:
        """`START..END` (a single value restates one partition); ValueError names the fix."""
        start, sep, end = (part.strip() for part in text.partition(".."))
        if not sep:
            start = end = text.strip()
        if not start or not end or ".." in end:
            raise ValueError(f"`--restate {text}` is not a range{FIX_SEPARATOR}write START..END, e.g. --restate 2026-11-01..2026-11-07")
        return cls(start=start, end=end)

    def __str__(self) -> str:
        return f"{self.start}..{self.end}"
