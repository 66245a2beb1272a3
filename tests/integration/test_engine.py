"""The warm engine (framework/engine/) as a user meets it: `lake engine start`, commands of the
project served by it with the same results and exit codes as without it, a project the engine's JVM
cannot take run in its own process (and saying why), Ctrl-C cancelling a served command, a killed
engine noticed, two starts making one engine, stop.

The rows are checked against the CDC events written here (the source's final state), not against
another lake run; which process ran a command is read from its run record (the pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LakeProject, envelope

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LAKE_ENGINE"}  # the project's own engine file decides
    return {**env, **extra}


def lake(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args], capture_output=True, text=True,
                          env=env or _env(), timeout=timeout)


def last_run_pid(root: Path) -> int:
    r = lake(root, "runs", "--format", "json", "--last", "1")
    assert r.returncode == 0, r.stderr
    return int(json.loads(r.stdout)[0]["pid"])


def users(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The source's final rows, from the events (the oracle)."""
    state: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["op"] == "d":
            state.pop(e["before"]["id"], None)
        else:
            state[e["after"]["id"]] = e["after"]
    return [state[k] for k in sorted(state)]


def test_commands_run_on_the_engine_with_the_results_and_exit_codes_of_a_local_run(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    lp = LakeProject(root, "tables:\n  - {source: shop.users, key: [id]}\n")
    events = [envelope("c", "shop.users", None, {"id": i, "city": f"c{i % 3}"}, pos=10 + i) for i in range(1, 7)]
    events += [envelope("u", "shop.users", {"id": 2, "city": "c2"}, {"id": 2, "city": "moved"}, pos=40),
               envelope("d", "shop.users", {"id": 5, "city": "c2"}, None, pos=41)]
    lp.write_cdc(events)
    lp.add_models({"dws/by_city.sql": "select city, count(*) as n from ods.users group by city",
                   "dws/by_city.yaml": "key: [city]\n"})

    # Two starts at once make one engine.
    starts = [subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "engine", "start", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in starts]
    assert all(p.returncode == 0 for p in starts), outs
    pids = {json.loads(o)["pid"] for o, _ in outs}
    assert len(pids) == 1, outs
    engine_pid = pids.pop()
    info = root / ".lake" / "engine.json"
    assert info.stat().st_mode & 0o077 == 0  # its token lets a client run code in the engine
    try:
        status = lake(root, "engine", "status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["state"] == "running", status.stdout + status.stderr

        # Served: the same results as the source, exit codes and messages as without an engine.
        r = lake(root, "ingest", "--once")
        assert r.returncode == 0 and "ods.users" in r.stdout, r.stdout + r.stderr
        assert last_run_pid(root) == engine_pid
        r = lake(root, "build")
        assert r.returncode == 0, r.stdout + r.stderr
        assert last_run_pid(root) == engine_pid
        got = json.loads(lake(root, "sql", "select id, city from ods.users order by id", "--format", "json").stdout)
        assert got == users(events)
        by_city = json.loads(lake(root, "sql", "select city, n from dws.by_city order by city", "--format", "json").stdout)
        oracle: dict[str, int] = {}
        for u in users(events):
            oracle[u["city"]] = oracle.get(u["city"], 0) + 1
        assert by_city == [{"city": c, "n": n} for c, n in sorted(oracle.items())]
        bad = lake(root, "sql", "select * from ods.nothing_here")
        assert bad.returncode == 1 and "Error:" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        usage = lake(root, "build", "--no-such-option")
        assert usage.returncode == 2 and "No such option" in usage.stderr, usage.stderr
        # A temporary view of one command is not seen by the next (each has its own session).
        assert lake(root, "sql", "create temporary view leak as select 1 as x").returncode == 0
        assert lake(root, "sql", "select * from leak").returncode == 1

        # A setting fixed when a JVM starts differs: the command runs in its own process, saying why.
        other = tmp_path / "other"
        other.mkdir()
        LakeProject(other, "tables:\n  - {source: shop.users, key: [id]}\n", "spark: {master: 'local[2]', conf: {spark.driver.memory: 1g}}\n")
        (other / "lake.yaml").write_text((other / "lake.yaml").read_text().replace("spark: {master: 'local[2]'}\n", ""))
        (other / ".lake").mkdir()
        (other / ".lake" / "engine.json").write_text(info.read_text())  # pointed at the same engine
        (other / "cdc" / "a.json").write_text(json.dumps(events[0]) + "\n")
        r = lake(other, "ingest", "--once")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "the engine does not run this command" in r.stderr and "spark.driver.memory" in r.stderr, r.stderr
        assert last_run_pid(other) != engine_pid

        # Ctrl-C cancels a served command: its Spark job stops, the engine serves the next one;
        # pressed before the command's first job (2 s), the job it starts next is cancelled too.
        for wait in (8, 2):
            slow = subprocess.Popen([sys.executable, "-m", "framework.cli", "--project", str(root), "sql",
                                     "select count(*) from range(0, 2000, 1, 2) where reflect('java.lang.Thread', 'sleep', cast(100 as bigint)) is null"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
            time.sleep(wait)
            slow.send_signal(signal.SIGINT)
            out, err = slow.communicate(timeout=60)  # the job alone would take 100 s
            assert slow.returncode == 130 and "interrupted" in err, (wait, slow.returncode, out, err)
        again = lake(root, "sql", "select count(*) as n from ods.users", "--format", "json")
        assert again.returncode == 0 and json.loads(again.stdout) == [{"n": len(users(events))}], again.stderr

        # A killed engine: the next command runs in its own process; status says so and exits 1.
        os.kill(engine_pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{engine_pid}").exists():
            time.sleep(0.2)
        r = lake(root, "ingest", "--once")
        assert r.returncode == 0 and "nothing new to ingest" in r.stdout, r.stdout + r.stderr
        assert last_run_pid(root) != engine_pid
        status = lake(root, "engine", "status")
        assert status.returncode == 1 and "dead" in status.stdout, status.stdout
        assert not info.exists()

        # Started again, then stopped.
        r = lake(root, "engine", "start")
        assert r.returncode == 0 and "engine started" in r.stdout, r.stdout + r.stderr
        engine_pid = json.loads(info.read_text())["pid"]
    finally:
        lake(root, "engine", "stop")
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(engine_pid, signal.SIGKILL)
    assert not info.exists()
    status = lake(root, "engine", "status")
    assert status.returncode == 1 and "stopped" in status.stdout


def _status_listeners(spark: Any) -> int:
    bus = spark._jsc.sc().listenerBus()
    return sum(1 for x in bus.listeners() if x.getClass().getSimpleName() == "SQLAppStatusListener")


def test_a_served_commands_session_leaves_no_listener_behind(spark: Any) -> None:
    """Each command's session has its own shared state (its own catalog), and Spark adds a SQL
    status listener to the driver for every shared state: the engine removes it after the command,
    or an engine that served n commands would pass every event through n more listeners."""
    from framework.engine.session import fresh, release

    spark.sql("select 1").collect()  # the engine's own shared state (Spark makes it lazily)
    before = _status_listeners(spark)
    for _ in range(3):
        session = fresh(spark)
        session.sql("create temporary view v as select 1 as x")
        assert session.sql("select count(*) from v").collect()[0][0] == 1
        assert _status_listeners(spark) == before + 1  # the command's own, while it runs
        release(spark, session)
    assert _status_listeners(spark) == before
    assert not spark.catalog.tableExists("v")  # and nothing it registered reached the engine's session
