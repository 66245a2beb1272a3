"""Forward-only changes (`lake build --forward-only`, SQLMesh's forward-only / non-breaking
change): a model whose query only added output columns builds them from now on instead of
rebuilding in full. Rows built before hold NULL in the new column until a change reaches their
key; rows built after hold its value. Oracle: the rows the test wrote and Python's str.upper,
not lake's code. A change that does more, or an aggregate's new column, still rebuilds in full,
saying why; `lake plan` offers the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework.commands.plan import run_plan
from framework.transform.options import BuildOptions
from framework.transform.runner import build, selection
from tests.helpers import LakeProject, UsersSource, envelope

ROWWISE = "select id, city, score from ods.users where score >= 0"
RESCAN = "select u.id, u.city, c.region from ods.users u join ods.cities c on u.city = c.city"
AGG = "select city, count(*) as n from ods.users group by city"


def _rows(spark: Any, lp: LakeProject, name: str) -> dict[int, dict[str, Any]]:
    df = spark.read.format("hudi").load(str(lp.layout.table(name)))
    return {r["id"]: {c: r[c] for c in df.columns if not c.startswith("_")} for r in df.where("NOT _deleted").collect()}


def _write(lp: LakeProject, models: dict[str, str]) -> None:
    for rel, sql in models.items():
        (lp.root / "layers" / rel).write_text(sql + "\n")


def test_added_columns_build_from_now_on(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.users, key: [id]}\n  - {source: shop.cities, key: [city]}\n")
    lp.add_models({"dwd/users_clean.sql": ROWWISE, "dwd/users_region.sql": RESCAN, "dwd/users_region.yaml": "key: [id]\n",
                   "dws/city_counts.sql": AGG})
    src = UsersSource()
    cities = [envelope("c", "shop.cities", None, {"city": c, "region": r}, pos=10 + i) for i, (c, r) in enumerate([("sh", "east"), ("bj", "north")])]
    lp.write_cdc(cities + [src.put(i, "sh" if i % 2 else "bj", i) for i in range(1, 9)])
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=True)

    _write(lp, {"dwd/users_clean.sql": ROWWISE.replace("score from", "score, upper(city) as city_uc from"),
                "dwd/users_region.sql": RESCAN.replace("c.region from", "c.region, length(u.city) as city_len from"),
                "dws/city_counts.sql": AGG.replace("count(*) as n", "count(*) as n, max(score) as top")})
    offered = {p.model.name: p for p, _ in run_plan(project=lp.project, selection=selection(lp.project, []), incremental=True)}
    assert offered["dwd.users_clean"].mode == "full"
    assert "it only adds city_uc: `lake build dwd.users_clean --forward-only`" in offered["dwd.users_clean"].reason
    planned = {p.model.name: p for p, _ in run_plan(project=lp.project, selection=selection(lp.project, []), incremental=True,
                                                    forward_only=True)}
    assert planned["dwd.users_clean"].mode == "incremental" and planned["dwd.users_clean"].forward == ("city_uc",)
    assert planned["dws.city_counts"].mode == "full" and "cannot be built forward-only by the aggregate strategy" in planned["dws.city_counts"].reason

    # Nothing new upstream: an empty commit records the change; the old rows hold NULL.
    first = {r.model: r for r in build(spark, lp.project, [], [], incremental=True, options=BuildOptions(forward_only=True))}
    assert first["dwd.users_clean"].mode == "incremental" and "forward-only: city_uc built from now on" in first["dwd.users_clean"].reason
    assert first["dwd.users_region"].mode == "incremental" and first["dws.city_counts"].mode == "full"
    clean = _rows(spark, lp, "dwd.users_clean")
    assert sorted(clean) == list(range(1, 9)) and all("city_uc" in r and r["city_uc"] is None for r in clean.values()), clean

    # Changes reach some keys: those carry the new columns, the others keep NULL; a plain
    # incremental build now (the change is recorded: no full rebuild without the flag).
    touched = {2: "bj", 3: "sh", 9: "sh"}
    lp.write_cdc([src.put(k, c, 50 + k) for k, c in touched.items()] + [src.delete(4)])
    lp.ingest(spark)
    again = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert again["dwd.users_clean"].mode == "incremental" and again["dwd.users_region"].mode == "incremental", again
    live = src.users  # id -> (city, score)
    clean, region = _rows(spark, lp, "dwd.users_clean"), _rows(spark, lp, "dwd.users_region")
    assert set(clean) == set(live) == set(region)
    for k, (city, score) in live.items():
        assert clean[k] == {"id": k, "city": city, "score": score, "city_uc": city.upper() if k in touched else None}, (k, clean[k])
        assert region[k]["city_len"] == (len(city) if k in touched else None), (k, region[k])

    # A change that does more than add a column is rebuilt in full, also with the flag.
    _write(lp, {"dwd/users_clean.sql": ROWWISE.replace("score >= 0", "score >= 1").replace("score from", "score, upper(city) as city_uc from")})
    res = {r.model: r for r in build(spark, lp.project, ["dwd.users_clean"], [], incremental=True, options=BuildOptions(forward_only=True))}
    assert res["dwd.users_clean"].mode == "full" and "not a forward-only change" in res["dwd.users_clean"].reason
    assert all(r["city_uc"] == r["city"].upper() for r in _rows(spark, lp, "dwd.users_clean").values())
