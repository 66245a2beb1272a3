"""The sidecar `<name>.yaml` of a seed, `layers/seed/<name>.csv` (framework/project/seeds/).

    description: ISO 3166 country codes
    key: [code]
    columns:
      code: string
      name: {type: string, description: the English short name}
      eu_member: boolean
    checks:
      - not_null: [name]

Every key is optional: without `columns:` types are inferred from the values (as dbt-spark
does: bigint, double, boolean, date, timestamp, else string); without `key:` a row is its values
and the file must not repeat a row.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR
from models.docs import typed_short_form
from models.quality import CheckSpec

SEED_TYPES_HINT = "string, boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s), date, timestamp"
_SEED_TYPE = re.compile(r"^(string|boolean|tinyint|smallint|int|integer|bigint|long|float|double|date|timestamp"
                        r"|decimal\(\s*\d+\s*,\s*\d+\s*\))$", re.IGNORECASE)


class SeedColumn(StrictModel):
    """One column of a seed: its Spark SQL type (None: inferred) and what it means."""

    type: str | None = Field(default=None, description=f"Its Spark SQL type: {SEED_TYPES_HINT}.")
    description: str | None = Field(default=None, description="What the column holds (`lake docs`).")

    @field_validator("type")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and not _SEED_TYPE.match(v.strip()):
            raise ValueError(f"{v!r} is not a type a seed column can have{FIX_SEPARATOR}use one of {SEED_TYPES_HINT}")
        return v


class SeedConfig(StrictModel):
    """Sidecar `<name>.yaml` of a seed `layers/seed/<name>.csv`."""

    description: str | None = Field(default=None, description="What the seed holds (`lake docs`).")
    owner: str | None = Field(default=None, description="Who answers for it (`lake docs`).")
    tags: list[str] = Field(default_factory=list, description="Labels; `tag:NAME` selects them.")
    key: list[str] | None = Field(default=None, min_length=1, description="Columns that identify a row: a changed file then "
                                  "upserts the changed keys and deletes the removed ones, and models reading the seed row-wise "
                                  "stay row-wise. Its values must be unique and not empty.")
    columns: dict[str, SeedColumn] = Field(default_factory=dict, description="Column types (and descriptions): `{name: type}` "
                                           "or `{name: {type: ..., description: ...}}`; a column left out is typed from its "
                                           "values. Every name must be a column of the CSV's header.")
    delimiter: str = Field(default=",", min_length=1, max_length=1, description="The CSV's field separator.")
    checks: list[CheckSpec] = Field(default_factory=list, description="Quality checks on the rows, before each commit "
                                    "(reference: Checks).")

    @field_validator("columns", mode="before")
    @classmethod
    def _short_form(cls, v: object) -> object:
        return typed_short_form(v)
