"""Hudi write options for a table's layout (models/layout.py), and whether a table on disk can
take a layout: what an existing table cannot change in place.

lake records the layout it wrote a table with (`TableLayout.layout_tag`) in every commit's
metadata (`_lake_layout`). Tables written before that record nothing and have the SIMPLE
(or, partitioned, GLOBAL_SIMPLE) index.
"""

from __future__ import annotations

from models.layout import TableLayout

META_KEY = "layout"  # commit metadata key, after hudi.META_PREFIX
UNRECORDED = "simple"


def options(layout: TableLayout, key: list[str]) -> dict[str, str]:
    """Index and compaction options of `layout` (the table type is set by the caller)."""
    opts: dict[str, str] = {}
    if layout.index == "bucket":
        opts.update({
            "hoodie.index.type": "BUCKET",
            "hoodie.index.bucket.engine": "SIMPLE",
            "hoodie.bucket.index.num.buckets": str(layout.buckets),
            "hoodie.bucket.index.hash.field": ",".join(key),
        })
    if layout.type == "mor":
        opts.update(compaction(layout.compact_every))
    return opts


def compaction(every: int) -> dict[str, str]:
    """Inline compaction every `every` delta commits; 0: none inline (`lake compact` runs it)."""
    if every <= 0:
        return {"hoodie.compact.inline": "false", "hoodie.compact.schedule.inline": "false"}
    return {"hoodie.compact.inline": "true", "hoodie.compact.inline.trigger.strategy": "NUM_COMMITS",
            "hoodie.compact.inline.max.delta.commits": str(every)}


def change_problem(recorded: str | None, layout: TableLayout) -> str | None:
    """Why a table written with layout `recorded` cannot be written with `layout` (None: it can).
    A bucket index finds a key only in the file group its hash names: a table written with
    another index, or another number of buckets, holds keys elsewhere, and an upsert would
    duplicate them. Going from a bucket index to the SIMPLE one is safe (SIMPLE looks
    everywhere)."""
    was = recorded or UNRECORDED
    want = layout.layout_tag
    if was == want or layout.index != "bucket":
        return None
    if was.startswith("bucket:"):
        return f"its table has {was.split(':', 1)[1]} buckets, and `buckets: {layout.buckets}` needs another table"
    return "its table was written with the simple index, and `index: bucket` needs a new table"
