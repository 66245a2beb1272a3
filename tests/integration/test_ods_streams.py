"""Streams and their bookkeeping: the stream id follows Spark's checkpoint (a deleted checkpoint
restarts batch ids at 0), and concurrent ingests of disjoint tables share the dead letter."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
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
    ckpt = lp.layout.checkpoint(checkpoint_name(None)).local
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
    id_file = (lp.layout.checkpoint(checkpoint_name(None)) / "lake_stream_id").local
    before = id_file.read_text()
    s = lp.ingest(spark)
    assert id_file.read_text() == before
    assert [(b.batch_id, b.tables["users"].status) for b in s.batches] == [(0, "already_committed")]
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]


def test_concurrent_ingests_of_disjoint_tables_share_the_dead_letter(tmp_path: Path, spark: Any) -> None:
    """Two `lake ingest --tables` processes reach their dead-letter write together (a pause point
    holds both until both are there): both succeed and every bad event is in it once."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n  - {source: shop.orders, key: [id]}\n")
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1}, pos=1),
        envelope("c", "shop.orders", None, {"id": 10}, pos=2),
        "{malformed",                                                     # dead for both streams
        envelope("c", "shop.nobody", None, {"id": 1}, pos=3),            # undeclared: both streams
        envelope("c", "shop.users", None, {"name": "no id"}, pos=4),     # the users stream's
        envelope("c", "shop.orders", None, {"name": "no id"}, pos=5),    # the orders stream's
    ], name="f.json")
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {"LAKE_PAUSE": f"before_dead_letter_lock:{pause}"}
    procs = [_lake(tmp_path, "ingest", "--once", "--tables", t, env=env) for t in ("users", "orders")]
    try:
        deadline = time.monotonic() + 300
        while len(list(pause.glob("before_dead_letter_lock.*"))) < 2:
            assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs if p.poll() is not None]
            assert time.monotonic() < deadline, "the ingests did not reach their dead-letter writes"
            time.sleep(0.2)
        (pause / "go").touch()
        outs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs
    dead = sorted((d["loc"], d["reason"]) for d in lp.dead_letters(spark))
    assert dead == [
        ("cdc/f.json:3", "malformed JSON"),
        ("cdc/f.json:4", "table shop.nobody is not declared in layers/ods/"),
        ("cdc/f.json:5", "missing or NULL key column (id)"),
        ("cdc/f.json:6", "missing or NULL key column (id)"),
    ]
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]
    assert lp.rows(spark, "orders", ["id"]) == [{"id": 10}]


def test_a_replayed_batch_skips_the_dead_letter_after_another_streams_commit(tmp_path: Path, spark: Any) -> None:
    """The replay check looks for this stream's commit anywhere, not only in the last commit."""
    from framework.ods.batch import OdsBatchWriter
    from framework.table import hudi

    lp = LakeProject(tmp_path, USERS)

    def msgs(loc: str) -> Any:
        return spark.createDataFrame([("{bad", loc, "0" * 27, "cdc/f.json")], "value string, loc string, arrival string, origin string")

    a = OdsBatchWriter(spark, lp.project, "stream-a")
    a.process(msgs("cdc/a.json:1"), 0)
    OdsBatchWriter(spark, lp.project, "stream-b").process(msgs("cdc/b.json:1"), 0)
    before = hudi.completed_instants(spark, lp.layout.dead_letter)
    a.process(msgs("cdc/a.json:1"), 0)  # stream a's batch 0 again, as after a crash
    assert hudi.completed_instants(spark, lp.layout.dead_letter) == before
    assert [d["loc"] for d in lp.dead_letters(spark)] == ["cdc/a.json:1", "cdc/b.json:1"]
