"""Commit metadata records (models/commit_meta.py) write exactly the `_lake_*` entries earlier
versions wrote (the golden texts below are what those versions put in commits), read them back,
and fold a table's commits into its state; `LakeTable.settle` removes a table only when nothing
of it ever completed. No Spark."""

from __future__ import annotations

import json
from pathlib import Path

from framework.runtime.location import Location
from framework.table.lake_table import LakeTable, ProjectDefaults, TableSpec
from models.commit_meta import BatchMark, HighWater, ModelCheckpoint, OdsCommit


def test_ods_batch_mark_writes_the_keys_and_texts_of_earlier_versions() -> None:
    hw = HighWater(server="1", pos="00000000010000000042", ts_ms=1700000000000)
    mark = OdsCommit(stream="s1", batch=3, key=["id", "k"], tombstones=True, high_water=hw, event_ts_max=1700000000123)
    assert mark.to_meta() == {"ods_stream": "s1", "ods_batch": "3", "ods_key": "id,k", "ods_tombstones": "1",
                              "ods_high_water": '{"server":"1","pos":"00000000010000000042","ts_ms":1700000000000}',
                              "ods_event_ts_max": "1700000000123"}
    assert OdsCommit.from_meta(mark.to_meta()) == mark
    assert BatchMark(stream="s1", batch=3).to_meta() == {"ods_stream": "s1", "ods_batch": "3"}
    assert BatchMark.from_meta({"ods_stream": "s1"}) == BatchMark(stream="s1", batch=-1) and BatchMark.from_meta({}) is None


def test_a_tables_commits_fold_into_its_state() -> None:
    boot = OdsCommit.from_meta({"bootstrap_rows": "5", "bootstrap_source": "d.csv", "ods_tombstones": "1", "bootstrap_watermark": "f:1"})
    first = OdsCommit.from_meta({"ods_stream": "s", "ods_batch": "0", "ods_key": "id"})
    later = OdsCommit.from_meta({"ods_stream": "s", "ods_batch": "1"})
    state = boot.then(first).then(later)
    assert (state.stream, state.batch, state.key, state.tombstones, state.bootstrap_watermark) == ("s", 1, ["id"], True, "f:1")
    carried = state.carried().model_copy(update={"rewritten": "d DATE → TIMESTAMP"}).to_meta()
    assert carried == {"ods_stream": "s", "ods_batch": "1", "ods_key": "id", "ods_tombstones": "1", "bootstrap_watermark": "f:1",
                       "ods_rewritten": "d DATE → TIMESTAMP"}


def test_model_checkpoint_writes_the_keys_and_texts_of_earlier_versions() -> None:
    rec = ModelCheckpoint(checkpoint={"ods.b": "2", "ods.a": "1"}, fingerprint="f", metadata="m", strategy="aggregate", mode="full",
                          hidden="-", counts_unknown="this")
    meta = rec.to_meta()
    assert meta["ckpt"] == json.dumps({"ods.b": "2", "ods.a": "1"}, sort_keys=True) == '{"ods.a": "1", "ods.b": "2"}'
    assert meta == {"ckpt": meta["ckpt"], "fingerprint": "f", "metadata": "m", "strategy": "aggregate", "mode": "full", "hidden": "-",
                    "counts_unknown": "this"}
    assert ModelCheckpoint.from_meta(meta) == rec and ModelCheckpoint.from_meta({"fingerprint": "f"}) is None


def test_settle_removes_only_a_table_nothing_of_which_completed(tmp_path: Path) -> None:
    table = LakeTable(TableSpec("ods", "t", ("id",)), Location.parse(tmp_path / "ods" / "t"), ProjectDefaults())
    tl = tmp_path / "ods" / "t" / ".hoodie" / "timeline"
    (tl / "history").mkdir(parents=True)
    (tl / "20240101000000000.commit.requested").write_text("")
    assert table.settle() and not (tmp_path / "ods" / "t").exists()  # no hoodie.properties, nothing completed
    (tl / "history").mkdir(parents=True)
    (tl.parent / "hoodie.properties").write_text("hoodie.table.name=t\n")
    (tl / "20240101000000000_20240101000000100.rollback").write_text("")
    assert not table.settle() and table.exists()  # something completed once: never removed
    assert not table.committed()
