"""`incremental: strict` and `contract: enforced` on one aggregate model, through the builder and
`lake plan`: a strict model's fall back to a full build is refused until `--allow-full`; a build
whose output breaks the contract (a NULL in a `nullable: false` column, a type) commits nothing.
Rows are compared with sums computed here from the events (the oracle)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from framework.cli.main import main
from framework.transform.options import BuildOptions
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

ODS = "tables:\n  - {source: shop.orders, key: [id]}\n"
SQL = "select uid as user_id, sum(amount) as total, count(*) as orders from ods.orders group by uid\n"
YAML = """incremental: strict
contract: enforced
columns:
  user_id: {type: bigint, nullable: false, description: the buyer}
  total: {type: bigint}
  orders: {type: bigint}
"""


def _order(op: str, oid: int, uid: int | None, amount: int, pos: int) -> dict[str, Any]:
    row = {"id": oid, "uid": uid, "amount": amount}
    return envelope(op, "shop.orders", row if op == "d" else None, None if op == "d" else row, pos=pos)


def _oracle(live: dict[int, tuple[int | None, int]]) -> list[tuple[Any, ...]]:
    acc: dict[int | None, list[int]] = defaultdict(lambda: [0, 0])
    for uid, amount in live.values():
        acc[uid][0] += amount
        acc[uid][1] += 1
    return sorted((u, s, n) for u, (s, n) in acc.items() if u is not None)


def _table(spark: Any, lp: LakeProject) -> list[tuple[Any, ...]]:
    from framework.transform.reader import TableReader

    return sorted(tuple(r) for r in TableReader(spark, lp.layout).snapshot("dws.user_sales").select("user_id", "total", "orders").collect())


def _commits(lp: LakeProject) -> int:
    from framework.table.timeline import completed

    return len(completed(lp.layout.table("dws.user_sales")))


def test_strict_incremental_and_an_enforced_contract(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, ODS).add_models({"dws/user_sales.sql": SQL, "dws/user_sales.yaml": YAML})
    live: dict[int, tuple[int | None, int]] = {1: (1, 7), 2: (2, 9), 3: (1, 4)}
    lp.write_cdc([_order("c", k, u, a, pos=k) for k, (u, a) in live.items()])
    lp.ingest(spark)
    (first,) = build(spark, lp.project, [], [], incremental=True)
    assert first.mode == "full", first.error  # a strict model's first build: nothing to keep
    assert _table(spark, lp) == _oracle(live)

    # A NULL buyer breaks `nullable: false`: the model fails, its table and checkpoint stay.
    lp.write_cdc([_order("c", 4, None, 5, pos=10), _order("c", 5, 2, 1, pos=11)])
    lp.ingest(spark)
    (bad,) = build(spark, lp.project, [], [], incremental=True)
    assert bad.mode == "failed" and "'user_id' holds NULL in 1 row(s)" in (bad.error or ""), bad.error
    assert _commits(lp) == 1 and _table(spark, lp) == _oracle(live)
    # The source removes the order: the same events and the delete build incrementally.
    lp.write_cdc([_order("d", 4, None, 5, pos=12)])
    lp.ingest(spark)
    live[5] = (2, 1)
    (ok,) = build(spark, lp.project, [], [], incremental=True)
    assert ok.mode == "incremental", ok.error
    assert _table(spark, lp) == _oracle(live)

    # A changed query would rebuild the table in full: refused, shown by `lake plan`, until allowed once.
    (lp.root / "layers" / "dws" / "user_sales.sql").write_text(SQL.replace("from ods.orders", "from ods.orders where amount > 1"))
    (refused,) = build(spark, lp.project, [], [], incremental=True)
    assert refused.mode == "failed" and "`incremental: strict`" in (refused.error or "") and "--allow-full" in (refused.error or "")
    shown = CliRunner().invoke(main, ["--project", str(lp.root), "plan", "--incremental"], catch_exceptions=False)
    assert "REFUSED" in shown.output and "dws.user_sales" in shown.output, shown.output
    assert _commits(lp) == 2
    (allowed,) = build(spark, lp.project, [], [], incremental=True, options=BuildOptions(allow_full=True))
    assert allowed.mode == "full", allowed.error
    assert _table(spark, lp) == _oracle({k: v for k, v in live.items() if v[1] > 1})

    # A type the contract does not declare: refused before the commit, naming the column.
    (lp.root / "layers" / "dws" / "user_sales.sql").write_text(SQL.replace("sum(amount) as total", "cast(sum(amount) as double) as total"))
    (typed,) = build(spark, lp.project, [], [], incremental=True, options=BuildOptions(allow_full=True))
    assert typed.mode == "failed" and "column 'total' is double, the contract says bigint" in (typed.error or ""), typed.error
    assert _commits(lp) == 3
