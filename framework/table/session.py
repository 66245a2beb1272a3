"""The one place Spark and Hudi are configured.

Static confs (serializer, SQL extension, catalog, JVM options) only take effect before the JVM
starts, so every entry point gets its session from :func:`spark_session`. When lake runs as the
application a platform submits (spark-submit, EMR; framework/cli/submit.py) it *adopts* the
session the submitter configured instead (:func:`adopt`): jars and static settings are the
submitter's (`--jars`, `--conf`), lake only checks that Hudi's are there and sets the runtime SQL
settings it relies on.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.errors import LakeError
from framework.runtime import cds, preload
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
    from collections.abc import Iterable

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


# A micro-batch's caches (its parsed envelopes, each table's decoded rows) are built once and read
# a few times within seconds: compressing them cost more CPU than it saved (a 200k-event first load
# 19.7 -> 16.6 s uncompressed, benchmarks/ods_ingest.py). They spill to disk (MEMORY_AND_DISK) when
# memory is short; `spark.conf` can set it back.
UNCOMPRESSED_CACHE = {"spark.sql.inMemoryColumnarStorage.compressed": "false"}


def base_conf(master: str, warehouse: Location, log_dir: Path, kafka: bool = True, s3: bool = False) -> dict[str, str]:
    """Spark confs every lake session uses (user `spark.conf` entries are applied after).

    The Kafka connector's four jars and spark-avro (`from_avro`, format: debezium-avro) ride along
    by default so one session (the test suite's) serves every source; they are only loaded when a
    Kafka stream is read. `s3` adds hadoop-aws
    and its AWS SDK bundle (s3a://), which only projects with an S3 location need."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log4j = log_dir / "log4j2.properties"
    log4j.write_text(_LOG4J.format(path=log_dir / "spark.log"))
    # LAKE_JVM_OPTIONS: extra options for the driver's JVM (and local executors), e.g.
    # -XX:TieredStopAtLevel=1, which halves the CPU of short runs on small data (the test suite).
    java_opts = " ".join(filter(None, [JVM_OPTIONS, os.environ.get("LAKE_JVM_OPTIONS", "").strip(),
                                       f"-Dlog4j2.configurationFile=file:{log4j}"]))
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
        # Dates and timestamps are proleptic Gregorian everywhere lake's values come from (Debezium's
        # epoch days and micros, Spark, Hudi's Parquet): read and write them as they are. Spark's
        # default refuses (EXCEPTION) a Parquet file not written by Spark 3 holding a date before
        # 1582-10-15 or a timestamp before 1900, e.g. a DATE '0999-01-01' column in MariaDB.
        **REBASE,
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
        **UNCOMPRESSED_CACHE,
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


# What Hudi needs of a session lake did not build (static: only the submitter can set them).
HUDI_STATIC = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
}
REBASE = {f"spark.sql.parquet.{k}": "CORRECTED" for k in ("datetimeRebaseModeInRead", "datetimeRebaseModeInWrite",
                                                              "int96RebaseModeInRead", "int96RebaseModeInWrite")}
# Runtime SQL settings of base_conf lake relies on (why: there), set on an adopted session.
RUNTIME = {**REBASE, "spark.sql.session.timeZone": "UTC", "spark.sql.legacy.timeParserPolicy": "CORRECTED", "spark.sql.exchange.reuse": "false",
           "spark.sql.parquet.enableVectorizedReader": "false", "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"}
_ADOPTED: list[SparkSession] = []


def adopt(spark: SparkSession) -> None:
    """Use `spark`, the session the submitter created, for every lake command of this process:
    no jar is added and no static setting changed. Raises LakeError naming the `--conf` or
    `--jars` to add when Hudi cannot work in it."""
    conf = dict(spark.sparkContext.getConf().getAll())
    missing = [f"--conf {k}={v}" for k, v in HUDI_STATIC.items() if v not in conf.get(k, "").split(",")]
    if missing:
        raise LakeError(f"the submitted Spark application lacks what Hudi needs: {', '.join(m.split()[1].split('=')[0] for m in missing)}",
                        fix="add to the spark-submit command (or the platform's Spark properties): " + " ".join(missing))
    jvm: Any = spark._jvm
    try:
        jvm.java.lang.Class.forName("org.apache.hudi.DefaultSource", True, jvm.Thread.currentThread().getContextClassLoader())
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException
        raise LakeError("the submitted Spark application has no Hudi on its classpath",
                        fix=f"add the Hudi bundle to spark-submit: --jars .../{HUDI_BUNDLE.split(':')[1]}-{HUDI_BUNDLE.split(':')[2]}.jar "
                            "(or --packages " + HUDI_BUNDLE + ")") from None
    for k, v in RUNTIME.items():
        if spark.conf.isModifiable(k):
            spark.conf.set(k, v)
    _ADOPTED[:] = [spark]


def adopted() -> SparkSession | None:
    """The submitter's session, when this process adopted one."""
    return _ADOPTED[0] if _ADOPTED else None


def as_submitted(project: Project) -> Project:
    """`project` with the adopted session's master and settings in place of lake.yaml's `spark:`
    (what the locks' S3 endpoint and the local-mode choices read); unchanged without one."""
    spark = adopted()
    if spark is None:
        return project
    import dataclasses

    from models.config import SparkConfig

    sc = spark.sparkContext
    submitted = SparkConfig.model_construct(master=str(sc.master), conf=dict(sc.getConf().getAll()))
    return dataclasses.replace(project, config=project.config.model_copy(update={"spark": submitted}))


def driver_conf(project: Project, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The settings a driver for `project` starts with (in this environment): lake's, the
    catalog's, lake.yaml's `spark.conf`, then `extra`. The engine compares a project's with its own
    (framework/engine/session.py)."""
    conf = base_conf(project.config.spark.master, project.warehouse, project.local_state / "logs", s3=uses_s3(project))
    conf.update(catalog_conf(project.config.catalog))
    conf.update(project.config.spark.conf)
    conf.update(extra or {})
    return conf


def spark_session(project: Project, extra: dict[str, str] | None = None) -> SparkSession:
    """Return the process's SparkSession for `project`, creating it on first call (or the
    submitter's, adopted: its runtime SQL settings from lake.yaml are applied, nothing else)."""
    spark = adopted()
    if spark is not None:
        for k, v in {**project.config.spark.conf, **(extra or {})}.items():
            if k.startswith("spark.sql.") and spark.conf.isModifiable(k):
                spark.conf.set(k, v)
        check_file_system(spark, project.warehouse)
        return spark
    ensure_java()
    check_metastore(project.config.catalog)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    logs = project.local_state / "logs"
    conf = driver_conf(project, extra)
    _class_sharing(conf)
    from framework.runtime import jvm

    jvm.note_session(logs, conf.get("spark.driver.memory", ""))  # what a dead driver's message names
    _python_side_to_log(logs / "python.log")
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    preload.settle()  # imports started beside the JVM's start end before lake's code goes on
    spark.sparkContext.setLogLevel("ERROR")
    _jvm_stdio_to_log(spark, logs / "jvm-stdout.log")
    check_file_system(spark, project.warehouse)
    return spark


def _class_sharing(conf: dict[str, str]) -> None:
    """For a local driver JVM this process starts: lake's jars on its class path, and the options
    that map the class data sharing archive of this configuration (framework/runtime/cds.py)."""
    from pyspark import SparkContext

    if not conf.get("spark.master", "").startswith("local") or SparkContext._gateway is not None:
        return  # a cluster's JVMs are not ours to tune; a JVM already started keeps its options
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    class_path = [c for c in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if c]
    class_path += [j for j in jars if j not in class_path]
    conf["spark.driver.extraClassPath"] = os.pathsep.join(class_path)
    sharing = cds.options(class_path, conf.get("spark.driver.memory", ""), conf)
    if sharing:
        conf["spark.driver.extraJavaOptions"] = " ".join(filter(None, [conf.get("spark.driver.extraJavaOptions", ""), *sharing]))


def ensure_storage(project: Project) -> None:
    """Start Spark when the warehouse is not on the local disk: Hadoop's file system (and its
    jars and credentials) live in the driver's JVM. A local warehouse needs no JVM."""
    if not project.warehouse.is_local:
        spark_session(project)


def ensure_external_storage(project: Project, names: Iterable[str]) -> None:
    """Start Spark when one of the external tables `names` is not on the local disk (its version
    is read through Hadoop's file system: framework/transform/external.py)."""
    if any((e := project.externals.get(n)) is not None and e.location is not None and not e.location.is_local for n in names):
        spark_session(project)


def uses_s3(project: Project) -> bool:
    """Whether the warehouse, the CDC files or an external table are at s3a:// (Hadoop's S3 file system, which lake
    brings). EMR's `s3://` is EMRFS, already on an EMR cluster's classpath: nothing to add."""
    src = getattr(project.config.ods.source, "path", "")
    paths = [project.config.warehouse, src, *(str(e.location) for e in project.externals.values() if e.location is not None)]
    return any(str(x).startswith("s3a://") for x in paths)


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


def _python_side_to_log(path: Path) -> None:
    """py4j and pyspark report a lost driver on the terminal with stack traces (py4j logs
    "Exception while sending command" through the root logger, which prints to stderr when it has
    no handler; pyspark's accumulator server prints socketserver's traceback): into a file, so the
    terminal shows lake's own message (framework/runtime/jvm.py). lake's own loggers (`framework.*`)
    still print their warnings on stderr. A root logger that already has handlers (pytest's, an
    embedding application's) is left alone."""
    import logging

    root = logging.getLogger()
    if not root.handlers:
        path.parent.mkdir(parents=True, exist_ok=True)
        ours = logging.StreamHandler(sys.stderr)  # lake's own warnings stay on the terminal, as before
        ours.addFilter(lambda r: r.name.startswith("framework"))
        theirs = logging.FileHandler(path, encoding="utf-8", delay=True)
        theirs.addFilter(lambda r: not r.name.startswith("framework"))
        theirs.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(ours)
        root.addHandler(theirs)
    from pyspark import accumulators

    def handle_error(server: Any, request: Any, client_address: Any) -> None:
        logging.getLogger("pyspark.accumulators").warning("accumulator update from %s failed", client_address, exc_info=True)

    accumulators.AccumulatorServer.handle_error = handle_error  # type: ignore[assignment,method-assign]


def _jvm_stdio_to_log(spark: SparkSession, path: Path) -> None:
    """Libraries inside the JVM (JOL, Hudi's timeline code) print to System.out/err directly;
    send that to a file so the terminal shows only lake's own output."""
    jvm: Any = spark._jvm
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path), True), True)
    jvm.java.lang.System.setOut(stream)
    jvm.java.lang.System.setErr(stream)
