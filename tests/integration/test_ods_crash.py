"""Exactly once: a SIGKILL in the middle of a micro-batch and a rerun leave the same tables as one
clean run (DESIGN.md invariant 5; the commit metadata records stream and batch per table)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, key: [sku], type: mor}
"""
COMPARE = ["_op", "_seq", "_deleted", "_source"]


def _events(seed: int) -> list[list[dict[str, Any]]]:
    rnd = random.Random(seed)
    files, pos = [], 0
    for _ in range(3):
        batch = []
        for _ in range(40):
            pos += 10
            table = rnd.choice(["shop.users", "shop.orders", "shop.items"])
            k = rnd.randint(1, 12)
            op = rnd.choice(["c", "u", "u", "d"])
            key = {"sku": f"s{k}"} if table == "shop.items" else {"id": k}
            row = {**key, "v": rnd.randint(0, 99)}
            if table == "shop.orders":
                row["created"] = f"2024-0{rnd.randint(1, 3)}-01T00:00:00Z"
            batch.append(envelope(op, table, row if op == "d" else None, None if op == "d" else row, pos=pos))
        files.append(batch)
    return files


def _snapshot(lp: LakeProject, spark: Any) -> dict[str, list[tuple]]:
    out = {}
    for t in ("users", "orders", "items"):
        df = lp.raw(spark, t)
        cols = sorted(c for c in df.columns if not c.startswith("_hoodie") and c != "_ingested_at")
        out[t] = sorted(tuple(str(v) for v in r) for r in df.select(*cols).collect())
    return out


def _lake(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "--project", str(root), *args],
        env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


@pytest.fixture
def clean_run(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[dict, list]:
    files = _events(42)
    lp = LakeProject(tmp_path_factory.mktemp("clean"), TABLES)
    for f in files:
        lp.write_cdc(f)
    lp.ingest(spark)
    return _snapshot(lp, spark), files


@pytest.mark.parametrize("failpoint", ["after_table_commit:1", "before_table_commit:2"])
def test_kill_mid_batch_then_rerun(tmp_path: Path, spark: Any, clean_run: tuple[dict, list], failpoint: str) -> None:
    expected, files = clean_run
    lp = LakeProject(tmp_path, TABLES)
    for f in files:
        lp.write_cdc(f)
    proc = _lake(tmp_path, "ingest", "--once", env={"LAKE_FAILPOINT": failpoint})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    # Run history says what happened to the killed run.
    from framework import history

    (killed,) = history.runs(lp.layout)
    assert killed.command == "ingest" and killed.status == "crashed" and "ended without finishing" in (killed.error or "")
    lp.ingest(spark)
    assert _snapshot(lp, spark) == expected


def test_kill_at_a_random_moment_then_rerun(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> None:
    files = _events(7)
    # Several micro-batches (one file each) so the kill lands inside the run, wherever it lands.
    one_file = "ods:\n  source: {kind: files, path: cdc, max_files_per_trigger: 1}\n"
    clean = LakeProject(tmp_path_factory.mktemp("clean1"), TABLES, lake_extra=one_file)
    for f in files:
        clean.write_cdc(f)
    clean.ingest(spark)
    expected = _snapshot(clean, spark)
    tmp_path = tmp_path_factory.mktemp("killed")
    lp = LakeProject(tmp_path, TABLES, lake_extra=one_file)
    for f in files:
        lp.write_cdc(f)
    proc = _lake(tmp_path, "ingest", "--once")
    deadline = time.time() + 120
    # Wait until the first table commit exists, then kill after a random short delay.
    committed = False
    while time.time() < deadline and proc.poll() is None and not committed:
        committed = bool(list((tmp_path / "warehouse" / "ods").glob("*/.hoodie/timeline/*.commit")))
        time.sleep(0.2)
    time.sleep(random.Random(os.getpid()).uniform(0.0, 3.0))
    proc.send_signal(signal.SIGKILL)  # no-op when the run has ended
    out, _ = proc.communicate(timeout=60)
    # The kill landed inside the run: after its first commit, before it finished.
    assert committed, out
    assert proc.returncode == -signal.SIGKILL, f"the run ended (exit {proc.returncode}) before the kill:\n{out}"
    from framework import history

    (killed,) = history.runs(lp.layout)
    assert killed.status == "crashed", killed
    lp.ingest(spark)
    assert _snapshot(lp, spark) == expected
