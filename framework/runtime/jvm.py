"""What happened to the Spark driver's JVM when a call into it failed, in words a user can act on.

A JVM that runs out of heap, is killed (the kernel's out-of-memory killer sends SIGKILL) or
crashes reaches Python as a Py4J error ("An error occurred while calling o123.awaitTermination",
"Answer from Java side is empty") or as a Java exception whose text holds
`java.lang.OutOfMemoryError`. Neither says what to do. `explain` looks at the exception chain
and at the JVM process pyspark started (`SparkContext._gateway.proc`: its exit code, or the
signal that ended it) and returns a `JvmFailure` naming what happened, the fix, where the logs
are, and that nothing was committed past the last checkpoint: every lake commit is one Hudi
commit carrying its own checkpoint (DESIGN §2), so a dead driver leaves each table at its last
completed commit and the next run resumes from there.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from framework.errors import LakeError
from framework.runtime import cds

# Spark's SparkExitCode.OOM: its uncaught-exception handler exits the JVM with it on an OutOfMemoryError.
OOM_EXIT = 52
_OOM = re.compile(r"java\.lang\.OutOfMemoryError(?::\s*([^\n\r\t]+))?")
_LOST = ("Answer from Java side is empty", "Error while receiving", "Error while sending", "Connection refused",
         "Broken pipe", "Connection reset", "closed the connection",
         # A JVM exiting (Spark's handler of an OutOfMemoryError in any thread calls System.exit(52)) runs
         # its shutdown hooks first: the call in flight fails with these while the process still lives.
         "SparkContext was shut down", "SparkContext has been shutdown", "stopped SparkContext")
EXIT_WAIT_SECONDS = 20.0
NOTHING_LOST = ("nothing was committed past the last checkpoint: every table is at its last completed commit "
                "(a micro-batch or build that did not finish left no data without its checkpoint), and the next run "
                "resumes from there")

_session: dict[str, Any] = {}


def note_session(log_dir: Path, driver_memory: str) -> None:
    """Remember where the driver logs and its heap size (framework/table/session.py calls it)."""
    _session.update(log_dir=log_dir, driver_memory=driver_memory)


class JvmFailure(LakeError):
    """The driver JVM ran out of memory, was killed or crashed; `dead`: its process is gone (or
    cannot go on); `archive`: the class-data-sharing archive that broke it, removed."""

    def __init__(self, message: str, *, fix: str, dead: bool, archive: Path | None = None) -> None:
        super().__init__(message, fix=fix)
        self.dead = dead
        self.archive = archive


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _text(e: BaseException) -> str:
    try:
        parts = [str(e)]
    except Exception:  # noqa: BLE001 - a Py4JJavaError asks its (dead) JVM for its text
        parts = [repr(e.args)]
    for attr in ("desc", "stackTrace", "java_exception"):
        v = getattr(e, attr, None)
        if v is not None:
            with contextlib.suppress(Exception):  # a Java object of a dead JVM cannot print itself
                parts.append(str(v))
    return "\n".join(parts)


def _driver() -> Any:
    """The JVM process pyspark launched in this Python process (None: not started here, or remote)."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    gateway = getattr(SparkContext, "_gateway", None)
    return getattr(gateway, "proc", None) if gateway is not None else None


def _exit_code(proc: Any, wait: float) -> int | None:
    """The driver's exit code (negative: the signal that killed it), None while it runs; waits up
    to `wait` seconds for a JVM that is shutting down."""
    if proc is None:
        return None
    try:
        return proc.wait(timeout=wait) if wait > 0 else proc.poll()
    except Exception:  # noqa: BLE001 - still running after the wait, or a process object of another kind
        return None


def _logs(pid: int | None) -> str:
    where = []
    log_dir = _session.get("log_dir")
    if log_dir is not None:
        where.append(f"Spark's log: {Path(log_dir) / 'spark.log'}")
    if pid is not None:
        crash = Path.cwd() / f"hs_err_pid{pid}.log"  # the JVM's fatal error report (HotSpot writes it to the working directory)
        if crash.exists():
            where.append(f"the JVM's crash report: {crash}")
    return "; ".join(where)


def _heap_fix() -> str:
    now = _session.get("driver_memory") or os.environ.get("LAKE_DRIVER_MEMORY") or "4g"
    return (f"give the driver more heap: LAKE_DRIVER_MEMORY=8g (now {now}), or `spark: {{conf: {{spark.driver.memory: 8g}}}}` "
            "in lake.yaml; on a cluster, tasks run in executors (`spark.executor.memory`)")


def explain(e: BaseException) -> JvmFailure | None:
    """A `JvmFailure` when `e` comes from the driver JVM running out of memory, being killed or
    crashing; None for any other error."""
    chain = list(_chain(e))
    texts = [_text(x) for x in chain]
    if any(cds.defect(t) for t in texts):
        archive = cds.discard()
        if archive is not None:
            return JvmFailure(f"the driver JVM's class-data-sharing archive {archive} cannot link a method handle this run "
                              f"needed (a JDK 17 defect, JDK-8327499); it was removed; {NOTHING_LOST}",
                              fix="run the command again (it starts without the archive, and a new one is made)", dead=True,
                              archive=archive)
    lost = any(s in t for t in texts for s in _LOST)
    py4j = lost or any(type(x).__module__.startswith("py4j") for x in chain)
    oom = next((m for m in (_OOM.search(t) for t in texts) if m), None)
    proc = _driver()
    pid = getattr(proc, "pid", None)
    code = _exit_code(proc, EXIT_WAIT_SECONDS if lost else 0) if (oom or py4j) else None
    if oom is None and code is None:
        return None
    logs = _logs(pid)
    tail = f"; {NOTHING_LOST}" + (f". {logs}" if logs else "")
    who = f"the Spark driver (JVM pid {pid})" if pid else "the Spark driver"
    if oom is not None or code == OOM_EXIT:
        detail = (oom.group(1) or "").strip() if oom else ""
        what = f"{who} ran out of memory (java.lang.OutOfMemoryError{': ' + detail if detail else ''})"
        if code is not None:
            what += " and exited"
        return JvmFailure(what + tail, fix=_heap_fix(), dead=code is not None)
    assert code is not None
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        why = (" - on Linux usually the kernel's out-of-memory killer (see `dmesg`), when the machine has less free "
               "memory than the driver's heap and its off-heap use; or a person or a supervisor stopped it") if code == -signal.SIGKILL else ""
        return JvmFailure(f"{who} was killed by {name}{why}{tail}",
                          fix=("rerun the command; if the out-of-memory killer did it, give the machine more memory or the driver less "
                               "(LAKE_DRIVER_MEMORY, `spark.driver.memory`)"), dead=True)
    return JvmFailure(f"{who} exited unexpectedly with code {code}{tail}",
                      fix="rerun the command; if it happens again, the logs above say why the JVM stopped", dead=True)
