"""Tables a micro-batch reveals: undeclared source tables lake creates (`ods.auto_create`), and
the keys of tables declared without `key:` (from Kafka message keys). Both read the envelopes
parse.py parsed once for the batch."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.ods import decode as D
from framework.ods.context import TableState
from framework.ods.routing import auto_table_name, undeclared_parts
from framework.project.config import Project
from models.config import OdsTable

log = logging.getLogger(__name__)


def auto_create(project: Project, env: DataFrame, tables: dict[str, OdsTable], all_sources: set[str]) -> None:
    """Declare (into `tables` and `all_sources`) the undeclared source tables of the batch, with
    the configured key; events whose images lack the key still go to the dead letter."""
    auto = project.config.ods.auto_create
    found = (
        env.select("tbl", F.col("src.db").alias("db"), F.col("src.schema").alias("schema"), F.col("src.table").alias("table"))
        .where((F.length("db") > 0) & (F.length("table") > 0) & F.col("control").isNull())
        .distinct()
        .collect()
    )
    names = {t.table_name for t in project.ods_tables} | {t.table_name for t in tables.values()}
    # Sorted: within a batch the names do not depend on the order Spark returns the rows.
    for tbl, db, schema, table in sorted((r["tbl"], r["db"], r["schema"] or "", r["table"]) for r in found):
        if tbl in all_sources:
            continue
        name = auto_table_name(tbl, undeclared_parts(db, schema, table), names)
        if name is None:  # undeclared: its events go to the dead letter as such
            log.warning("auto_create: no ODS table for %s: a `.` in its db, schema or table name", tbl)
            continue
        tables[tbl] = OdsTable(source=tbl, name=name, key=list(auto.key), type=auto.type)
        all_sources.add(tbl)
        names.add(name)


def resolve_keys(env: DataFrame, tables: dict[str, OdsTable], state: Callable[[OdsTable], TableState]) -> None:
    """Tables declared without `key:` take the fields of the Kafka message key (Debezium's key
    struct, with or without a schema block); once written, the table keeps its key."""
    missing = []
    for t in [t for t in tables.values() if not t.key]:
        st = state(t)
        if st.key:
            tables[t.source] = t.model_copy(update={"key": list(st.key)})
        else:
            missing.append(t.source)
    if not missing or "msg_key" not in env.columns:
        return
    kmap = F.from_json(F.col("msg_key"), D.IMAGE_MAP)  # type: ignore[arg-type]
    inner = F.from_json(kmap.getItem("payload"), D.IMAGE_MAP)  # type: ignore[arg-type]
    fields = F.when(kmap.getItem("schema").isNotNull() & inner.isNotNull(), F.map_keys(inner)).otherwise(F.map_keys(kmap))
    found = (
        # Not a schema change's key ({databaseName}) nor a heartbeat's ({serverName}).
        env.where(F.col("msg_key").isNotNull() & F.col("control").isNull())
        .select("tbl", fields.alias("fields"))
        .where(F.col("tbl").isin(missing) & (F.size("fields") > 0))
        .groupBy("tbl").agg(F.first("fields").alias("fields"))
        .collect()
    )
    for r in found:
        tables[r["tbl"]] = tables[r["tbl"]].model_copy(update={"key": list(r["fields"])})
