"""`layers/external/<name>.yaml`: a table lake reads but never writes, `external.<name>`.

    description: exchange rates, published daily by the treasury team's job
    path: s3a://treasury/rates        # a Hudi table (format: hudi, the default) or a Parquet folder
    format: hudi
    key: [currency, day]              # unique, if the writer guarantees it
    columns:                          # checked against the table at every build
      currency: string
      day: date
      rate: "decimal(18,8)"

or, for a table of the Spark catalog (Hive metastore, Glue):

    table: finance.fx_rates

Exactly one of `path:` and `table:`. Models read it as `external.<name>` (framework/transform/external.py).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from models.base import StrictModel
from models.config import _SQL_TYPE
from models.deploy import FIX_SEPARATOR
from models.docs import typed_short_form

EXTERNAL_TYPES_HINT = "string, boolean, tinyint, smallint, int, bigint, float, double, date, timestamp, binary, decimal(p,s)"
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


class ExternalColumn(StrictModel):
    """One column an external table must have: its Spark SQL type and what it means."""

    type: str = Field(description=f"Its Spark SQL type: {EXTERNAL_TYPES_HINT}.")
    description: str | None = Field(default=None, description="What the column holds.")

    @field_validator("type")
    @classmethod
    def _known(cls, v: str) -> str:
        if not _SQL_TYPE.match(v.strip()):
            raise ValueError(f"{v!r} is not a type lake checks{FIX_SEPARATOR}use one of {EXTERNAL_TYPES_HINT}, or leave the "
                             "column out of `columns:` (it is read anyway)")
        return v.strip().lower()


class ExternalConfig(StrictModel):
    """`layers/external/<name>.yaml`: the table `external.<name>`, which models read and lake never writes."""

    description: str | None = Field(default=None, description="What the table holds and who writes it.")
    owner: str | None = Field(default=None, description="Who answers for it.")
    tags: list[str] = Field(default_factory=list, description="Labels; `tag:NAME` selects them (and `tag:NAME+` their readers).")
    path: str | None = Field(default=None, description="Where the table is: a folder on the local disk (relative to the "
                             "project root) or a Hadoop URI (s3a://bucket/x, hdfs://...). Not with `table:`.")
    format: Literal["hudi", "parquet"] | None = Field(default=None, description="What is at `path:`: a Hudi table (the "
                                                      "default) or a folder of Parquet files.")
    table: str | None = Field(default=None, description="A table of the Spark catalog, `db.table`. Not with `path:`.")
    key: list[str] | None = Field(default=None, min_length=1, description="Columns whose values identify a row, if the "
                                  "table's writer guarantees it: models reading it row-wise may then keep its key.")
    columns: dict[str, ExternalColumn] = Field(default_factory=dict, description="Columns the table must have and their "
                                               "types, `{name: type}` or `{name: {type: ..., description: ...}}`: a build "
                                               "reading it fails when one is missing or of another type.")

    @field_validator("columns", mode="before")
    @classmethod
    def _short_form(cls, v: object) -> object:
        return typed_short_form(v)

    @field_validator("table")
    @classmethod
    def _table_name(cls, v: str | None) -> str | None:
        if v is not None and not _TABLE.match(v.strip()):
            raise ValueError(f"{v!r} is not a catalog table name{FIX_SEPARATOR}write `database.table` (letters, digits "
                             "and underscores), e.g. `table: finance.fx_rates`")
        return v.strip() if v is not None else None

    @model_validator(mode="after")
    def _one_source(self) -> ExternalConfig:
        if (self.path is None) == (self.table is None):
            both = "both `path:` and `table:`" if self.path is not None else "neither `path:` nor `table:`"
            raise ValueError(f"declares {both}{FIX_SEPARATOR}declare exactly one: `path: <folder or URI>` for a Hudi "
                             "table or Parquet folder, or `table: db.table` for a table of the Spark catalog")
        if self.table is not None and self.format is not None:
            raise ValueError(f"`format: {self.format}` goes with `path:`, not `table:`{FIX_SEPARATOR}remove `format:` "
                             "(Spark's catalog knows the table's format)")
        if self.key:
            missing = [k for k in self.key if self.columns and k not in self.columns]
            if missing:
                raise ValueError(f"key column {missing[0]!r} is not in `columns:`{FIX_SEPARATOR}add it to `columns:` "
                                 "with its type, or remove it from `key:`")
        return self

    @property
    def kind(self) -> Literal["hudi", "parquet", "catalog"]:
        """What lake reads: a Hudi table or Parquet folder at `path:`, or a catalog table."""
        return "catalog" if self.table is not None else (self.format or "hudi")
