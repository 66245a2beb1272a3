"""Class data sharing for the driver JVM lake starts itself: a third off every cold start.

A local Spark driver with the Hudi bundle parses and verifies ~20,000 classes before its first
job; that is most of the ~18 s a `lake` command spends before touching a table. Java's dynamic
CDS archive (JDK 13+, JEP 350) keeps those classes pre-parsed in one file the next JVM maps:
measured on the 2-core test machine, a session start + first job + one small Hudi upsert went from
18 s to 12.5 s of wall time (docs/guides/spark-cluster.md, "Start-up time").

How lake uses it (local masters only; a cluster's or a submitter's JVMs are theirs):

- The jars lake adds (`spark.jars`: Hudi, the Kafka connector, hadoop-aws) also go on the
  driver's class path: CDS archives only classes of the JVM's built-in loaders.
- The archive is keyed by everything that decides whether the JVM can use it (the `java` binary,
  PySpark's jars, the driver class path, heap size), one file per key under the jar cache
  (`.cache/cds/`, or `$LAKE_CDS_DIR`). Java checks the class path itself too and ignores an
  archive that does not match (`-Xshare:auto`), so a wrong key costs the speed-up, never a failure.
- No archive yet: the run goes on without one and starts a warm-up in the background
  (framework/runtime/cds_warmup.py: a JVM of the same configuration writes a tiny Hudi table and
  reads it, then exits, dumping the archive; ~30 s of CPU, once per key). The warm-up is detached,
  so a long-lived `lake schedule` or a killed run does not hold the archive back; one runs at a
  time (a lock file naming its process), and it moves its dump into place only when its JVM
  exited normally, so no half archive is ever used.
- CDS's own log lines are off: they would land on stdout, where `--format json` writes.

`LAKE_CDS=0` turns it off.

JDK 17's dynamic archives regenerate the method-handle holder classes, and can store an invoker
whose linker does not exist (JDK-8327499, fixed in JDK 23): a run that needs it fails with
`InternalError: NoSuchMethodException: no such method: java.lang.invoke.MethodHandle.linkToStatic(...)`
(seen once in the suite, in Structured Streaming's progress reporter). `defect` recognises it;
the CLI then removes the archive (`discard`) and runs the command once more without it
(framework/cli/support.py): lake's commits are atomic, so a rerun completes what the first left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from framework.runtime.history import process_alive
from framework.runtime.jars import cache_dir, java_executable

QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
# Archives kept (newest by use); each is ~160 MB. One per heap size and jar set in use: the test
# suite alone used five (4g, 512m and 2g heaps; with and without the S3 jars), and an evicted archive
# costs a ~30 s warm-up and cold starts until it is back.
KEEP = 8
STALE_LOCK_SECONDS = 600  # a warm-up takes ~30 s; a lock this old is a leftover
JVM_KEYS = ("spark.master", "spark.jars", "spark.driver.extraClassPath", "spark.driver.extraJavaOptions", "spark.driver.memory",
            "spark.serializer", "spark.kryo.registrator", "spark.sql.extensions", "spark.sql.catalog.spark_catalog",
            "spark.sql.session.timeZone", "spark.ui.enabled", "spark.ui.showConsoleProgress", "spark.sql.parquet.enableVectorizedReader")


def enabled() -> bool:
    return os.environ.get("LAKE_CDS", "1").strip().lower() not in ("0", "false", "no", "off")


def folder() -> Path:
    """`$LAKE_CDS_DIR`, else `cds/` beside the jar cache."""
    return Path(os.environ["LAKE_CDS_DIR"]) if os.environ.get("LAKE_CDS_DIR") else cache_dir().parent / "cds"


def _stamp(p: Path) -> str:
    try:
        st = p.stat()
    except OSError:
        return f"{p}:missing"
    return f"{p}:{st.st_size}:{int(st.st_mtime)}"


def key(class_path: list[str], heap: str) -> str:
    """What the archive depends on, hashed: the JVM binary, PySpark's jars, the class path, heap size."""
    import pyspark

    java = Path(os.path.realpath(java_executable()))
    spark_jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted(p.name for p in spark_jars.glob("*.jar")) if spark_jars.is_dir() else []
    parts = [_stamp(java), pyspark.__version__, *listing, *(_stamp(Path(c)) for c in class_path), heap]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def _lock_is_stale(lock: Path) -> bool:
    try:
        text, age = lock.read_text().strip(), time.time() - lock.stat().st_mtime
    except OSError:
        return False
    if age > STALE_LOCK_SECONDS:
        return True
    return text.isdigit() and not process_alive(int(text))


def _sweep(where: Path) -> None:
    """Remove what dead warm-ups left (locks, temporary dumps) and all but the newest archives."""
    for lock in where.glob("*.lock"):
        if _lock_is_stale(lock):
            lock.unlink(missing_ok=True)
    for tmp in where.glob("*.tmp"):
        pid = tmp.name.split(".")[-2]
        if not pid.isdigit() or not process_alive(int(pid)):
            tmp.unlink(missing_ok=True)
    archives = sorted(where.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)


def archive_for(class_path: list[str], heap: str) -> Path:
    return folder() / f"{key(class_path, heap)}.jsa"


_in_use: list[Path] = []  # the archive this process's driver maps


def defect(text: str) -> bool:
    """Whether a failure's text is the JDK's dynamic-archive defect (module docstring)."""
    return "java.lang.invoke.MethodHandle.linkTo" in text and "NoSuchMethod" in text


def discard() -> Path | None:
    """Remove the archive this process's driver mapped (a new one is made by the next warm-up)."""
    if not _in_use:
        return None
    archive = _in_use[-1]
    with contextlib.suppress(OSError):
        archive.unlink()
    return archive


def options(class_path: list[str], heap: str, conf: dict[str, str]) -> tuple[str, ...]:
    """The JVM options that map this configuration's archive; () when off or when there is none yet
    (then a background warm-up of `conf` writes it, unless one is already running)."""
    if not enabled():
        return ()
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    _sweep(where)
    archive = archive_for(class_path, heap)
    if archive.is_file() and archive.stat().st_size > 0:
        with contextlib.suppress(OSError):
            os.utime(archive)  # newest by use: kept by the sweep
        _in_use.append(archive)
        return (f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *QUIET)
    start_warmup(archive, conf)
    return ()


def start_warmup(archive: Path, conf: dict[str, str]) -> None:
    """Start the detached warm-up that writes `archive` for `conf`, unless one holds its lock."""
    lock = archive.with_suffix(".lock")
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    # Only what shapes the JVM and its class loading: no credentials or project settings.
    wanted = {k: v for k, v in conf.items() if k.startswith(JVM_KEYS)}
    log = archive.with_suffix(".log")
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "framework.runtime.cds_warmup", str(archive)],
                                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=str(archive.parent))
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(wanted).encode())
        proc.stdin.close()
        os.write(fd, str(proc.pid).encode())
    except OSError:
        lock.unlink(missing_ok=True)  # no warm-up: the next run tries again
    finally:
        os.close(fd)
