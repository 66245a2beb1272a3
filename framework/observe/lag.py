"""Checkpoint lag in commits: per model, the upstream commits its table's checkpoint has not
consumed yet (read from the timelines' files; no Spark on a local warehouse)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from framework.runtime.paths import Layout
from framework.table import timeline


def checkpoint_lag(layout: Layout, models: Iterable[str]) -> dict[str, dict[str, int]]:
    """{model: {upstream: commits completed after the model's checkpoint of it}}; models with
    no commit (or no checkpoint) are left out. Compactions and clusterings change no row: not counted."""
    out: dict[str, dict[str, int]] = {}
    for m in models:
        last = timeline.last_commit(layout.table(m))
        if last is None or "ckpt" not in last.lake:
            continue
        ckpt: dict[str, str] = json.loads(last.lake["ckpt"])
        lag = {}
        for up, begin in sorted(ckpt.items()):
            table = layout.table(up)
            pending = [i for i in timeline.completed(table) if not begin or i.completed > begin]
            lag[up] = sum(1 for i in pending if timeline.read_commit(table, i).operation not in timeline.REWRITES)
        out[m] = lag
    return out
