"""Per-table checks of `ordering:` and `partition_by.column` against a batch's column types."""

from __future__ import annotations

from framework.ods.tablecheck import table_config_problem
from models.config import OdsTable

F = "layers/ods/shop.yaml"


def _t(**kw: object) -> OdsTable:
    return OdsTable.model_validate({"source": "shop.orders", "key": ["id"], **kw})


def test_good_tables_have_no_problem() -> None:
    cols = {"id": "bigint", "updated": "timestamp", "day": "date", "version": "int", "n": "integer", "created": "string"}
    assert table_config_problem(_t(), cols, F) is None
    assert table_config_problem(_t(ordering=["updated", "day", "version", "n"]), cols, F) is None
    assert table_config_problem(_t(partition_by={"column": "created"}), cols, F) is None
    assert table_config_problem(_t(partition_by={"column": "updated", "granularity": "day"}), cols, F) is None


def test_missing_ordering_column() -> None:
    p = table_config_problem(_t(ordering=["modified"]), {"id": "bigint", "updated": "timestamp"}, F)
    assert p == ("layers/ods/shop.yaml: ods.orders `ordering:` names column 'modified', which the events of "
                 "shop.orders do not have (columns: id, updated); fix: name a timestamp, date or integer "
                 "column they carry, or remove it")


def test_ordering_column_of_a_type_that_does_not_order() -> None:
    p = table_config_problem(_t(ordering=["updated"]), {"id": "bigint", "updated": "string"}, F)
    assert p is not None and p.startswith("layers/ods/shop.yaml: ods.orders `ordering:` column 'updated' has type STRING")
    assert "`columns: {updated: timestamp}`" in p
    for typ in ("double", "decimal(10,2)", "boolean", "binary"):
        p = table_config_problem(_t(ordering=["v"], columns={"v": "string"}), {"v": typ}, F)
        assert p is not None and typ.upper() in p and "`columns:" not in p  # already declared


def test_partition_column_missing_or_binary() -> None:
    p = table_config_problem(_t(partition_by={"column": "created"}), {"id": "bigint"}, F)
    assert p is not None and "`partition_by.column` 'created' is not a column of the events of shop.orders (columns: id)" in p
    assert p.startswith("layers/ods/shop.yaml: ods.orders ") and "fix: " in p
    p = table_config_problem(_t(partition_by={"column": "blob"}), {"blob": "binary"}, F)
    assert p is not None and "has type BINARY" in p
