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
  PySpark's jars, lake's jars, the driver class path, heap size), one file per key under the jar
  cache (`.cache/cds/`, or `$LAKE_CDS_DIR`). Java checks the class path itself too and ignores an archive that does
  not match (`-Xshare:auto`), so a wrong key costs the speed-up, never a failure.
- No archive yet: this run dumps one when its JVM exits (`-XX:ArchiveClassesAtExit`, a few
  seconds, once per key). One process dumps at a time (an exclusive marker file); the dump goes
  to a temporary name that only a JVM that exited normally renames into place, so a killed run
  leaves no half archive behind (and its temporary file is removed by the next run).
- CDS's own log lines are off: they would land on stdout, where `--format json` writes.

`LAKE_CDS=0` turns it off; `LAKE_CDS_DIR` puts the archives elsewhere (e.g. when the install is read-only).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.runtime.jars import cache_dir, java_executable

QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
KEEP = 4  # archives kept (newest by use); each is ~160 MB


@dataclass(frozen=True)
class Plan:
    """What to add to the driver's JVM options, and where a dump goes (None: an archive is used)."""

    options: tuple[str, ...]
    archive: Path
    dump_to: Path | None = None


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(where: Path) -> None:
    """Remove what dead processes left: temporary dumps and dump markers."""
    for p in list(where.glob("*.tmp")) + list(where.glob("*.dumping")):
        try:
            pid = int(p.name.split(".")[-2])
        except (ValueError, IndexError):
            continue
        if not _alive(pid):
            p.unlink(missing_ok=True)
    archives = sorted(where.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)


def plan(class_path: list[str], heap: str) -> Plan | None:
    """The JVM options for this run (use the archive, or dump one at exit), or None (off, or another
    process is dumping this archive right now)."""
    if not enabled():
        return None
    where = folder()
    where.mkdir(parents=True, exist_ok=True)
    _sweep(where)
    archive = where / f"{key(class_path, heap)}.jsa"
    if archive.is_file() and archive.stat().st_size > 0:
        with contextlib.suppress(OSError):
            os.utime(archive)  # newest by use: kept by the sweep
        return Plan((f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *QUIET), archive)
    marker = where / f"{archive.stem}.{os.getpid()}.dumping"
    others = [p for p in where.glob(f"{archive.stem}.*.dumping") if p != marker]
    if others:
        return None  # one dump at a time; this run goes without
    marker.touch()
    tmp = where / f"{archive.stem}.{os.getpid()}.tmp"
    return Plan((f"-XX:ArchiveClassesAtExit={tmp}", *QUIET), archive, tmp)


def finish_at_exit(spark: Any, p: Plan) -> None:
    """For a dumping run: when Python exits, stop Spark, let the JVM exit (it writes the archive as it
    does) and move a complete archive into place."""
    if p.dump_to is None:
        return
    marker = p.dump_to.with_suffix(".dumping")
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)

    def finish() -> None:
        try:
            if proc is None:
                return
            with contextlib.suppress(Exception):
                spark.stop()
            with contextlib.suppress(Exception):
                if proc.stdin is not None:
                    proc.stdin.close()  # PySpark's gateway exits on EOF of its stdin
            try:
                code = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                return
            assert p.dump_to is not None
            if code == 0 and p.dump_to.is_file() and p.dump_to.stat().st_size > 0:
                os.replace(p.dump_to, p.archive)
        finally:
            if p.dump_to is not None:
                p.dump_to.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)

    atexit.register(finish)
