"""ODS contracts without Spark: what a `contract: enforced` declaration must say, and how the
schema versions of a batch are judged against it (framework/ods/contract.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from framework.ods.contract import contracted_columns, stored_problem
from models.config import OdsTable
from tests.helpers import ods_config_issues as _load


def test_a_contract_needs_columns_with_key_and_ordering(tmp_path: Path) -> None:
    (issue,) = _load(tmp_path, "tables:\n  - {source: shop.a, key: [id], contract: enforced}\n")
    assert issue.file == "layers/ods/t.yaml" and "without `columns:`" in issue.problem and "columns: {id: bigint" in issue.fix
    (issue,) = _load(tmp_path, "tables:\n  - {source: shop.a, key: [id], ordering: [v], contract: enforced, columns: {id: int}}\n")
    assert "'v'" in issue.problem and "v: bigint" in issue.fix
    (issue,) = _load(tmp_path, "tables:\n  - {source: shop.a, key: [id], contract: strict, columns: {id: int}}\n")
    assert issue.field.endswith("contract") and "enforced" in issue.problem
    assert _load(tmp_path, "tables:\n  - {source: shop.a, key: [id], contract: enforced, columns: {id: {type: int, description: the id}}}\n") == []


def _schema(fields: dict[str, dict[str, Any]]) -> str:
    image = [{"field": k, "optional": True, **v} for k, v in fields.items()]
    return json.dumps({"type": "struct", "fields": [{"field": "before", "type": "struct", "optional": True, "fields": image},
                                                     {"field": "after", "type": "struct", "optional": True, "fields": image}]})


def _row(schema: str | None, arrival: str) -> dict[str, Any]:
    return {"first_arrival": arrival, "is_truncate": False, "pos_max": None, "schema_raw": schema,
            "schema_hash": None if schema is None else f"h{arrival}", "keys": None, "n": 1}


TABLE = OdsTable(source="shop.a", key=["id"], contract="enforced", columns={"id": "bigint", "price": "decimal(10,2)"})
DEC = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "8"}}


def test_versions_are_judged_against_the_declared_types_not_widened() -> None:
    fits = _schema({"id": {"type": "int32"}, "price": DEC})  # narrower than declared: taken, in the declared types
    extra = _schema({"id": {"type": "int64"}, "price": DEC, "note": {"type": "string"}})
    wider = _schema({"id": {"type": "int64"}, "price": {**DEC, "parameters": {"scale": "2", "connect.decimal.precision": "14"}}})
    cols = contracted_columns(TABLE, [_row(fits, "1"), _row(extra, "2"), _row(wider, "3"), _row(None, "4")], {}, None, "layers/ods/t.yaml")
    assert cols.target == {"id": "bigint", "price": "decimal(10,2)"}
    assert set(cols.versions) == {"h1", ""}
    assert "note not in the contract of ods.a" in cols.rejected["h2"] and "layers/ods/t.yaml" in cols.rejected["h2"]
    assert "DECIMAL(14,2)" in cols.rejected["h3"] and "lake dead-letter replay --table ods.a" in cols.rejected["h3"]


def test_a_stored_table_must_fit_its_contract() -> None:
    assert stored_problem(TABLE, {"id": "int", "price": "decimal(8,2)"}, "f.yaml") is None  # the contract widens it
    assert "'note'" in (stored_problem(TABLE, {"id": "bigint", "note": "string"}, "f.yaml") or "")
    assert "DECIMAL(12,2)" in (stored_problem(TABLE, {"id": "bigint", "price": "decimal(12,2)"}, "f.yaml") or "")
    rows = [_row(None, "1"), _row(_schema({"id": {"type": "int64"}}), "2")]
    cols = contracted_columns(TABLE, rows, {"id": "bigint", "note": "string"}, None, "f.yaml")
    assert set(cols.rejected) == {"", "h2"} and not cols.versions


def test_a_declared_smallint_reads_back_as_int_and_still_fits() -> None:
    t = OdsTable(source="db.t", key=["id"], contract="enforced", columns={"id": "int", "n": "smallint", "b": "tinyint"})
    assert stored_problem(t, {"id": "int", "n": "int", "b": "int"}, "f.yaml") is None
