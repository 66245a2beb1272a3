"""A real Spark standalone cluster for the tests: a master and a worker from pyspark's own
distribution (`bin/spark-class`), on loopback ports, stopped afterwards.

The workers inherit the test's environment, as cluster nodes inherit an instance role: that is
how their executors get the S3 credentials. Executors run in their own JVMs and get the Hudi
bundle, hadoop-aws and the Kafka connector only through `spark.jars`, as on a real cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark

from framework.demo.services import die_with_parent, free_port, log_tail
from framework.table.session import JVM_OPTIONS

C1_ONLY = "-XX:TieredStopAtLevel=1"  # short-lived JVMs on small data: C2 costs more than it saves


def _wait_workers(ui: str, n: int, procs: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for p, log in procs:
            if p.poll() is not None:
                raise RuntimeError(f"a Spark standalone process exited:\n{log_tail(log.read_text())}")
        try:
            with urllib.request.urlopen(f"{ui}/json/", timeout=2) as r:
                state = json.loads(r.read())
            if sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE") >= n:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the Spark standalone workers did not register:\n" + "\n".join(log_tail(log.read_text()) for _p, log in procs))


def running_cluster(work_dir: Path, workers: int = 1) -> Iterator[str]:
    """Start a master and `workers` workers (2 cores, 2 GiB each); yield the master URL. One worker
    and one 2-core executor by default: the executor is still another JVM that gets everything
    through `spark.jars` and the network, and the 2-core test machine starts one JVM less per
    application (it ran two 1-core workers until the suite outgrew CI)."""
    home = Path(pyspark.__file__).parent
    # The master and workers compile with C1 only, like the suite's other short-lived JVMs.
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_DAEMON_JAVA_OPTS": C1_ONLY}
    port, ui_port = free_port(), free_port()
    url, ui = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}"
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(name: str, *args: str) -> None:
        log = work_dir / f"{name}.log"
        with log.open("wb") as out:
            p = subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                                 env=env, cwd=work_dir, preexec_fn=die_with_parent)
        procs.append((p, log))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port))
        for i in range(workers):
            (work_dir / f"worker{i}").mkdir(parents=True, exist_ok=True)
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
                  "--webui-port", str(free_port()), "--cores", "2", "--memory", "2g", "--work-dir", str(work_dir / f"worker{i}"), url)
        _wait_workers(ui, workers, procs)
        yield url
    finally:
        for p, _log in reversed(procs):
            p.terminate()
        for p, _log in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def cluster_conf(master: str) -> dict[str, str]:
    """What a lake.yaml says to run on that cluster from this machine (client mode)."""
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "1g",
        # Executors live for one test on small data: C1 only (lake's own options kept).
        "spark.executor.extraJavaOptions": f"{JVM_OPTIONS} {C1_ONLY}",
        "spark.executor.cores": "2",
        "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
    }
