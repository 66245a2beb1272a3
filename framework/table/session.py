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
from framework.runtime.jars import (
    HUDI_BUNDLE,
    ensure_jar,
    ensure_java,
    kafka_connector_jars,
    s3_jars,
    spark_avro_jar,
)
from framework.runtime.location import Location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.project.config import Project
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


def base_conf(master: str, warehouse: Location, log_dir: Path, kafka: bool = True, s3: bool = False) -> dict[str, str]:
    """Spark confs every lake session uses (user `spark.conf` entries are applied after).

    The Kafka connector's four jars and spark-avro (`from_avro`, format: debezium-avro) ride along
    by default so one session (the test suite's) serves every source; they are only loaded when a
    Kafka stream is read. `s3` adds hadoop-aws
    and its AWS SDK bundle (s3a://), which only projects with an S3 location need."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log4j = log_dir / "log4j2.properties"
    log4j.write_text(_LOG4J.format(path=log_dir / "spark.log"))
    java_opts = f"{JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}"
    local = master.startswith("local")
    return {
        "spark.master": master,
        "spark.app.name": "lake",
        "spark.jars": ",".join([str(ensure_jar(HUDI_BUNDLE))] + ([str(p) for p in [*kafka_connector_jars(), spark_avro_jar()]] if kafka else [])
                               + ([str(p) for p in s3_jars()] if s3 else [])),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        "spark.driver.extraJavaOptions": java_opts,
        # Executors of a cluster run elsewhere: the log config file exists only on this machine.
        "spark.executor.extraJavaOptions": java_opts if local else JVM_OPTIONS,
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
    `catalog.uri`, where Hudi's Hive sync registers every table lake writes (framework/table/hudi.py)."""
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

    logs = project.local_state / "logs"
    conf = base_conf(project.config.spark.master, project.warehouse, logs, s3=uses_s3(project))
    conf.update(catalog_conf(project.config.catalog))
    conf.update(project.config.spark.conf)
    conf.update(extra or {})
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _jvm_stdio_to_log(spark, logs / "jvm-stdout.log")
    check_file_system(spark, project.warehouse)
    return spark


def ensure_storage(project: Project) -> None:
    """Start Spark when the warehouse is not on the local disk: Hadoop's file system (and its
    jars and credentials) live in the driver's JVM. A local warehouse needs no JVM."""
    if not project.warehouse.is_local:
        spark_session(project)


def uses_s3(project: Project) -> bool:
    """Whether the warehouse or the CDC files are at s3a:// (Hadoop's S3 file system, which lake
    brings). EMR's `s3://` is EMRFS, already on an EMR cluster's classpath: nothing to add."""
    src = getattr(project.config.ods.source, "path", "")
    return any(str(x).startswith("s3a://") for x in (project.config.warehouse, src))


def check_file_system(spark: SparkSession, where: Location) -> None:
    """Fail with the fix when Hadoop has no file system for the warehouse's scheme."""
    if where.is_local:
        return
    jvm: Any = spark._jvm
    try:
        jvm.org.apache.hadoop.fs.Path(str(where)).getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    except Exception as e:  # py4j wraps the JVM's exception
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        detail = next((line.strip() for line in str(e).splitlines() if "FileSystem for scheme" in line or "Exception:" in line), first)
        raise LakeError(
            f"Spark cannot open the warehouse {where}: {detail}",
            fix=(f"add the jar of Hadoop's {where.scheme}:// file system to `spark.conf` (spark.jars or "
                 "spark.jars.packages) in lake.yaml; outside EMR, write s3a:// for S3 (lake adds hadoop-aws)"),
        ) from None


def _jvm_stdio_to_log(spark: SparkSession, path: Path) -> None:
    """Libraries inside the JVM (JOL, Hudi's timeline code) print to System.out/err directly;
    send that to a file so the terminal shows only lake's own output."""
    jvm: Any = spark._jvm
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path), True), True)
    jvm.java.lang.System.setOut(stream)
    jvm.java.lang.System.setErr(stream)
