"""`catalog:` in lake.yaml (models/config.py holds the rest of it)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

# Spark confs and Hudi options that `catalog:` decides, so two settings cannot disagree.
CATALOG_CONFS = ("spark.sql.catalogImplementation", "spark.hadoop.hive.metastore.uris", "spark.hive.metastore.uris")
CATALOG_HUDI_OPTIONS = frozenset({
    "hoodie.datasource.hive_sync.enable", "hoodie.datasource.meta.sync.enable", "hoodie.datasource.hive_sync.mode",
    "hoodie.datasource.hive_sync.metastore.uris", "hoodie.datasource.hive_sync.database", "hoodie.datasource.hive_sync.table",
})


class CatalogConfig(StrictModel):
    """`catalog:` in lake.yaml: where the tables' names live.

    `embedded` (default): Spark's in-memory catalog, rebuilt from the warehouse at each lake
    start; only lake's own processes know the names. `hive`: every table lake writes is registered,
    with its partitions and columns, in the Hive metastore at `uri` (Hudi's Hive sync, HMS mode),
    where any Spark, Trino, Presto or Athena reaches it, and lake's sessions use that metastore.
    """

    kind: Literal["embedded", "hive"] = Field(default="embedded", description="`embedded`: Spark's in-memory catalog, rebuilt at each "
                                              "start; `hive`: every table registered in a Hive metastore at each commit.")
    uri: str | None = Field(default=None, description="`kind: hive` only: `thrift://host:port`; several metastores comma-separated "
                            "(the Hive client tries each).")

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str | None) -> str | None:
        if v is None:
            return v
        for u in v.split(","):
            m = re.fullmatch(r"thrift://([^:/\s]+):(\d+)", u.strip())
            if not m or not 0 < int(m.group(2)) < 65536:
                raise ValueError(f"{u.strip()!r} is not a metastore address{FIX_SEPARATOR}give thrift://host:port, e.g. thrift://metastore:9083")
        return ",".join(u.strip() for u in v.split(","))

    @model_validator(mode="after")
    def _uri_for_hive(self) -> CatalogConfig:
        if self.kind == "hive" and not self.uri:
            raise ValueError(f"`kind: hive` needs the metastore's address{FIX_SEPARATOR}add `uri: thrift://host:9083` under `catalog:`")
        if self.kind == "embedded" and self.uri:
            raise ValueError(f"`uri` applies to `kind: hive` only{FIX_SEPARATOR}set `kind: hive`, or remove `uri`")
        return self


def check_sync_options(v: dict[str, str]) -> dict[str, str]:
    """`hudi:` options may not contradict `catalog:` (it decides whether and where tables sync)."""
    taken = sorted(k for k in v if k in CATALOG_HUDI_OPTIONS)
    if taken:
        raise ValueError(
            f"{taken[0]} is decided by `catalog:`{FIX_SEPARATOR}remove it; `catalog: {{kind: hive, uri: thrift://host:9083}}` "
            "registers every table in that metastore (other hoodie.datasource.hive_sync.* options may stay)"
        )
    return v
