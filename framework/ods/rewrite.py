"""Rewriting an ODS table in wider column types that Hudi cannot take in place: DATE → TIMESTAMP
(Hudi 1.2.0 refuses it in every write mode), or a key column whose text changes (a DECIMAL's
scale, FLOAT → DOUBLE), since Hudi's record key is that text (framework/project/types.py).

1. Stage: the table's rows (every column, lake's included, `_seq` unchanged) cast to the new types
   are bulk-inserted into a fresh Hudi table, `_lake/staging/ods_<name>`, whose one commit carries
   the table's lake metadata (stream and batch, key, high-water mark, hand-off watermark); its
   tombstone table likewise when a key column changes. Nothing is registered in a catalog.
2. A marker, `_lake/staging/ods_<name>.json`, says the staged copy is complete.
3. Swap: the table's folder is replaced by the staged one, the marker removed, and the rebuild
   recorded (framework/runtime/rebuilds.py): models reading the table rebuild fully, saying why.

A crash before 2 leaves the table as it was (the next attempt removes the staged copy); after 2,
`recover`, run before a micro-batch first reads the table, finishes the swap.

On a local disk or HDFS the swap is a delete and a rename (instant). On an object store a rename
is a copy of every object followed by the deletion of the originals, so a crash in it could leave
a complete table and a half-deleted staged copy, which a second "delete and rename" would swap in.
There the marker carries a manifest (every staged file and its size) and a phase, and the swap
never deletes anything it may still need: `staged` (the staged copy is verified complete, then
the old table deleted) → `cleared` (each staged file copied to its place unless already there
whole; the table verified complete against the manifest) → `copied` (only the staged copy is
deleted). A crash at any point resumes at the recorded phase.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.ods.context import BatchContext, TableState
from framework.runtime import rebuilds
from framework.runtime.faults import failpoint
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.runtime.storage import Storage
from framework.table import hudi, kinds, timeline
from framework.table.lake_table import LakeTable
from models.commit_meta import OdsCommit
from models.config import OdsTable

PARTS = ("table", "tombstones")


def marker(layout: Layout, qualified: str) -> Location:
    staged = layout.staging(qualified)
    return staged.parent / f"{staged.name}.json"


def rewrite(ctx: BatchContext, t: OdsTable, st: TableState, changes: dict[str, tuple[str, str]]) -> None:
    """Rewrite table `t` with `changes` (column -> (stored type, new type)). `st` learns the new types."""
    q, layout, fs = t.qualified_name, ctx.layout, ctx.layout.fs
    staged = layout.staging(q)
    fs.delete(staged)  # a staged copy of an attempt that did not finish
    casts = {c: new for c, (_old, new) in changes.items()}
    table = ctx.table(t)
    state = OdsCommit()
    for c in table.commits():  # the table's state, carried into the rewrite's one commit
        state = state.then(OdsCommit.from_meta(c.lake))
    said = ", ".join(f"{c} {old.upper()} → {new.upper()}" for c, (old, new) in sorted(changes.items()))
    _stage(ctx, table, kinds.staged(table, staged / "table"), casts, state.carried().model_copy(update={"rewritten": said}))
    tomb = ctx.tombstones(t)
    if any(c in t.key for c in casts) and tomb.committed():
        _stage(ctx, tomb, kinds.staged(tomb, staged / "tombstones"), casts, None)
    reason = f"{q} was rewritten: column {said}, which Hudi cannot change in place"
    files = dirs = None
    if layout.root.is_object_store:  # the manifest the swap copies against (see the module's doc)
        files = {str(loc)[len(str(staged)) + 1:]: size for loc, size in fs.files(staged)}
        dirs = [str(d)[len(str(staged)) + 1:] for part in PARTS for d in _folders(fs, staged / part / ".hoodie")]
    fs.write_text(marker(layout, q), json.dumps({"table": q, "reason": reason, "files": files, "dirs": dirs, "phase": "staged"}))
    failpoint("after_rewrite_staged")
    recover(ctx.spark, layout, q)
    st.columns.update(casts)


def _folders(fs: Storage, root: Location) -> list[Location]:
    """The folders under a table's `.hoodie/` (Hudi's empty ones too: `.aux`, `timeline/history`)."""
    out = []
    for child in fs.children(root):
        if fs.is_dir(child):
            out += [child, *_folders(fs, child)]
    return out


def _stage(ctx: BatchContext, src: LakeTable, dst: LakeTable, casts: dict[str, str], record: OdsCommit | None) -> None:
    rows = src.read(ctx.spark)
    rows = rows.select(*[(F.col(f"`{c}`").cast(casts[c]).alias(c) if c in casts else F.col(f"`{c}`"))
                         for c in rows.columns if c not in hudi.HOODIE_META_COLUMNS])
    if "_hoodie_is_deleted" not in rows.columns:
        rows = rows.withColumn("_hoodie_is_deleted", F.lit(False))
    dst.commit(rows, record)


def recover(spark: SparkSession | None, layout: Layout, qualified: str) -> bool:
    """Finish a rewrite of `qualified` whose staged copy is complete (its marker exists): put the
    staged tables in place of the old ones. True when there was one. (`spark` is not needed: the
    file operations go through the warehouse's storage.)"""
    done = marker(layout, qualified)
    fs = layout.fs
    if not fs.exists(done):
        return False
    m = json.loads(fs.read_text(done))
    staged = layout.staging(qualified)
    dests = {"table": layout.table(qualified), "tombstones": layout.tombstones(qualified)}
    if m.get("files") is None:  # a rename is atomic: delete and rename, part by part
        for part, dest in dests.items():
            if fs.exists(staged / part):  # else already moved (a crash after this rename)
                fs.delete(dest)
                fs.rename(staged / part, dest)
            failpoint("after_rewrite_swap")
    else:
        _swap_by_copy(fs, done, m, staged, dests)
    first = timeline.completed(layout.table(qualified))[0].completed
    rebuilds.record(layout, qualified, first, m["reason"])
    fs.delete(done)
    fs.delete(staged)
    return True


def _swap_by_copy(fs: Storage, done: Location, m: dict[str, object], staged: Location, dests: dict[str, Location]) -> None:
    """The swap on an object store, phase by phase (see the module's doc); never deletes the
    table once the copy into it began, and never deletes the staged copy before the table is
    verified complete."""
    files: dict[str, int] = dict(m["files"])  # type: ignore[call-overload]
    parts = [p for p in PARTS if any(f.startswith(p + "/") for f in files)]

    def target(rel: str) -> Location:
        part, _, rest = rel.partition("/")
        return dests[part] / rest

    if m["phase"] == "staged":
        kept = {str(loc): size for loc, size in fs.files(staged)}
        lost = [rel for rel, size in files.items() if kept.get(str(staged / rel)) != size]
        if lost:
            raise LakeError(f"the staged rewrite {staged} lacks {len(lost)} of its files (e.g. {lost[0]}); the table was not touched",
                            fix=f"remove {done} and {staged}; the next ingest rewrites the table again")
        for p in parts:
            fs.delete(dests[p])
        m["phase"] = "cleared"
        fs.write_text(done, json.dumps(m))
    if m["phase"] == "cleared":
        have = {str(loc): size for p in parts for loc, size in fs.files(dests[p])}
        for rel, size in sorted(files.items()):
            if have.get(str(target(rel))) != size:
                fs.copy(staged / rel, target(rel))
                failpoint("rewrite_copy")
        have = {str(loc): size for p in parts for loc, size in fs.files(dests[p])}
        for rel in m.get("dirs") or []:  # type: ignore[attr-defined]
            fs.mkdirs(target(str(rel)))
        short = [rel for rel, size in files.items() if have.get(str(target(rel))) != size]
        if short:
            raise LakeError(f"copying the rewrite of {dests['table']} left {len(short)} file(s) incomplete (e.g. {short[0]})",
                            fix="rerun: the copy resumes from the staged copy, which is kept until the table is complete")
        m["phase"] = "copied"
        fs.write_text(done, json.dumps(m))
        failpoint("after_rewrite_copied")
