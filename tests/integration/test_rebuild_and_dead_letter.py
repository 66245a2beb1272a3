"""`lake ingest --rebuild ods.T` and `lake dead-letter list|replay|purge`, through the CLI in fresh
processes (a SIGKILL in the middle of each included), against the source's final state computed
in Python."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from framework.cli.main import main
from framework.ods import dead_letter
from framework.ods.rebuild import rebuild
from framework.table import hudi
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope
from tests.typed_cdc import BIGINT, INT, STRING, TypedTable

TABLES = """
tables:
  - {source: shop.users, key: [id]}
  - {source: shop.orders, key: [id]}
"""
MODELS = {
    "dws/users_by_city.sql": "select city, count(*) as n, sum(score) as score from ods.users group by city",
    "dwd/vip.sql": "select id, city from ods.users where score >= 10",
}


def lake(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)


class Source:
    """Users and orders of a MySQL source: the envelopes it emits and its rows (the oracle)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, dict[str, Any]]] = {"users": {}, "orders": {}}
        self.pos = 100

    def put(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        self.pos += 10
        before = self.rows[table].get(row["id"])
        self.rows[table][row["id"]] = row
        return envelope("u" if before else "c", f"shop.{table}", before, row, pos=self.pos)

    def drop(self, table: str, k: int) -> dict[str, Any]:
        self.pos += 10
        return envelope("d", f"shop.{table}", self.rows[table].pop(k), None, pos=self.pos)

    def live(self, table: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(sorted(r.items())) for r in self.rows[table].values())


def _stored(spark: Any, lp: LakeProject, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    df = hudi.read(spark, lp.layout.table(table))
    return sorted(tuple(sorted(r.asDict().items())) for r in df.select(*cols).collect())


def _ok(p: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def test_rebuild_one_table_from_the_cdc_then_from_a_dump(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, TABLES).add_models(MODELS)
    src = Source()
    first = lp.write_cdc([src.put("users", {"id": i, "city": "sh" if i % 2 else "bj", "score": i * 3}) for i in range(1, 7)]
                         + [src.put("orders", {"id": 100 + i, "uid": i, "amount": i}) for i in range(1, 4)])
    lp.write_cdc([src.put("users", {"id": 2, "city": "gz", "score": 30}), src.drop("users", 3),
                  src.put("orders", {"id": 101, "uid": 1, "amount": 9})])
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=False)
    orders_before = hudi.completed_instants(spark, lp.layout.table("ods.orders"))
    offsets = sorted(p.name for p in (lp.layout.checkpoint("ods") / "stream" / "offsets").local.iterdir())
    # The table is lost; more CDC arrives that the main stream has not read yet.
    shutil.rmtree(lp.layout.table("ods.users").local)
    lp.write_cdc([src.put("users", {"id": 7, "city": "sh", "score": 12}), src.drop("users", 1),
                  src.put("orders", {"id": 104, "uid": 7, "amount": 4})])

    # Killed after removing what it rebuilds: ingest refuses the table until the rebuild reruns.
    killed = lake(tmp_path, "ingest", "--rebuild", "ods.users", env={"LAKE_FAILPOINT": "after_rebuild_removed"})
    assert killed.returncode == -9, killed.stderr
    refused = lake(tmp_path, "ingest", "--once")
    assert refused.returncode == 1 and "the rebuild of ods.users" in refused.stderr and "lake ingest --rebuild ods.users" in refused.stderr
    out = _ok(lake(tmp_path, "ingest", "--rebuild", "ods.users", "--json"))
    res = json.loads(out.stdout)
    assert res["table"] == "ods.users" and res["rows"] == len(src.rows["users"]) and res["dump_rows"] is None
    assert _stored(spark, lp, "ods.users", ["id", "city", "score"]) == src.live("users")
    # The other table and the main checkpoint are untouched.
    assert hudi.completed_instants(spark, lp.layout.table("ods.orders")) == orders_before
    assert sorted(p.name for p in (lp.layout.checkpoint("ods") / "stream" / "offsets").local.iterdir()) == offsets

    # Models see a fully rebuilt upstream and rebuild, saying why.
    built = {r["model"]: r for r in json.loads(_ok(lake(tmp_path, "build", "--incremental", "--json")).stdout)}
    for m in ("dws.users_by_city", "dwd.vip"):
        assert built[m]["mode"] == "full" and "ods.users was rebuilt after the checkpoint" in built[m]["reason"], built[m]
    lp.ingest(spark)  # the main stream goes on (re-reading the third file is harmless)
    assert _stored(spark, lp, "ods.users", ["id", "city", "score"]) == src.live("users")
    assert _stored(spark, lp, "ods.orders", ["id", "uid", "amount"]) == src.live("orders")

    # A dump instead of CDC the source no longer holds: the first file is gone (retention).
    at_dump = dict(src.rows["users"])
    dump = tmp_path / "users_dump.csv"
    dump.write_text("id,city,score\n" + "".join(f"{r['id']},{r['city']},{r['score']}\n" for r in at_dump.values()))
    position = f"mysql-bin.000001:{src.pos}"
    first.unlink()
    lp.write_cdc([src.put("users", {"id": 2, "city": "sz", "score": 1}), src.put("users", {"id": 8, "city": "bj", "score": 40})])
    rb = rebuild(spark, lp.project, lp.project.ods_table("ods.users"), dump=dump, position=position, fmt="auto")
    assert rb.dump_rows == len(at_dump) and rb.position and rb.dead_letter == 0
    assert _stored(spark, lp, "ods.users", ["id", "city", "score"]) == src.live("users")


def test_dead_letter_replay_after_the_fix(tmp_path: Path, spark: Any) -> None:
    """Events dead-lettered under the old rules (a narrowing the table refused, a table not
    declared yet), the config fixed, a replay killed half-way and rerun: ODS equals the source,
    older replayed events lose to newer rows, a replayed insert of a deleted key stays deleted,
    and a second replay does nothing."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.product, key: [id]}\n")
    p = TypedTable("shop.product", "id", {"id": INT, "name": STRING, "qty": BIGINT})
    extra: dict[int, str] = {}
    lp.write_cdc([p.upsert({"id": i, "name": f"p{i}", "qty": 2**40 + i}) for i in range(1, 5)])
    lp.ingest(spark)
    lines = []
    p.alter("qty", INT)  # the source narrows the column: the table refuses these (BIGINT -> INT)
    lines += [p.upsert({"id": 1, "qty": 7}), p.upsert({"id": 5, "name": "p5", "qty": 5}), p.upsert({"id": 2, "qty": 8})]
    p.alter("qty", BIGINT)
    lines += [p.upsert({"id": 1, "qty": 2**41}), p.delete(5), p.delete(3)]  # newer than the refused ones
    for i in (1, 2):
        extra[i] = f"e{i}"
        lines.append(json.dumps(envelope("c", "shop.extra", None, {"id": i, "v": extra[i]}, pos=5000 + i)))
    lp.write_cdc(lines)
    lp.ingest(spark)
    listed = json.loads(_ok(lake(tmp_path, "dead-letter", "list", "--format", "json")).stdout)
    counts = {(g["source_table"], g["pending"]) for g in listed}
    assert counts == {("shop.product", 3), ("shop.extra", 2)}, listed
    assert any("narrowed from BIGINT to INT" in g["reason"] and "lake dead-letter replay --table ods.product" in g["reason"] for g in listed)

    # The fix: keep the wider type, declare the other table. A replay killed after its ingest.
    (tmp_path / "layers" / "ods" / "tables.yaml").write_text(
        "tables:\n  - {source: shop.product, key: [id], schema_narrowing: keep_wider}\n  - {source: shop.extra, key: [id]}\n")
    killed = lake(tmp_path, "dead-letter", "replay", env={"LAKE_FAILPOINT": "after_replay_ingest"})
    assert killed.returncode == -9, killed.stderr
    out = _ok(lake(tmp_path, "dead-letter", "replay", "--json"))
    done = json.loads(out.stdout)
    assert done[0]["resumed"] and done[0]["selected"] == 5 and done[0]["replayed"] == 5 and done[0]["failed_again"] == 0, done
    assert _stored(spark, lp, "ods.product", ["id", "name", "qty"]) == sorted(tuple(sorted(r.items())) for r in p.live())
    assert sorted((r.id, r.v) for r in hudi.read(spark, lp.layout.table("ods.extra")).collect()) == sorted(extra.items())
    project = lp.project
    again = dead_letter.replay(spark, project, None, None, lambda names: contextlib.nullcontext())
    assert [r.selected for r in again] == [0]  # a second replay does nothing
    listed = [g.model_dump() for g in dead_letter.groups(spark, project, None, None)]
    assert {(g["source_table"], g["pending"], g["replayed"]) for g in listed} == {("shop.product", 0, 3), ("shop.extra", 0, 2)}
    # The table view (in this process: no JVM to start), and purge without and with --yes.
    shown = CliRunner().invoke(main, ["--project", str(tmp_path), "dead-letter", "list", "--reason", "narrowed"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and "shop.product" in shown.output and "ods.product" in shown.output
    assert "cdc/0002.json:1" in shown.output  # a sample: the first refused event's location
    dry = CliRunner().invoke(main, ["--project", str(tmp_path), "dead-letter", "purge", "--table", "ods.extra"])
    assert dry.exit_code == 1 and "2 replayed and 0 pending events match" in dry.output
    done_purge = CliRunner().invoke(main, ["--project", str(tmp_path), "dead-letter", "purge", "--table", "ods.extra", "--yes"])
    assert done_purge.exit_code == 0 and "purged 2 events" in done_purge.output
    assert {g.source_table for g in dead_letter.groups(spark, project, None, None)} == {"shop.product"}


def test_rebuild_from_the_offsets_a_kafka_topic_still_holds(tmp_path: Path, spark: Any, kafka_broker: Any) -> None:
    """With a Kafka source the rebuild reads the table's topic from its earliest offset, under a
    checkpoint of its own: the main checkpoint's offsets and the other table stay as they were.
    Once retention dropped the segment of rows' last events (issue 27 item 4), the rebuild
    refuses, counting them, unless --accept-loss; it reports the rows before and after."""
    topic = f"rb{os.getpid()}.shop"
    kafka_broker.create_topic(topic)
    src = {"kind": "kafka", "bootstrap_servers": kafka_broker.bootstrap_servers, "topics": [topic], "connect_timeout_seconds": 20}
    lp = LakeProject(tmp_path, TABLES, lake_extra="ods:\n  source: " + json.dumps(src) + "\n")
    s = Source()

    def produce(events: list[dict[str, Any]]) -> None:
        kafka_broker.produce(topic, [(json.dumps({"id": e["after" if e["after"] else "before"]["id"]}), json.dumps(e)) for e in events])

    produce([s.put("users", {"id": i, "city": "sh", "score": i}) for i in range(1, 6)] + [s.put("orders", {"id": 1, "uid": 1, "amount": 3})])
    lp.ingest(spark)
    produce([s.put("users", {"id": 2, "city": "bj", "score": 20}), s.drop("users", 4)])
    lp.ingest(spark)
    orders_before = hudi.completed_instants(spark, lp.layout.table("ods.orders"))
    offsets = sorted(p.name for p in (lp.layout.checkpoint("ods") / "stream" / "offsets").local.iterdir())
    shutil.rmtree(lp.layout.table("ods.users").local)
    rb = rebuild(spark, lp.project, lp.project.ods_table("ods.users"), dump=None, position=None, fmt="auto")
    assert rb.rows == len(s.rows["users"]) and rb.dead_letter == 0
    assert _stored(spark, lp, "ods.users", ["id", "city", "score"]) == s.live("users")
    assert hudi.completed_instants(spark, lp.layout.table("ods.orders")) == orders_before
    assert sorted(p.name for p in (lp.layout.checkpoint("ods") / "stream" / "offsets").local.iterdir()) == offsets
    assert [p.name for p in lp.layout.checkpoint("x").parent.local.iterdir()] == ["ods"]  # its own checkpoint is gone

    # Retention drops offsets 0-2: users 1 and 3 were last written there (user 2 at 6, user 5 at 4).
    from confluent_kafka import TopicPartition

    admin = kafka_broker.admin()  # kept: its futures resolve only while the client lives
    (done,) = admin.delete_records([TopicPartition(topic, 0, 3)], operation_timeout=30).values()
    assert done.result(60).low_watermark == 3
    before = hudi.completed_instants(spark, lp.layout.table("ods.users"))
    cli = ["--project", str(tmp_path), "ingest", "--rebuild", "ods.users"]
    refused = CliRunner().invoke(main, cli, env={"COLUMNS": "400"})
    flat = " ".join(refused.output.split())
    assert refused.exit_code == 1 and "would lose 2 of the 4 rows of ods.users" in flat, flat
    assert f"{topic}/0/0" in flat and f"{topic} partition 0 from offset 3" in flat and "--accept-loss" in flat and "--path DUMP" in flat, flat
    assert hudi.completed_instants(spark, lp.layout.table("ods.users")) == before  # untouched
    accepted = CliRunner().invoke(main, [*cli, "--accept-loss"], env={"COLUMNS": "400"})
    flat = " ".join(accepted.output.split())
    assert accepted.exit_code == 0 and "4 rows before, 2 rows after (2 the source no longer held were given up" in flat, flat
    assert _stored(spark, lp, "ods.users", ["id", "city", "score"]) == [r for r in s.live("users") if dict(r)["id"] not in (1, 3)]
    # The table gone: no rows to count; the main checkpoint started at offset 0, the topic now at 3.
    shutil.rmtree(lp.layout.table("ods.users").local)
    gone = CliRunner().invoke(main, cli, env={"COLUMNS": "400"})
    flat = " ".join(gone.output.split())
    assert gone.exit_code == 1 and f"Kafka no longer holds {topic} partition 0 offsets 0 to 2" in flat, flat
