"""Secrets out of everything lake sends or stores about a run: each value `${VAR}` put into the
project's YAML is shown as `${VAR}` instead (whole words, as config errors do)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from models.records import RunRecord


class Redactor:
    """Replaces the values of `secrets` (value -> variable name) in text."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self._subs = [(re.compile(rf"(?<![A-Za-z0-9_]){re.escape(v)}(?![A-Za-z0-9_])"), "${" + name + "}")
                      for v, name in sorted(secrets.items(), key=lambda kv: len(kv[0]), reverse=True) if v]

    def text(self, value: str) -> str:
        for pat, name in self._subs:
            value = pat.sub(lambda _m: name, value)  # noqa: B023 - used at once
        return value

    def maybe(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def record(self, rec: RunRecord) -> None:
        """Redact, in place, the free text of a run record (errors, fixes, reasons)."""
        if not self._subs:
            return
        rec.error, rec.fix = self.maybe(rec.error), self.maybe(rec.fix)
        for m in rec.models:
            m.reason, m.error = self.text(m.reason), self.maybe(m.error)
        if rec.ingest is not None:
            rec.ingest.error = self.maybe(rec.ingest.error)
            for b in rec.ingest.batches:
                for t in b.tables.values():
                    t.reason = self.maybe(t.reason)
                b.dead_reasons = {self.text(k): v for k, v in b.dead_reasons.items()}
        for d in rec.deliveries:
            d.target, d.error = self.text(d.target), self.maybe(d.error)
