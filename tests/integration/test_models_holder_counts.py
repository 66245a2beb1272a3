"""A full build after incremental ones writes nothing when no visible value differs (issue 19,
goal 3), yet the MIN/MAX holder counts it leaves in place never outlive the upstream they were
counted from: counts of rows written at or before the last full build read as unknown.

An aggregate with COUNT/SUM/MIN/MAX and a HAVING that hides one group (its state lives in the
hidden-groups table), on copy-on-write and merge-on-read tables; every table is compared with the
aggregates computed here in Python from the events sent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from framework.table import hudi
from framework.transform.runner import build
from tests.helpers import LakeProject, UsersSource

ODS = """
tables:
  - {source: shop.users, key: [id]}
"""
MODEL = "dws.city_scores"
SQL = "select city, count(*) as n, sum(score) as s, min(score) as lo, max(score) as hi from ods.users group by city having max(score) < 100"


class Source(UsersSource):
    """The users as the source database holds them, and their CDC events."""

    def groups(self) -> dict[str, tuple[int, int, int, int]]:
        """city -> (count, sum, min, max), computed here."""
        by: dict[str, list[int]] = defaultdict(list)
        for city, score in self.users.values():
            by[city].append(score)
        return {c: (len(s), sum(s), min(s), max(s)) for c, s in by.items()}


def _visible(spark: Any, lp: LakeProject) -> dict[str, tuple[int, int, int, int]]:
    df = hudi.read(spark, lp.layout.table(MODEL))
    return {r["city"]: (r["n"], r["s"], r["lo"], r["hi"]) for r in df.collect()}


def _hidden(spark: Any, lp: LakeProject) -> dict[str, tuple[int, int, int, int]]:
    """The hidden groups' state (aggregates 0-3: count(*), sum, min, max)."""
    path = lp.layout.hidden(MODEL)
    if not hudi.table_exists(path):
        return {}
    return {r["city"]: (r["_lake_rows"], r["_lake_s1"], r["_lake_m2"], r["_lake_m3"]) for r in hudi.read(spark, path).collect()}


def _counts(spark: Any, lp: LakeProject) -> dict[str, tuple[int | None, int | None]]:
    """Stored holder counts of MIN and MAX per group, both tables."""
    out = {}
    for path in (lp.layout.table(MODEL), lp.layout.hidden(MODEL)):
        out.update({r["city"]: (r["_lake_c2"], r["_lake_c3"]) for r in hudi.read(spark, path).collect()})
    return out


def _assert_oracle(spark: Any, lp: LakeProject, src: Source) -> None:
    want = src.groups()
    assert _visible(spark, lp) == {c: g for c, g in want.items() if g[3] < 100}
    assert _hidden(spark, lp) == {c: g for c, g in want.items() if g[3] >= 100}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_full_build_after_incremental_writes_nothing_and_stale_counts_read_unknown(tmp_path: Path, spark: Any, table_type: str,
                                                                                   monkeypatch: Any) -> None:
    from framework.transform.strategies import aggregate

    recomputed: list[str] = []
    real = aggregate._rows_of_groups

    def spy(a: Any, key: list[str], upstream: Any, groups: Any) -> Any:
        recomputed.extend(r["city"] for r in groups.collect())
        return real(a, key, upstream, groups)

    monkeypatch.setattr(aggregate, "_rows_of_groups", spy)
    # MOR: compaction every 4 delta commits puts one after the incremental build that follows the
    # full build, so rows written before the full build (stale counts) are rewritten into a new
    # base file after it: their commit times must survive.
    extra = 'hudi: {hoodie.compact.inline.max.delta.commits: "4"}\n' if table_type == "mor" else ""
    lp = LakeProject(tmp_path, ODS, lake_extra=extra).add_models({"dws/city_scores.sql": SQL, "dws/city_scores.yaml": f"type: {table_type}\n"})
    src = Source()
    model, hidden_path = lp.layout.table(MODEL), lp.layout.hidden(MODEL)

    def round_(events: list[dict[str, Any]], incremental: bool) -> Any:
        lp.write_cdc(events)
        lp.ingest(spark)
        res, = build(spark, lp.project, [], [], incremental=incremental)
        return res

    seed = {1: ("sh", 3), 2: ("sh", 3), 3: ("sh", 3), 4: ("sh", 7), 5: ("sh", 9), 6: ("sh", 9), 7: ("bj", 5), 8: ("bj", 6),
            20: ("gz", 1), 21: ("gz", 1), 22: ("gz", 1), 23: ("gz", 200), 24: ("gz", 50)}  # gz: hidden (max >= 100)
    assert round_([src.put(i, c, s) for i, (c, s) in seed.items()], incremental=True).mode == "full"
    _assert_oracle(spark, lp, src)
    # Incremental: a holder of sh's and of gz's minimum goes, their number unknown: both groups are
    # recomputed with their holder counts; bj gets a row.
    assert round_([src.delete(1), src.delete(20), src.put(9, "bj", 6)], incremental=True).mode == "incremental"
    _assert_oracle(spark, lp, src)
    counts = _counts(spark, lp)
    assert counts["sh"] == (2, 2) and counts["gz"] == (2, 1), counts  # known: what a full build would write as NULL
    # `lake build` (full) with nothing new upstream: no row differs but the counts, nothing is written.
    instants = hudi.completed_instants(spark, model), hudi.completed_instants(spark, hidden_path)
    res = round_([], incremental=False)
    assert (res.mode, res.rows_written, res.rows_deleted) == ("full", 0, 0)
    assert (hudi.completed_instants(spark, model), hudi.completed_instants(spark, hidden_path)) == instants
    _assert_oracle(spark, lp, src)
    # Holders move but no visible value (nor sum, count, extreme) changes: sh's minimum 3 now has
    # one holder (id 3), gz's minimum 1 one (id 22). The full build writes no row, so the stored
    # counts (2) stay, stale; its commit (empty, for the checkpoint) says they are unknown.
    hidden_before = hudi.completed_instants(spark, hidden_path)
    res = round_([src.put(2, "sh", 5), src.put(4, "sh", 5), src.put(21, "gz", 4), src.put(24, "gz", 47)], incremental=False)
    assert (res.mode, res.rows_written, res.rows_deleted) == ("full", 0, 0)
    assert hudi.completed_instants(spark, hidden_path) == hidden_before
    _assert_oracle(spark, lp, src)
    # An incremental build elsewhere (bj) carries the full build's instant forward.
    assert round_([src.put(10, "bj", 7)], incremental=True).mode == "incremental"
    _assert_oracle(spark, lp, src)
    if table_type == "mor":  # compacted after that build: every row keeps the instant that wrote it
        done = hudi.completed_instants(spark, model)
        assert [i.action for i in done[-2:]] == ["deltacommit", "commit"], done
        times = {r[0] for r in hudi.read(spark, model).select("_hoodie_commit_time").collect()}
        assert times <= {i.requested for i in done if i.action == "deltacommit"} and len(times) > 1, (times, done)
    # The last holders go, incrementally: with the stale counts trusted (2 - 1 = 1 left) the
    # minimums would stay 3 and 1.
    assert round_([src.delete(3), src.delete(22)], incremental=True).mode == "incremental"
    _assert_oracle(spark, lp, src)
    assert src.groups()["sh"][2] == 5 and src.groups()["gz"][2] == 4
    assert sorted(recomputed) == ["gz", "gz", "sh", "sh"]
    # Counts written after the full build are trusted again: one of sh's two 9s goes, merged
    # without a recompute (5 is held by ids 2 and 4, 9 by 5 and 6).
    assert round_([src.delete(5)], incremental=True).mode == "incremental"
    _assert_oracle(spark, lp, src)
    assert _counts(spark, lp)["sh"] == (2, 1) and len(recomputed) == 4


def test_restored_hidden_group_keeps_its_counts_unknown(tmp_path: Path, spark: Any) -> None:
    """A build killed between the hidden-groups commit and the model commit leaves an orphan; the
    rerun puts back, rewritten, the groups the orphan changed that its own change does not reach
    (hidden.py). A group restored that way carries holder counts a full build left stale: the
    rewrite must not make them look fresh."""
    lp = LakeProject(tmp_path, ODS).add_models({"dws/city_scores.sql": SQL})
    src = Source()
    held = lp.layout.hidden(MODEL)

    def round_(events: list[dict[str, Any]], incremental: bool = True) -> Any:
        lp.write_cdc(events)
        lp.ingest(spark)
        res, = build(spark, lp.project, [], [], incremental=incremental)
        return res

    seed = {1: ("sh", 3), 7: ("sh", 60), 20: ("gz", 1), 21: ("gz", 1), 22: ("gz", 1), 23: ("gz", 200), 24: ("gz", 50)}
    round_([src.put(i, c, s) for i, (c, s) in seed.items()])
    round_([src.delete(20)])  # gz (hidden) recomputed: its minimum 1 has 2 holders
    assert _counts(spark, lp)["gz"] == (2, 1)
    # Full build: gz's minimum keeps one holder (22), nothing visible changes, the count 2 stays.
    assert round_([src.put(21, "gz", 4), src.put(24, "gz", 47)], incremental=False).rows_written == 0
    # User 7 moves to gz: killed after the hidden-groups commit (an orphan that rewrote gz) ...
    lp.write_cdc([src.put(7, "gz", 60)])
    lp.ingest(spark)
    before = hudi.completed_instants(spark, held)
    proc = subprocess.run([sys.executable, "-m", "framework.cli", "--project", str(lp.root), "build", "--incremental"],
                          env={**os.environ, "LAKE_FAILPOINT": "after_hidden_commit"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    assert len(hudi.completed_instants(spark, held)) == len(before) + 1
    # ... and back before the rerun: its change no longer reaches gz, which is restored.
    assert round_([src.put(7, "sh", 60)]).mode == "incremental"
    _assert_oracle(spark, lp, src)
    # gz's last holder of 1 goes: a restored count taken as fresh (2 - 1) would keep 1.
    assert round_([src.delete(22)]).mode == "incremental"
    _assert_oracle(spark, lp, src)
    assert src.groups()["gz"][2] == 4
