"""The background warm-up that writes a class data sharing archive (framework/runtime/cds.py).

`python -m framework.runtime.cds_warmup <archive>`, the configuration as JSON on stdin: start a
local Spark with the JVM settings a `lake` run uses (its class path and JVM options) and
`-XX:ArchiveClassesAtExit`, write a three-row Hudi table and read it back (the classes a lake run
loads), stop, let the JVM exit and dump, and move the dump into place only when that JVM exited
normally. Runs detached from the `lake` command that started it; its lock (`<archive>.lock`,
holding this process's pid) is removed at the end whatever happened.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from framework.runtime.cds import QUIET


def _workload(conf: dict[str, str], dump: Path, scratch: Path) -> int:
    """Run the workload in a JVM that dumps to `dump` at exit; the JVM's exit code."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    conf = dict(conf)
    # The run's own log4j file is the project's; the warm-up logs errors to its own output.
    log4j = scratch / "log4j2.properties"
    log4j.write_text("rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
                     "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n")
    kept = [o for o in conf.get("spark.driver.extraJavaOptions", "").split() if not o.startswith("-Dlog4j2.configurationFile=")]
    conf["spark.driver.extraJavaOptions"] = " ".join([*kept, f"-Dlog4j2.configurationFile=file:{log4j}",
                                                     f"-XX:ArchiveClassesAtExit={dump}", *QUIET])
    conf["spark.sql.warehouse.dir"] = str(scratch / "spark-warehouse")
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    df = spark.createDataFrame([(1, "a", 1), (2, "b", 1), (1, "c", 2)], "id INT, v STRING, ts INT")
    table = str(scratch / "t")
    opts = {"hoodie.table.name": "warmup", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.table.ordering.fields": "ts", "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.metadata.enable": "false", "hoodie.embed.timeline.server": "false",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator"}
    for op in ("upsert", "upsert"):
        df.write.format("hudi").options(**opts).option("hoodie.datasource.write.operation", op).mode("append").save(table)
    spark.read.format("hudi").load(table).groupBy("id").count().collect()
    spark.stop()
    proc: subprocess.Popen[bytes] | None = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return 1
    if proc.stdin is not None:
        proc.stdin.close()  # PySpark's gateway JVM exits at the end of its stdin, dumping the archive
    return proc.wait(timeout=300)


def main(archive: Path) -> int:
    lock = archive.with_suffix(".lock")
    dump = archive.parent / f"{archive.stem}.{os.getpid()}.tmp"
    scratch = Path(tempfile.mkdtemp(prefix="lake-cds-"))
    try:
        conf = json.loads(sys.stdin.read())
        code = _workload(conf, dump, scratch)
        if code == 0 and dump.is_file() and dump.stat().st_size > 0:
            os.replace(dump, archive)
            return 0
        print(f"the warm-up JVM exited with {code}; no archive written", file=sys.stderr)
        return 1
    finally:
        dump.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
