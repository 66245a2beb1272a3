"""Every evaluation's results, stored as `<warehouse>/_lake/quality/<run_id>/<model>.json`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from framework.paths import Layout
from models.quality_result import ModelQuality


def result_path(layout: Layout, run_id: str, model: str) -> Path:
    return layout.quality(run_id) / f"{model}.json"


def save(layout: Layout, record: ModelQuality) -> Path:
    """Write atomically (a reader never sees half a file); a re-evaluation in the same run replaces
    the earlier result."""
    path = result_path(layout, record.run_id, record.model)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(record.model_dump_json(indent=2))
    os.replace(tmp, path)
    return path


def load_run(layout: Layout, run_id: str) -> list[ModelQuality]:
    """All results of one run, by model name."""
    d = layout.quality(run_id)
    if not d.is_dir():
        return []
    return [ModelQuality.model_validate_json(p.read_text(encoding="utf-8")) for p in sorted(d.glob("*.json"))]


def runs(layout: Layout) -> list[str]:
    """Run ids with stored results, oldest first (run ids sort by time)."""
    d = layout.lake / "quality"
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []
