"""`lake sql`: a Spark SQL query over the warehouse's tables, registered by name."""

from __future__ import annotations

from pyspark.sql import DataFrame

from framework.errors import LakeError
from framework.project.config import Project
from framework.runtime.paths import Layout
from framework.table.catalog import register_ods
from framework.table.session import spark_session


def run_sql(*, project: Project, query: str) -> DataFrame:
    """The query's result; a query Spark rejects is a user error naming Spark's reason."""
    spark = spark_session(project)
    register_ods(spark, Layout(project.warehouse))
    try:
        return spark.sql(query)
    except Exception as e:  # AnalysisException / ParseException: a user error
        msg = str(e).strip().splitlines()[0]
        raise LakeError(f"query failed: {msg}", fix="check table and column names: lake sql 'show tables in ods'") from e
