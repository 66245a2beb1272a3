"""`lake ingest --bootstrap ods.<table> --path DUMP`: bulk-load a full dump, then CDC continues.

A full load (Parquet, or CSV with a header row, as a migration service's full load writes it) becomes
the table's base. Its rows get the ordering sequence of the dump's source position, and the
position is stored in the same commit as the table's bootstrap watermark: later CDC events from
before it are dropped (counted as `before_bootstrap`), so older events cannot regress the dump.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from framework import hudi
from framework.config import Project
from framework.errors import LakeError
from framework.ods import decode as D
from framework.ods.batch import META_COLUMNS
from framework.ods.position import parse_position, seq_at
from framework.paths import Layout
from models.config import OdsTable


class BootstrapResult(BaseModel):
    table: str
    path: str
    rows: int
    position: str | None


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


def run_bootstrap(spark: SparkSession, project: Project, table: OdsTable, path: Path, *, position: str | None, fmt: str = "auto") -> BootstrapResult:
    watermark = parse_position(position) if position else None
    dump = _read_dump(spark, path, fmt)
    # A DMS full load may carry an `Op` column (includeOpForFullLoad); it is not data.
    if "Op" in dump.columns and "Op" not in table.key:
        dump = dump.drop("Op")
    missing = [k for k in table.key if k not in dump.columns]
    if missing:
        raise LakeError(f"the dump {path} has no key column(s) {missing} of {table.qualified_name}", fix=f"dump columns are {dump.columns}; check `key:` in the table YAML")
    layout = Layout(project.warehouse)
    target = layout.table(table.qualified_name)
    existing: dict[str, str] = {}
    if hudi.table_exists(target):
        existing = {f.name: f.dataType.simpleString() for f in hudi.read(spark, target).schema.fields}
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
    if table.partition_by:
        p = table.partition_by
        fmt_ = {"day": "yyyy-MM-dd", "month": "yyyy-MM", "year": "yyyy"}[p.granularity]
        out = out.withColumn(p.derived_name, F.date_format(F.col(p.column).cast("timestamp"), fmt_))
    opts = hudi.write_options(
        name=table.table_name, key=table.key, ordering="_seq",
        partition=table.partition_by.derived_name if table.partition_by else None,
        table_type=table.type, local=project.config.spark.master.startswith("local"), extra=project.config.hudi,
    )
    if not hudi.table_exists(target):
        opts["hoodie.datasource.write.operation"] = "bulk_insert"
    rows = out.count()
    meta = {"bootstrap_rows": str(rows), "bootstrap_source": str(path)}
    if watermark:
        meta["bootstrap_watermark"] = watermark
    hudi.write(out, target, opts, meta)
    return BootstrapResult(table=table.qualified_name, path=str(path), rows=rows, position=watermark)
