"""The engine's Spark side: whether a project can run on the engine's JVM, and a fresh session of
that JVM for each command.

A Spark driver's static settings (master, jars, serializer, catalog, driver memory, JVM options)
are fixed when its JVM starts; runtime SQL settings are per session. A project runs on an engine
only when every static setting it would start its own driver with is the engine's (the jars: the
engine has them all); its runtime settings are applied to its command's own session. Otherwise
the command runs in its own process as without an engine, and `reason` says why.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.project.config import Project

# Set per project or per process by lake itself, never deciding what a command computes.
PER_PROCESS = frozenset({"spark.app.name", "spark.driver.extraClassPath", "spark.sql.warehouse.dir", "spark.default.parallelism"})
JAVA_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# lake's per-project log file and the class-data-sharing archive (framework/runtime/cds.py).
_PER_PROCESS_OPTION = re.compile(r"-Dlog4j2\.configurationFile=\S+|-XX:SharedArchiveFile=\S+|-Xshare:\S+|-Xlog:cds\S*")


ENGINE_JAVA: dict[str, str] = {}  # the `java` the engine's JVM was started from (set at its start)


def remember_java() -> None:
    from framework.runtime.jars import java_executable

    ENGINE_JAVA["path"] = os.path.realpath(java_executable())


def _options(text: str) -> list[str]:
    return sorted(_PER_PROCESS_OPTION.sub("", text).split())


def _master(text: str) -> str:
    return text.replace("local[*]", f"local[{os.cpu_count() or 1}]")


def reason(project: Project, engine: SparkSession) -> str | None:
    """Why `project` cannot run on `engine`'s JVM (a static setting differs), or None."""
    from framework.runtime.jars import java_executable

    try:
        java = os.path.realpath(java_executable())
    except Exception as e:  # noqa: BLE001 - no Java in the client's environment: its own run says so
        return f"no Java in the command's environment ({e})"
    if java != ENGINE_JAVA.get("path", java):
        return f"the command's Java is {java}, the engine runs on {ENGINE_JAVA['path']}"
    have: dict[str, str] = dict(engine.sparkContext.getConf().getAll())
    from framework.table.session import driver_conf

    for key, value in driver_conf(project).items():
        if key in PER_PROCESS:
            continue
        if key == "spark.jars":
            missing = sorted(set(filter(None, value.split(","))) - set(have.get(key, "").split(",")))
            if missing:
                return f"the engine's driver lacks the jars {', '.join(os.path.basename(m) for m in missing)}"
        elif key in JAVA_OPTIONS:  # Spark adds its own (--add-opens ...): the engine's must include the project's
            lacking = [o for o in _options(value) if o not in _options(have.get(key, ""))]
            if lacking:
                return f"{key} has {' '.join(lacking)} for this project, the engine's JVM does not"
        elif key == "spark.master":
            if _master(value) != _master(have.get(key, "")):
                return f"spark.master is {value} for this project, the engine's is {have.get(key)}"
        elif not engine.conf.isModifiable(key) and have.get(key) != value:
            return f"{key} is {value!r} for this project, the engine's JVM has {have.get(key)!r} (a setting fixed when a JVM starts)"
    return None


def fresh(engine: SparkSession) -> SparkSession:
    """A session for one command: its own SQL settings and temporary views, and with Spark's
    in-memory catalog its own catalog and cache (a new shared state), so nothing one command
    registered or cached is seen by the next. A Hive catalog is shared (it is persistent anyway)."""
    from pyspark.sql import SparkSession

    if engine.conf.get("spark.sql.catalogImplementation", "in-memory") == "hive":
        session = engine.newSession()
    else:
        jvm: Any = engine._jvm
        jss = jvm.org.apache.spark.sql.SparkSession(engine._jsc.sc(), jvm.java.util.HashMap())  # type: ignore[attr-defined]
        session = SparkSession(engine.sparkContext, jss)
    jvm = session._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)  # type: ignore[union-attr]
    SparkSession._activeSession = session
    return session


def release(engine: SparkSession, session: SparkSession) -> None:
    """Drop what a command left in memory: its cached tables, any RDD still persisted, and the
    SQL status listener its shared state added to the driver's listener bus (Spark adds one per
    shared state and never removes it: left there, every later command's events would pass
    through one more listener per command served before)."""
    from pyspark.sql import SparkSession

    try:
        session.catalog.clearCache()
        jsc: Any = engine._jsc
        for rdd in list(jsc.getPersistentRDDs().values()):
            rdd.unpersist(False)
    finally:
        jvm: Any = engine._jvm
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(engine._jsparkSession)
        SparkSession._activeSession = engine
        _drop_status_listener(engine, session)


def _drop_status_listener(engine: SparkSession, session: SparkSession) -> None:
    jss: Any = session._jsparkSession
    shared = jss.sharedState()
    if shared.equals(engine._jsparkSession.sharedState()):  # type: ignore[union-attr]
        return  # a Hive catalog's session shares the engine's state
    listener = shared.statusStore().listener()
    if listener.isDefined():
        engine._jsc.sc().removeSparkListener(listener.get())  # type: ignore[union-attr]
