"""Streams and their bookkeeping: the stream id follows Spark's checkpoint (a deleted checkpoint
restarts batch ids at 0), and concurrent ingests of disjoint tables share the dead letter."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from framework.ods.ingest import checkpoint_name
from tests.helpers import LakeProject, envelope

USERS = "tables:\n  - {source: shop.users, key: [id]}\n"


def _lake(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "--project", str(root), *args],
        env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def test_deleting_the_streaming_checkpoint_does_not_skip_new_events(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, USERS)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "v": "a"}, pos=10)])
    lp.ingest(spark)
    ckpt = lp.layout.checkpoint(checkpoint_name(None))
    shutil.rmtree(ckpt / "stream")  # Spark starts over: batch ids from 0 again
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 2, "v": "b"}, pos=20),
                  envelope("u", "shop.users", None, {"id": 1, "v": "A"}, pos=30)])
    s = lp.ingest(spark)
    assert [b.batch_id for b in s.batches] == [0]
    assert s.batches[0].tables["users"].status == "ok"
    assert lp.rows(spark, "users", ["id", "v"]) == [{"id": 1, "v": "A"}, {"id": 2, "v": "b"}]


def test_a_crash_in_batch_0_keeps_the_stream_id(tmp_path: Path, spark: Any) -> None:
    """Spark has written offsets/0 before batch 0 runs: the rerun replays batch 0 under the same
    id, and the table that committed it recognises the replay."""
    lp = LakeProject(tmp_path, USERS)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1}, pos=10)])
    proc = _lake(tmp_path, "ingest", "--once", env={"LAKE_FAILPOINT": "after_table_commit:1"})
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, out
    id_file = lp.layout.checkpoint(checkpoint_name(None)) / "lake_stream_id"
    before = id_file.read_text()
    s = lp.ingest(spark)
    assert id_file.read_text() == before
    assert [(b.batch_id, b.tables["users"].status) for b in s.batches] == [(0, "already_committed")]
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]
