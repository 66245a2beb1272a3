"""Issue 27 item 0: a `kill -9` while a table is being created must not block every later run.

Hudi creates a table in steps: `.hoodie/` (with `.aux`, `.schema`, `timeline/`), then
`hoodie.properties`, then the first commit. A kill between them left a table Hudi cannot load
("Could not load Hoodie properties") or lake cannot read (no completed commit), and every rerun
failed. One project, one chain of `lake run` processes: each is SIGKILLed inside the creation of
a different kind of table (framework/runtime/faults.py `creating_<kind>` / `created_<kind>`: as
soon as `.hoodie/` / `hoodie.properties` appears), and the next run must go on from there. The
end state is compared with oracles computed here: the ODS tables hold the source's final rows, the
dead letter exactly the bad event, the model the aggregate of the source's rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from framework.runtime.location import Location
from framework.table import timeline
from framework.transform.reader import TableReader
from tests.helpers import LakeProject, envelope
from tests.typed_cdc import DATE, DATETIME3, STRING, TypedTable, decimal

pytestmark = pytest.mark.slow

ODS = """
tables:
  - {source: shop.c, key: [code]}
  - {source: shop.users, key: [id], columns: {id: int, city: string, age: int}}
"""
# HAVING hides the cities with one user: the build creates the hidden-groups table too.
MODEL = {"dws/by_city.sql": "select city, count(*) as n, sum(age) as age from ods.users group by city having count(*) > 1"}


def _users() -> tuple[list[dict[str, Any]], dict[int, tuple[str, int]]]:
    """The users' events (one of them bad: its age is not an INT) and the source's final rows."""
    rows: dict[int, tuple[str, int]] = {}
    events, pos = [], 0

    def put(uid: int, city: str, age: int) -> None:
        nonlocal pos
        pos += 1
        before = rows.get(uid)
        rows[uid] = (city, age)
        b = None if before is None else {"id": uid, "city": before[0], "age": before[1]}
        events.append(envelope("u" if before else "c", "shop.users", b, {"id": uid, "city": city, "age": age}, pos=pos))

    for uid, city, age in [(1, "sh", 30), (2, "sh", 40), (3, "bj", 20), (4, "gz", 50), (2, "bj", 41), (8, "sh", 33), (9, "bj", 1)]:
        put(uid, city, age)
    pos += 1
    events.append(envelope("d", "shop.users", {"id": 3, "city": "bj", "age": 20}, None, pos=pos))
    rows.pop(3)
    events.append(envelope("c", "shop.users", None, {"id": 7, "city": "sh", "age": "abc"}, pos=pos + 1))  # the bad one
    return events, rows


def _lake_run(root: Path, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"LAKE_FAILPOINT": failpoint} if failpoint else {})}
    env.pop("LAKE_PAUSE", None)
    return subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(root), "run"], capture_output=True, text=True,
                          env=env, timeout=600)


def _half_created(table: Location) -> bool:
    """A table folder with `.hoodie/` and no completed commit: what a kill in its creation leaves."""
    return table.local.joinpath(".hoodie").exists() and not timeline.completed(table)


def _text(v: Any) -> str:
    if isinstance(v, Decimal):
        return str(v.quantize(Decimal("0.0001")))
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, date):
        return v.strftime("%Y-%m-%d 00:00:00")
    return str(v)


def test_kills_inside_every_kind_of_table_creation_then_the_next_run_goes_on(tmp_path: Path, spark: Any) -> None:
    # One table after another (commit_threads 1): with concurrent commits, how far the other tables
    # get before a kill in ods.c's creation is a race, and the next kill needs users' tombstone
    # table still uncreated.
    lp = LakeProject(tmp_path, ODS, "ods: {commit_threads: 1}\n").add_models(MODEL)
    c = TypedTable("shop.c", "code", {"code": decimal(6, 2), "grp": STRING, "day": DATE})
    lines = [c.upsert({"code": Decimal(f"{i}.50"), "grp": "xy"[i % 2], "day": date(2024, 1, i)}) for i in range(1, 6)]
    users, final = _users()
    lay = lp.layout
    # A first micro-batch of one message that is not JSON: the dead letter is its only table.
    lp.write_cdc(["this is not json"])
    r = _lake_run(tmp_path, "creating_dead_letter")
    assert r.returncode == -9 and _half_created(lay.dead_letter), f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    lp.write_cdc(lines + [json.dumps(e) for e in users])
    # Each kill lands inside the creation of the table it names; the run after it must recover
    # that table (nothing was committed in it) and go on to the next creation.
    chain = [
        # The kill names the table it waits for (failpoints count per table).
        ("creating_ods@ods.c", lay.table("ods.c")),  # no hoodie.properties yet
        ("created_tombstones@users_tombstones", lay.tombstones("ods.users")),  # hoodie.properties, no commit
        ("created_hidden", lay.hidden("dws.by_city")),
        ("creating_model", lay.table("dws.by_city")),
    ]
    for failpoint, table in chain:
        r = _lake_run(tmp_path, failpoint)
        assert r.returncode == -9, f"{failpoint}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert _half_created(table), f"{failpoint}: {table} is not half created"
    # A widening Hudi cannot make in place (a key DECIMAL's scale, DATE → DATETIME): the table is
    # rewritten through a staged copy; a kill inside the staged copy's creation.
    c.alter("code", decimal(8, 4))
    c.alter("day", DATETIME3, lambda d: datetime(d.year, d.month, d.day))
    lp.write_cdc([c.upsert({"code": Decimal("9.1234"), "grp": "y", "day": datetime(2024, 5, 6, 7, 8, 9)}), c.delete(Decimal("2.50"))])
    r = _lake_run(tmp_path, "created_staged")
    assert r.returncode == -9 and _half_created(lay.staging("ods.c") / "table"), r.stdout + r.stderr
    r = _lake_run(tmp_path, None)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "creation never completed" in r.stderr  # said so, for the model table the last kill left
    reader = TableReader(spark, lay)
    got_c = sorted(tuple(_text(v) for v in row) for row in reader.snapshot("ods.c").select("code", "grp", "day").collect())
    assert got_c == sorted(tuple(_text(r[k]) for k in ("code", "grp", "day")) for r in c.live())
    got_users = {row["id"]: (row["city"], row["age"]) for row in reader.snapshot("ods.users").collect()}
    assert got_users == final
    dead = sorted((row["source_table"] or "", row["raw"] if row["source_table"] is None else json.loads(row["raw"])["after"]["id"])
                  for row in spark.read.format("hudi").load(str(lay.dead_letter)).collect())
    assert dead == [("", "this is not json"), ("shop.users", 7)]
    cities: dict[str, list[int]] = {}
    for city, age in final.values():
        cities.setdefault(city, []).append(age)
    expected = sorted((city, len(ages), sum(ages)) for city, ages in cities.items() if len(ages) > 1)
    assert sorted(tuple(row) for row in reader.snapshot("dws.by_city").select("city", "n", "age").collect()) == expected
