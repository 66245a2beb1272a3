"""Model contracts as written in a model's YAML (models/contract.py, models/model_config.py): both
forms, the types lake compares, and the errors that name the column and the fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models.contract import normal_type, sql_type_problem
from models.model_config import ModelConfig


def test_mapping_and_dbt_list_forms_give_the_same_contract() -> None:
    mapping = ModelConfig.model_validate({"contract": "enforced", "columns": {
        "user_id": {"type": "BIGINT", "nullable": False, "description": "the buyer"},
        "total": {"type": "decimal(18, 2)"}}})
    dbt = ModelConfig.model_validate({"contract": "enforced", "columns": [
        {"name": "user_id", "data_type": "long", "description": "the buyer", "constraints": [{"type": "not_null"}]},
        {"name": "total", "data_type": "DECIMAL(18,2)"}]})
    for c in (mapping, dbt):
        assert {k: (v.type, v.nullable) for k, v in c.column_contracts.items()} == {"user_id": ("bigint", False), "total": ("decimal(18,2)", True)}
        assert c.columns == {"user_id": "the buyer"}
    # Plain descriptions stay descriptions; no contract without `contract: enforced`.
    assert ModelConfig.model_validate({"columns": {"a": "text"}}).column_contracts == {}


def test_types_are_compared_in_spark_spelling() -> None:
    assert normal_type("Array< INTEGER >") == "array<int>"
    assert normal_type("map<string, decimal>") == "map<string,decimal(10,0)>"
    assert normal_type("struct<a: long, b: short>") == "struct<a:bigint,b:smallint>"
    assert sql_type_problem("varchar(10)") is not None and "decimal(p,s)" in (sql_type_problem("varchar(10)") or "")
    assert sql_type_problem("array<int") is not None
    assert sql_type_problem("timestamp_ntz") is None


@pytest.mark.parametrize(("yaml", "says"), [
    ({"contract": "enforced"}, "needs the columns' types"),
    ({"contract": "enforced", "columns": {"a": {"type": "int"}, "b": "text"}}, "column 'b' has no type"),
    ({"columns": {"a": {"type": "int", "size": 3}}}, "unknown key 'size'"),
    ({"columns": {"a": {"type": "int", "constraints": [{"type": "unique"}]}}}, "not one lake enforces"),
    ({"columns": {"a": {"nullable": False}}}, "`nullable` without a `type`"),
    ({"columns": {"a": {"type": "text"}}}, "unknown type 'text'"),
    ({"columns": [{"description": "no name"}]}, "needs a `name:`"),
])
def test_errors_name_the_column_and_the_fix(yaml: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError) as e:
        ModelConfig.model_validate(yaml)
    assert says in str(e.value), str(e.value)
