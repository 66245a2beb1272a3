"""Table layouts on real Hudi tables: bucket indexes and merge-on-read with `lake compact`, for
ODS tables and models. The oracle is plain Python over the events: the last event per key by
source position, and the aggregates computed from those rows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from framework.cli.main import main
from framework.commands.compact import run_compact
from framework.errors import LakeError
from framework.table import hudi
from framework.transform.runner import build
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - {source: shop.orders, key: [id], type: mor, index: bucket, buckets: 4, compact_every: 0}
  - {source: shop.users, key: [id], index: bucket, buckets: 2}
"""
MODELS = {
    # Row-wise, copy-on-write with a bucket index.
    "dwd/big_orders.sql": "select o.id, o.uid, o.amount from ods.orders o where o.amount >= 50",
    "dwd/big_orders.yaml": "key: [id]\nindex: bucket\nbuckets: 3\n",
    # Aggregate with MIN/MAX, merge-on-read with a bucket index, compacted only by `lake compact`.
    "dws/by_user.sql": "select uid, count(*) as n, sum(amount) as total, min(amount) as lo, max(amount) as hi "
                       "from ods.orders group by uid",
    "dws/by_user.yaml": "key: [uid]\ntype: mor\nindex: bucket\nbuckets: 2\ncompact_every: 0\n",
    # Join + rescan over both, merge-on-read with inline compaction every 2 delta commits.
    "dws/by_city.sql": "select u.city, count(*) as n, sum(o.amount) as total from ods.orders o join ods.users u on o.uid = u.id group by u.city",
    "dws/by_city.yaml": "key: [city]\ntype: mor\ncompact_every: 2\n",
}


class Source:
    """The source database the events describe, and the events themselves."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.orders: dict[int, dict[str, Any]] = {}
        self.users = {i: {"id": i, "city": f"c{i % 3}"} for i in range(1, 7)}
        self.pos = 100
        self.next_id = 1

    def _ev(self, op: str, table: str, before: dict | None, after: dict | None) -> dict[str, Any]:
        self.pos += 10
        return envelope(op, table, before, after, pos=self.pos)

    def users_snapshot(self) -> list[dict[str, Any]]:
        return [self._ev("c", "shop.users", None, dict(u)) for u in self.users.values()]

    def round(self, n: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(n):
            kind = self.rng.choice(["c", "c", "u", "u", "d"]) if self.orders else "c"
            if kind == "c":
                row = {"id": self.next_id, "uid": self.rng.randint(1, 6), "amount": self.rng.randint(1, 100)}
                self.next_id += 1
                self.orders[row["id"]] = row
                out.append(self._ev("c", "shop.orders", None, dict(row)))
            else:
                old = self.orders[self.rng.choice(sorted(self.orders))]
                if kind == "u":
                    new = {**old, "amount": self.rng.randint(1, 100)}
                    self.orders[old["id"]] = new
                    out.append(self._ev("u", "shop.orders", dict(old), dict(new)))
                else:
                    del self.orders[old["id"]]
                    out.append(self._ev("d", "shop.orders", dict(old), None))
        # A replay of a few of this round's events, older than what the tables hold: no effect.
        return out + self.rng.sample(out, min(3, len(out)))

    def expected(self) -> dict[str, list[tuple[Any, ...]]]:
        o = self.orders.values()
        by_user: dict[int, list[int]] = {}
        by_city: dict[str, list[int]] = {}
        for r in o:
            by_user.setdefault(r["uid"], []).append(r["amount"])
            by_city.setdefault(self.users[r["uid"]]["city"], []).append(r["amount"])
        return {
            "dwd.big_orders": sorted((r["id"], r["uid"], r["amount"]) for r in o if r["amount"] >= 50),
            "dws.by_user": sorted((u, len(a), sum(a), min(a), max(a)) for u, a in by_user.items()),
            "dws.by_city": sorted((c, len(a), sum(a)) for c, a in by_city.items()),
        }


def _actual(spark: Any, lp: LakeProject) -> dict[str, list[tuple[Any, ...]]]:
    cols = {"dwd.big_orders": "id, uid, amount", "dws.by_user": "uid, n, total, lo, hi", "dws.by_city": "city, n, total"}
    out = {}
    for name, c in cols.items():
        df = hudi.read(spark, lp.layout.table(name)).selectExpr(*c.split(", "))
        out[name] = sorted(tuple(int(v) if hasattr(v, "as_tuple") else v for v in r) for r in df.collect())
    return out


def _file_ids(path: Path) -> set[str]:
    return {f.name.lstrip(".").split("_", 1)[0] for f in path.iterdir() if f.name.endswith(".parquet") or ".log." in f.name}


def test_bucket_and_mor_layouts_equal_the_source_across_compaction(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, TABLES).add_models(MODELS)
    src = Source(seed=7)
    lp.write_cdc(src.users_snapshot() + src.round(40))
    for i in range(4):
        lp.ingest(spark)
        results = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
        assert all(r.mode not in ("failed", "skipped") for r in results.values()), results
        live = {r.id: r.asDict() for r in lp.raw(spark, "orders").where("NOT _deleted").select("id", "uid", "amount").collect()}
        assert live == src.orders, f"round {i}: ODS orders differ from the source"
        assert _actual(spark, lp) == src.expected(), f"round {i}"
        if i == 1:
            # The compaction service, through the CLI: every merge-on-read table.
            cli = CliRunner().invoke(main, ["--project", str(lp.root), "compact", "--json"])
            assert cli.exit_code == 0, cli.output
            done = {r["table"]: r for r in json.loads(cli.output[cli.output.index("["):])}
            assert set(done) == {"ods.orders", "dws.by_user", "dws.by_city"}
            assert done["ods.orders"]["status"] == "compacted" and done["dws.by_user"]["status"] == "compacted"
            assert done["dws.by_city"]["status"] in ("compacted", "nothing")
            # A second run finds nothing left to compact in the tables only it compacts.
            again = {r.table: r.status for r in run_compact(project=lp.project, names=["ods.orders"], lock_timeout=0, argv=["compact"])}
            assert again == {"ods.orders": "nothing"}
            assert _actual(spark, lp) == src.expected(), "after lake compact"
        lp.write_cdc(src.round(25))
    # Bucket tables keep one file group per bucket: file ids are the bucket numbers.
    for name, buckets in (("ods.orders", 4), ("ods.users", 2), ("dwd.big_orders", 3), ("dws.by_user", 2)):
        ids = _file_ids(lp.layout.table(name).local)
        assert ids and all(i[:8].isdigit() and int(i[:8]) < buckets for i in ids), (name, ids)
    # The models read their upstream's change across the compaction: no full rebuild since the first.
    lp.ingest(spark)
    again = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert all(r.mode in ("incremental", "noop") for r in again.values()), again
    assert _actual(spark, lp) == src.expected()


def test_a_layout_an_existing_table_cannot_take(tmp_path: Path, spark: Any) -> None:
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.orders, key: [id]}\n").add_models({
        "dws/by_user.sql": "select uid, count(*) as n from ods.orders group by uid",
        "dws/by_user.yaml": "key: [uid]\n",
    })
    src = Source(seed=3)
    lp.write_cdc(src.round(20))
    lp.ingest(spark)
    build(spark, lp.project, [], [], incremental=True)
    # ODS: a bucket index on a table written with the simple one would duplicate keys.
    (lp.root / "layers/ods/tables.yaml").write_text("tables:\n  - {source: shop.orders, key: [id], index: bucket}\n")
    lp.write_cdc(src.round(5))
    with pytest.raises(LakeError) as e:
        lp.ingest(spark)
    assert "simple index" in e.value.message and "lake ingest --rebuild ods.orders" in (e.value.fix or "")
    (lp.root / "layers/ods/tables.yaml").write_text("tables:\n  - {source: shop.orders, key: [id]}\n")
    lp.ingest(spark)
    with pytest.raises(LakeError, match="not a merge-on-read table"):
        run_compact(project=lp.project, names=["ods.orders"], lock_timeout=0, argv=["compact"])
    # A model: the new index is a new data fingerprint, so the build is full and writes the table anew.
    (lp.root / "layers/dws/by_user.yaml").write_text("key: [uid]\nindex: bucket\nbuckets: 2\n")
    res = {r.model: r for r in build(spark, lp.project, [], [], incremental=True)}
    assert res["dws.by_user"].mode == "full"
    ids = _file_ids(lp.layout.table("dws.by_user").local)
    assert ids and all(i[:8].isdigit() and int(i[:8]) < 2 for i in ids), ids
    counts: dict[int, int] = {}
    for r in src.orders.values():
        counts[r["uid"]] = counts.get(r["uid"], 0) + 1
    got = {r.uid: r.n for r in hudi.read(spark, lp.layout.table("dws.by_user")).collect()}
    assert got == counts


def test_compact_quotes_the_table_path_in_its_sql(tmp_path: Path, spark: Any) -> None:
    """A warehouse path with a quote in it (`o'brien`) reaches Hudi's run_compaction intact."""
    from framework.commands.compact import compact
    from framework.runtime.location import as_location

    path = as_location(tmp_path / "o'brien's warehouse" / "t")
    opts = hudi.write_options(name="t", key=["id"], ordering=None, partition=None, table_type="mor")
    hudi.write(spark.createDataFrame([(1, "a"), (2, "b")], "id int, v string"), path, opts, {})
    hudi.write(spark.createDataFrame([(2, "c")], "id int, v string"), path, opts, {})
    result = compact(spark, "t", path)
    assert result.status == "compacted" and result.instant, result
    assert sorted((r.id, r.v) for r in hudi.read(spark, path).collect()) == [(1, "a"), (2, "c")]
