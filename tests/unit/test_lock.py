"""Project locks between real processes: fail fast, wait, time out, take over from the dead (no Spark)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.runtime.lock import FileLock, LockHeldError, hold, ingest_lock, table_lock
from models.records import LockHolder

REPO = Path(__file__).resolve().parents[2]
HOLDER = """
import sys, time
from pathlib import Path
from framework.runtime.lock import hold
with hold(Path(sys.argv[1]), sys.argv[2].split(","), command=sys.argv[3], timeout=0):
    print("held", flush=True)
    time.sleep(float(sys.argv[4]))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[str]] = []

    def start(names: list[str], seconds: float, command: str = "lake build dws.x", lock_dir: Path | None = None) -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_dir or tmp_path / "locks"), ",".join(names), command, str(seconds)],
                             stdout=subprocess.PIPE, text=True, env=_env())
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_second_process_fails_fast_naming_the_holder(tmp_path: Path, holder) -> None:  # type: ignore[no-untyped-def]
    p = holder([table_lock("dws.x")], 60, command="lake build --incremental dws.x")
    t0 = time.monotonic()
    with pytest.raises(LockHeldError) as e, hold(tmp_path / "locks", [table_lock("dws.x")], command="me", timeout=0):
        pass
    assert time.monotonic() - t0 < 1
    msg = str(e.value)
    assert f"table dws.x is locked by pid {p.pid} on {socket.gethostname()}" in msg
    assert "`lake build --incremental dws.x` since" in msg and "not waiting" in msg
    assert e.value.fix is not None and "--lock-timeout" in e.value.fix and f"kill {p.pid}" in e.value.fix


def test_waits_for_the_holder_to_finish(tmp_path: Path, holder) -> None:  # type: ignore[no-untyped-def]
    holder([ingest_lock("ods")], 1.0)
    t0 = time.monotonic()
    with hold(tmp_path / "locks", [ingest_lock("ods")], command="me", timeout=20) as locks:
        waited = time.monotonic() - t0
        assert locks[0].holder() == LockHolder.model_validate_json(locks[0].path.read_text())
        assert locks[0].holder().pid == os.getpid()  # type: ignore[union-attr]
    assert 0.3 < waited < 10
    assert locks[0].path.read_text() == ""  # a clean release leaves no holder behind


def test_timeout_expires_while_held(tmp_path: Path, holder) -> None:  # type: ignore[no-untyped-def]
    holder([table_lock("ods.user")], 60)
    t0 = time.monotonic()
    with pytest.raises(LockHeldError, match=r"after waiting 0.5 s"), hold(tmp_path / "locks", [table_lock("ods.user")], command="me", timeout=0.5):
        pass
    assert 0.5 <= time.monotonic() - t0 < 3


def test_killed_holder_is_taken_over(tmp_path: Path, holder) -> None:  # type: ignore[no-untyped-def]
    p = holder([table_lock("dws.x"), table_lock("dws.y")], 60)
    p.send_signal(signal.SIGKILL)
    p.wait()
    stale: list[tuple[str, LockHolder]] = []
    with hold(tmp_path / "locks", [table_lock("dws.y"), table_lock("dws.x")], command="me", timeout=0,
              on_stale=lambda name, h: stale.append((name, h))):
        pass
    assert [(n, h.pid, h.command) for n, h in stale] == [("table-dws.x", p.pid, "lake build dws.x"), ("table-dws.y", p.pid, "lake build dws.x")]


def test_other_tables_do_not_wait_and_partial_sets_are_released(tmp_path: Path, holder) -> None:  # type: ignore[no-untyped-def]
    holder([table_lock("dws.b")], 60)
    with hold(tmp_path / "locks", [table_lock("dws.a"), table_lock("dws.c")], command="me", timeout=0):
        pass
    with pytest.raises(LockHeldError), hold(tmp_path / "locks", [table_lock("dws.a"), table_lock("dws.b")], command="me", timeout=0):
        pass
    a = FileLock(tmp_path / "locks", table_lock("dws.a"))  # taken before dws.b failed: released again
    assert a.try_acquire("me")
    a.release()


def _lake(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # JAVA_HOME points nowhere: should a lock ever fail to stop the command, it stops at the Java
    # check instead of starting Spark next to the other session on this machine.
    env = {**_env(), "JAVA_HOME": str(project / "no-java")}
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(project), *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(REPO / "layers", root / "layers")
    (root / "lake.yaml").write_text("name: t\nwarehouse: wh\n")
    return root


def test_cli_build_and_ingest_take_the_table_locks(project: Path, holder) -> None:  # type: ignore[no-untyped-def]
    locks = project / "wh" / "_lake" / "locks"
    p = holder([table_lock("dws.user_agg"), table_lock("ods.product")], 60, command="lake build dws.user_agg", lock_dir=locks)
    r = _lake(project, "build", "dws.user_agg", "--lock-timeout", "0")
    assert r.returncode == 1
    assert f"table dws.user_agg is locked by pid {p.pid}" in r.stderr and "no Java" not in r.stderr
    r = _lake(project, "ingest", "--tables", "ods.product,ods.user", "--lock-timeout", "0")
    assert r.returncode == 1 and "table ods.product is locked" in r.stderr
    # A model nobody holds gets its lock, then fails at the Java check: the lock comes first.
    r = _lake(project, "build", "dwd.big_orders", "--lock-timeout", "0")
    assert r.returncode == 1 and "no Java runtime" in r.stderr
    assert (locks / "table-dwd.big_orders.lock").read_text() == ""
