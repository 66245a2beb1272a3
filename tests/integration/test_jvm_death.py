"""A Spark driver JVM that dies is a message that says what happened, never an "Internal error".

Two real deaths, each in its own `lake` process: the JVM killed with SIGKILL (what the kernel's
out-of-memory killer does) while `lake ingest` holds a micro-batch, and the JVM's heap exhausted by
a query. Each must name what happened and the fix, say that nothing was committed past the last
checkpoint, exit 1, and the next run must lose and duplicate nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LakeProject, UsersSource

pytestmark = pytest.mark.slow


def _cli(root: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return [sys.executable, "-m", "framework.cli", "--project", str(root), *args]


def _java_child(pid: int) -> int:
    """The JVM pyspark started under process `pid`."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"java" in cmd:
                return int(entry.name)
    raise AssertionError(f"no JVM under pid {pid}")


def _clean(out: str) -> None:
    assert "Internal error" not in out and "Traceback" not in out and "Py4J" not in out, out


def test_a_killed_driver_jvm_is_named_and_the_rerun_loses_nothing(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    src = UsersSource()
    lp.write_cdc([src.put(i, f"c{i}", i) for i in range(20)] + [src.delete(3)])
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {**os.environ, "COLUMNS": "200", "LAKE_PAUSE": f"before_table_commit:{pause}"}
    proc = subprocess.Popen(_cli(tmp_path, "ingest", "--once"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not list(pause.glob("before_table_commit.*")):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "lake ingest never reached the table commit"
            time.sleep(0.5)
        java = _java_child(proc.pid)
        os.kill(java, signal.SIGKILL)
        (pause / "go").touch()
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    _clean(out)
    assert f"the Spark driver (JVM pid {java}) was killed by SIGKILL" in out, out
    assert "out-of-memory killer" in out and "nothing was committed past the last checkpoint" in out, out
    assert "spark.log" in out, out

    r = subprocess.run(_cli(tmp_path, "ingest", "--once"), capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {row["id"]: (row["city"], row["score"]) for row in lp.rows(spark, "users")}
    assert got == src.users


def test_an_exhausted_heap_names_the_setting_to_raise(tmp_path: Path) -> None:
    LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    # 3,000 strings of 1 MB gathered in one aggregation buffer: 3 GB in a 512 MB heap.
    query = "select size(collect_list(repeat('x', 1000000))) as n from range(3000)"
    r = subprocess.run(_cli(tmp_path, "sql", query), capture_output=True, text=True, timeout=600,
                       env={**os.environ, "COLUMNS": "200", "LAKE_DRIVER_MEMORY": "512m"})
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    _clean(out)
    assert "ran out of memory (java.lang.OutOfMemoryError" in out, out
    assert "LAKE_DRIVER_MEMORY=8g (now 512m)" in out and "spark.driver.memory" in out, out
    assert "nothing was committed past the last checkpoint" in out, out
