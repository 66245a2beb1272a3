"""Names and paths in the SQL lake writes are escaped: a warehouse under a directory whose name
holds a quote registers and queries like any other; one Hudi cannot register says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework.errors import LakeError
from framework.runtime.paths import Layout
from framework.table.catalog import quote_ident, quote_literal, register_ods
from tests.helpers import LakeProject, envelope

TABLES = """
tables:
  - source: shop.users
    key: [id]
    checks:
      - expect_column_values_to_be_between: {column: age, min_value: 0}
        severity: drop
"""


def test_literals_and_identifiers_round_trip(spark: Any) -> None:
    for text in ["it's", "a\\'b", "back\\slash\\", "`tick`", "\"dq\"", "\\\\'"]:
        assert spark.sql(f"SELECT {quote_literal(text)} AS v").first()[0] == text, text
    assert spark.sql(f"SELECT 1 AS {quote_ident('a`b c')}").columns == ["a`b c"]


def test_warehouse_path_with_quotes(tmp_path: Path, spark: Any) -> None:
    root = tmp_path / "it's(o'dd)"
    root.mkdir()
    lp = LakeProject(root, TABLES)
    lp.write_cdc([
        envelope("c", "shop.users", None, {"id": 1, "age": 30}, pos=1),
        envelope("c", "shop.users", None, {"id": 2, "age": -1}, pos=2),   # quarantined
        envelope("c", "shop.ghosts", None, {"id": 3}, pos=3),            # dead letter
    ])
    lp.ingest(spark)
    names = register_ods(spark, lp.layout)
    assert {"ods.users", "_quarantine.ods_users", "_lake.dead_letter"} <= set(names)
    assert [tuple(r) for r in spark.sql("SELECT id, age FROM ods.users").collect()] == [(1, 30)]
    assert [r.id for r in spark.sql("SELECT id FROM _quarantine.ods_users").collect()] == [2]
    assert [r.source_table for r in spark.sql("SELECT source_table FROM _lake.dead_letter").collect()] == ["shop.ghosts"]
    loc = spark.sql("DESCRIBE TABLE EXTENDED ods_raw.users").where("col_name = 'Location'").first()
    assert loc is not None and loc.data_type.endswith(str(lp.layout.table("ods.users")))

    # A backquote (or a space, %, #, ...) in the path: Hudi looks for the table at the URI-escaped
    # path ("Missing schema for Create Table"), so lake says what to do instead.
    moved = tmp_path / "it's `odd`"
    root.rename(moved)
    with pytest.raises(LakeError, match=r"(?s)contains ' ' '`'.*fix: move the warehouse"):
        register_ods(spark, Layout(moved / "warehouse"))
