"""Exactly once: a SIGKILL in the middle of a micro-batch and a rerun leave the same tables as one
clean run (DESIGN.md invariant 5; the commit metadata records stream and batch per table)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from framework.table import hudi
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, key: [sku], type: mor}
"""
COMPARE = ["_op", "_seq", "_deleted", "_source"]
# The events of every test that needs no events of its own: those tests share clean runs
# (`reference`). The tombstone test's kill point is counted on them.
SEED = 42


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


class Reference:
    """A clean run: a project that ingested `files` in one process, not killed."""

    def __init__(self, lp: LakeProject, files: list[list[Any]]) -> None:
        self.lp, self.files = lp, files
        self._snapshot: dict[str, list[tuple]] | None = None

    def snapshot(self, spark: Any) -> dict[str, list[tuple]]:
        if self._snapshot is None:
            self._snapshot = _snapshot(self.lp, spark)
        return self._snapshot


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Callable[..., Reference]:
    """The clean run of (seed, tables, extra lake.yaml, a bad line appended to batch 0), ingested
    once per module: the tests only read it, and a clean run of three micro-batches is 40-75 s of
    Hudi commits on the 2-core test machine."""
    cache: dict[tuple[int, str, str, str | None], Reference] = {}

    def get(seed: int, tables: str = TABLES, extra: str = "", bad_line: str | None = None) -> Reference:
        key = (seed, tables, extra, bad_line)
        if key not in cache:
            files: list[list[Any]] = list(_events(seed))
            if bad_line is not None:
                files[0].append(bad_line)
            lp = LakeProject(tmp_path_factory.mktemp("clean"), tables, lake_extra=extra)
            for f in files:
                lp.write_cdc(f)
            lp.ingest(spark)
            cache[key] = Reference(lp, files)
        return cache[key]

    return get


# A kill before a table commit is the Kafka test's case (test_ods_kafka.py); here, after one.
@pytest.mark.parametrize("failpoint", ["after_table_commit:1"])
def test_kill_mid_batch_then_rerun(tmp_path: Path, spark: Any, reference: Callable[..., Reference], failpoint: str) -> None:
    clean = reference(SEED)  # one micro-batch: the kill lands inside the only one
    lp = LakeProject(tmp_path, TABLES)
    for f in clean.files:
        lp.write_cdc(f)
    proc = _lake(tmp_path, "ingest", "--once", env={"LAKE_FAILPOINT": failpoint})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    # Run history says what happened to the killed run.
    from framework.runtime import history

    (killed,) = history.runs(lp.layout)
    assert killed.command == "ingest" and killed.status == "crashed" and "ended without finishing" in (killed.error or "")
    lp.ingest(spark)
    assert _snapshot(lp, spark) == clean.snapshot(spark)


def test_kill_at_a_random_moment_then_rerun(tmp_path_factory: pytest.TempPathFactory, spark: Any, reference: Callable[..., Reference]) -> None:
    # Several micro-batches (one file each) so the kill lands inside the run, wherever it lands.
    clean, lp = _pair(tmp_path_factory, reference, SEED)
    tmp_path = lp.root
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
    from framework.runtime import history

    (killed,) = history.runs(lp.layout)
    assert killed.status == "crashed", killed
    lp.ingest(spark)
    assert _snapshot(lp, spark) == clean.snapshot(spark)


ONE_FILE = "ods:\n  source: {kind: files, path: cdc, max_files_per_trigger: 1}\n"


def _pair(tmp_path_factory: pytest.TempPathFactory, reference: Callable[..., Reference], seed: int, tables: str = TABLES,
          bad_line: str | None = None) -> tuple[Reference, LakeProject]:
    """The clean run of seed's files (one micro-batch each; shared by the module's tests) and a
    project with the same files, not ingested."""
    clean = reference(seed, tables, ONE_FILE, bad_line)
    crashed = LakeProject(tmp_path_factory.mktemp("crashed"), tables, lake_extra=ONE_FILE)
    for f in clean.files:
        crashed.write_cdc(f)
    return clean, crashed


def _killed(lp: LakeProject, *args: str, failpoint: str) -> str:
    proc = _lake(lp.root, *args, env={"LAKE_FAILPOINT": failpoint})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    return out


def test_kill_after_the_last_table_commit_before_the_offset_commit(tmp_path_factory: pytest.TempPathFactory, spark: Any, reference: Callable[..., Reference]) -> None:
    """Every table and the dead letter committed micro-batch 0, Spark has not recorded it: the
    rerun replays it, each table recognises it (no second commit), nothing is doubled."""
    clean, lp = _pair(tmp_path_factory, reference, SEED, bad_line="{not json")  # a dead letter in batch 0
    _killed(lp, "ingest", "--once", failpoint="before_offset_commit:1")
    # Where it landed: batch 0 in every table's last commit and the dead letter, not in Spark's commit log.
    stream = (lp.layout.checkpoint("ods") / "stream").local
    assert (stream / "offsets" / "0").exists() and not (stream / "commits" / "0").exists()
    paths = [lp.layout.table(f"ods.{t}") for t in ("users", "orders", "items")] + [lp.layout.dead_letter]
    assert [hudi.last_commit_metadata(spark, p)[1]["ods_batch"] for p in paths] == ["0"] * 4
    commits = {p: hudi.completed_instants(spark, p) for p in paths}
    summary = lp.ingest(spark)
    assert {t.status for t in summary.batches[0].tables.values()} == {"already_committed"}
    assert all(hudi.completed_instants(spark, p)[: len(c)] == c for p, c in commits.items())
    assert _snapshot(lp, spark) == clean.snapshot(spark)
    expected = clean.lp.dead_letters(spark)
    assert lp.dead_letters(spark) == expected and len(expected) == 1


CHECKED = """
tables:
  - source: shop.users
    key: [id]
    checks:
      - between: {column: v, min_value: 10}
        severity: drop
  - {source: shop.orders, key: [id], partition_by: {column: created, granularity: month}}
  - {source: shop.items, key: [sku], type: mor}
"""


def _tombstones(lp: LakeProject, spark: Any) -> dict[str, list[tuple]]:
    out = {}
    for t, key in (("users", "id"), ("orders", "id"), ("items", "sku")):
        path = lp.layout.tombstones(f"ods.{t}")
        out[t] = sorted((str(r[0]), r[1]) for r in hudi.read(spark, path).select(key, "_seq").collect()) if hudi.table_exists(path) else []
    return out


def test_kill_between_the_tombstone_write_and_the_table_commit(tmp_path_factory: pytest.TempPathFactory, spark: Any, reference: Callable[..., Reference]) -> None:
    """The last micro-batch wrote ods.items' tombstones and the process died before the table's
    commit: the rerun's deletes pass their own tombstones, so it leaves what one clean run leaves
    (rows and tombstones), nothing lost, nothing doubled."""
    clean, lp = _pair(tmp_path_factory, reference, SEED)
    # Every micro-batch passes the point once per table: items' third is in the last batch. The
    # other tables commit concurrently, so they may be before, inside or after their commits.
    _killed(lp, "ingest", "--once", failpoint="after_tombstone_commit@ods.items:3")
    items, tomb = lp.layout.table("ods.items"), lp.layout.tombstones("ods.items")
    # Where it landed: items' tombstones have batch 2, the table has batch 1, and live rows the
    # batch deletes (tombstones newer than the row).
    assert hudi.last_commit_metadata(spark, tomb)[1]["ods_batch"] == "2"
    assert hudi.last_commit_metadata(spark, items)[1]["ods_batch"] == "1"
    rows, kept = hudi.read(spark, items).select("sku", "_seq"), hudi.read(spark, tomb).select("sku", F.col("_seq").alias("t"))
    assert rows.join(kept, "sku").where("t > _seq").count() > 0
    lp.ingest(spark)
    assert _snapshot(lp, spark) == clean.snapshot(spark)
    assert _tombstones(lp, spark) == _tombstones(clean.lp, spark)


def _quarantine(lp: LakeProject, spark: Any) -> list[tuple]:
    df = hudi.read(spark, lp.layout.quarantine("ods.users"))
    return sorted(tuple(str(v) for v in r) for r in df.select("_lake_run_id", "_source", "id", "v", "_op", "_lake_failed_checks").collect())


def test_kill_between_the_quarantine_write_and_the_commit(tmp_path_factory: pytest.TempPathFactory, spark: Any, reference: Callable[..., Reference]) -> None:
    """A `drop` check quarantined events of ods.users and the process died before the table's
    commit: the rerun commits the batch without them, like a clean run."""
    clean, lp = _pair(tmp_path_factory, reference, 25, CHECKED)  # seed 25: 2 users events quarantined in batch 0, 1 in each later one
    _killed(lp, "ingest", "--once", failpoint="after_quarantine_write:1")
    from framework.runtime import history

    (killed,) = history.runs(lp.layout)
    # Where it landed: the quarantine holds batch 0's rejected events; every table's gate runs
    # before any table is written, so no ODS table has a commit yet.
    early = _quarantine(lp, spark)
    assert early and {r[0] for r in early} == {killed.run_id}
    assert not any(hudi.table_exists(lp.layout.table(f"ods.{t}")) for t in ("users", "items", "orders"))
    lp.ingest(spark, run_id="rerun")
    assert _snapshot(lp, spark) == clean.snapshot(spark)
    # The rerun quarantined what the clean run did; the killed run's rows stay, under its run id.
    mine = [r[1:] for r in _quarantine(lp, spark) if r[0] == "rerun"]
    assert mine == [r[1:] for r in _quarantine(clean.lp, spark)]
    assert {r[1:] for r in early} <= set(mine)


def _inflight_data_instants(root: Path, existing_only: bool) -> list[tuple[Path, str]]:
    """(timeline dir, instant) of data commits started and not completed, in any ODS table;
    `existing_only`: in tables that have a completed commit already."""
    out = []
    for tl in (root / "warehouse" / "ods").glob("*/.hoodie/timeline"):
        try:
            names = os.listdir(tl)
        except FileNotFoundError:
            continue
        done = {n.split("_")[0] for n in names if n.endswith((".commit", ".deltacommit")) and "_" in n and not n.startswith(".")}
        if existing_only and not done:
            continue
        for n in names:
            if n.endswith((".inflight", ".deltacommit.inflight")) and n.split(".")[1] in ("inflight", "deltacommit") and n.split(".")[0] not in done:
                out.append((tl, n.split(".")[0]))
    return out


def _kill_inside_a_commit(proc: subprocess.Popen, root: Path, existing_only: bool) -> tuple[Path, str]:
    """SIGKILL `proc` as soon as a Hudi data commit is in flight (its timeline has the instant's
    `.inflight` file, not its completion): the process dies inside `hudi.write`."""
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        found = _inflight_data_instants(root, existing_only)
        if found:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == -signal.SIGKILL, out
            tl, instant = found[0]
            completed = [n for n in os.listdir(tl) if n.startswith(instant + "_")]
            assert not completed, f"the commit {instant} completed before the kill landed: {completed}"
            return tl, instant
        time.sleep(0.005)
    out, _ = proc.communicate(timeout=60)
    raise AssertionError(f"no commit in flight seen (exit {proc.returncode}):\n{out}")


def test_kill_inside_a_hudi_commit_then_the_next_writer_rolls_it_back(tmp_path_factory: pytest.TempPathFactory, spark: Any, reference: Callable[..., Reference]) -> None:
    """The process dies while Hudi writes a commit into a table that has data: the instant stays
    in flight; the rerun's first write to that table rolls it back, and the tables equal a clean run."""
    clean, lp = _pair(tmp_path_factory, reference, SEED)
    proc = _lake(lp.root, "ingest", "--once")
    tl, instant = _kill_inside_a_commit(proc, lp.root, existing_only=True)
    lp.ingest(spark)
    names = os.listdir(tl)
    assert not [n for n in names if n.startswith(instant)], f"{instant} is still on the timeline: {sorted(names)}"
    rollbacks = [n for n in names if n.endswith(".rollback") and "_" in n and not n.startswith(".")]
    assert rollbacks, sorted(names)
    assert _snapshot(lp, spark) == clean.snapshot(spark)


BOOTSTRAP_POSITION = "mysql-bin.000002:100"


def _bootstrap_cdc() -> list[dict[str, Any]]:
    after = [envelope("u" if i % 3 else "d", "shop.users", {"id": i, "v": 0}, None if i % 3 == 0 else {"id": i, "v": 100 + i}, pos=500 + i,
                      file="mysql-bin.000002") for i in range(1, 15)]
    before = [envelope("u", "shop.users", {"id": 1, "v": 0}, {"id": 1, "v": -1}, pos=5, file="mysql-bin.000001")]  # older than the dump
    return before + after


@pytest.fixture(scope="module")
def bootstrapped(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Path, LakeProject]:
    """The dump, and a project that bootstrapped ods.users from it and ingested the CDC after it
    without being killed (in this process; shared by both kill points)."""
    import pandas as pd

    from framework.ods.bootstrap import run_bootstrap

    dump = tmp_path_factory.mktemp("dump") / "users.parquet"
    pd.DataFrame({"id": list(range(1, 41)), "v": [i * 3 % 17 for i in range(1, 41)]}).to_parquet(dump)
    clean = LakeProject(tmp_path_factory.mktemp("clean"), TABLES)
    clean.write_cdc(_bootstrap_cdc())
    project = clean.project
    run_bootstrap(spark, project, project.ods_table("ods.users"), dump, position=BOOTSTRAP_POSITION)
    clean.ingest(spark)
    return dump, clean


@pytest.mark.parametrize("where", ["before_bootstrap_commit", "inside the commit"])
def test_kill_during_bootstrap_then_rerun(tmp_path_factory: pytest.TempPathFactory, spark: Any, bootstrapped: tuple[Path, LakeProject], where: str) -> None:
    """`lake ingest --bootstrap` killed before its commit or inside it (a new table's bulk insert
    left in flight): a rerun of the bootstrap, then CDC from the hand-off position, equals a run
    that was not killed."""
    dump, clean = bootstrapped
    args = ("ingest", "--bootstrap", "ods.users", "--path", str(dump), "--position", BOOTSTRAP_POSITION)
    lp = LakeProject(tmp_path_factory.mktemp("crashed"), TABLES)
    lp.write_cdc(_bootstrap_cdc())
    target = lp.layout.table("ods.users")
    if where == "before_bootstrap_commit":
        _killed(lp, *args, failpoint="before_bootstrap_commit")
        assert not hudi.table_exists(target)
    else:
        _kill_inside_a_commit(_lake(lp.root, *args), lp.root, existing_only=False)
        assert hudi.completed_instants(spark, target) == []
    proc = _lake(lp.root, *args)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    lp.ingest(spark)
    assert lp.rows(spark, "users") == clean.rows(spark, "users") and len(clean.rows(spark, "users")) == 40 - 4
    assert _snapshot_users(lp, spark) == _snapshot_users(clean, spark)


def _snapshot_users(lp: LakeProject, spark: Any) -> list[tuple]:
    df = lp.raw(spark, "users")
    cols = sorted(c for c in df.columns if not c.startswith("_hoodie") and c != "_ingested_at")
    return sorted(tuple(str(v) for v in r) for r in df.select(*cols).collect())
