"""Committing a model build: the rows that differ, the deletes, the quality gate and one Hudi
commit that carries the model's checkpoint and fingerprint.

A model's progress — for each upstream the completion time of the last instant consumed, and the
model's fingerprint — is written into the extra metadata of the same Hudi commit that writes its
data, so a crash leaves either the old commit or the new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.project.config import Project
from framework.project.externals import is_external
from framework.project.types import in_place
from framework.quality.checks import GateResult
from framework.quality.model_gate import ModelGate
from framework.runtime import rebuilds
from framework.runtime.faults import failpoint
from framework.runtime.paths import Layout
from framework.table import hudi, hudi_layout, kinds
from framework.table.columns import lake_key, visible_columns
from framework.table.held import Held, is_held
from framework.table.lake_table import LakeTable, ProjectDefaults
from framework.transform import contract, hidden, holders
from framework.transform.loader import Model
from framework.transform.plan import ModelPlan
from framework.transform.reader import TableReader
from framework.transform.strategy import Analysis
from models.commit_meta import ModelCheckpoint

# Upstream commits a model's checkpoint may lag before a build that writes no row commits anyway
# (empty) to move it (Committer._lagging). Well below the cleaner's default retention (50).
ADVANCE_AFTER = 10


@dataclass(frozen=True)
class Written:
    """What one model build committed: rows upserted and deleted, and what its gate found."""

    rows: int
    deletes: int
    gate: GateResult


class Committer:
    """Writes model builds into their Hudi tables, gated, with their checkpoints.

    `write` is a pipeline: the rows to write (`_rows`), the stored table or why it is written
    anew (`_stored`), the gate, the diff against the table (`_final`), then the hidden groups and
    the commit (`_commit`). A table written anew is removed only after the gate let the build
    through: a blocked gate leaves the table and its checkpoint as they were."""

    def __init__(self, spark: SparkSession, project: Project, layout: Layout, reader: TableReader, gate: ModelGate) -> None:
        self.spark = spark
        self.project = project
        self.layout = layout
        self.reader = reader
        self.gate = gate
        self.defaults = ProjectDefaults.of(project)

    def table(self, m: Model) -> LakeTable:
        return kinds.model(self.layout, self.defaults, m.name, m.config)

    def write(self, p: ModelPlan, rows: DataFrame, scope: DataFrame | None, scope_col: str = "_lake_key") -> Written:
        """Upsert `rows`; delete target rows inside `scope` (None: the whole table) not in `rows`.
        Without a key, a row's key is all its visible columns (set semantics). Without a scope
        (full rebuilds and recomputes: every row of the model), rows equal to the table's row of
        their key (every column, NULL-safe) are not written, so the commit and its CDC stay as
        small as the change and downstream models read only that."""
        m, a = p.model, p.analysis
        out, key = self._rows(p, rows)
        stored, anew = self._stored(p, out)
        # A key from the model's YAML may not be unique; the others are by construction (GROUP BY,
        # DISTINCT, an upstream's key). Hudi's insert (a first write) would store each duplicate
        # and later upserts keep one of them: refuse instead.
        declared = bool(m.config.key) and a.strategy in ("rescan", "full") and bool(a.key)
        held = Held()
        try:
            # Into an existing table, the rows are used twice or more (upserts, the anti-join that
            # finds the deletes, the diff): keep them rather than evaluate the model's query again.
            if stored is not None or declared or "_lake_rows" in out.columns or contract.reads_rows(m):
                out = held(out)
            # An aggregate's emptied groups split off the kept rows, not the query: split before
            # holding, the deletes would evaluate the model's query again (with a MIN/MAX
            # recompute, another aggregation over the upstream's rows).
            out, gone = _emptied(out)
            contract.enforce(m, out)  # `contract: enforced`: columns, types, NULLs, before any commit
            if declared:
                _reject_duplicate_keys(m, key, out)
            # The gate evaluates the checks first and drops quarantined rows from `out`, so their keys
            # are deleted below like any key the query no longer returns.
            out, gate = self.gate.check(m.name, m.config.checks, out, key, stored, scope, scope_col, gone)
            hidden_rows = None
            if "_lake_rows" in out.columns:
                # Groups HAVING or a `drop` check hides go to the hidden-groups table (hidden.py);
                # not returned here, the diff deletes them from the model's table if there.
                hidden_rows, out = out.where("_deleted"), out.where("NOT _deleted")
            final = self._final(held, stored, m, out, scope, scope_col, gone, only_changed=scope is None or p.mode == "restate")
            if anew:  # past the gate: the table, and its hidden groups, are written anew
                self.table(m).drop()
                self.layout.fs.delete(self.layout.hidden(m.name))
            moved = None if hidden_rows is None else (hidden_rows, scope, gone)
            written, deleted = self._commit(p, a, final, stored is not None, moved)
            if anew:
                rebuilds.record(self.layout, m.name, self.table(m).instants()[0].completed, anew)
            return Written(written, deleted, gate)
        finally:
            held.release()
            self.gate.release()

    def _rows(self, p: ModelPlan, rows: DataFrame) -> tuple[DataFrame, list[str]]:
        """The rows to write, keyed (`_lake_key`), flagged, an aggregate's emptied groups
        included (`_emptied` splits them off); the key."""
        a = p.analysis
        key = list(a.key or ()) or visible_columns(rows)
        out = rows.withColumn("_lake_key", lake_key(key))
        if not a.key:
            # A row is its values (set semantics): an upsert keeps one row per value, but a first
            # write (Hudi's insert) would keep each duplicate.
            out = out.dropDuplicates(["_lake_key"])
        if "_deleted" not in out.columns:
            out = out.withColumn("_deleted", F.lit(False))
        return out.withColumn("_hoodie_is_deleted", F.lit(False)), key

    def _stored(self, p: ModelPlan, out: DataFrame) -> tuple[DataFrame | None, str | None]:
        """The model's table (None: none yet, or written anew), and why it is written anew (else
        None): a column whose type changes in a way Hudi cannot make in place (DATE → TIMESTAMP, a
        narrowing; framework/project/types.py), or a layout the table cannot take. Nothing is
        removed here: `write` removes such a table, and its hidden groups, once the gate passed
        (a full build rewrites every row anyway, and a crash before its commit leaves no table,
        which the next build builds in full)."""
        m = p.model
        if not self.table(m).committed():
            return None, None
        stored = self.reader.raw(m.name)
        theirs = dict(stored.dtypes)
        bad = [(c, theirs[c], t) for c, t in out.dtypes if c in theirs and not c.startswith("_hoodie_") and not in_place(theirs[c], t)]
        relaid = hudi_layout.change_problem(p.layout, m.config)
        if not bad and relaid is None:
            return stored, None
        if relaid is not None and p.mode != "full":  # only a build of every row may write the table anew
            raise LakeError(f"{m.name}: {relaid}", fix=f"run a full build: lake build {m.name}")
        if relaid is not None:
            return None, f"{m.name}: {relaid}: its table was written anew"
        c, old, new = bad[0]
        return None, (f"{m.name} column {c} changed type from {old.upper()} to {new.upper()}, which Hudi cannot change in place: "
                      "its table was written anew")

    def _final(self, held: Held, stored: DataFrame | None, m: Model, out: DataFrame, scope: DataFrame | None, scope_col: str,
               gone: DataFrame | None, only_changed: bool) -> DataFrame:
        """What the commit writes: the rows, and into an existing table only those that differ,
        plus the deletes (`_diff`); held, since the commit counts them and writes them."""
        deletes = None
        if stored is not None:
            out, deletes = self._diff(stored, m, out, scope, scope_col, gone, only_changed)
        return out if deletes is None and is_held(out) else held(out if deletes is None else out.unionByName(deletes))

    def _diff(self, full_target: DataFrame, m: Model, out: DataFrame, scope: DataFrame | None, scope_col: str,
              gone: DataFrame | None, only_changed: bool) -> tuple[DataFrame, DataFrame]:
        """Into an existing table (`full_target`): the delete records of keys in `scope` the rows
        no longer hold (and of `gone` groups), and, `only_changed` (without a scope, or a
        restatement's), only the rows that differ from the table."""
        # Delete records need the key (and partition path) only: read just those columns.
        required = {f.name for f in full_target.schema.fields if not f.nullable}
        kept = ["_lake_key"] + ([m.config.partition_by] if m.config.partition_by else [])
        if any(t.startswith(("array", "map", "struct")) for c, t in full_target.dtypes if c in required):
            kept = full_target.columns  # no typed zero for a required nested column: carry the row
        target = full_target.select(*[f"`{c}`" for c in dict.fromkeys(kept + ([scope_col] if scope is not None else []))])
        candidates = target if scope is None else target.join(scope, scope_col, "left_semi")
        vanished = candidates.join(out.select("_lake_key"), "_lake_key", "left_anti")
        if gone is not None:
            vanished = vanished.unionByName(target.join(gone, "_lake_key", "left_semi")).dropDuplicates(["_lake_key"])
        deletes = vanished.select(*[F.col(c) if c in vanished.columns else _filler(t, c in required).alias(c) for c, t in out.dtypes if c != "_hoodie_is_deleted"],
                                  F.lit(True).alias("_hoodie_is_deleted"))
        return (_changed_rows(out, full_target) if only_changed else out), deletes

    def _commit(self, p: ModelPlan, a: Analysis, final: DataFrame, exists: bool,
                moved: tuple[DataFrame, DataFrame | None, DataFrame | None] | None) -> tuple[int, int]:
        """Commit `final` with the checkpoint; an aggregate's hidden groups (`moved`: the rows,
        the scope and the emptied groups) commit first into their table, and the model's commit
        records which instant of it goes with the model's rows (hidden.py)."""
        m = p.model
        counts = {r["_hoodie_is_deleted"]: r["count"] for r in final.groupBy("_hoodie_is_deleted").count().collect()}
        written, deleted = counts.get(False, 0), counts.get(True, 0)
        # A full build leaves holder counts it did not write in place: from its commit on, they
        # are unknown; later commits carry the instant forward (holders.py).
        unknown = holders.THIS if a.strategy == "aggregate" and p.mode in ("full", "recompute", "restate") else p.counts
        record = ModelCheckpoint(checkpoint=dict(p.end), fingerprint=m.fingerprint, metadata=m.metadata_fingerprint,
                                 strategy=a.strategy, mode=p.mode, counts_unknown=unknown, shape=m.shape, note=p.note)
        if moved is not None:
            companion = kinds.hidden(self.layout, self.defaults, m.name)
            record = record.model_copy(update={"hidden": hidden.write(self.spark, companion, *moved, p.hidden, p.counts)})
            failpoint("after_hidden_commit")
        same_hidden = record.hidden == p.hidden
        if (written + deleted == 0 and exists and same_hidden and not p.forward and not self._external_moved(p)
                and ((p.mode != "full" and not self._lagging(p)) or self._recorded(p))):
            return 0, 0
        # (A full rebuild that changes no row still commits, empty, when the table's commit
        # records another fingerprint or checkpoint: else every later build would be full. So does
        # a recompute for an external table's new version: else every later build would recompute.
        # So does a build that changes no row once its checkpoint lags far: see _lagging; and one
        # whose hidden groups changed, to record their table's new instant; and a forward-only
        # change, to record the model's new fingerprint.)
        if exists and self.table(m).is_mor() != (m.config.type == "mor"):
            was = "merge-on-read" if self.table(m).is_mor() else "copy-on-write"
            raise LakeError(f"{m.name}'s table was created {was}; `type: {m.config.type}` in its YAML needs a new table "
                            "(Hudi cannot change a table's type in place)",
                            fix=f"put `type:` back, or delete {self.layout.table(m.name)} and run `lake build {m.name}`")
        # A new table's first commit is an insert; failpoints before_model_commit / after_model_commit.
        self.table(m).commit(final, record)
        return written, deleted

    def _recorded(self, p: ModelPlan) -> bool:
        """The table's last commit already records this plan's checkpoint and the model's
        fingerprints (data and metadata: a rebuild after a metadata edit records the new one, so
        `state:modified` stops selecting the model)."""
        rec, m = p.recorded, p.model
        return (rec is not None and dict(rec.checkpoint) == dict(p.end) and rec.fingerprint == m.fingerprint
                and rec.metadata == m.metadata_fingerprint)

    def _external_moved(self, p: ModelPlan) -> bool:
        """Whether the plan reads an external table at another version than the table's last
        commit records (framework/transform/external.py)."""
        ckpt = p.recorded.checkpoint if p.recorded is not None else {}
        return any(is_external(u) and ckpt.get(u) != v for u, v in p.end.items())

    def _lagging(self, p: ModelPlan) -> bool:
        """The checkpoint lags an upstream by so many commits that a build writing no row should
        still commit (empty) to move it. An empty commit at every such build would cost a commit
        (0.6-1.2 s measured in test_models_build.py) and give every downstream model an empty
        change to read at its next build; never committing lets the checkpoint fall behind the
        upstream's cleaner, and then the next build is a full rebuild (`plan`). So: once it lags
        by ADVANCE_AFTER commits, or by half the cleaner's retention if that is fewer."""
        retained = hudi.clean_retained(self.project.config.hudi)
        return max(p.pending.values(), default=0) >= max(1, min(ADVANCE_AFTER, retained // 2))


def _emptied(out: DataFrame) -> tuple[DataFrame, DataFrame | None]:
    """An aggregate's rows split into the groups it keeps and the `_lake_key`s of those whose
    count reached 0, which are deleted; other models' rows as they are, and None."""
    if "_lake_rows" not in out.columns:
        return out, None
    return out.where("_lake_rows > 0"), out.where("_lake_rows <= 0").select("_lake_key")


def _reject_duplicate_keys(m: Model, key: list[str], rows: DataFrame) -> None:
    """Fail the model when two rows to write share a key (one aggregation over the held rows)."""
    dup = rows.groupBy("_lake_key").agg(F.count(F.lit(1)).alias("n")).where("n > 1")
    sample = dup.limit(5).collect()
    if not sample:
        return
    total = dup.agg(F.count(F.lit(1)).alias("keys"), F.sum("n").alias("rows")).first()
    assert total is not None
    shown = "; ".join(", ".join(f"{c}={v}" for c, v in zip(key, json.loads(r["_lake_key"]), strict=True)) for r in sorted(sample, key=lambda r: r["_lake_key"]))
    raise LakeError(
        f"{m.name}: {total['keys']} value(s) of its key ({', '.join(key)}) occur in more than one row "
        f"({total['rows']} rows) among the rows to write, e.g. {shown}; its table keeps one row per key",
        fix=f"set `key:` in layers/{m.layer}/{m.stem}.yaml to the columns that identify a row, "
            f"or make {m.rel} return one row per key (GROUP BY, DISTINCT, a filter)",
    )


def _changed_rows(out: DataFrame, target: DataFrame) -> DataFrame:
    """The rows of `out` that the table does not hold exactly (NULL-safe on every column but an
    aggregate's holder counts, which a full build does not know: holders.py). When the columns
    differ (one added, dropped or retyped: the model changed) or a column is a map (not
    comparable in Spark), every row counts as changed, so every row is rewritten."""
    cols = [c for c in out.columns if c != "_hoodie_is_deleted"]
    stored = {"tinyint": "int", "smallint": "int"}  # Avro has no 8/16-bit ints: Hudi stores them as int
    mine = {c: stored.get(t, t) for c, t in out.dtypes}
    theirs = {c: stored.get(t, t) for c, t in target.dtypes if not c.startswith("_hoodie_")}
    if {c: mine[c] for c in cols} != theirs or any("map<" in t for t in mine.values()):
        return out
    cols = [c for c in cols if not holders.is_count(c)]
    o, t = out.alias("_o"), target.select(*[f"`{c}`" for c in cols]).alias("_t")
    same = [F.col(f"_o.`{c}`").eqNullSafe(F.col(f"_t.`{c}`")) for c in cols]
    return o.join(t, same, "left_anti")


def _filler(sql_type: str, required: bool) -> Column:
    """A value for a column of a delete record (Hudi needs only its key and partition): NULL, or a
    typed zero where the table's schema does not allow NULL (Avro would refuse the record)."""
    if not required:
        return F.lit(None).cast(sql_type)
    if sql_type == "date":
        return F.lit("1970-01-01").cast("date")
    if sql_type in ("string", "binary"):
        return F.lit("").cast(sql_type)
    return F.lit(0).cast(sql_type)
