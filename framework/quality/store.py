"""Every evaluation's results, stored as `<warehouse>/_lake/quality/<run_id>/<model>.json`."""

from __future__ import annotations

from framework.runtime.location import Location
from framework.runtime.paths import Layout
from models.quality_result import ModelQuality


def result_path(layout: Layout, run_id: str, model: str) -> Location:
    return layout.quality(run_id) / f"{model}.json"


def save(layout: Layout, record: ModelQuality) -> Location:
    """Write atomically (a reader never sees half a file); a re-evaluation in the same run replaces
    the earlier result."""
    path = result_path(layout, record.run_id, record.model)
    layout.fs.write_text(path, record.model_dump_json(indent=2))
    return path


def load_run(layout: Layout, run_id: str) -> list[ModelQuality]:
    """All results of one run, by model name."""
    fs = layout.fs
    files = [p for p in fs.children(layout.quality(run_id)) if p.name.endswith(".json") and not p.name.startswith(".")]
    return [ModelQuality.model_validate_json(fs.read_text(p)) for p in files]


def runs(layout: Layout) -> list[str]:
    """Run ids with stored results, oldest first (run ids sort by time)."""
    return [p.name for p in layout.fs.children(layout.lake / "quality") if not p.name.startswith(".")]
