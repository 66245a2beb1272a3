"""History of a model's output (`history: true` in its YAML; dbt snapshots of a query): the table
`<layer>.<name>_history` holds one row per version of each output row across builds, with
`_valid_from` / `_valid_to` the commit times of the builds that wrote and ended it, `_is_current`
and `_ended_by_delete`, spliced by framework/ods/history.py as an ODS table's history is.

It follows the model's table, never the build: after each model's build (or no-op) the commits
of the model's table the history has not taken yet are read as changes (Hudi's change feed,
framework/transform/reader.py) and spliced in, each at its commit's time, and the history commit
records the last model commit it covers. So a crash between the model's commit and the
history's is caught up by the next build of the model, and a version is exactly one build's rows.
The first time (or once the model's older commits are cleaned), the model's rows as they are
become the first versions, valid from its latest commit.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.ods import history
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import kinds, timeline
from framework.table.hudi import Instant
from framework.table.lake_table import LakeTable, ProjectDefaults
from framework.transform.loader import Model
from framework.transform.reader import TableReader
from models.commit_meta import CommitRecord

COVERS = "history_covers"  # commit metadata key: the model commit (completion time) the history covers


class Covers(CommitRecord):
    """A model history's commit: the last commit of the model's table it has taken."""

    covers: str

    def to_meta(self) -> dict[str, str]:
        return {COVERS: self.covers}


def table(layout: Layout, defaults: ProjectDefaults, m: Model, key: tuple[str, ...]) -> LakeTable:
    return kinds.model_history(layout, defaults, m.name, key)


def covered(h: LakeTable) -> str | None:
    """The last model commit the history `h` has taken (None: none yet)."""
    if not h.committed():
        return None
    last = h.last_commit()
    return None if last is None else last.lake.get(COVERS)


def catch_up(reader: TableReader, defaults: ProjectDefaults, m: Model, key: tuple[str, ...]) -> int:
    """Take the model's commits the history has not: returns the history rows written (0 without
    Spark when it is up to date)."""
    layout = reader.layout
    model_table = kinds.model(layout, defaults, m.name, m.config)
    done = model_table.instants()
    if not done:
        return 0
    h = table(layout, defaults, m, key)
    since = covered(h)
    todo = [i for i in done if since is None or i.completed > since]
    if not todo:
        return 0
    where = layout.table(m.name)
    if since is None or since not in {i.completed for i in done}:
        rows = _versions(reader.snapshot(m.name), todo[-1], where, deleted=False)  # the rows as they are: first versions
        return history.write(reader.spark, h, list(key), rows, Covers(covers=todo[-1].completed))
    written, prev = 0, since
    for i in todo:  # one version per build: each commit's change at its own time
        ch = reader.change(m.name, list(key), prev, i.completed)
        gone = ch.before.join(ch.after.select(*[F.col(f"`{k}`") for k in key]), list(key), "left_anti")
        rows = _versions(ch.after, i, where, deleted=False).unionByName(_versions(gone, i, where, deleted=True))
        written += history.write(reader.spark, h, list(key), rows, Covers(covers=i.completed))
        prev = i.completed
    return written


def _versions(rows: DataFrame, at: Instant, where: Location, deleted: bool) -> DataFrame:
    """`rows` as events of the model commit `at`: its completion time is `_seq` and `_valid_from`."""
    when = timeline.instant_time(where, at.completed)
    return rows.select("*", F.lit(at.completed).alias("_seq"), F.lit(deleted).alias("_deleted"),
                       F.lit(when).cast("timestamp").alias("_valid_from"))

