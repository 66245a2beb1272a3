"""Column contracts: the names, Spark SQL types and nullability a table promises its readers.

A model with `contract: enforced` declares its columns with types in `columns:` (dbt's model
contracts); a build whose output differs fails before anything is committed
(framework/transform/contract.py). An ODS table with `contract: enforced` takes only events that
fit its `columns:` and dead-letters the others instead of widening the table.

`columns:` of a model is written as

    columns:
      user_id: {type: bigint, nullable: false, description: the user}
      amount: {type: "decimal(12,2)"}

or in dbt's list form, `[{name: user_id, data_type: bigint, constraints: [{type: not_null}]}]`.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

_SIMPLE = re.compile(
    r"^(string|boolean|tinyint|smallint|int|integer|bigint|long|float|double|date|timestamp|timestamp_ntz|binary"
    r"|decimal\(\s*\d+\s*,\s*\d+\s*\))$", re.IGNORECASE)
_COMPLEX = re.compile(r"^(array|map|struct)\s*<.*>$", re.IGNORECASE | re.DOTALL)
_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float", "decimal": "decimal(10,0)"}
TYPES_HINT = "string, boolean, int, bigint, float, double, date, timestamp, binary, decimal(p,s), array<...>, map<...>, struct<...>"


def sql_type_problem(text: str) -> str | None:
    """Why `text` is not a Spark SQL type lake can compare, or None."""
    t = text.strip()
    if _SIMPLE.match(t):
        return None
    if _COMPLEX.match(t):
        depth = 0
        for ch in t:
            depth += {"<": 1, ">": -1}.get(ch, 0)
            if depth < 0:
                break
        if depth == 0:
            return None
    return f"unknown type {text!r}{FIX_SEPARATOR}use one of {TYPES_HINT}"


def normal_type(text: str) -> str:
    """A type's text as lake compares it: lower case, no spaces, Spark's names (`integer` → `int`,
    `decimal` → `decimal(10,0)`), also inside `array<...>`, `map<...>` and `struct<...>`."""
    t = re.sub(r"\s+", "", text.lower())
    return re.sub(r"(?<![a-z_0-9])(integer|long|short|byte|real|decimal)(?![a-z_0-9(])", lambda m: _ALIASES[m.group(1)], t)


class ColumnContract(StrictModel):
    """One column of a model's contract: its type and whether it may hold NULL."""

    type: str = Field(description="The Spark SQL type the column must have, e.g. `bigint`, `decimal(12,2)`, `array<string>`.")
    nullable: bool = Field(default=True, description="`false`: a build whose rows hold NULL in this column fails (dbt's "
                           "`not_null` constraint).")

    @field_validator("type")
    @classmethod
    def _type(cls, v: str) -> str:
        problem = sql_type_problem(v)
        if problem:
            raise ValueError(problem)
        return normal_type(v)


def split_model_columns(columns: dict[object, object]) -> tuple[dict[object, object], dict[object, object]]:
    """A model's `columns:` mapping as (descriptions, contracts): an entry may be a description, or
    a mapping with `description:`, `type:` (dbt: `data_type:`), `nullable:` and dbt's
    `constraints: [{type: not_null}]`; anything else is an error naming the column."""
    docs: dict[object, object] = {}
    contracts: dict[object, object] = {}
    allowed = {"description", "type", "data_type", "nullable", "constraints"}
    for name, spec in columns.items():
        if not isinstance(spec, dict):
            docs[name] = spec
            continue
        extra = sorted(str(k) for k in spec if k not in allowed)
        if extra:
            raise ValueError(f"column {name!r}: unknown key {extra[0]!r}{FIX_SEPARATOR}use {', '.join(sorted(allowed))}")
        if "description" in spec:
            docs[name] = spec["description"]
        typ = spec.get("type", spec.get("data_type"))
        nullable = spec.get("nullable", True)
        for c in spec.get("constraints") or []:
            kind = c.get("type") if isinstance(c, dict) else None
            if kind != "not_null":
                raise ValueError(f"column {name!r}: constraint {c!r} is not one lake enforces{FIX_SEPARATOR}"
                                 "use `constraints: [{type: not_null}]` (or `nullable: false`); other rules are checks (`checks:`)")
            nullable = False
        if typ is not None:
            contracts[name] = {"type": typ, "nullable": nullable}
        elif "nullable" in spec or "constraints" in spec:
            raise ValueError(f"column {name!r}: `nullable` without a `type`{FIX_SEPARATOR}give the column its type, e.g. "
                             f"`{name}: {{type: bigint, nullable: false}}`")
    return docs, contracts
