"""framework/table/timeline.py reads Hudi's timeline without Spark; the oracle is Hudi's own Java reader
(HoodieTableMetaClient) on the same tables: copy-on-write and merge-on-read, inserts, updates and
deletes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.table import hudi, timeline
from framework.table.avro import AvroError, read_container
from tests.helpers import LakeProject, envelope


def _java_stats(spark: Any, path: Any) -> list[tuple[str, str, tuple[int, int, int]]]:
    mc = hudi._meta_client(spark, path)
    at = mc.getActiveTimeline()
    out = []
    for i in at.getCommitsTimeline().filterCompletedInstants().getInstants().toArray():
        stats = at.readCommitMetadata(i).getWriteStats().toArray()
        counts = (sum(s.getNumInserts() for s in stats), sum(s.getNumUpdateWrites() for s in stats), sum(s.getNumDeletes() for s in stats))
        out.append((i.getCompletionTime(), i.getAction(), counts))
    return sorted(out)


def test_commits_read_in_python_equal_hudis_own(tmp_path: Path, spark: Any) -> None:
    # Cleaner retention 1: the third commit cleans, so the earliest retained commit is recorded.
    lp = LakeProject(tmp_path, "tables:\n  - {source: shop.a, key: [id]}\n  - {source: shop.m, key: [id], type: mor}\n",
                     "hudi: {hoodie.clean.commits.retained: '1'}\n")
    for t in ("shop.a", "shop.m"):
        lp.write_cdc([envelope("c", t, None, {"id": i, "v": i}, pos=i) for i in range(1, 6)])
        lp.ingest(spark)
        lp.write_cdc([envelope("u", t, {"id": 1, "v": 1}, {"id": 1, "v": 10}, pos=10),
                      envelope("d", t, {"id": 2, "v": 2}, None, pos=11),
                      envelope("c", t, None, {"id": 9, "v": 9}, pos=12)])
        lp.ingest(spark)
        lp.write_cdc([envelope("u", t, {"id": 3, "v": 3}, {"id": 3, "v": 30}, pos=20)])
        lp.ingest(spark)
    for name in ("ods.a", "ods.m"):
        path = lp.layout.table(name)
        assert timeline.completed(path) == hudi.completed_instants(spark, path)
        commits = [timeline.read_commit(path, i) for i in timeline.completed(path)]
        assert [(c.instant, c.lake) for c in commits] == hudi.commit_metadata(spark, path)
        mine = sorted((c.instant.completed, c.instant.action, (c.inserts, c.updates, c.deletes)) for c in commits)
        assert mine == _java_stats(spark, path)
        assert commits[-1].changed > 0
        last = timeline.last_commit(path)
        assert last is not None and last.instant == hudi.completed_instants(spark, path)[-1]
        assert timeline.commits_between(path, commits[0].instant.completed, last.instant.completed) == commits[1:]
        # What planning and LakeTable read without a JVM: the cleaner's earliest retained commit,
        # the last writer commit's metadata, column types at commits, the table's key fields.
        at = {commits[0].instant.completed}
        assert timeline.read(path, at) == hudi.timeline(spark, path, at)
        assert timeline.earliest_retained(path) == hudi.earliest_retained(spark, path)
        assert name == "ods.m" or timeline.earliest_retained(path) is not None
        props = timeline.properties(path)
        assert timeline.fields(props, "recordkey") == hudi.record_key(spark, path) == ["id"]
        assert timeline.fields(props, "partition") == hudi.partition_fields(spark, path)
        ends = [c.instant.completed for c in commits]
        for begin, end in zip(ends, ends[1:], strict=False):
            assert timeline.cdc_logged(path, begin, end) == hudi.cdc_logged(spark, path, begin, end), (name, begin, end)
    assert timeline.last_commit(lp.layout.table("ods.nothing")) is None


def test_not_an_avro_container() -> None:
    with pytest.raises(AvroError, match="magic"):
        read_container(b'{"json": true}')
    with pytest.raises(AvroError, match="truncated"):
        read_container(b"Obj\x01\x02")
