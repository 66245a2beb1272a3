"""Model tables hold only the model's rows, as any Hudi reader sees them: groups HAVING or a
`drop` check hides live in `_lake/hidden/<layer>_<name>` with their state (DESIGN.md "Outside
readers"). Every model table is read by path with hudi-rs (PyPI `hudi`, no Spark, no lake) and
compared with the models' results computed in Python from the source rows the test sent."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from framework.runtime.location import Location
from framework.table import hudi
from framework.transform.runner import build
from tests.helpers import LakeProject, UsersSource

ODS = """
tables:
  - {source: shop.users, key: [id]}
"""
MODELS = {
    # HAVING hides the cities with one user.
    "dws/city_stats.sql": "select city, count(*) as n, sum(score) as score from ods.users group by city having count(*) > 1",
    # A `drop` check hides the cities whose lowest score is negative.
    "dws/city_low.sql": "select city, count(*) as n, min(score) as low from ods.users group by city",
    "dws/city_low.yaml": "checks:\n  - between: {column: low, min_value: 0}\n    severity: drop\n",
    # Downstream of the HAVING model: a group turning hidden must reach them as a delete.
    "dws/by_size.sql": "select n, count(*) as cities, sum(score) as score from dws.city_stats group by n",
    "dws/big_cities.sql": "select city, n from dws.city_stats where n > 2",
}


class Source(UsersSource):
    """The users the test sent, as the source database holds them, and CDC events for them."""

    def expected(self) -> dict[str, set[tuple[Any, ...]]]:
        """Every model's rows, computed here from the users (not by lake, not by Spark)."""
        by_city: dict[str, list[int]] = defaultdict(list)
        for city, score in self.users.values():
            by_city[city].append(score)
        stats = {(c, len(s), sum(s)) for c, s in by_city.items() if len(s) > 1}
        sizes: dict[int, list[int]] = defaultdict(list)
        for _c, n, score in stats:
            sizes[n].append(score)
        return {
            "dws.city_stats": stats,
            "dws.city_low": {(c, len(s), min(s)) for c, s in by_city.items() if min(s) >= 0},
            "dws.by_size": {(n, len(s), sum(s)) for n, s in sizes.items()},
            "dws.big_cities": {(c, n) for c, n, _s in stats if n > 2},
        }

    def hidden(self) -> dict[str, set[tuple[Any, ...]]]:
        """The groups each aggregate model hides (its hidden-groups table's visible columns)."""
        by_city: dict[str, list[int]] = defaultdict(list)
        for city, score in self.users.values():
            by_city[city].append(score)
        return {"dws.city_stats": {(c, len(s), sum(s)) for c, s in by_city.items() if len(s) <= 1},
                "dws.city_low": {(c, len(s), min(s)) for c, s in by_city.items() if min(s) < 0}}


COLUMNS = {"dws.city_stats": ("city", "n", "score"), "dws.city_low": ("city", "n", "low"), "dws.by_size": ("n", "cities", "score"),
           "dws.big_cities": ("city", "n")}


def read_by_path(path: Location | Path, columns: tuple[str, ...]) -> set[tuple[Any, ...]]:
    """The rows hudi-rs reads from the table at `path` (a snapshot), as tuples of `columns`."""
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(path)).build()
    rows = [r for batch in table.read() for r in batch.to_pylist()]
    assert all(set(r) - set(columns) <= {c for c in r if c.startswith("_")} for r in rows), rows[:1]
    out = [tuple(r[c] for c in columns) for r in rows]
    assert len(out) == len(set(out)), out  # one row per group
    return set(out)


def assert_tables(lp: LakeProject, src: Source) -> None:
    want = src.expected()
    for model, cols in COLUMNS.items():
        assert read_by_path(lp.layout.table(model), cols) == want[model], model
    for model, rows in src.hidden().items():
        path = lp.layout.hidden(model)
        assert (read_by_path(path, COLUMNS[model]) if hudi.table_exists(path) else set()) == rows, f"{model} (hidden groups)"


def _round(spark: Any, lp: LakeProject, events: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    lp.write_cdc(events)
    lp.ingest(spark)
    res = {r.model: r for r in build(spark, lp.project, [], [], **{"incremental": True, **kw})}
    assert not [(m, r.reason) for m, r in res.items() if r.mode == "failed"]
    return res


def test_hidden_groups_are_not_rows_of_the_model_table(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS).add_models(MODELS)
    src = Source()
    # sh: 3 users; bj: 1 (HAVING hides it); gz: 2, one negative (the drop check hides it in city_low).
    first = [src.put(1, "sh", 5), src.put(2, "sh", 7), src.put(3, "sh", 1), src.put(4, "bj", 9), src.put(5, "gz", -2), src.put(6, "gz", 4)]
    res = _round(spark, lp, first)
    assert {r.mode for r in res.values()} == {"full"}
    assert_tables(lp, src)
    # bj gets a second user: visible again (an insert downstream); gz loses one: hidden by HAVING
    # (a delete downstream) and no longer negative: visible in city_low.
    res = _round(spark, lp, [src.put(7, "bj", 3), src.delete(5)])
    assert {m: r.mode for m, r in res.items()} == dict.fromkeys(COLUMNS, "incremental")
    assert_tables(lp, src)
    # sh shrinks to two (leaves big_cities), gz regains a user (visible with its kept state),
    # bj's new user turns negative (hidden by the drop check, its state kept).
    res = _round(spark, lp, [src.delete(3), src.put(8, "gz", 6), src.put(7, "bj", -3)])
    assert {m: r.mode for m, r in res.items()} == dict.fromkeys(COLUMNS, "incremental")
    assert_tables(lp, src)
    # Hidden groups change while hidden; then come back.
    _round(spark, lp, [src.put(9, "hz", 2), src.put(7, "bj", -5), src.put(10, "hz", 3)])
    assert_tables(lp, src)
    _round(spark, lp, [src.put(7, "bj", 0), src.delete(10), src.put(10, "sh", 1)])
    assert_tables(lp, src)
    # A full rebuild finds nothing to change in the SUM/COUNT model (state included) and leaves
    # every table as it was.
    full = {r.model: r for r in build(spark, lp.project, [], [], incremental=False)}
    assert (full["dws.city_stats"].rows_written, full["dws.city_stats"].rows_deleted) == (0, 0)
    assert_tables(lp, src)


def test_table_with_hidden_rows_from_an_older_lake_is_rebuilt_once(tmp_path: Path, spark: Any) -> None:
    """A model table written before hidden groups had their own table keeps them as `_deleted`
    rows (and its commits record no `hidden` instant): the next build is full and moves them."""
    lp = LakeProject(tmp_path, ODS).add_models({k: v for k, v in MODELS.items() if k.startswith("dws/city_stats")})
    src = Source()
    _round(spark, lp, [src.put(1, "sh", 5), src.put(2, "sh", 7), src.put(4, "bj", 9)])
    # Rewrite it as the older lake left it: hidden groups as `_deleted` rows, no `hidden` metadata.
    path, held = lp.layout.table("dws.city_stats"), lp.layout.hidden("dws.city_stats")
    old = hudi.read(spark, path).unionByName(hudi.read(spark, held)).drop(*hudi.HOODIE_META_COLUMNS).toPandas()
    _inst, meta = hudi.last_commit_metadata(spark, path)
    meta.pop("hidden")
    shutil.rmtree(path.local)
    shutil.rmtree(held.local)
    opts = hudi.write_options(name="dws_city_stats", key=["_lake_key"], ordering=None, partition=None)
    hudi.write(spark.createDataFrame(old).withColumn("_hoodie_is_deleted", F.lit(False)), path, opts, meta)
    assert ("bj", 1, 9) in read_by_path(path, COLUMNS["dws.city_stats"])  # what outside readers saw
    res = _round(spark, lp, [src.put(3, "gz", 1)])
    assert res["dws.city_stats"].mode == "full" and "a full build moves them" in res["dws.city_stats"].reason
    assert read_by_path(path, COLUMNS["dws.city_stats"]) == src.expected()["dws.city_stats"]
    assert read_by_path(held, COLUMNS["dws.city_stats"]) == src.hidden()["dws.city_stats"]
    # From there on, incremental.
    res = _round(spark, lp, [src.put(5, "bj", 1)])
    assert res["dws.city_stats"].mode == "incremental"
    assert read_by_path(path, COLUMNS["dws.city_stats"]) == src.expected()["dws.city_stats"]
    # A column retyped (the README's advice for an incompatible change: remove the model's
    # table): the full build also rewrites the hidden groups, written with the old type.
    (lp.root / "layers" / "dws" / "city_stats.sql").write_text(
        "select city, count(*) as n, cast(sum(score) as string) as score from ods.users group by city having count(*) > 1")
    shutil.rmtree(path.local)
    res = _round(spark, lp, [src.put(6, "hz", 4)])
    assert res["dws.city_stats"].mode == "full"
    assert read_by_path(path, COLUMNS["dws.city_stats"]) == {(c, n, str(s)) for c, n, s in src.expected()["dws.city_stats"]}
    assert read_by_path(held, COLUMNS["dws.city_stats"]) == {(c, n, str(s)) for c, n, s in src.hidden()["dws.city_stats"]}


def test_crash_between_the_hidden_groups_commit_and_the_model_commit(tmp_path: Path, spark: Any) -> None:
    """Killed after the hidden-groups table committed and before the model's commit: that commit
    is an orphan. Here it removed a group (it had become visible) that the rerun's change does not
    reach (its user moved back before the rerun): the rerun restores it, with its state."""
    lp = LakeProject(tmp_path, ODS).add_models({k: v for k, v in MODELS.items() if k.startswith(("dws/city_stats", "dws/by_size"))})
    src = Source()
    # sh: 3 users, visible; bj: 1, hidden.
    _round(spark, lp, [src.put(1, "sh", 5), src.put(2, "sh", 7), src.put(3, "sh", 1), src.put(4, "bj", 9)])
    lp.write_cdc([src.put(1, "bj", 5)])  # bj: 2 users, visible: leaves the hidden-groups table
    lp.ingest(spark)
    held = lp.layout.hidden("dws.city_stats")
    before = hudi.completed_instants(spark, held)
    proc = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(lp.root), "build", "--incremental"],
                          env={**os.environ, "LAKE_FAILPOINT": "after_hidden_commit"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert len(hudi.completed_instants(spark, held)) == len(before) + 1  # the orphan
    assert ("bj", 2, 14) not in read_by_path(lp.layout.table("dws.city_stats"), COLUMNS["dws.city_stats"])  # no model commit
    # User 1 moves back before the rerun: its net change no longer reaches bj.
    res = _round(spark, lp, [src.put(1, "sh", 5)])
    assert res["dws.city_stats"].mode == "incremental"
    assert read_by_path(lp.layout.table("dws.city_stats"), COLUMNS["dws.city_stats"]) == src.expected()["dws.city_stats"]
    assert read_by_path(held, COLUMNS["dws.city_stats"]) == src.hidden()["dws.city_stats"] == {("bj", 1, 9)}
    # bj's kept state is right: a second user makes it visible with both users counted.
    _round(spark, lp, [src.put(5, "bj", 2)])
    want = src.expected()
    assert ("bj", 2, 11) in want["dws.city_stats"]
    for model in ("dws.city_stats", "dws.by_size"):
        assert read_by_path(lp.layout.table(model), COLUMNS[model]) == want[model], model
