"""What `lake build` may do beyond its plan: let strict models fall back (`--allow-full`), restate
a range of partitions (`--restate`), apply an additive change forward only (`--forward-only`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from framework.errors import LakeError


@dataclass(frozen=True)
class DateRange:
    """An inclusive range of days, `2026-11-01..2026-11-07` (one day: `2026-11-01`)."""

    first: date
    last: date

    @classmethod
    def parse(cls, text: str) -> DateRange:
        first, sep, last = text.strip().partition("..")
        try:
            a = date.fromisoformat(first.strip())
            b = date.fromisoformat(last.strip()) if sep else a
        except ValueError:
            raise LakeError(f"--restate {text!r} is not a range of days",
                            fix="give FIRST..LAST as ISO dates, both included, e.g. --restate 2026-11-01..2026-11-07") from None
        if b < a:
            raise LakeError(f"--restate {text!r} ends before it starts", fix=f"write it as {b}..{a}")
        return cls(a, b)

    def __str__(self) -> str:
        return f"{self.first}..{self.last}" if self.first != self.last else str(self.first)


@dataclass(frozen=True)
class BuildOptions:
    allow_full: bool = False  # `incremental: strict` models may fall back to a full build, once
    restate: DateRange | None = None  # recompute these days' partitions only (framework/transform/restate.py)
    forward_only: bool = False  # apply a change that only adds columns without a rebuild (framework/transform/forward.py)
