"""The sidecar `<stem>.yaml` of a DWD/DWS model (re-exported by models/config.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from models.contract import ColumnContract, split_model_columns
from models.deploy import FIX_SEPARATOR
from models.layout import TableLayout
from models.quality import CheckSpec
from models.unit_test import UnitTest


class ModelConfig(TableLayout):
    """Sidecar `<stem>.yaml` of a DWD/DWS model."""

    key: list[str] | None = Field(default=None, description="The output key; inferred for GROUP BY (the group columns) and row-wise models.")
    partition_by: str | None = Field(default=None, description="An output column to partition the table by.")
    strategy: Literal["rowwise", "aggregate", "rescan", "full"] | None = Field(default=None, description="Override the inferred "
                                                                               "strategy (checked: an impossible one is an error).")
    # `type`, `index`, `buckets`, `compact_every` of its table: models/layout.py.
    recompute_below_mib: float | None = Field(default=None, ge=0, description="This model's own `build.recompute_below_mib`, e.g. 0 for "
                                              "a row-wise model over a large upstream.")
    incremental: Literal["auto", "strict"] = Field(default="auto", description="`strict`: the model is never rebuilt in full "
                                                   "behind your back: a build that would fall back to a full build or a recompute "
                                                   "(a changed model, a cleaned checkpoint, a strategy that cannot apply) fails with "
                                                   "the reason, until `lake build <model> --allow-full` allows it once; a build without "
                                                   "`--incremental` builds it incrementally, and `build.recompute_below_mib` does not apply.")
    contract: Literal["enforced"] | None = Field(default=None, description="`enforced`: the output must have exactly the columns "
                                                 "`columns:` declares, with their types (and nullability); a build that does not "
                                                 "match fails before anything is committed (dbt's model contracts).")
    history: bool = Field(default=False, description="`true`: keep `<layer>.<name>_history`, one row per version of each output row "
                          "across builds with `_valid_from` / `_valid_to` (the commit times of the builds that wrote and ended it), "
                          "`_is_current` and `_ended_by_delete` (dbt snapshots of a query; framework/transform/model_history.py).")
    depends_on: list[str] = Field(default_factory=list, description="Python models only: the tables it reads, `<layer>.<table>`.")
    tags: list[str] = Field(default_factory=list, description="Labels; `tag:NAME` selects them.")
    description: str | None = Field(default=None, description="What the model computes (`lake docs`).")
    owner: str | None = Field(default=None, description="Who answers for it (`lake docs`).")
    columns: dict[str, str] = Field(default_factory=dict, description="Columns: `{name: text}`, `{name: {description: text, type: "
                                    "bigint, nullable: false}}` or dbt's list `[{name: x, description: text, data_type: bigint, "
                                    "constraints: [{type: not_null}]}]`; types are what `contract: enforced` checks.")
    column_contracts: dict[str, ColumnContract] = Field(default_factory=dict, description="The columns' types and nullability "
                                                        "(also written as `type:`/`nullable:` inside `columns:`).")
    # Evaluated by the quality gate before the Hudi commit (framework/project/checks.py parses them).
    checks: list[CheckSpec] = Field(default_factory=list, description="Quality checks (reference: Checks).")
    tests: list[UnitTest] = Field(default_factory=list, description="Unit tests of the model's logic (`lake test`); not in the fingerprint.")

    @model_validator(mode="before")
    @classmethod
    def _columns(cls, data: object) -> object:
        """`columns:` (a mapping, or dbt's list) as descriptions (`columns`) and types
        (`column_contracts`)."""
        if not isinstance(data, dict) or "columns" not in data:
            return data
        v = data["columns"]
        if isinstance(v, list):  # dbt's form
            if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in v):
                raise ValueError(f"each entry of `columns` needs a `name:`{FIX_SEPARATOR}write e.g. columns: [{{name: user_id, "
                                 "description: the user}}]")
            v = {c["name"]: {k: x for k, x in c.items() if k != "name"} for c in v}
        if not isinstance(v, dict):
            return data
        docs, contracts = split_model_columns(v)
        return {**data, "columns": docs, "column_contracts": {**contracts, **data.get("column_contracts", {})}}

    @model_validator(mode="after")
    def _contract(self) -> ModelConfig:
        if self.contract == "enforced" and not self.column_contracts:
            raise ValueError("`contract: enforced` needs the columns' types" + FIX_SEPARATOR
                             + "declare every output column with its type, e.g. `columns: {user_id: {type: bigint}, orders: {type: bigint}}`")
        if self.contract == "enforced":
            untyped = sorted(c for c in self.columns if c not in self.column_contracts)
            if untyped:
                raise ValueError(f"`contract: enforced`: column {untyped[0]!r} has no type" + FIX_SEPARATOR
                                 + f"give it one: `{untyped[0]}: {{type: string, description: ...}}`")
        return self

    @field_validator("depends_on")
    @classmethod
    def _qualified(cls, v: list[str]) -> list[str]:
        for name in v:
            if name.count(".") != 1:
                raise ValueError(f"{name!r} must be <layer>.<table>, e.g. ods.user_order or dwd.order_detail")
        return v
