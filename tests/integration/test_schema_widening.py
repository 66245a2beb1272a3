"""Schema changes real databases make, on real Hudi tables: lossless widenings taken in ODS tables
(COW and MOR) and in the models that read them, each ODS table equal to the source's final state
computed in Python and each model equal to the same aggregate computed in Python, after
incremental builds across the change and after a full rebuild; narrowing and lossy changes go to
the dead letter with a reason naming a command that exists."""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.table import hudi
from framework.transform.reader import TableReader
from framework.transform.runner import build
from tests.helpers import LakeProject
from tests.typed_cdc import (
    BIGINT,
    DATE,
    DATETIME3,
    DOUBLE,
    FLOAT,
    INT,
    STRING,
    TypedTable,
    decimal,
    varchar,
)

ODS = """
tables:
  - {source: shop.a, key: [id]}
  - {source: shop.b, key: [id], type: mor}
  - {source: shop.c, key: [code]}
  - {source: shop.d, key: [id]}
"""
AGG = ("select grp, sum(price) as s, min(price) as lo, max(price) as hi, sum(rate) as r, sum(qty) as q, max(qty) as qmax, "
       "min(w) as wmin, count(*) as n from ods.{t} group by grp")
MODELS = {
    "dws/a_agg.sql": AGG.format(t="a"),
    "dws/b_agg.sql": AGG.format(t="b"),
    "dwd/a_rows.sql": "select id, grp, price, rate, qty, w, name from ods.a where qty >= 0",
    # Grouped by the column whose scale grows: its key text changes (1.50 -> 1.5000).
    "dws/a_by_rate.sql": "select rate, count(*) as n, sum(qty) as q from ods.a group by rate",
    "dwd/c_rows.sql": "select code, grp, day from ods.c",
    "dws/c_agg.sql": "select grp, max(day) as last_day, min(day) as first_day, count(*) as n from ods.c group by grp",
}
# Compaction every 2 delta commits: the MOR table compacts base files of the old type with logs of the new.
LAKE = 'hudi: {"hoodie.compact.inline.max.delta.commits": "2"}\n'
OLD_AB = {"id": INT, "grp": STRING, "price": decimal(10, 2), "rate": decimal(10, 2), "qty": INT, "w": FLOAT, "name": varchar(10)}
OLD_C = {"code": decimal(6, 2), "grp": STRING, "day": DATE}
OLD_D = {"id": INT, "n": BIGINT, "p": decimal(12, 4), "s": STRING}


def _row_ab(rng: random.Random, k: int, wide: bool) -> dict[str, Any]:
    """A row of tables a/b; `wide`: values only the widened types hold."""
    if wide:
        price = Decimal(rng.choice(["9999999999.99", "1234567890.25", "-1000000000.50", "3.10"]))
        rate = Decimal(rng.choice(["12345678.1234", "0.0001", "-2.5005", "7"]))
        qty = rng.choice([2**40, 3 * 2**33, 17, 2**31])
        w = rng.choice([1e300, 0.1, 2.0 / 3.0, -1.5])
        name = rng.choice(["a name longer than ten", "x" * 40, "ok"])
    else:
        price = Decimal(rng.randint(-10**9, 10**9)) / 100
        rate = Decimal(rng.randint(-10**7, 10**7)) / 100
        qty = rng.randint(0, 2**31 - 1)
        w = rng.choice([1.5, -0.25, 1024.0, 3.75])  # exact in float32
        name = rng.choice(["ann", "bob", "cid"])
    return {"id": k, "grp": rng.choice(["x", "y", "z"]), "price": price, "rate": rate, "qty": qty, "w": w, "name": name}


def _round(rng: random.Random, tables: list[TypedTable], n: int, wide: bool, next_key: list[int]) -> list[str]:
    lines = []
    for _ in range(n):
        keys = sorted(tables[0].rows)
        r = rng.random()
        if keys and r < 0.2:
            k = rng.choice(keys)
            lines += [t.delete(k) for t in tables]
        elif keys and r < 0.6:
            row = _row_ab(rng, rng.choice(keys), wide)
            lines += [t.upsert(dict(row)) for t in tables]
        else:
            next_key[0] += 1
            row = _row_ab(rng, next_key[0], wide)
            lines += [t.upsert(dict(row)) for t in tables]
    return lines


def _c_round(rng: random.Random, c: TypedTable, n: int, wide: bool) -> list[str]:
    lines = []
    for _ in range(n):
        if c.rows and rng.random() < 0.3:
            lines.append(c.delete(rng.choice(sorted(c.rows))))
            continue
        if wide:
            code = Decimal(rng.randint(0, 2000)) / 100 + Decimal("0.0001") * rng.randint(0, 1)
            day: Any = datetime(2024, 1, 1) + timedelta(minutes=rng.randint(0, 10**6), milliseconds=rng.randint(0, 999))
        else:
            code = Decimal(rng.randint(0, 2000)) / 100
            day = date(2024, 1, 1) + timedelta(days=rng.randint(0, 700))
        lines.append(c.upsert({"code": code, "grp": rng.choice(["x", "y"]), "day": day}))
    return lines


def _text(v: Any) -> Any:
    """Values compared exactly: decimals by value, timestamps to the millisecond as text."""
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(v, Decimal):
        return v.normalize()
    return v


def _table(spark: Any, lp: LakeProject, name: str, cols: list[str]) -> list[tuple[Any, ...]]:
    df = TableReader(spark, lp.layout).snapshot(name)
    types = dict(df.dtypes)
    sel = [F.date_format(F.col(c), "yyyy-MM-dd HH:mm:ss.SSS").alias(c) if types[c] == "timestamp" else F.col(c) for c in cols]
    return sorted((tuple(_text(v) for v in r) for r in df.select(*sel).collect()), key=repr)


def _oracle_rows(rows: list[dict[str, Any]], cols: list[str], where: Any = None) -> list[tuple[Any, ...]]:
    return sorted((tuple(_text(r[c]) for c in cols) for r in rows if where is None or where(r)), key=repr)


def _oracle_agg(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["grp"], []).append(r)
    out = []
    for g, rs in groups.items():
        out.append((g, sum(r["price"] for r in rs), min(r["price"] for r in rs), max(r["price"] for r in rs), sum(r["rate"] for r in rs),
                    sum(r["qty"] for r in rs), max(r["qty"] for r in rs), min(r["w"] for r in rs), len(rs)))
    return sorted((tuple(_text(v) for v in t) for t in out), key=repr)


def _oracle_c_agg(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    groups: dict[str, list[Any]] = {}
    for r in rows:
        groups.setdefault(r["grp"], []).append(r["day"])
    return sorted(((g, _text(max(ds)), _text(min(ds)), len(ds)) for g, ds in groups.items()), key=repr)


AGG_COLS = ["grp", "s", "lo", "hi", "r", "q", "qmax", "wmin", "n"]
AB_COLS = ["id", "grp", "price", "rate", "qty", "w", "name"]


def _check(spark: Any, lp: LakeProject, a: TypedTable, c: TypedTable) -> None:
    for t in ("ods.a", "ods.b"):
        assert _table(spark, lp, t, AB_COLS) == _oracle_rows(a.live(), AB_COLS), t
    assert _table(spark, lp, "ods.c", ["code", "grp", "day"]) == _oracle_rows(c.live(), ["code", "grp", "day"])
    for m in ("dws.a_agg", "dws.b_agg"):
        assert _table(spark, lp, m, AGG_COLS) == _oracle_agg(a.live()), m
    assert _table(spark, lp, "dwd.a_rows", AB_COLS) == _oracle_rows(a.live(), AB_COLS, lambda r: r["qty"] >= 0)
    by_rate: dict[Any, list[int]] = {}
    for r in a.live():
        by_rate.setdefault(r["rate"], []).append(r["qty"])
    assert _table(spark, lp, "dws.a_by_rate", ["rate", "n", "q"]) == sorted(((_text(k), len(v), sum(v)) for k, v in by_rate.items()), key=repr)
    assert _table(spark, lp, "dwd.c_rows", ["code", "grp", "day"]) == _oracle_rows(c.live(), ["code", "grp", "day"])
    assert _table(spark, lp, "dws.c_agg", ["grp", "last_day", "first_day", "n"]) == _oracle_c_agg(c.live())


def _types(spark: Any, lp: LakeProject, name: str) -> dict[str, str]:
    return dict(TableReader(spark, lp.layout).snapshot(name).dtypes)


def test_lossless_widenings_in_ods_and_models(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS, lake_extra=LAKE).add_models(MODELS)
    rng = random.Random(18)
    a, b = TypedTable("shop.a", "id", OLD_AB), TypedTable("shop.b", "id", OLD_AB)
    c = TypedTable("shop.c", "code", OLD_C)
    key = [0]

    def cycle(lines: list[str]) -> dict[str, Any]:
        lp.write_cdc(lines)
        s = lp.ingest(spark)
        assert s.dead_letter == 0, lp.dead_letters(spark)
        return {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}

    cycle(_round(rng, [a, b], 14, False, key) + _c_round(rng, c, 10, False))
    res = cycle(_round(rng, [a, b], 10, False, key) + _c_round(rng, c, 6, False))
    assert {r.mode for r in res.values()} == {"incremental"}, {m: (r.mode, r.reason) for m, r in res.items()}
    _check(spark, lp, a, c)

    # ALTER TABLE ... MODIFY: every widening at once, then events only the new types hold.
    for t in (a, b):
        t.alter("price", decimal(12, 2))
        t.alter("rate", decimal(12, 4))
        t.alter("qty", BIGINT)
        t.alter("w", DOUBLE)
        t.alter("name", varchar(40))
    c.alter("code", decimal(8, 4))
    c.alter("day", DATETIME3, lambda d: datetime(d.year, d.month, d.day))
    res = cycle(_round(rng, [a, b], 12, True, key) + _c_round(rng, c, 8, True))
    for t in ("ods.a", "ods.b"):
        assert {k: v for k, v in _types(spark, lp, t).items() if k in AB_COLS} == {
            "id": "int", "grp": "string", "price": "decimal(12,2)", "rate": "decimal(12,4)", "qty": "bigint", "w": "double", "name": "string"}, t
    assert _types(spark, lp, "ods.c")["code"] == "decimal(8,4)" and _types(spark, lp, "ods.c")["day"] == "timestamp"
    _check(spark, lp, a, c)
    # Models whose upstream changed a column's type rebuild in full, saying why; so do the
    # models of the rewritten ods.c (DATE -> TIMESTAMP: Hudi takes it only as a new table).
    reasons = {m: (r.mode, r.reason) for m, r in res.items()}
    assert all(mode == "full" for mode, _ in reasons.values()), reasons
    assert "ods.a column price changed type from DECIMAL(10,2) to DECIMAL(12,2)" in reasons["dws.a_agg"][1]
    assert "ods.c was rebuilt" in reasons["dwd.c_rows"][1] and "DATE → TIMESTAMP" in reasons["dwd.c_rows"][1], reasons
    assert _types(spark, lp, "dws.a_agg")["s"] == "decimal(22,2)" and _types(spark, lp, "dws.c_agg")["last_day"] == "timestamp"

    for _ in range(2):  # incremental again, in the new types (MOR b compacts in between)
        res = cycle(_round(rng, [a, b], 8, True, key) + _c_round(rng, c, 5, True))
        assert {r.mode for r in res.values()} == {"incremental"}, {m: (r.mode, r.reason) for m, r in res.items()}
        _check(spark, lp, a, c)
    assert any(i.action == "commit" for i in hudi.completed_instants(spark, lp.layout.table("ods.b")))  # a compaction
    # A full rebuild gives the same tables.
    build(spark, lp.project, [], [], incremental=False)
    _check(spark, lp, a, c)


def test_narrowing_and_lossy_changes_go_to_the_dead_letter(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS)
    d = TypedTable("shop.d", "id", OLD_D)
    lp.write_cdc([d.upsert({"id": i, "n": 2**40 + i, "p": Decimal("1.2345"), "s": "x"}) for i in range(3)])
    lp.ingest(spark)
    lines = []
    for col, schema, row in (("n", INT, {"id": 10, "n": 5}), ("p", decimal(12, 2), {"id": 11, "p": Decimal("2.50")}),
                             ("s", INT, {"id": 12, "s": 7})):
        d.alter(col, schema)
        lines.append(d.upsert({**{"id": 0, "n": 1, "p": Decimal("1.25"), "s": 1}, **row}))
        d.alter(col, OLD_D[col])  # back, so each line changes one column
    lp.write_cdc(lines)
    s = lp.ingest(spark)
    assert s.totals()["d"].dead_letter == 3
    reasons = sorted(x["reason"] for x in lp.dead_letters(spark))
    assert "column 'n' narrowed from BIGINT to INT" in reasons[0] and "lake dead-letter replay --table ods.d" in reasons[0]
    assert "column 'p' changed type from DECIMAL(12,4) to DECIMAL(12,2), which cannot hold every DECIMAL(12,4) value" in reasons[1]
    assert "column 's' changed type from STRING to INT" in reasons[2] and "lake ingest --rebuild ods.d --path DUMP" in reasons[2]
    assert lp.rows(spark, "d", ["id"]) == [{"id": 0}, {"id": 1}, {"id": 2}]


def test_change_read_planned_before_a_widening_keeps_the_old_scale(tmp_path: Path, spark: Any) -> None:
    """A build planned up to c1 reads its change after a DECIMAL(10,2) -> DECIMAL(12,4) widening
    committed (an ingest running beside it): Hudi gives the old CDC images rescaled to the new
    schema (1.25 as 12500); decoded at the old scale they would be 100 times too large."""
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.a, key: [id]}\n  - {source: shop.b, key: [id], type: mor}\n")
    a, b = TypedTable("shop.a", "id", {"id": INT, "v": decimal(10, 2)}), TypedTable("shop.b", "id", {"id": INT, "v": decimal(10, 2)})
    lp.write_cdc([t.upsert({"id": i, "v": Decimal("1.25")}) for t in (a, b) for i in (1, 2)])
    lp.ingest(spark)
    reader = TableReader(spark, lp.layout)
    c0 = {t: reader.latest(t).completed for t in ("ods.a", "ods.b")}  # type: ignore[union-attr]
    lp.write_cdc([t.upsert({"id": 1, "v": Decimal("2.50")}) for t in (a, b)])
    lp.ingest(spark)
    c1 = {t: reader.latest(t).completed for t in ("ods.a", "ods.b")}  # type: ignore[union-attr]
    for t in (a, b):
        t.alter("v", decimal(12, 4))
    lp.write_cdc([t.upsert({"id": 2, "v": Decimal("3.1234")}) for t in (a, b)])
    lp.ingest(spark)
    for t in ("ods.a", "ods.b"):
        ch = reader.change(t, ["id"], c0[t], c1[t])
        assert ch.after.schema["v"].dataType == T.DecimalType(10, 2), t
        assert [(r.id, r.v) for r in ch.after.collect()] == [(1, Decimal("2.50"))], t
        assert [(r.id, r.v) for r in ch.before.collect()] == [(1, Decimal("1.25"))], t


def test_rewrite_killed_after_staging_is_finished_by_the_next_ingest(tmp_path: Path, spark: Any) -> None:
    """DATE -> DATETIME rewrites the table; a SIGKILL once the staged copy is complete (before the
    swap) leaves the old table, and the next ingest puts the staged copy in place and commits."""
    import os
    import subprocess
    import sys

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.c, key: [code]}\n")
    c = TypedTable("shop.c", "code", OLD_C)
    rng = random.Random(5)
    lp.write_cdc(_c_round(rng, c, 8, False))
    lp.ingest(spark)
    c.alter("code", decimal(8, 4))
    c.alter("day", DATETIME3, lambda d: datetime(d.year, d.month, d.day))
    lp.write_cdc(_c_round(rng, c, 6, True))
    killed = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(tmp_path), "ingest", "--once"], capture_output=True,
                            text=True, env={**os.environ, "LAKE_FAILPOINT": "after_rewrite_staged"}, timeout=600)
    assert killed.returncode == -9, killed.stderr
    assert _types(spark, lp, "ods.c")["day"] == "date"  # not swapped yet
    assert (lp.layout.staging("ods.c").parent / "ods_c.json").local.exists()
    lp.ingest(spark)
    assert _types(spark, lp, "ods.c")["day"] == "timestamp"
    assert _table(spark, lp, "ods.c", ["code", "grp", "day"]) == _oracle_rows(c.live(), ["code", "grp", "day"])
    assert not lp.layout.staging("ods.c").local.exists()
