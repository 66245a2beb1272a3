"""ODS tombstones: the upgrade of a table written with soft deletes, and the retention of
tombstones (`ods.tombstone_retention_days`): framework/ods/tombstones.py."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from framework.table import hudi, timeline
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


def test_each_tombstone_commit_bounds_its_oldest_entry_and_a_shorter_retention_still_expires(tmp_path: Path, spark: Any) -> None:
    """A tombstone commit records a lower bound of the `_deleted_at` it keeps, so a batch need not
    read the table while nothing can have expired: the bound is never above an entry the table
    holds, and a retention shortened since (nothing recorded assumed it) still expires them."""
    from models.commit_meta import TombstoneMark

    lp = LakeProject(tmp_path, USERS)
    tomb = lp.layout.tombstones("ods.users")

    def bound_and_entries() -> tuple[Any, list[Any]]:
        mark = TombstoneMark.from_meta(timeline.commits(tomb)[-1].lake)
        assert mark is not None and mark.oldest is not None
        held = [r[0] for r in hudi.read(spark, tomb).select(F.expr("timestamp_micros(unix_micros(_deleted_at))")).collect()]
        return mark.oldest.replace(tzinfo=None), held

    lp.write_cdc([*(envelope("c", "shop.users", None, _user(k, f"u{k}"), pos=100 + k) for k in (1, 2, 3)),
                  envelope("d", "shop.users", _user(1, "u1"), None, pos=201)])
    lp.ingest(spark)
    lp.write_cdc([envelope("d", "shop.users", _user(2, "u2"), None, pos=202)])
    lp.ingest(spark)  # within the retention (30 days): the bound is the first delete's time
    oldest, held = bound_and_entries()
    assert len(held) == 2 and oldest == min(held)
    (tmp_path / "lake.yaml").write_text((tmp_path / "lake.yaml").read_text() + "ods: {tombstone_retention_days: 0}\n")
    lp.write_cdc([envelope("d", "shop.users", _user(3, "u3"), None, pos=203)])
    assert lp.ingest(spark).tombstones_expired == 2
    oldest, held = bound_and_entries()
    assert len(held) == 1 and oldest == held[0]


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


def test_a_replay_older_than_an_expired_tombstone_is_refused(tmp_path: Path, spark: Any) -> None:
    """Issue 27 item 7. Events dead-lettered while shop.users was undeclared are replayed after a
    delete's tombstone expired: the one that would re-insert the deleted key is refused (pending,
    with the reason and the fix; the replay says which and how many), the ones lake can still
    order are replayed; each batch counts the tombstones it expired; and the flag lets the user
    replay the refused one on purpose."""
    from click.testing import CliRunner
    from rich.console import Console

    from framework.cli.main import main
    from framework.ods import dead_letter
    from framework.runtime import terminal

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.other, key: [id]}\n", lake_extra="ods: {tombstone_retention_days: 0}\n")
    # Undeclared: dead-lettered. The source: user 1 inserted at 10 (deleted at 30 below), user 4
    # at 5 (updated at 35 below), user 3 at 60.
    held = lp.write_cdc([envelope("c", "shop.users", None, _user(k, f"u{k}"), pos=p) for k, p in ((1, 10), (3, 60), (4, 5))])
    lp.ingest(spark)
    (tmp_path / "layers" / "ods" / "tables.yaml").write_text(USERS)
    lp.write_cdc([envelope("c", "shop.users", None, _user(2, "u2"), pos=20), envelope("d", "shop.users", _user(1, "u1"), None, pos=30),
                  envelope("u", "shop.users", _user(4, "u4"), _user(4, "u4b"), pos=35)])
    assert lp.ingest(spark).tombstones_expired == 0
    lp.write_cdc([envelope("d", "shop.users", _user(2, "u2"), None, pos=50)])  # its tombstone write expires user 1's
    third = lp.ingest(spark)
    assert third.tombstones_expired == 1 and third.batches[0].tables["users"].tombstones_expired == 1
    shown = Console(record=True, width=300)
    terminal.print_ingest_summary(shown, third)
    assert "1 tombstone(s) older than ods.tombstone_retention_days removed (ods.users: 1)" in shown.export_text()

    out = CliRunner().invoke(main, ["--project", str(tmp_path), "dead-letter", "replay"], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    refused = f"cdc/{held.name}:1"
    assert "3 events put back through ingest, 2 marked replayed, 1 dead-lettered again" in flat, flat
    assert "1 refused (ods.users: 1)" in flat and f"e.g. {refused}." in flat and "--allow-expired-tombstones" in flat, flat
    assert sorted((r["id"], r["name"]) for r in lp.rows(spark, "users", ["id", "name"])) == [(3, "u3"), (4, "u4b")]
    pending = {r["loc"]: r["reason"] for r in hudi.read(spark, lp.layout.dead_letter).where("replayed_at is null").collect()}
    assert list(pending) == [refused] and pending[refused].startswith("replay refused, tombstone expired")

    # The user checked the source and wants it back anyway.
    (again,) = dead_letter.replay(spark, lp.project, None, "tombstone expired", lambda names: contextlib.nullcontext(), allow_expired=True)
    assert again.selected == 1 and again.replayed == 1 and not again.refused_expired
    assert sorted(r["id"] for r in lp.rows(spark, "users", ["id"])) == [1, 3, 4]
