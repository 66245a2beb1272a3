"""`lake verify` (issue 44): a model's table against a full build of it from its upstreams as of
the instants its last commit recorded. Built incrementally over a few ODS batches, every model is
equal (row-wise, aggregate with MIN/MAX under deletes on merge-on-read, a history model and a model
reading its history table, a join with a seed, a join with an external Parquet folder); a row changed in a model's Hudi table by plain
Spark (not through lake; a log file of the merge-on-read table) is found, exactly that key and
column, alerted, and `--repair` puts it right through the build path. One project, built once,
shared by the tests in order. Last, an upstream change a build lost (it missed part of an upstream
commit's change, committed the rest and so recorded the commit as read) is found the same way and
repaired."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result
from pyspark.sql import functions as F

from framework.cli.main import main
from framework.runtime import history
from framework.table import kinds, timeline
from framework.table.lake_table import ProjectDefaults
from framework.transform.loader import load_models
from framework.transform.reader import Change, TableReader
from framework.transform.runner import build
from tests.helpers import LakeProject, UsersSource

MODELS = {
    "dwd/users_rw.sql": "select id, city, score * 2 as score2 from ods.users where score >= 0",  # rowwise
    "dwd/users_rw.yaml": "key: [id]\n",
    "dws/city_agg.sql": "select city, count(*) as n, sum(score) as total, avg(score) as mean from ods.users group by city",  # aggregate
    "dws/rw_city.sql": "select city, count(*) as n from dwd.users_rw group by city",  # reads the rowwise model
    # MIN/MAX under deletes, on merge-on-read (log files the snapshot and time-travel reads merge)
    "dws/city_range.sql": "select city, count(*) as n, min(score) as lo, max(score) as hi from ods.users group by city",
    "dws/city_range.yaml": "type: mor\n",
    # a history model (verified on its current rows) and a model reading its history table
    "dwd/users_hist.sql": "select id, city from ods.users",
    "dwd/users_hist.yaml": "key: [id]\nhistory: true\n",
    "dws/moves.sql": "select id, count(*) as versions from dwd.users_hist_history group by id",
    # a join with a seed (a rescan)
    "seed/regions.csv": "city,region\nbj,north\nsh,east\ngz,south\nsz,south\n",
    "dwd/user_region.sql": "select u.id, r.region from ods.users u join seed.regions r on u.city = r.city",
    "dwd/user_region.yaml": "key: [id]\n",
    # an external Parquet folder written by plain Spark (not lake)
    "external/tiers.yaml": "path: ext/tiers\nformat: parquet\ncolumns: {city: string, tier: int}\n",
    "dwd/user_tier.sql": "select u.id, t.tier from ods.users u join external.tiers t on u.city = t.city",
    "dwd/user_tier.yaml": "key: [id]\n",
}
SOURCE: dict[str, UsersSource] = {}  # each project's source, for a later batch
NAMES = ["dwd.users_rw", "dws.city_agg", "dws.rw_city", "dws.city_range", "dwd.users_hist", "dws.moves", "dwd.user_region", "dwd.user_tier"]


def _write_tiers(spark: Any, lp: LakeProject, rows: list[tuple[str, int]]) -> None:
    spark.createDataFrame(rows, "city string, tier int").coalesce(1).write.mode("overwrite").parquet(str(lp.root / "ext" / "tiers"))


@pytest.fixture(scope="module")
def lp(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> LakeProject:
    """Two ODS batches (inserts; then updates, a delete, a row leaving the filter), each followed by
    an incremental build (the first is full); alerts go to a file through a command target."""
    root = tmp_path_factory.mktemp("verify")
    alerts = root / "alerts.jsonl"
    lp = LakeProject(root, "tables:\n  - {source: shop.users, key: [id]}\n",
                     f"alerts:\n  targets: [{{kind: command, command: [sh, -c, 'cat >> {alerts}; echo >> {alerts}']}}]\n")
    lp.add_models(MODELS)
    _write_tiers(spark, lp, [("bj", 1), ("sh", 1), ("gz", 2), ("sz", 3)])
    src = SOURCE[str(root)] = UsersSource()
    batches = [  # a full build, then an incremental one (two builds: the suite's time is a budget)
        [src.put(i, ["bj", "sh", "gz"][i % 3], i * 10) for i in range(1, 13)],
        # a group move, a move and new values, a row leaving the filter (gz's minimum), a delete,
        # inserts into a new group and an old one
        [src.put(2, "sh", 5), src.put(4, "bj", 40), src.put(8, "gz", -2), src.delete(7), src.put(20, "sz", 3),
         src.put(3, "sz", 8), src.put(21, "gz", 1)],
    ]
    for events in batches:
        lp.write_cdc(events)
        lp.ingest(spark)
        results = build(spark, lp.project, ["seed.regions", *NAMES], [], incremental=True)
        assert all(r.mode != "failed" for r in results), results
    modes = {r.model: r.mode for r in results}
    # the last build was incremental
    assert {modes[m] for m in ("dwd.users_rw", "dws.city_agg", "dws.city_range", "dwd.users_hist")} == {"incremental"}, modes
    return lp


def lake(lp: LakeProject, *args: str) -> Result:
    return CliRunner().invoke(main, ["--project", str(lp.root), *args], catch_exceptions=False, env={"COLUMNS": "200"})


def verified(r: Result) -> dict[str, dict[str, Any]]:
    return {v["model"]: v for v in json.loads(r.output)}


def test_incremental_builds_verify_equal(lp: LakeProject) -> None:
    r = lake(lp, "verify", *NAMES, "--json")
    assert r.exit_code == 0, r.output
    out = verified(r)
    assert {m: v["status"] for m, v in out.items()} == dict.fromkeys(NAMES, "equal")
    agg = out["dws.city_agg"]
    assert agg["table_rows"] == agg["full_rows"] == 4 and agg["sampled"] is None  # bj sh gz sz
    assert agg["upstream"]["ods.users"] == timeline.completed(lp.layout.table("ods.users"))[-1].completed
    rec = history.runs(lp.layout, 1)[0]
    assert rec.command == "verify" and rec.status == "ok" and sorted(v.model for v in rec.verified) == sorted(NAMES)
    seed = verified(lake(lp, "verify", "seed.regions", "--json"))["seed.regions"]
    assert seed["status"] == "skipped", seed  # a seed is its file: nothing to build it from


def test_drift_is_found_alerted_and_repaired(lp: LakeProject, spark: Any) -> None:
    _inject(spark, lp, "dwd.users_rw", "id", 5, "score2", 999)
    _inject(spark, lp, "dws.city_range", "city", "gz", "hi", 1000)  # a log file of the merge-on-read table
    r = lake(lp, "verify", "dwd.users_rw", "dws.city_agg", "dws.city_range", "--json")
    assert r.exit_code == 1, r.output
    rw = verified(r)["dwd.users_rw"]
    assert (rw["status"], rw["missing"], rw["extra"], rw["changed"], rw["columns"]) == ("differs", 0, 0, 1, {"score2": 1})
    (s,) = rw["samples"]
    assert s["key"] == {"id": 5} and s["table"]["score2"] == 999 and s["full"]["score2"] == 100
    assert verified(r)["dws.city_agg"]["status"] == "equal"
    mor = verified(r)["dws.city_range"]
    assert (mor["status"], mor["changed"], mor["columns"], mor["samples"][0]["key"]) == ("differs", 1, {"hi": 1}, {"city": "gz"}), mor
    alerts = [json.loads(line) for line in (lp.root / "alerts.jsonl").read_text().splitlines() if line.strip()]
    assert sorted((a["event"], a["subject"], a["status"]) for a in alerts) == [("verify_failed", "dwd.users_rw", "firing"),
                                                                              ("verify_failed", "dws.city_range", "firing")]
    assert "1 changed" in alerts[0]["reason"] and ("score2" in alerts[0]["reason"] or "hi" in alerts[0]["reason"])

    fixed = lake(lp, "verify", "dwd.users_rw", "--repair", "--json")
    assert fixed.exit_code == 1, fixed.output  # it differed; the run says so and repaired it
    out = verified(fixed)
    assert out["dwd.users_rw"]["repaired"] is True
    assert out["dws.rw_city"]["status"] == "equal"  # its reader, verified after it
    last = timeline.last_commit(lp.layout.table("dwd.users_rw"))
    assert last is not None and last.lake["note"] == "repair after verify: 1 keys differed"
    rows = {r["id"]: r["score2"] for r in spark.read.format("hudi").load(str(lp.layout.table("dwd.users_rw"))).collect()}
    assert rows[5] == 100
    again = lake(lp, "verify", "dwd.users_rw", "--json")
    assert again.exit_code == 0 and verified(again)["dwd.users_rw"]["status"] == "equal", again.output
    mor_fixed = lake(lp, "verify", "dws.city_range", "--repair", "--json")
    assert verified(mor_fixed)["dws.city_range"]["repaired"] is True, mor_fixed.output
    assert lake(lp, "verify", "dws.city_range").exit_code == 0
    shown = lake(lp, "runs")
    assert "verify" in shown.output and "verified" in shown.output


def test_an_external_folder_that_changed_since_the_build_is_not_compared(lp: LakeProject, spark: Any) -> None:
    """A Parquet folder has no past to read: once its files changed, a full build as of the
    checkpoint cannot be made, and verify says so instead of reporting drift that is not there."""
    _write_tiers(spark, lp, [("bj", 9), ("sh", 9), ("gz", 9), ("sz", 9)])
    r = lake(lp, "verify", "dwd.user_tier", "dwd.user_region", "--json")
    out = verified(r)
    assert out["dwd.user_region"]["status"] == "equal", out
    tier = out["dwd.user_tier"]
    assert tier["status"] == "skipped" and "external.tiers changed since its last build" in tier["reason"], tier


def test_sample_compares_part_of_the_keys(lp: LakeProject) -> None:
    r = lake(lp, "verify", "dwd.users_rw", "--sample", "50%", "--json")
    assert r.exit_code == 0, r.output
    v = verified(r)["dwd.users_rw"]
    assert v["status"] == "equal" and v["sampled"] == 0.5
    assert 0 < v["table_rows"] < 12  # 12 users pass the filter; about half are compared
    text = lake(lp, "verify", "dwd.users_rw", "--sample", "50%")
    assert "50.00% sample of keys" in text.output
    bad = lake(lp, "verify", "dwd.users_rw", "--sample", "0%")
    assert bad.exit_code == 1 and "outside (0%, 100%]" in bad.output


def _inject(spark: Any, lp: LakeProject, model: str, key_column: str, key: Any, column: str, value: int) -> None:
    """Upsert one changed row straight into the model's Hudi table with plain Spark (no lake)."""
    path = str(lp.layout.table(model))
    # The table's own Hudi settings (record key, key generator, table name), so Hudi takes the write;
    # no lake commit metadata, no gate, no checkpoint: a foreign writer.
    options = kinds.model(lp.layout, ProjectDefaults.of(lp.project), model, load_models(lp.project)[model].config).options("upsert")
    row = spark.read.format("hudi").load(path).where(F.col(key_column) == key)
    row = row.select(*[c for c in row.columns if not c.startswith("_hoodie_")]).withColumn(column, F.lit(value).cast(dict(row.dtypes)[column]))
    row.write.format("hudi").options(**options).mode("append").save(path)


def test_an_upstream_change_a_build_lost_is_found_and_repaired(lp: LakeProject, spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that lost part of an upstream commit's change (a change feed cleaned too early, a
    bug) and committed the rest records that commit's instant as read: its table then lacks the
    lost change while its checkpoint says it has it, so later incremental builds never bring it.
    Verify's full build as of that instant has it."""
    src = SOURCE[str(lp.root)]
    lp.write_cdc([src.put(1, "bj", 77), src.put(30, "sz", 4)])  # a changed row and a new one
    lp.ingest(spark)
    real = TableReader.change

    def lossy(self: TableReader, name: str, key: list[str], begin: str, end: str) -> Change:
        c = real(self, name, key, begin, end)
        if name != "ods.users":
            return c
        return Change(before=c.before.where("id <> 1"), after=c.after.where("id <> 1"), keys=c.keys.where("id <> 1"))

    monkeypatch.setattr(TableReader, "change", lossy)
    (res,) = build(spark, lp.project, ["dwd.users_rw"], [], incremental=True)
    monkeypatch.undo()
    assert (res.mode, res.rows_written) == ("incremental", 1), res  # id 30 only
    ods_now = timeline.completed(lp.layout.table("ods.users"))[-1].completed
    r = lake(lp, "verify", "dwd.users_rw", "--json")
    assert r.exit_code == 1, r.output
    v = verified(r)["dwd.users_rw"]
    assert v["upstream"]["ods.users"] == ods_now  # the checkpoint says the change was read
    assert (v["status"], v["missing"], v["extra"], v["changed"], v["columns"]) == ("differs", 0, 0, 1, {"city": 1, "score2": 1}), v
    (sample,) = v["samples"]
    assert sample["key"] == {"id": 1} and (sample["table"]["score2"], sample["full"]["score2"]) == (20, 154)
    again = build(spark, lp.project, ["dwd.users_rw"], [], incremental=True)
    assert again[0].rows_written == 0  # an incremental build never brings it back
    fixed = verified(lake(lp, "verify", "dwd.users_rw", "--repair", "--json"))["dwd.users_rw"]
    assert fixed["repaired"] is True, fixed
    rows = {r["id"]: r["score2"] for r in spark.read.format("hudi").load(str(lp.layout.table("dwd.users_rw"))).collect()}
    assert (rows[1], rows[30]) == (154, 8)
    assert lake(lp, "verify", "dwd.users_rw").exit_code == 0
