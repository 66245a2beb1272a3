"""`lake ingest --bootstrap ods.<table> --path DUMP`: bulk-load a full dump, then CDC continues.

A full load (Parquet, or CSV with a header row, as a migration service's full load writes it) becomes
the table's base. Its rows get the ordering sequence of the dump's source position, and the
position is stored in the same commit as the table's bootstrap watermark: later CDC events from
before it are dropped (counted as `before_bootstrap`), so older events cannot regress the dump.
A key on several rows of the dump keeps the row with the greatest `ordering:` values; without
`ordering:`, or when those tie, the bootstrap stops (a bulk insert would store every copy).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.ods import decode as D
from framework.ods import history
from framework.ods.batch import META_COLUMNS
from framework.ods.position import parse_position, seq_at
from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import ProjectDefaults
from models.commit_meta import OdsCommit
from models.config import OdsTable


class BootstrapResult(BaseModel):
    table: str
    path: str
    rows: int
    position: str | None
    duplicates: int = 0  # rows dropped: older versions (by `ordering:`) of a key


def _read_dump(spark: SparkSession, path: Path, fmt: str) -> DataFrame:
    if not path.exists():
        raise LakeError(f"the dump {path} does not exist", fix="pass --path to a Parquet or CSV file or directory")
    if fmt == "auto":
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
        suffixes = {p.suffix.lower() for p in files}
        if suffixes & {".parquet"}:
            fmt = "parquet"
        elif suffixes & {".csv", ".txt", ".gz"}:
            fmt = "csv"
        else:
            raise LakeError(f"cannot tell the format of {path} (found {sorted(suffixes) or 'no files'})", fix="pass --format parquet or --format csv")
    try:
        if fmt == "parquet":
            return spark.read.parquet(str(path))
        return spark.read.option("header", True).option("inferSchema", True).csv(str(path))
    except Exception as e:  # unreadable dump: say which file and what Spark said
        raise LakeError(f"cannot read the dump {path} as {fmt}: {str(e).splitlines()[0]}", fix="check the file is a complete Parquet/CSV dump") from e


def _one_row_per_key(rows: DataFrame, table: OdsTable, path: Path) -> tuple[DataFrame, int]:
    """The dump's rows, one per key (the greatest `_seq`, ordering columns first, wins), and how
    many rows that dropped."""
    key = table.key
    cols = ", ".join(key)

    def sample(df: DataFrame) -> str:
        found = df.select(*key).orderBy(*key).limit(5).collect()
        return "; ".join(", ".join(f"{k}={r[k]!r}" for k in key) for r in found)

    counted = rows.groupBy(*key).agg(F.count(F.lit(1)).alias("_n"))
    dup = counted.where(F.col("_n") > 1)
    stats = dup.agg(F.count(F.lit(1)).alias("keys"), F.sum("_n").alias("rows")).first()
    if stats is None or stats["keys"] == 0:
        return rows, 0
    n_dup, n_rows = int(stats["keys"]), int(stats["rows"])
    if not table.ordering:
        raise LakeError(
            f"the dump {path} has {n_dup} key(s) of {table.qualified_name} ({cols}) on more than one row, e.g. {sample(dup)}",
            fix="remove the duplicates from the dump, or declare `ordering:` on the table in layers/ods/ "
            "so that the row with the greatest ordering value is kept",
        )
    latest = rows.withColumn("_top", F.max("_seq").over(Window.partitionBy(*key))).where(F.col("_seq") == F.col("_top")).drop("_top")
    tied = latest.groupBy(*key).agg(F.count(F.lit(1)).alias("_n")).where(F.col("_n") > 1)
    n_tied = tied.count()
    if n_tied:
        raise LakeError(
            f"the dump {path} has {n_tied} key(s) of {table.qualified_name} ({cols}) on several rows with the same "
            f"greatest ordering ({', '.join(table.ordering)}), e.g. {sample(tied)}",
            fix="remove the duplicates from the dump: lake cannot tell which of these rows is the latest",
        )
    return latest, n_rows - n_dup


def run_bootstrap(spark: SparkSession, project: Project, table: OdsTable, path: Path, *, position: str | None, fmt: str = "auto") -> BootstrapResult:
    watermark = parse_position(position) if position else None
    dump = _read_dump(spark, path, fmt)
    # A DMS full load may carry an `Op` column (includeOpForFullLoad); it is not data.
    if "Op" in dump.columns and "Op" not in table.key:
        dump = dump.drop("Op")
    missing = [k for k in table.key if k not in dump.columns]
    if missing:
        raise LakeError(f"the dump {path} has no key column(s) {missing} of {table.qualified_name}", fix=f"dump columns are {dump.columns}; check `key:` in the table YAML")
    if table.contract == "enforced":  # the table keeps the contract's columns (framework/ods/contract.py)
        extra = [c for c in dump.columns if c not in table.columns]
        if extra:
            raise LakeError(f"the dump {path} has column(s) {', '.join(extra)} that the contract of {table.qualified_name} does not declare",
                            fix="declare them in its `columns:` (contract: enforced) or leave them out of the dump")
        dump = dump.select(*dump.columns, *[F.lit(None).cast(typ).alias(c) for c, typ in table.columns.items() if c not in dump.columns])
    target = kinds.bootstrap(Layout(project.warehouse), ProjectDefaults.of(project), table)
    target.settle()  # the remains of a creation a kill interrupted
    existing: dict[str, str] = {}
    if target.committed():
        existing = {f.name: f.dataType.simpleString() for f in target.schema(spark).fields}
    cols = []
    for c in dump.columns:
        typ = table.columns.get(c) or existing.get(c)
        cols.append(F.col(c).cast(typ).alias(c) if typ else F.col(c))
    data = dump.select(*cols)
    seq: F.Column = F.lit(seq_at(watermark) + "0" * 27)
    if table.ordering:
        types = dict((f.name, f.dataType.simpleString()) for f in data.schema.fields)
        seq = F.concat(*[D.ordering_prefix(F.col(c), types[c]) for c in table.ordering], seq)
    now = datetime.now(timezone.utc)
    out = data.select(
        "*",
        F.lit("r").alias("_op"),
        F.lit(None).cast("timestamp").alias("_event_ts"),
        seq.alias("_seq"),
        F.lit(now).alias("_ingested_at"),
        F.lit(False).alias("_deleted"),
        F.lit(f"bootstrap:{path.name}").alias("_source"),
    )
    assert list(out.columns[-len(META_COLUMNS):]) == META_COLUMNS
    out, dropped = _one_row_per_key(out, table, path)
    if table.partition_by:
        p = table.partition_by
        fmt_ = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[p.granularity]
        out = out.withColumn(p.derived_name, F.date_format(F.col(p.column).cast("timestamp"), fmt_))
    rows = out.count()
    # A new table has no soft deletes to move (framework/ods/tombstones.py); its first commit is a
    # bulk insert (kinds.bootstrap).
    mark = OdsCommit(bootstrap_rows=rows, bootstrap_source=str(path), tombstones=not target.committed(), bootstrap_watermark=watermark or None)
    if table.history:  # the dump's rows are each key's first version, valid since an unknown time (framework/ods/history.py)
        layout = Layout(project.warehouse)
        types = {c: t for c, t in out.dtypes if c in dump.columns or c in table.columns}
        history.write(spark, history.table(layout, ProjectDefaults.of(project), table), table.key, history.ods_events(table, out, types), mark)
    target.commit(out, mark)  # failpoint before_bootstrap_commit
    return BootstrapResult(table=table.qualified_name, path=str(path), rows=rows, position=watermark, duplicates=dropped)
