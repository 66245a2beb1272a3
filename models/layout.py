"""How a lake table is laid out in Hudi: its table type, index and compaction.

Shared by ODS tables (`layers/ods/*.yaml`) and models (`<model>.yaml`):

    type: mor          # cow (default) | mor
    index: bucket      # simple (default) | bucket
    buckets: 16        # bucket index: file groups of the table, fixed when it is created
    compact_every: 5   # mor: inline compaction every N delta commits; 0 = only `lake compact`

Why these and not more (BENCHMARKS.md, "Table layouts"): a copy-on-write upsert rewrites every
file group a change touches, so random keys cost a rewrite of the whole table; merge-on-read
appends the change to log files. The SIMPLE index joins the incoming keys against every key of
the table; a bucket index hashes each key to its file group, so neither the lookup nor the
write grows with the table. Hudi's bucket index is per partition, so it cannot move a row whose
partition value changes (lake's partitioned tables use GLOBAL_SIMPLE for that): the two do not
go together.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

DEFAULT_BUCKETS = 8
DEFAULT_COMPACT_EVERY = 5


class TableLayout(StrictModel):
    """The Hudi layout fields of an ODS table or a model (mixed into both configs)."""

    type: Literal["cow", "mor"] = Field(default="cow", description="Hudi table type: copy-on-write, or merge-on-read (appends a "
                                        "change to log files instead of rewriting every file group it touches).")
    index: Literal["simple", "bucket"] = Field(default="simple", description="`bucket`: a key's hash names its file group (no lookup); "
                                               "not with `partition_by`.")
    buckets: int = Field(default=DEFAULT_BUCKETS, ge=1, le=4096, description="Bucket index only: the table's file groups, fixed when "
                         "it is created.")
    compact_every: int = Field(default=DEFAULT_COMPACT_EVERY, ge=0, description="Merge-on-read only: inline compaction every N delta "
                               "commits; 0: only `lake compact`.")

    @model_validator(mode="after")
    def _bucket_layout(self) -> TableLayout:
        partitioned = getattr(self, "partition_by", None) is not None
        if self.index == "bucket" and partitioned:
            raise ValueError(
                "`index: bucket` cannot go with `partition_by`: Hudi's bucket index is per partition, so a row "
                f"whose partition value changes would be duplicated{FIX_SEPARATOR}drop `partition_by`, or use `index: simple`"
            )
        if "buckets" in self.model_fields_set and self.index != "bucket":
            raise ValueError(f"`buckets:` is for the bucket index{FIX_SEPARATOR}add `index: bucket`, or remove `buckets:`")
        if "compact_every" in self.model_fields_set and self.type != "mor":
            raise ValueError(f"`compact_every:` is for merge-on-read tables{FIX_SEPARATOR}add `type: mor`, or remove `compact_every:`")
        return self

    @property
    def layout_tag(self) -> str:
        """What lake records in each commit of the table and compares before writing: the settings
        an existing table cannot change in place."""
        return f"bucket:{self.buckets}" if self.index == "bucket" else "simple"
