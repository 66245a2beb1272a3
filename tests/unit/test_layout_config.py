"""Table layout settings (models/layout.py): what the YAML accepts, the Hudi options it gives,
when an existing table cannot take it, and the `compact` schedule."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from framework.ops.schedule import lake_commands
from framework.table import hudi, hudi_layout
from models.config import ModelConfig, OdsTable
from models.schedule import ScheduleConfig


def test_bucket_index_options_and_recorded_layout() -> None:
    t = OdsTable(source="shop.orders", key=["id", "shop"], type="mor", index="bucket", buckets=16, compact_every=0)
    o = hudi.write_options(name="orders", key=t.key, ordering="_seq", partition=None, layout=t)
    assert o["hoodie.index.type"] == "BUCKET" and o["hoodie.bucket.index.num.buckets"] == "16"
    assert o["hoodie.bucket.index.hash.field"] == "id,shop"
    assert o["hoodie.datasource.write.table.type"] == "MERGE_ON_READ" and o["hoodie.compact.inline"] == "false"
    assert o[hudi.META_PREFIX + hudi_layout.META_KEY] == "bucket:16"
    m = ModelConfig(key=["uid"], type="mor", compact_every=3)
    o = hudi.write_options(name="m", key=["_lake_key"], ordering=None, partition=None, layout=m)
    assert o["hoodie.index.type"] == "SIMPLE" and o["hoodie.compact.inline.max.delta.commits"] == "3"
    assert o[hudi.META_PREFIX + hudi_layout.META_KEY] == "simple"


@pytest.mark.parametrize("fields, says", [
    ({"index": "bucket", "partition_by": {"column": "created"}}, "cannot go with `partition_by`"),
    ({"buckets": 4}, "`buckets:` is for the bucket index"),
    ({"compact_every": 2}, "for merge-on-read tables"),
    ({"index": "bucket", "buckets": 0}, "greater than or equal to 1"),
])
def test_layouts_that_do_not_fit_are_config_errors(fields: dict, says: str) -> None:
    with pytest.raises(ValidationError) as e:
        OdsTable(source="shop.orders", key=["id"], **fields)
    assert says in str(e.value)


def test_model_bucket_index_with_partition_is_an_error() -> None:
    with pytest.raises(ValidationError, match="cannot go with `partition_by`"):
        ModelConfig(key=["id"], partition_by="dt", index="bucket")


@pytest.mark.parametrize("recorded, fields, bad", [
    (None, {}, None),
    (None, {"index": "bucket"}, "simple index"),
    ("simple", {"index": "bucket", "buckets": 4}, "simple index"),
    ("bucket:4", {"index": "bucket", "buckets": 4}, None),
    ("bucket:4", {"index": "bucket", "buckets": 8}, "4 buckets"),
    ("bucket:4", {}, None),  # SIMPLE finds keys in any file group
])
def test_which_layout_changes_need_a_new_table(recorded: str | None, fields: dict, bad: str | None) -> None:
    problem = hudi_layout.change_problem(recorded, ModelConfig(key=["id"], **fields))
    assert (problem is None) if bad is None else (problem is not None and bad in problem)


def test_compact_schedule_runs_lake_compact() -> None:
    s = ScheduleConfig(name="c", cron="0 3 * * *", what="compact", select=["ods.orders"], lock_timeout=60)
    assert lake_commands(s) == [["compact", "ods.orders", "--lock-timeout", "60"]]
    with pytest.raises(ValidationError, match="apply to builds"):
        ScheduleConfig(name="c", cron="0 3 * * *", what="compact", incremental=True)
