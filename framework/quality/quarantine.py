"""The quarantine Hudi tables: rows a `drop` check rejected, one table per model or ODS table.

`_quarantine/<layer>_<name>` under the warehouse (SQL: `_quarantine.<layer>_<name>`), keyed by
run id plus the row's own identity, so a retried run id replaces its rows and other runs add theirs.
Each row keeps its visible columns plus `_lake_failed_checks`, `_lake_run_id` and `_lake_model`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.quality.checks import RUN_ID
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import ProjectDefaults
from models.commit_meta import QuarantineMark
from models.quality_result import ModelQuality
from models.records import CheckOutcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write(layout: Layout, model: str, rows: DataFrame, identity: str, defaults: ProjectDefaults) -> int:
    """Upsert quarantined `rows` (already tagged by the gate) into the model's quarantine table;
    `identity` is the column naming a row within a run (`_lake_key`, or an ODS event's `_source`).
    Returns the number of rows written (0 writes nothing)."""
    rows = rows.persist()
    try:
        n = rows.count()
        if n == 0:
            return 0
        kinds.quarantine(layout, defaults, model, (RUN_ID, identity)).commit(rows, QuarantineMark(model=model))
        return n
    finally:
        rows.unpersist()


def outcomes(record: ModelQuality) -> list[CheckOutcome]:
    """The compact per-check verdicts kept in run records."""
    return [CheckOutcome(name=r.name, severity=r.severity, success=r.success, failing=r.failing, total=r.total) for r in record.results]
