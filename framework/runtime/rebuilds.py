"""Records of tables written anew: `lake ingest --rebuild`, an ODS table rewritten for a type
change Hudi cannot make in place (framework/ods/rewrite.py), a model table written anew for one.

A model's checkpoint of such a table is not on its new timeline. The record (one small JSON file
per table, `_lake/rebuilds/<layer>_<name>.json`, replaced by the next rebuild) lets planning say
why it rebuilds fully; reading it needs no Spark for a local warehouse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone

from framework.errors import LakeError
from framework.runtime.paths import Layout
from models.records import RebuildRecord


def record(layout: Layout, table: str, first: str, reason: str) -> RebuildRecord:
    """Store that `table` was written anew, its first commit completing at `first`."""
    rec = RebuildRecord(table=table, first=first, reason=reason, at=datetime.now(timezone.utc))
    layout.fs.write_text(layout.rebuild_record(table), rec.model_dump_json(indent=2))
    return rec


def read(layout: Layout, table: str) -> RebuildRecord | None:
    """The table's last rebuild, or None."""
    path = layout.rebuild_record(table)
    fs = layout.fs
    if not fs.exists(path):
        return None
    return RebuildRecord.model_validate_json(fs.read_text(path))


def unfinished(layout: Layout, tables: Iterable[str]) -> None:
    """Stop an ingest that would write a table whose rebuild did not finish (a crash, Ctrl-C)."""
    fs = layout.fs
    for q in tables:
        if fs.exists(layout.rebuild_pending(q)):
            started = json.loads(fs.read_text(layout.rebuild_pending(q))).get("started", "?")
            raise LakeError(
                f"the rebuild of {q} started at {started} did not finish: the table holds only part of its rows",
                fix=f"rerun it (lake ingest --rebuild {q}, with the same --path/--position if it had them); "
                f"meanwhile `lake ingest --tables` with the other tables ingests them",
            )
