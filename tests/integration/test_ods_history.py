"""History tables (`history: true`, SCD type 2): `ods.<name>_history` holds one row per version of
each key with its validity, right where snapshots are wrong: an event arriving late splices in at
its source position, a replayed file adds nothing, a delete then a re-insert are two lives, a
truncate closes every open version (also one an event of the same micro-batch opened before it),
and a crash between the history's commit and the table's converges. A model joins the history
point-in-time and builds incrementally. Oracle: versions computed in Python from the events this
test wrote, in source order, not lake's code."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

TS0 = 1_700_000_000_000


def _ev(op: str, uid: int, pos: int, device: str | None = None) -> dict[str, Any]:
    row = {"id": uid, "device": device}
    after = row if op in ("c", "u") else None
    before = row if op == "d" else None
    return envelope(op, "shop.users", before, after, pos=pos, ts=TS0 + pos * 1000) if op != "t" else \
        envelope("t", "shop.users", None, None, pos=pos, ts=TS0 + pos * 1000)


def _when(pos: int) -> datetime:
    return datetime.fromtimestamp((TS0 + pos * 1000) / 1000, tz=timezone.utc).replace(tzinfo=None)


def oracle(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Versions from the events: each distinct (key, position) once, in position order; a
    truncate deletes every key live before it."""
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    truncates = []
    for e in events:
        pos = e["source"]["pos"]
        if e["op"] == "t":
            truncates.append(pos)
            continue
        img = e["after"] or e["before"]
        seen[(img["id"], pos)] = e
    by_key: dict[int, list[tuple[int, bool, str | None]]] = {}
    for (uid, pos), e in seen.items():
        by_key.setdefault(uid, []).append((pos, e["op"] == "d", (e["after"] or e["before"])["device"]))
    for t in truncates:
        for events_of in by_key.values():
            before = sorted(x for x in events_of if x[0] < t)
            if before and not before[-1][1]:
                events_of.append((t, True, None))
    out = []
    for uid, evs in by_key.items():
        evs.sort()
        for i, (pos, deleted, device) in enumerate(evs):
            if deleted:
                continue
            nxt = evs[i + 1] if i + 1 < len(evs) else None
            out.append((uid, device, _when(pos), _when(nxt[0]) if nxt else None, nxt is None, bool(nxt and nxt[1])))
    return sorted(out, key=lambda r: (r[0], r[2]))


def history(spark: Any, lp: LakeProject) -> list[tuple[Any, ...]]:
    df = spark.read.format("hudi").load(str(lp.layout.table("ods.users_history"))).where("NOT _deleted")
    rows = df.select("id", "device", "_valid_from", "_valid_to", "_is_current", "_ended_by_delete").collect()
    return sorted((tuple(r) for r in rows), key=lambda r: (r[0], r[2] or datetime.min))


ODS = """
tables:
  - {source: shop.users, key: [id], history: true}
  - {source: shop.orders, key: [oid], columns: {at: timestamp}}
"""
PIT = ("select o.oid, o.uid, h.device from ods.orders o join ods.users_history h on o.uid = h.id "
       "and o.at >= h._valid_from and (h._valid_to is null or o.at < h._valid_to)")


def _order(oid: int, uid: int, pos: int) -> dict[str, Any]:
    return envelope("c", "shop.orders", None, {"oid": oid, "uid": uid, "at": _when(pos).isoformat(sep=" ")}, pos=pos)


def test_history_splices_late_replayed_and_truncated_events(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS).add_models({"dwd/order_device.sql": PIT, "dwd/order_device.yaml": "key: [oid]\n"})
    first = [_ev("c", 1, 10, "ios"), _ev("c", 2, 20, "android"), _ev("u", 1, 30, "web"), _ev("d", 2, 40), _ev("c", 2, 50, "ios"),
             _ev("c", 3, 60, "web"), _order(1, 1, 15), _order(2, 1, 35), _order(3, 2, 55)]
    lp.write_cdc(first)
    lp.ingest(spark)
    sent = [e for e in first if e["source"]["table"] == "users"]
    assert history(spark, lp) == oracle(sent)
    build(spark, lp.project, [], [], incremental=True)

    # A late update of key 1 between its two versions; the first file again (a replay); an update.
    late = [_ev("u", 1, 25, "mac"), _ev("u", 3, 70, "ios"), _order(4, 1, 27), _order(5, 3, 75)]
    lp.write_cdc(late)
    lp.write_cdc(first, name="replayed.json")
    lp.ingest(spark)
    sent += [e for e in late if e["source"]["table"] == "users"]
    assert history(spark, lp) == oracle(sent)

    # One micro-batch: key 3 updated, then the table truncated, then key 4 created. A crash after
    # the history's commit and before the table's: the rerun converges.
    third = [_ev("u", 3, 75, "android"), _ev("t", 0, 80), _ev("c", 4, 90, "web")]
    lp.write_cdc(third)
    crashed = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "ingest"],
                             env={**os.environ, "LAKE_FAILPOINT": "after_history_commit@ods.users_history"},
                             capture_output=True, text=True, timeout=600)
    assert crashed.returncode != 0, crashed.stdout + crashed.stderr
    lp.ingest(spark)
    sent += third
    assert history(spark, lp) == oracle(sent)
    assert lp.rows(spark, "users") == [{"id": 4, "device": "web"}]

    # A late update of key 1, older than the truncate that deleted it: the ODS table drops it
    # (its tombstone), the history still takes it between the versions around it.
    lp.write_cdc([_ev("u", 1, 27, "tv")])
    lp.ingest(spark)
    sent += [_ev("u", 1, 27, "tv")]
    assert history(spark, lp) == oracle(sent)
    assert lp.rows(spark, "users") == [{"id": 4, "device": "web"}]

    # The point-in-time join, built incrementally, equals plain Spark's over the same tables.
    results = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert results["dwd.order_device"].mode == "incremental", results["dwd.order_device"]
    got = sorted(tuple(r) for r in spark.read.format("hudi").load(str(lp.layout.table("dwd.order_device"))).select("oid", "uid", "device").collect())
    hist = spark.read.format("hudi").load(str(lp.layout.table("ods.users_history"))).where("NOT _deleted")
    orders = lp.raw(spark, "orders").where("NOT _deleted")
    want = (orders.alias("o").join(hist.alias("h"), (F.col("o.uid") == F.col("h.id")) & (F.col("o.at") >= F.col("h._valid_from"))
                                   & (F.col("h._valid_to").isNull() | (F.col("o.at") < F.col("h._valid_to"))))
            .select("o.oid", "o.uid", "h.device"))
    assert got == sorted(tuple(r) for r in want.collect())
    assert dict((r[0], r[2]) for r in got) == {1: "ios", 2: "web", 3: "ios", 4: "tv", 5: "android"}


def test_a_bootstrap_gives_each_key_its_first_version(tmp_path: Path, spark: Any) -> None:
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id], history: true}\n")
    dump = tmp_path / "users.csv"
    dump.write_text("id,device\n1,ios\n2,web\n")
    run_bootstrap(spark, lp.project, lp.project.ods_table("ods.users"), dump, position="mysql-bin.000001:5")
    lp.write_cdc([_ev("u", 1, 10, "mac"), _ev("d", 2, 20)])
    lp.ingest(spark)
    assert history(spark, lp) == [(1, "ios", None, _when(10), False, False), (1, "mac", _when(10), None, True, False),
                                  (2, "web", None, _when(20), False, True)]


def test_a_models_history_follows_its_builds(tmp_path: Path, spark: Any) -> None:
    """`history: true` on a model: one version per build that changed a row, valid from that
    build's commit until the next one's; a build with history switched off is taken by the next
    one (the path a crash between the two commits takes). Oracle: the source rows per build."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n").add_models(
        {"dwd/users_dev.sql": "select id, device from ods.users", "dwd/users_dev.yaml": "history: true\n",
         # A model reading the history: versions per user (the aggregate strategy over its changes).
         "dws/dev_versions.sql": "select id, count(*) as versions from dwd.users_dev_history group by id"})
    states: list[dict[int, str]] = []
    modes: list[str] = []

    def round_(events: list[dict[str, Any]]) -> None:
        lp.write_cdc(events)
        lp.ingest(spark)
        modes.extend(f"{r.mode}: {r.reason}" for r in build(spark, lp.project, [], [], incremental=True) if r.model == "dws.dev_versions")
        states.append({r["id"]: r["device"] for r in lp.rows(spark, "users")})

    round_([_ev("c", 1, 10, "ios"), _ev("c", 2, 20, "web")])
    round_([_ev("u", 1, 30, "mac"), _ev("d", 2, 40), _ev("c", 3, 50, "ios")])
    reader = tmp_path / "layers" / "dws" / "dev_versions.sql"
    sql = reader.read_text()
    reader.unlink()  # with history off there is no history to read: a model reading it is a config error
    (tmp_path / "layers" / "dwd" / "users_dev.yaml").write_text("history: false\n")
    round_([_ev("u", 3, 60, "web")])
    (tmp_path / "layers" / "dwd" / "users_dev.yaml").write_text("history: true\n")
    reader.write_text(sql)
    round_([_ev("c", 4, 70, "web")])

    df = spark.read.format("hudi").load(str(lp.layout.table("dwd.users_dev_history"))).where("NOT _deleted")
    rows = sorted((tuple(r) for r in df.select("id", "device", "_valid_from", "_valid_to", "_is_current", "_ended_by_delete").collect()),
                  key=lambda r: (r[0], r[2]))
    builds = sorted({r[2] for r in rows})
    assert len(builds) == 4  # every build changed a row: one start time each
    expected = []
    for uid in sorted({k for s in states for k in s}):
        lives = [(i, s.get(uid)) for i, s in enumerate(states)]
        versions = [(i, v) for n, (i, v) in enumerate(lives) if v is not None and (n == 0 or lives[n - 1][1] != v)]
        for i, v in versions:
            end = next((k for k in range(i + 1, len(states)) if states[k].get(uid) != v), None)
            expected.append((uid, v, builds[i], None if end is None else builds[end], end is None, end is not None and uid not in states[end]))
    assert rows == sorted(expected, key=lambda r: (r[0], r[2]))
    counts = {r["id"]: r["versions"] for r in spark.read.format("hudi").load(str(lp.layout.table("dws.dev_versions"))).collect()}
    want: dict[int, int] = {}
    for r in expected:
        want[r[0]] = want.get(r[0], 0) + 1
    assert counts == want and any(m.startswith("incremental") for m in modes), (counts, modes)
