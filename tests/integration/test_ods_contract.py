"""ODS contracts (`contract: enforced`): a table keeps exactly its declared columns and types;
events that do not fit (a column the contract leaves out, a type it cannot hold) go to the dead
letter with the reason, with schema blocks (judged per schema version) and without (judged per
event). After the contract is changed, a dead-letter replay brings them in and the table equals
the source's final rows. Oracle: the rows the simulated source holds (tests/typed_cdc.py) and
the events this test wrote, not lake's code."""

from __future__ import annotations

import contextlib
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import types as T

from framework.ods import dead_letter
from tests.helpers import LakeProject, envelope
from tests.typed_cdc import INT, STRING, TypedTable, decimal

CONTRACT_P = "{source: shop.p, key: [id], contract: enforced, columns: {id: bigint, name: string, price: 'decimal(10,2)'%s}}"
CONTRACT_Q = "{source: shop.q, key: [id], contract: enforced, columns: {id: bigint, v: int%s}}"


def _tables(p_extra: str = "", q_extra: str = "") -> str:
    return f"tables:\n  - {CONTRACT_P % p_extra}\n  - {CONTRACT_Q % q_extra}\n"


def _q(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, pos: int) -> str:
    return json.dumps(envelope(op, "shop.q", before, after, pos=pos))  # no schema block


def _source(src: TypedTable) -> list[dict[str, Any]]:
    """The source's rows in all its current columns (a column added later is NULL in older rows)."""
    return [{c: r.get(c) for c in src.columns} for r in src.live()]


def _replay(lp: LakeProject, spark: Any) -> None:
    dead_letter.replay(spark, lp.project, None, None, lambda names: contextlib.nullcontext())


def _pending(lp: LakeProject, spark: Any) -> list[dict[str, Any]]:
    from framework.table import hudi

    path = lp.layout.dead_letter
    if not hudi.table_exists(path):
        return []
    df = hudi.read(spark, path)
    df = df.where("replayed_at IS NULL") if "replayed_at" in df.columns else df
    return [r.asDict() for r in df.select("source_table", "reason", "raw").collect()]


def test_a_contract_dead_letters_what_does_not_fit_and_a_replay_after_the_change_converges(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, _tables())
    src = TypedTable("shop.p", "id", {"id": INT, "name": STRING, "price": decimal(10, 2)})
    lines = [src.upsert({"id": i, "name": f"n{i}", "price": Decimal(f"{i}.25")}) for i in range(1, 6)]
    lines.append(src.upsert({"id": 2, "price": Decimal("20.50")}))
    lines.append(src.delete(5))
    q_rows = {1: 10, 2: 20, 3: 30}
    q_lines = [_q("c", None, {"id": k, "v": v}, pos=100 + k) for k, v in q_rows.items()]
    lp.write_cdc(lines + q_lines)
    lp.ingest(spark)

    # The table has the contract's types, not the events' (INT ids in a BIGINT column).
    types = {f.name: f.dataType for f in lp.raw(spark, "p").schema.fields if not f.name.startswith("_")}
    assert types == {"id": T.LongType(), "name": T.StringType(), "price": T.DecimalType(10, 2)}, types
    assert lp.rows(spark, "p") == src.live()
    assert not _pending(lp, spark)

    # The source adds a column, then widens price past the contract; table q gets an event with a
    # column the contract does not declare beside events that fit.
    before_change = src.live()
    src.alter("note", STRING)
    added = [src.upsert({"id": 1, "note": "hello"}), src.upsert({"id": 6, "name": "n6", "price": Decimal("6.00"), "note": "new"}),
             src.delete(3)]
    src.alter("price", decimal(12, 2))
    wider = [src.upsert({"id": 7, "name": "n7", "price": Decimal("1234567890.12"), "note": None})]
    q_rows.update({4: 40, 1: 11})
    q_more = [_q("c", None, {"id": 4, "v": 40}, pos=201), _q("c", None, {"id": 9, "v": 90, "w": "extra"}, pos=202),
              _q("u", {"id": 1, "v": 10}, {"id": 1, "v": 11}, pos=203)]
    lp.write_cdc(added + wider + q_more)
    lp.ingest(spark)

    assert lp.rows(spark, "p") == before_change  # nothing of the new versions was taken
    assert [f.name for f in lp.raw(spark, "p").schema.fields if not f.name.startswith("_")] == ["id", "name", "price"]
    assert lp.rows(spark, "q") == [{"id": k, "v": v} for k, v in sorted(q_rows.items())]
    pending = _pending(lp, spark)
    by_table: dict[str, list[str]] = {}
    for r in pending:
        by_table.setdefault(r["source_table"], []).append(r["reason"])
    assert len(by_table["shop.p"]) == 4 and len(by_table["shop.q"]) == 1, by_table
    assert all("column(s) note not in the contract of ods.p" in r for r in by_table["shop.p"]), by_table
    assert sum("'price' arrives as DECIMAL(12,2), which the contract's DECIMAL(10,2)" in r for r in by_table["shop.p"]) == 1, by_table
    assert all("lake dead-letter replay --table ods.p" in r for r in by_table["shop.p"])
    assert "column(s) w not in the contract of ods.q" in by_table["shop.q"][0]

    # The contract takes the new column: a replay brings the three events of that version in; the
    # widened price still waits. Then the contract widens price too (the stored table widens).
    (tmp_path / "layers" / "ods" / "tables.yaml").write_text(_tables(", note: string", ", w: string"))
    _replay(lp, spark)
    assert lp.rows(spark, "q") == sorted([{"id": k, "v": v, "w": None} for k, v in q_rows.items()] + [{"id": 9, "v": 90, "w": "extra"}],
                                         key=lambda r: str(r["id"]))
    still = [r["reason"] for r in _pending(lp, spark)]
    assert len(still) == 1 and "'price' arrives as DECIMAL(12,2)" in still[0], still
    without_7 = [r for r in _source(src) if r["id"] != 7]
    assert lp.rows(spark, "p") == without_7

    (tmp_path / "layers" / "ods" / "tables.yaml").write_text(
        _tables(", note: string", ", w: string").replace("'decimal(10,2)'", "'decimal(12,2)'"))
    _replay(lp, spark)
    assert not _pending(lp, spark)
    assert lp.rows(spark, "p") == _source(src)
    price = next(f for f in lp.raw(spark, "p").schema.fields if f.name == "price")
    assert price.dataType == T.DecimalType(12, 2)


def test_a_bootstrap_takes_the_contracts_columns_and_refuses_undeclared_ones(tmp_path: Path, spark: Any) -> None:
    from framework.errors import LakeError
    from framework.ods.bootstrap import run_bootstrap

    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.u, key: [id], contract: enforced, columns: {id: bigint, v: int, note: string}}\n")
    dump = tmp_path / "u.csv"
    dump.write_text("id,v,extra\n1,10,x\n")
    with pytest.raises(LakeError, match="extra") as e:
        run_bootstrap(spark, lp.project, lp.project.ods_table("ods.u"), dump, position=None)
    assert "columns:" in (e.value.fix or "")
    dump.write_text("id,v\n1,10\n2,20\n")
    run_bootstrap(spark, lp.project, lp.project.ods_table("ods.u"), dump, position=None)
    types = {f.name: f.dataType for f in lp.raw(spark, "u").schema.fields if not f.name.startswith("_")}
    assert types == {"id": T.LongType(), "v": T.IntegerType(), "note": T.StringType()}, types
    assert lp.rows(spark, "u") == [{"id": 1, "v": 10, "note": None}, {"id": 2, "v": 20, "note": None}]
