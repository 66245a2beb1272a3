"""`lake ingest --rebuild ods.T [--path DUMP --position POS]`: write one ODS table anew from what the
source still offers, while the other tables and their checkpoints stay as they are.

0. Without a dump, the rows whose last event the source no longer holds (Kafka retention, CDC
   files removed, rows a dump loaded) would be lost: the rebuild refuses, counting them, unless
   `--accept-loss` (framework/ods/retention.py). The row counts before and after are reported.
1. A marker (`_lake/rebuilds/ods_T.pending`) says a rebuild has started: until it finishes, an
   ingest that would write the table stops with the fix (rerun the rebuild), since the table holds
   only part of its rows in between.
2. The table, its tombstones (positions of its deletes, which a failover can make meaningless)
   and any staged rewrite are removed.
3. With `--path`: the dump is bulk-loaded (framework/ods/bootstrap.py), its position becoming the
   table's hand-off watermark.
4. The CDC the source still holds (every file of the file source; a Kafka source from its
   earliest retained offsets) is ingested for this table alone through the ODS micro-batch path,
   under a checkpoint of its own that is removed afterwards: events before a dump's position are
   dropped, the rest ordered by their source positions as in any ingest. The main checkpoint is
   untouched: events it reads again later are older than or equal to what the table holds.
5. The rebuild is recorded (framework/runtime/rebuilds.py): every model reading the table rebuilds fully
   at its next build, saying why; the marker is removed.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from framework.errors import LakeError
from framework.ods import retention
from framework.ods.bootstrap import run_bootstrap
from framework.ods.ingest import run_ingest
from framework.ods.retention import Loss
from framework.ods.rewrite import marker as rewrite_marker
from framework.project.config import Project
from framework.runtime import rebuilds
from framework.runtime.faults import failpoint
from framework.runtime.paths import Layout
from framework.table import hudi
from models.config import KafkaSourceConfig, OdsTable
from models.records import RebuildResult


def _from_the_start(project: Project) -> Project:
    """The project with a Kafka source read from its earliest retained offsets, and offsets the
    broker no longer has skipped instead of failing (the replay takes what is retained)."""
    src = project.config.ods.source
    if not isinstance(src, KafkaSourceConfig):
        return project
    src = src.model_copy(update={"starting_offsets": "earliest", "fail_on_data_loss": False})
    ods = project.config.ods.model_copy(update={"source": src})
    return dataclasses.replace(project, config=project.config.model_copy(update={"ods": ods}))


def rebuild(spark: SparkSession, project: Project, table: OdsTable, *, dump: Path | None, position: str | None, fmt: str,
            run_id: str | None = None, accept_loss: bool = False) -> RebuildResult:
    """Rebuild `table` (see the module's docstring).

    Raises:
        LakeError: without a dump, rows whose last event the source no longer holds would be lost
            (framework/ods/retention.py), and `accept_loss` is not set; nothing was touched.
    """
    q = table.qualified_name
    layout = Layout(project.warehouse)
    fs = layout.fs
    before = _check_loss(spark, project, table, dump, accept_loss)
    fs.write_text(layout.rebuild_pending(q), json.dumps({"started": datetime.now(timezone.utc).isoformat(), "dump": str(dump or "")}))
    for loc in (layout.table(q), layout.tombstones(q), layout.staging(q), rewrite_marker(layout, q)):
        fs.delete(loc)
    failpoint("after_rebuild_removed")
    boot = run_bootstrap(spark, project, table, dump, position=position, fmt=fmt) if dump is not None else None
    name = f"rebuild-{table.table_name}-{uuid.uuid4().hex[:8]}"
    try:
        summary = run_ingest(spark, _from_the_start(project), tables=[q], checkpoint=name, run_id=run_id)
    finally:
        fs.delete(layout.checkpoint(name))
    path = layout.table(q)
    instants = hudi.completed_instants(spark, path)
    what = f"from the dump {dump} (position {boot.position or 'none'}) and the CDC after it" if boot else "from the CDC the source still holds"
    reason = f"{q} was rebuilt by lake ingest --rebuild {what}"
    if instants:
        rebuilds.record(layout, q, instants[0].completed, reason)
    fs.delete(layout.rebuild_pending(q))
    rows = hudi.read(spark, path).count() if instants else 0
    events = sum(t.upserts + t.deletes for b in summary.batches for t in b.tables.values() if t.table == q)
    dead = sum(t.dead_letter for b in summary.batches for t in b.tables.values() if t.table == q)
    return RebuildResult(table=q, reason=reason, dump_rows=boot.rows if boot else None, position=boot.position if boot else None,
                         events=events, dead_letter=dead, rows=rows, ingest=summary, rows_before=before.rows,
                         given_up=before.lost if dump is None else 0)


def _check_loss(spark: SparkSession, project: Project, t: OdsTable, dump: Path | None, accept_loss: bool) -> Loss:
    """The table's rows before, and those the source cannot bring back; refused unless a dump
    brings them (`--path`) or the user accepts the loss."""
    if dump is not None:
        return Loss(rows=retention.row_count(spark, project, t))
    q = t.qualified_name
    found = retention.loss(spark, project, t)
    if found.lost and not accept_loss:
        raise LakeError(f"{found.message(q)}. Nothing was changed.",
                        fix=f"rebuild from a dump of the source table that brings them back: lake ingest --rebuild {q} --path DUMP "
                            f"--position FILE:POS (the dump's binlog position); or, to lose them, lake ingest --rebuild {q} --accept-loss")
    return found
