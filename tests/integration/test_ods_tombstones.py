"""ODS tombstones: the upgrade of a table written with soft deletes, and the retention of
tombstones (`ods.tombstone_retention_days`): framework/ods/tombstones.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from framework.table import hudi
from tests.helpers import LakeProject, envelope
from tests.integration.test_ods_outside_readers import read_by_path

USERS = "tables:\n  - {source: shop.users, key: [id]}\n"


def _user(k: int, name: str) -> dict[str, Any]:
    return {"id": k, "name": name}


def test_soft_deletes_of_an_older_table_move_to_tombstones(tmp_path: Path, spark: Any) -> None:
    """A table written before tombstones keeps deleted rows as `_deleted` rows at their delete's
    position. Its first batch removes them from the table and keeps their positions as
    tombstones, so a replay of their inserts still stays out."""
    inserts = [envelope("c", "shop.users", None, _user(k, f"u{k}"), pos=100 + k) for k in range(1, 6)]
    deletes = [envelope("d", "shop.users", _user(k, f"u{k}"), None, pos=200 + k) for k in (2, 3)]
    # The rows and positions lake gives these events, from a scratch project (today's lake).
    scratch = LakeProject(tmp_path / "scratch", USERS)
    scratch.write_cdc(inserts + deletes)
    scratch.ingest(spark)
    live = scratch.raw(spark, "users").select("id", "name", "_op", "_event_ts", "_seq", "_ingested_at", "_deleted", "_source")
    gone = hudi.read(spark, scratch.layout.tombstones("ods.users")).select(
        "id", F.lit(None).cast("string").alias("name"), F.lit("d").alias("_op"), F.lit(None).cast("timestamp").alias("_event_ts"),
        "_seq", F.col("_deleted_at").alias("_ingested_at"), F.lit(True).alias("_deleted"), F.lit("old").alias("_source"))
    # The table as lake wrote it before tombstones: soft deletes, no tombstone table, no marker.
    lp = LakeProject(tmp_path / "old", USERS)
    path = lp.layout.table("ods.users")
    opts = hudi.write_options(name="users", key=["id"], ordering="_seq", partition=None)
    hudi.write(live.unionByName(gone), path, opts, {"ods_stream": "old", "ods_batch": "0", "ods_key": "id"})
    assert read_by_path(path) != {(("id", str(k)), ("name", f"u{k}")) for k in (1, 4, 5)}  # what outside readers saw
    # The first batch after the upgrade: a replay of the inserts, and a new row.
    lp.write_cdc(inserts + [envelope("c", "shop.users", None, _user(6, "u6"), pos=300)])
    s = lp.ingest(spark)
    assert s.totals()["users"].replayed == 2
    assert read_by_path(path) == {(("id", str(k)), ("name", f"u{k}")) for k in (1, 4, 5, 6)}
    assert lp.raw(spark, "users").where("_deleted").count() == 0
    tomb = hudi.read(spark, lp.layout.tombstones("ods.users")).select("id", "_seq").collect()
    assert sorted((r.id, r._seq) for r in tomb) == sorted((r.id, r._seq) for r in gone.collect())
    # Later batches still keep them out.
    lp.write_cdc(inserts[1:3])
    lp.ingest(spark)
    assert [r["id"] for r in lp.rows(spark, "users", ["id"])] == [1, 4, 5, 6]


def test_tombstones_older_than_the_retention_are_removed(tmp_path: Path, spark: Any) -> None:
    """With a retention of 0 days, the next tombstone write removes earlier tombstones: a replay
    older than a removed tombstone re-inserts its key (the documented limit), one older than a
    kept tombstone does not."""
    lp = LakeProject(tmp_path, USERS, lake_extra="ods: {tombstone_retention_days: 0}\n")
    ins = [envelope("c", "shop.users", None, _user(k, f"u{k}"), pos=100 + k) for k in (1, 2)]
    lp.write_cdc(ins)
    lp.ingest(spark)
    lp.write_cdc([envelope("d", "shop.users", _user(1, "u1"), None, pos=201)])
    lp.ingest(spark)
    lp.write_cdc([envelope("d", "shop.users", _user(2, "u2"), None, pos=202)])
    lp.ingest(spark)
    tomb = lp.layout.tombstones("ods.users")
    assert [r.id for r in hudi.read(spark, tomb).select("id").collect()] == [2]
    lp.write_cdc(ins)  # the replay
    lp.ingest(spark)
    assert lp.rows(spark, "users", ["id"]) == [{"id": 1}]


def test_a_tombstone_table_whose_first_commit_was_killed_reads_as_empty(tmp_path: Path, spark: Any) -> None:
    """A run killed inside the first commit of a tombstone table leaves its `hoodie.properties`
    and no completed instant, which Hudi reads as a relation without columns. The next batch
    must treat it as no tombstones (it failed: "cannot resolve `id`")."""
    lp = LakeProject(tmp_path, USERS)
    lp.write_cdc([envelope("c", "shop.users", None, _user(k, f"u{k}"), pos=100 + k) for k in (1, 2, 3)])
    lp.write_cdc([envelope("d", "shop.users", _user(3, "u3"), None, pos=203)])
    lp.ingest(spark)
    # What the kill leaves: the table and its instant requested/inflight, not completed.
    timeline = (lp.layout.tombstones("ods.users") / ".hoodie" / "timeline").local
    for done in timeline.glob("*.commit"):
        done.unlink()
    assert not hudi.completed_instants(spark, lp.layout.tombstones("ods.users"))
    lp.write_cdc([envelope("d", "shop.users", _user(1, "u1"), None, pos=201),
                  envelope("c", "shop.users", None, _user(1, "u1"), pos=101)])  # a replay of the insert
    s = lp.ingest(spark)
    assert s.status == "ok", s
    assert lp.rows(spark, "users", ["id"]) == [{"id": 2}]
    # Hudi rolls the killed commit back or keeps its file slice; user 1's tombstone is there either way.
    assert 1 in {r.id for r in hudi.read(spark, lp.layout.tombstones("ods.users")).select("id").collect()}
