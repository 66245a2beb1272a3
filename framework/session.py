"""The one place Spark and Hudi are configured.

Static confs (serializer, SQL extension, catalog, JVM options) only take effect before the JVM
starts, so every entry point gets its session from :func:`spark_session`.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.errors import LakeError
from framework.jars import HUDI_BUNDLE, ensure_jar, ensure_java, kafka_connector_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.config import Project
    from models.catalog import CatalogConfig

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n
logger.hudi.name = org.apache.hudi
logger.hudi.level = warn
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = error
"""

# Hudi needs Kryo; JOL's attach can hang in sandboxes (HUDI_NOTES §1.4).
JVM_OPTIONS = "-Djol.skipHotspotSAAttach=true -Djol.magicFieldOffset=true"


def base_conf(master: str, warehouse: Path, log_dir: Path, kafka: bool = True) -> dict[str, str]:
    """Spark confs every lake session uses (user `spark.conf` entries are applied after).

    The Kafka connector's four jars ride along by default so one session (the test suite's)
    serves every source; they are only loaded when a Kafka stream is read."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log4j = log_dir / "log4j2.properties"
    log4j.write_text(_LOG4J.format(path=log_dir / "spark.log"))
    java_opts = f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}"
    local = master.startswith("local")
    return {
        "spark.master": master,
        "spark.app.name": "lake",
        "spark.jars": ",".join([str(ensure_jar(HUDI_BUNDLE))] + ([str(p) for p in kafka_connector_jars()] if kafka else [])),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4" if local else "200",
        "spark.default.parallelism": "4" if local else "200",
        "spark.sql.warehouse.dir": str(warehouse / "_lake" / "spark-warehouse"),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.driver.memory": os.environ.get("LAKE_DRIVER_MEMORY", "4g"),
        "spark.sql.legacy.timeParserPolicy": "CORRECTED",
        # Hudi scans of one table at two instants in one plan break Spark's exchange-reuse
        # canonicalization (ColumnarToRowExec "assertion failed"); rescans need both.
        "spark.sql.exchange.reuse": "false",
        # Hudi 1.2's file format keeps the outcome of `supportBatch` in mutable fields and writes
        # it into the *session* conf (`spark.sql.parquet.enableVectorizedReader`) each time it
        # builds a reader — false for every incremental/CDC scan, true for snapshot scans. Under
        # AQE, planning and execution interleave, so a scan planned as columnar could get a row
        # reader: sporadic `ColumnarBatchRow cannot be cast to ColumnarBatch` (BENCHMARKS.md,
        # freshness; apache/hudi#19817). Row-based Parquet reads for every scan make the
        # decision the same every time.
        "spark.sql.parquet.enableVectorizedReader": "false",
        # Plan descriptions posted to listeners at every AQE re-plan were ~30 % of the driver's
        # busy samples during small incremental builds (jstack sampling); `simple` is the cheapest.
        "spark.sql.ui.explainMode": "simple",
    }


def catalog_conf(catalog: CatalogConfig) -> dict[str, str]:
    """The session catalog: Spark's in-memory one (`embedded`), or the Hive metastore at
    `catalog.uri`, where Hudi's Hive sync registers every table lake writes (framework/hudi.py)."""
    if catalog.kind == "hive":
        assert catalog.uri
        return {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": catalog.uri}
    return {"spark.sql.catalogImplementation": "in-memory"}


def check_metastore(catalog: CatalogConfig, timeout: float = 5.0) -> None:
    """Fail before Spark starts when no metastore of `catalog.uri` accepts a connection. Without
    this, the first table commit of a run succeeds and its Hive sync then fails with pages of
    Java stack (the commit stays; its registration waits for the table's next commit)."""
    if catalog.kind != "hive" or not catalog.uri:
        return
    errors = []
    for uri in catalog.uri.split(","):
        host, _, port = uri.removeprefix("thrift://").rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
            return
        except OSError as e:
            errors.append(f"{uri}: {e.strerror or e}")
    raise LakeError(
        f"no Hive metastore answers at `catalog.uri` in lake.yaml ({'; '.join(errors)})",
        fix="start the metastore, or correct `catalog.uri`; `catalog: {kind: embedded}` (the default) needs none",
    )


def spark_session(project: Project, extra: dict[str, str] | None = None) -> SparkSession:
    """Return the process's SparkSession for `project`, creating it on first call."""
    ensure_java()
    check_metastore(project.config.catalog)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    warehouse = project.warehouse
    conf = base_conf(project.config.spark.master, warehouse, warehouse / "_lake" / "logs")
    conf.update(catalog_conf(project.config.catalog))
    conf.update(project.config.spark.conf)
    conf.update(extra or {})
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _jvm_stdio_to_log(spark, warehouse / "_lake" / "logs" / "jvm-stdout.log")
    return spark


def _jvm_stdio_to_log(spark: SparkSession, path: Path) -> None:
    """Libraries inside the JVM (JOL, Hudi's timeline code) print to System.out/err directly;
    send that to a file so the terminal shows only lake's own output."""
    jvm: Any = spark._jvm
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path), True), True)
    jvm.java.lang.System.setOut(stream)
    jvm.java.lang.System.setErr(stream)
