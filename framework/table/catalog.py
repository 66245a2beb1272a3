"""Registers the warehouse's tables in the session catalog so SQL can name them.

With the `embedded` catalog (the default) that is Spark's in-memory one, rebuilt from the
warehouse at session start (a few ms per table): no metastore process and no Derby lock, so
`lake sql` works next to a running ingest. ODS Hudi tables hold live rows only (deleted keys are
tombstones elsewhere: framework/ods/tombstones.py); `ods.<name>` is a view of the visible
columns, `ods_raw.<name>` the Hudi table itself.
`_quarantine.<layer>_<name>` holds the rows `drop` checks rejected (framework/quality/quarantine.py).

With a `hive` catalog the session is the metastore's, and every table is already there: Hudi's
Hive sync registered it at its last commit (framework/table/hudi.py `hive_sync_options`). No views or
`*_raw` tables are created then: they would be written into the shared metastore for every
engine, and would collide with the synced tables. A warehouse table the metastore lacks (written
before the project switched to `hive`, or whose sync failed after its commit) is registered by
the same sync, run here.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from framework.errors import LakeError
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi, timeline
from framework.table.hudi import HOODIE_META_COLUMNS
from models.catalog import CatalogConfig

HIDDEN = ("_deleted", "_hoodie_is_deleted")
# Characters a URI must escape in a path (and the glob `*`): Hudi's CREATE TABLE looks for the
# table at the escaped text (`a b` as `a%20b`) and fails with "Missing schema for Create Table".
URI_UNSAFE = ' `%#?[]{}^|<>"\\*'


def quote_ident(name: str) -> str:
    """A Spark SQL identifier: backquoted, backquotes doubled."""
    return "`" + name.replace("`", "``") + "`"


def quote_literal(text: str) -> str:
    """A Spark SQL string literal (backslashes and quotes escaped), e.g. a warehouse path."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register_ods(spark: SparkSession, layout: Layout) -> list[str]:
    """Create `<layer>_raw.<t>` (the Hudi table) and `<layer>.<t>` (live rows, visible columns)
    for every table found under ods/, dwd/ and dws/. In a Hive-backed session, register only the
    warehouse's tables the metastore lacks, and list them all (see the module docstring)."""
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "hive":
        return registered_in_metastore(spark, layout)
    bad = sorted({c for c in str(layout.root) if c in URI_UNSAFE})
    if bad:
        raise LakeError(
            f"the warehouse path {layout.root} contains {' '.join(repr(c) for c in bad)}: Hudi's CREATE "
            "TABLE looks for a table at the URI-escaped path, so SQL cannot name the warehouse's tables",
            fix=f"move the warehouse (`warehouse:` in lake.yaml) to a path without spaces or any of {' '.join(URI_UNSAFE.strip())}",
        )
    names = []
    for layer in ("ods", "dwd", "dws"):
        tables = layout.layer_tables(layer)
        if not tables and layer != "ods":
            continue
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {layer}")
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {layer}_raw")
        for path in tables:
            name = path.name
            spark.sql(f"DROP VIEW IF EXISTS {layer}.{quote_ident(name)}")
            spark.sql(f"DROP TABLE IF EXISTS {layer}_raw.{quote_ident(name)}")
            spark.sql(f"CREATE TABLE {layer}_raw.{quote_ident(name)} USING hudi LOCATION {quote_literal(str(path))}")
            fields = spark.table(f"{layer}_raw.{quote_ident(name)}").schema.fields
            cols = [f.name for f in fields if f.name not in HOODIE_META_COLUMNS and f.name not in HIDDEN and not f.name.startswith("_lake_")]
            select = ", ".join(quote_ident(c) for c in cols)
            # `_deleted`: groups a model hides; ODS tables hold live rows only (always false there)
            where = " WHERE NOT _deleted" if any(f.name == "_deleted" for f in fields) else ""
            spark.sql(f"CREATE VIEW {layer}.{quote_ident(name)} AS SELECT {select} FROM {layer}_raw.{quote_ident(name)}{where}")
            names.append(f"{layer}.{name}")
    quarantined = layout.tables_under(layout.quarantine_root)
    if quarantined:
        spark.sql("CREATE DATABASE IF NOT EXISTS _quarantine")
        spark.sql("CREATE DATABASE IF NOT EXISTS _quarantine_raw")
    for path in quarantined:
        # `_quarantine.<layer>_<name>`: rows `drop` checks rejected, with the checks and run id.
        name = path.name
        spark.sql(f"DROP VIEW IF EXISTS _quarantine.{quote_ident(name)}")
        spark.sql(f"DROP TABLE IF EXISTS _quarantine_raw.{quote_ident(name)}")
        spark.sql(f"CREATE TABLE _quarantine_raw.{quote_ident(name)} USING hudi LOCATION {quote_literal(str(path))}")
        fields = spark.table(f"_quarantine_raw.{quote_ident(name)}").schema.fields
        select = ", ".join(quote_ident(f.name) for f in fields if f.name not in HOODIE_META_COLUMNS)
        spark.sql(f"CREATE VIEW _quarantine.{quote_ident(name)} AS SELECT {select} FROM _quarantine_raw.{quote_ident(name)}")
        names.append(f"_quarantine.{name}")
    if layout.fs.exists(layout.dead_letter / ".hoodie"):
        spark.sql("CREATE DATABASE IF NOT EXISTS _lake")
        spark.sql("DROP TABLE IF EXISTS _lake.dead_letter")
        spark.sql(f"CREATE TABLE _lake.dead_letter USING hudi LOCATION {quote_literal(str(layout.dead_letter))}")
        names.append("_lake.dead_letter")
    return names


def warehouse_tables(layout: Layout) -> list[str]:
    """SQL names of the warehouse's tables: `<layer>.<t>`, `_quarantine.<layer>_<t>`, `_lake.dead_letter`."""
    names = [f"{layer}.{p.name}" for layer in ("ods", "dwd", "dws") for p in layout.layer_tables(layer)]
    names += [f"_quarantine.{p.name}" for p in layout.tables_under(layout.quarantine_root)]
    if layout.fs.exists(layout.dead_letter / ".hoodie"):
        names.append("_lake.dead_letter")
    return names


def registered_in_metastore(spark: SparkSession, layout: Layout) -> list[str]:
    """The warehouse's tables, each registered in the session's metastore: the ones it lacks are
    synced now. A merge-on-read table counts when its snapshot table `<t>_rt` is there."""
    catalog = CatalogConfig(kind="hive", uri=spark.conf.get("spark.hadoop.hive.metastore.uris"))
    names = warehouse_tables(layout)
    for name in names:
        db, _, table = name.partition(".")
        if not (spark.catalog.tableExists(table, db) or spark.catalog.tableExists(f"{table}_rt", db)):
            sync_table(spark, catalog, name, table_path(layout, name))
    return names


def table_path(layout: Layout, name: str) -> Location:
    """Where the table `name` (one of `warehouse_tables`) lives."""
    db, _, table = name.partition(".")
    if db == "_quarantine":
        return layout.quarantine_root / table
    return layout.dead_letter if name == "_lake.dead_letter" else layout.table(name)


def sync_table(spark: SparkSession, catalog: CatalogConfig, sql_name: str, path: Location) -> None:
    """Register the table at `path` as `sql_name` in the metastore: Hudi's Hive sync, with the
    options its commits use, run on its own (as a commit would at its end)."""
    jvm: Any = spark._jvm
    props = jvm.java.util.Properties()
    fields = timeline.fields(timeline.properties(path), "partition")
    for k, v in hudi.hive_sync_options(catalog, sql_name, ",".join(fields) or None).items():
        props.setProperty(k, v)
    props.setProperty("hoodie.datasource.meta.sync.base.path", str(path))
    tool = jvm.org.apache.hudi.hive.HiveSyncTool(props, spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    try:
        tool.syncHoodieTable()
    finally:
        tool.close()
