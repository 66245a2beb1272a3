"""Registers the warehouse's tables in the session catalog so SQL can name them.

The catalog is Spark's in-memory one, rebuilt from the warehouse at session start (a few ms per
table): no metastore process and no Derby lock, so `lake sql` works next to a running ingest.
ODS Hudi tables keep soft-deleted rows (their deletion position stops replays from resurrecting
them); `ods.<name>` is a view of the live rows, `ods_raw.<name>` the Hudi table itself.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from framework.hudi import HOODIE_META_COLUMNS
from framework.paths import Layout


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def register_ods(spark: SparkSession, layout: Layout) -> list[str]:
    """Create `ods_raw.<t>` (Hudi table) and `ods.<t>` (live rows) for every ODS table found."""
    names = []
    spark.sql("CREATE DATABASE IF NOT EXISTS ods")
    spark.sql("CREATE DATABASE IF NOT EXISTS ods_raw")
    for path in layout.layer_tables("ods"):
        name = path.name
        spark.sql(f"DROP VIEW IF EXISTS ods.{_q(name)}")
        spark.sql(f"DROP TABLE IF EXISTS ods_raw.{_q(name)}")
        spark.sql(f"CREATE TABLE ods_raw.{_q(name)} USING hudi LOCATION '{path}'")
        cols = [f.name for f in spark.table(f"ods_raw.{_q(name)}").schema.fields if f.name not in HOODIE_META_COLUMNS and f.name != "_deleted"]
        select = ", ".join(_q(c) for c in cols)
        spark.sql(f"CREATE VIEW ods.{_q(name)} AS SELECT {select} FROM ods_raw.{_q(name)} WHERE NOT _deleted")
        names.append(f"ods.{name}")
    if (layout.dead_letter / ".hoodie").exists():
        spark.sql("CREATE DATABASE IF NOT EXISTS _lake")
        spark.sql("DROP TABLE IF EXISTS _lake.dead_letter")
        spark.sql(f"CREATE TABLE _lake.dead_letter USING hudi LOCATION '{layout.dead_letter}'")
        names.append("_lake.dead_letter")
    return names
