"""ODS reliability: truncates ordered by source position (replays, other streams, arrival order
unlike source order), deletes without an ordering value, bad values that must dead-letter and
never stall a batch, per-version schema rejection, and the dead-letter ratio over every cause."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from framework.errors import IngestFailed
from tests.helpers import LakeProject, envelope

USERS = "tables:\n  - {source: shop.users, key: [id]}\n  - {source: shop.items, key: [id]}\n"


def ids(lp: LakeProject, spark: Any, table: str = "users") -> list[int]:
    return [r["id"] for r in lp.rows(spark, table, ["id"])]


def test_truncate_replayed_later_keeps_rows_newer_than_it(tmp_path: Path, spark: Any) -> None:
    """A window with a truncate, replayed after newer rows arrived (archive replay, fresh
    checkpoint), deletes only what is older than the truncate."""
    lp = LakeProject(tmp_path, USERS)
    window = [
        envelope("c", "shop.users", None, {"id": 1, "name": "a"}, pos=100),
        envelope("t", "shop.users", None, None, pos=120),
        envelope("c", "shop.users", None, {"id": 2, "name": "b"}, pos=130),
    ]
    lp.write_cdc(window)
    lp.ingest(spark)
    assert ids(lp, spark) == [2]
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 3, "name": "c"}, pos=200),
                  envelope("u", "shop.users", {"id": 2, "name": "b"}, {"id": 2, "name": "B"}, pos=210)])
    lp.ingest(spark)
    lp.write_cdc(window)  # the replay, in a later batch
    s = lp.ingest(spark)
    assert lp.rows(spark, "users", ["id", "name"]) == [{"id": 2, "name": "B"}, {"id": 3, "name": "c"}]
    # The replayed insert of id 1 (before the truncate) did not come back either.
    assert s.totals()["users"].truncated == 1


def test_truncate_replayed_by_another_stream(tmp_path: Path, spark: Any) -> None:
    """`--tables` ingests a window first; the full stream later reads the same files again, after
    newer events were written by the `--tables` stream."""
    lp = LakeProject(tmp_path, USERS)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "name": "a"}, pos=100),
                  envelope("t", "shop.users", None, None, pos=120),
                  envelope("c", "shop.users", None, {"id": 2, "name": "b"}, pos=130)])
    lp.ingest(spark, tables=["ods.users"])
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 3, "name": "c"}, pos=200)])
    lp.ingest(spark, tables=["ods.users"])
    lp.ingest(spark)  # the full stream: every file, truncate included
    assert ids(lp, spark) == [2, 3]


def test_truncate_ordered_by_position_not_arrival(tmp_path: Path, spark: Any) -> None:
    """Arrival order differs from source order (Kafka: other partitions). Events after the
    truncate by position survive even if they arrive first; earlier ones are removed even if
    they arrive after it."""
    lp = LakeProject(tmp_path, USERS)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 9, "name": "old"}, pos=50)])
    lp.ingest(spark)
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 3, "name": "after"}, pos=130),
        envelope("t", "shop.users", None, None, pos=120),
        envelope("c", "shop.users", None, {"id": 1, "name": "before"}, pos=100),
        envelope("c", "shop.items", None, {"id": 1}, pos=101),  # another table: untouched
    ])
    s = lp.ingest(spark)
    assert ids(lp, spark) == [3]
    assert ids(lp, spark, "items") == [1]
    assert s.totals()["users"].truncated == 1


def test_key_created_and_truncated_in_one_window_stays_gone(tmp_path: Path, spark: Any) -> None:
    """A key inserted and truncated away within one batch is kept as a delete carrying the
    truncate's position, so a much later replay of its insert cannot bring it back."""
    lp = LakeProject(tmp_path, USERS)
    insert = envelope("c", "shop.users", None, {"id": 5, "name": "short-lived"}, pos=100)
    lp.write_cdc([insert, envelope("t", "shop.users", None, None, pos=120)])
    lp.ingest(spark)
    lp.write_cdc([insert])
    lp.ingest(spark)
    assert ids(lp, spark) == []


def test_truncate_with_ordering_columns(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, """
        tables:
          - {source: shop.users, key: [id], ordering: [v], columns: {v: bigint}}
        """)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "v": 5}, pos=100),
                  envelope("c", "shop.users", None, {"id": 2, "v": 1}, pos=110)])
    lp.ingest(spark)
    window = [envelope("t", "shop.users", None, None, pos=120)]
    lp.write_cdc(window)
    lp.ingest(spark)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "v": 6}, pos=130)])
    lp.ingest(spark)
    lp.write_cdc(window)  # replayed: id 1 is newer than the truncate
    lp.ingest(spark)
    assert lp.rows(spark, "users", ["id", "v"]) == [{"id": 1, "v": 6}]


def test_delete_without_ordering_value_falls_back_to_position(tmp_path: Path, spark: Any) -> None:
    """Postgres REPLICA IDENTITY DEFAULT: the delete's before-image holds the key only."""
    lp = LakeProject(tmp_path, """
        tables:
          - {source: shop.users, key: [id], ordering: [modified], columns: {modified: timestamp}}
        """)
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "name": "a", "modified": "2024-01-01T00:00:00Z"}, pos=100),
                  envelope("c", "shop.users", None, {"id": 2, "name": "b", "modified": "2024-01-01T00:00:00Z"}, pos=110)])
    lp.ingest(spark)
    # Across batches (against the stored row) and within one (against the batch's insert).
    lp.write_cdc([envelope("d", "shop.users", {"id": 1}, None, pos=200),
                  envelope("c", "shop.users", None, {"id": 3, "name": "c", "modified": "2024-01-02T00:00:00Z"}, pos=210),
                  envelope("d", "shop.users", {"id": 3}, None, pos=220)])
    lp.ingest(spark)
    assert ids(lp, spark) == [2]
    # A newer re-insert of a deleted key wins; a replay of the old insert does not.
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "name": "a", "modified": "2024-01-01T00:00:00Z"}, pos=100),
                  envelope("c", "shop.users", None, {"id": 3, "name": "again", "modified": "2024-01-03T00:00:00Z"}, pos=300)])
    lp.ingest(spark)
    assert lp.rows(spark, "users", ["id", "name"]) == [{"id": 2, "name": "b"}, {"id": 3, "name": "again"}]


def test_source_time_out_of_range_is_dead_lettered(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, USERS)
    far = envelope("c", "shop.users", None, {"id": 1}, pos=100, ts=253_402_300_800_000)  # year 10000
    huge = envelope("c", "shop.users", None, {"id": 2}, pos=101, ts=99_999_999_999_999_999)
    lp.write_cdc([far, huge, envelope("c", "shop.users", None, {"id": 3}, pos=102)])
    s = lp.ingest(spark)
    assert ids(lp, spark) == [3]
    assert s.dead_letter == 2
    assert all("source.ts_ms" in d["reason"] and "0001-9999" in d["reason"] for d in lp.dead_letters(spark))


def _mutations(seed: int, n: int) -> list[str]:
    """Envelopes with one field replaced by an arbitrary JSON value, and raw oddities."""
    rng = random.Random(seed)
    odd: list[Any] = [None, "", "x[/]y", "[bold]z", -1, 0, 2**63, -(2**63) - 1, 10**30, 1e308, -1e308, 0.5, True,
                      [], [1, "a"], {}, {"nested": {"a": [1]}}, "9" * 40, "2024-13-45", "\u0000\u202e", "ü" * 50]
    paths = [("op",), ("ts_ms",), ("before",), ("after",), ("source",), ("source", "ts_ms"), ("source", "pos"),
             ("source", "row"), ("source", "file"), ("source", "db"), ("source", "table"), ("source", "lsn"),
             ("after", "id"), ("after", "name"), ("before", "id"), ("source", "snapshot")]
    out = []
    for i in range(n):
        op = rng.choice("cud")
        e = envelope(op, "shop.users", {"id": i % 7, "name": "b"} if op != "c" else None,
                     {"id": i % 7, "name": "a"} if op != "d" else None, pos=1000 + i)
        path = rng.choice(paths)
        node = e
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[path[-1]] = rng.choice(odd)
        text = json.dumps(e)
        if rng.random() < 0.1:
            text = json.dumps({"schema": {"type": "struct"}, "payload": e})
        out.append(text)
    return out + ["null", "[]", '"text"', "{", "{}", '{"payload": 5}', '{"payload": {"op": "c"}}']


def test_arbitrary_values_never_stall_the_batch(tmp_path: Path, spark: Any) -> None:
    """Every message ends as a row, a tombstone or a dead letter with a reason; the batch
    commits, and a rerun finds nothing new."""
    lp = LakeProject(tmp_path, USERS)
    lines = _mutations(7, 300)
    lp.write_cdc(lines)
    s = lp.ingest(spark)
    assert s.events == len(lines)
    dead = lp.dead_letters(spark)
    assert len(dead) == s.dead_letter and all(d["reason"] for d in dead)
    written = sum(t.upserts + t.deletes for t in s.totals().values())
    assert written + s.dead_letter + s.tombstones == len(lines)
    again = lp.ingest(spark)
    assert again.events == 0


def _messages(spark: Any, lines: list[str], batch: int) -> Any:
    rows = [(line, f"f:{i + 1}", f"{batch:012d}{0:06d}{i + 1:09d}", "f") for i, line in enumerate(lines)]
    return spark.createDataFrame(rows, "value string, loc string, arrival string, origin string")


def _typed(op: str, after: dict[str, Any], age_type: str, pos: int) -> str:
    fields = [{"field": "id", "type": "int32", "optional": False}, {"field": "age", "type": age_type, "optional": True}]
    schema = {"type": "struct", "fields": [{"field": "before", "type": "struct", "fields": fields, "optional": True},
                                           {"field": "after", "type": "struct", "fields": fields, "optional": True}]}
    return json.dumps({"schema": schema, "payload": envelope(op, "shop.users", None, after, pos=pos)})


def test_only_versions_the_table_cannot_take_are_dead_lettered(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    lp.write_cdc([_typed("c", {"id": 1, "age": 30}, "int64", 100)])
    lp.ingest(spark)
    lp.write_cdc([_typed("c", {"id": 2, "age": 31}, "int64", 110),
                  _typed("c", {"id": 3, "age": 32}, "int32", 120),  # narrowing: BIGINT -> INT
                  _typed("c", {"id": 4, "age": 33}, "int64", 130)])
    s = lp.ingest(spark)
    assert ids(lp, spark) == [1, 2, 4]
    t = s.totals()["users"]
    assert t.dead_letter == 1 and t.upserts == 2 and "narrowed" in (t.reason or "")
    assert [d["loc"] for d in lp.dead_letters(spark)] == ["cdc/0002.json:2"]


def test_replayed_batch_with_a_widening_is_not_judged_again(tmp_path: Path, spark: Any) -> None:
    """The first run widened INT to BIGINT and committed; its replay (same stream and batch ids,
    as after a crash before Spark's offset commit) must not dead-letter the INT events."""
    from framework.ods.batch import OdsBatchWriter

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n")
    OdsBatchWriter(spark, lp.project, "s1").process(_messages(spark, [_typed("c", {"id": 1, "age": 1}, "int32", 100)], 0), 0)
    batch = [_typed("c", {"id": 2, "age": 2}, "int32", 110), _typed("c", {"id": 3, "age": 2**40}, "int64", 120)]
    OdsBatchWriter(spark, lp.project, "s1").process(_messages(spark, batch, 1), 1)
    replay = OdsBatchWriter(spark, lp.project, "s1").process(_messages(spark, batch, 1), 1)
    assert replay.tables["users"].status == "already_committed"
    assert replay.tables["users"].dead_letter == 0 and lp.dead_letters(spark) == []
    assert ids(lp, spark) == [1, 2, 3]


def test_dead_letter_ratio_counts_decode_failures_per_table(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, """
        tables:
          - {source: shop.users, key: [id], columns: {age: int}}
          - {source: shop.items, key: [id]}
        """, lake_extra="ods:\n  max_dead_letter_ratio: 0.5\n")
    lp.write_cdc([envelope("c", "shop.users", None, {"id": 1, "age": "old"}, pos=1),
                  envelope("c", "shop.users", None, {"id": 2, "age": "older"}, pos=2),
                  envelope("c", "shop.users", None, {"id": 3, "age": 3}, pos=3)]
                 + [envelope("c", "shop.items", None, {"id": i}, pos=10 + i) for i in range(10)])
    # 2 of 13 events are bad for the batch (15 %), but 2 of 3 for ods.users (67 %).
    with pytest.raises(IngestFailed, match=r"ods.users.*2 of 3 events are bad"):
        lp.ingest(spark)
    assert not (lp.layout.table("ods.items") / ".hoodie").local.exists()
    assert not (lp.layout.table("ods.users") / ".hoodie").local.exists()


def _on(server: int | None, e: dict[str, Any], gtid: str | None = None) -> dict[str, Any]:
    if server is not None:
        e["source"]["server_id"] = server
    if gtid is not None:
        e["source"]["gtid"] = gtid
    return e


def test_binlog_restart_after_failover_is_reported_not_lost(tmp_path: Path, spark: Any) -> None:
    """After a failover (another server_id) or RESET MASTER, binlog file numbers start again:
    ordered by position, every later update of an existing key would silently lose."""
    lp = LakeProject(tmp_path, USERS)
    t0 = 1_700_000_000_000
    lp.write_cdc([_on(1, envelope("c", "shop.users", None, {"id": 1, "name": "a"}, pos=9000, file="mysql-bin.000009", ts=t0)),
                  _on(1, envelope("c", "shop.users", None, {"id": 2, "name": "b"}, pos=9100, file="mysql-bin.000009", ts=t0 + 1000))])
    lp.ingest(spark)
    # A long transaction of the same server, replayed: lower position, later time (10 min): fine.
    lp.write_cdc([_on(1, envelope("u", "shop.users", None, {"id": 1, "name": "a"}, pos=8000, file="mysql-bin.000009", ts=t0 + 600_000))])
    s = lp.ingest(spark)
    assert s.dead_letter == 0
    # Failover: server 2 starts at mysql-bin.000001.
    lp.write_cdc([_on(2, envelope("u", "shop.users", {"id": 1}, {"id": 1, "name": "after failover"}, pos=154, file="mysql-bin.000001", ts=t0 + 60_000)),
                  _on(2, envelope("c", "shop.users", None, {"id": 3, "name": "new"}, pos=300, file="mysql-bin.000001", ts=t0 + 61_000))])
    s = lp.ingest(spark)
    assert s.dead_letter == 2
    reasons = {d["reason"] for d in lp.dead_letters(spark)}
    assert len(reasons) == 1 and "binlog position went backwards" in next(iter(reasons)) and "lake ingest --bootstrap ods.users" in next(iter(reasons))
    assert lp.rows(spark, "users", ["id", "name"]) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    # RESET MASTER on the same server, two hours later; and a MariaDB GTID without server_id.
    lp.write_cdc([_on(1, envelope("u", "shop.users", None, {"id": 2, "name": "reset"}, pos=200, file="mysql-bin.000001", ts=t0 + 7_200_000)),
                  _on(None, envelope("u", "shop.users", None, {"id": 2, "name": "maria"}, pos=250, file="mysql-bin.000001", ts=t0 + 7_300_000), gtid="0-7-1234")])
    s = lp.ingest(spark)
    assert s.dead_letter == 2
    # Replays of the old server's older events are not flagged.
    lp.write_cdc([_on(1, envelope("c", "shop.users", None, {"id": 2, "name": "b"}, pos=9100, file="mysql-bin.000009", ts=t0 + 1000))])
    assert lp.ingest(spark).dead_letter == 0


def test_a_table_whose_commit_fails_leaves_the_others_committed_and_the_batch_replayed(tmp_path: Path, spark: Any) -> None:
    """Tables commit concurrently (`ods.commit_threads`): one table's failed commit (here its
    folder cannot be made: a file is in the way) does not stop the others, the micro-batch fails
    and stays unacknowledged, and the rerun commits that table alone, the others once."""
    from framework.table.timeline import completed

    lp = LakeProject(tmp_path, """
        tables:
          - {source: shop.users, key: [id]}
          - {source: shop.items, key: [id]}
          - {source: shop.carts, key: [id]}
        """, lake_extra="ods: {commit_threads: 3}\n")
    events = [envelope("c", f"shop.{t}", None, {"id": i, "v": f"{t}{i}"}, pos=100 * n + i)
              for n, t in enumerate(["users", "items", "carts"]) for i in range(1, 4)]
    events.append(envelope("d", "shop.users", {"id": 2, "v": "users2"}, None, pos=999))
    lp.write_cdc(events)
    blocker = lp.layout.table("ods.items").local
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a table")
    with pytest.raises(Exception, match="ods/items|items"):
        lp.ingest(spark)
    assert ids(lp, spark, "users") == [1, 3]
    assert ids(lp, spark, "carts") == [1, 2, 3]
    blocker.unlink()
    lp.ingest(spark)
    assert ids(lp, spark, "items") == [1, 2, 3]
    assert ids(lp, spark, "users") == [1, 3]
    for t in ("users", "carts", "items"):  # the rerun skipped the tables that had the batch
        assert len(completed(lp.layout.table(f"ods.{t}"))) == 1, t
