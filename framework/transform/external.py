"""External tables as sources of the model graph: `external.<name>` (framework/project/externals.py)
is read by models and never written by lake, so it has no change feed lake can follow.

What a build needs of one is its **version**, recorded in the checkpoint of each model that reads
it (models/commit_meta.py `ckpt`, where an ODS or model upstream records its last instant), and
compared at the next plan (framework/transform/plan.py):

- a Hudi table: its latest completed commit (completion time; Hudi 0.x tables: instant time),
  read from the timeline's files without a JVM; the build reads the table as of that commit;
- a Parquet folder: a hash of its data files' paths, sizes and modification times (one listing);
- a catalog table: none lake can read cheaply (`UNVERSIONED`), so it counts as changed at every build.

A changed (or unknown) version recomputes its readers from a full read, writing only the rows
that differ; an unchanged one lets them build from their other upstreams' changes, or not at all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from framework.errors import LakeError
from framework.project.types import normalize
from framework.runtime.storage import storage_for
from framework.table import timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.project.externals import ExternalTable

UNVERSIONED = "unversioned"  # a catalog table's version: never equal to the one recorded, see `change`
_FILES = "files:"  # a Parquet folder's version: the listing's hash
_LEGACY_INSTANT = re.compile(r"^(\d+)\.(commit|deltacommit|replacecommit)$")  # Hudi 0.x: .hoodie/<instant>.<action>


def version(ext: ExternalTable) -> str:
    """The version of `ext` now (see the module docstring); LakeError when there is no table to read."""
    if ext.location is None:
        return UNVERSIONED
    if ext.kind == "hudi":
        return _hudi_version(ext)
    return _files_version(ext)


def _hudi_version(ext: ExternalTable) -> str:
    loc = ext.location
    assert loc is not None
    fs = storage_for(loc)
    if not fs.exists(loc / ".hoodie" / "hoodie.properties"):
        what = "does not exist" if not fs.exists(loc) else "is not a Hudi table (no .hoodie/hoodie.properties)"
        raise LakeError(f"{ext.rel}: {ext.name} reads {loc}, which {what}",
                        fix=f"point `path:` in {ext.rel} at a Hudi table's folder, or add `format: parquet` for a folder of Parquet files")
    done = timeline.completed(loc)
    if done:
        return done[-1].completed
    legacy = sorted(m.group(1) for c in fs.children(loc / ".hoodie") if (m := _LEGACY_INSTANT.match(c.name)))
    if legacy:
        return legacy[-1]
    raise LakeError(f"{ext.rel}: the Hudi table {ext.name} at {loc} has no completed commit yet",
                    fix=f"build the readers of {ext.name} once its writer has committed")


def _files_version(ext: ExternalTable) -> str:
    """A hash of the data files Spark reads under the folder: what Spark skips (names starting with
    `_` or `.`, such as `_SUCCESS` and `.crc` files, apart from `key=value` partition folders) is left out."""
    loc = ext.location
    assert loc is not None
    root = str(loc).rstrip("/") + "/"
    listed = []
    for f, size, mtime in storage_for(loc).stats(loc):
        rel = str(f).removeprefix(root)
        if any(part.startswith((".", "_")) and "=" not in part for part in rel.split("/")):
            continue
        listed.append(f"{rel}\t{size}\t{mtime}\n")
    if not listed:
        raise LakeError(f"{ext.rel}: {ext.name} reads {loc}, which holds no Parquet file",
                        fix=f"point `path:` in {ext.rel} at the folder its writer writes, or build its readers once it has")
    return _FILES + hashlib.sha256("".join(sorted(listed)).encode()).hexdigest()[:16]


def change(name: str, recorded: str | None, current: str) -> str | None:
    """Why a model whose checkpoint records `recorded` for external `name` must read it again in
    full, or None when it need not (the same version)."""
    if current == UNVERSIONED:
        return f"{name} is a catalog table, whose changes lake cannot see, so it is read again at every build"
    if recorded is None:
        return f"no checkpoint for external table {name}"
    if recorded != current:
        return f"external table {name} changed (version {recorded} → {current})"
    return None


def column_problem(ext: ExternalTable, actual: Mapping[str, str]) -> tuple[str, str] | None:
    """The first column `ext` declares (`columns:`) that the table read (`actual`: name -> Spark
    type) lacks or types otherwise: (problem, fix); None when every one matches."""
    types = {n.lower(): t for n, t in actual.items()}
    for col, spec in ext.config.columns.items():
        got = types.get(col.lower())
        if got is None:
            return (f"{ext.rel}: column {col!r} of {ext.name} is not in {ext.where} (it has {', '.join(actual) or 'no column'})",
                    f"remove {col!r} from `columns:` in {ext.rel}, or correct its name")
        if normalize(got) != normalize(spec.type):
            return (f"{ext.rel}: column {col!r} of {ext.name} is {got} in {ext.where}, declared {spec.type}",
                    f"declare `{col}: {got}` in {ext.rel} if the new type is right (and check the models reading it)")
    return None


def frame(spark: SparkSession, ext: ExternalTable, as_of: str | None) -> DataFrame:
    """The table's rows as its readers see them: a Hudi table as of the commit `as_of` (its version
    when planned) without Hudi's `_hoodie_*` columns; a Parquet folder or catalog table as it is.
    Fails, naming the file, the column and the fix, when a declared column is missing or retyped."""
    if ext.location is None:
        assert ext.config.table is not None
        df = spark.table(ext.config.table)
    elif ext.kind == "parquet":
        df = spark.read.parquet(str(ext.location))
    else:
        r = spark.read.format("hudi")
        if as_of and as_of != UNVERSIONED:
            r = r.option("as.of.instant", as_of)
        df = r.load(str(ext.location))
        df = df.drop(*[c for c in df.columns if c.startswith("_hoodie_")])
    problem = column_problem(ext, {f.name: f.dataType.simpleString() for f in df.schema.fields})
    if problem:
        raise LakeError(problem[0], fix=problem[1])
    return df
