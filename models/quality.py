"""The type of a quality check declared under `checks:` of a model sidecar or an ODS table.

```yaml
checks:
  - expect_column_values_to_not_be_null: {column: device_model}   # any GE expectation, GE's arguments
    severity: error                                               # error (default) | warn | drop
  - not_null: [id, device_model]       # shorthands: not_null, unique, between, accepted_values, row_count
  - unique: [order_id, line_no]        # several columns: compound uniqueness
  - sql: "select * from {{ this }} where amount < 0"              # returns the failing rows
    name: no_negative_amounts
```

Each list item becomes one or more :class:`CheckSpec`. The parsing of these YAML forms, checked
against Great Expectations' registry with file, line and fix, is framework/project/checks.py's;
the config loader (framework/project/config.py) runs it before these types are validated.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from models.base import StrictModel

Severity = Literal["error", "warn", "drop"]
Kind = Literal["row", "table", "sql"]
Scope = Literal["rows", "table"]

# `{{ this }}` (dbt's spelling) is the data being checked; GE's own `{batch}` is accepted too.
THIS = re.compile(r"\{\{\s*this\s*\}\}|\{batch\}")


class CheckSpec(StrictModel):
    """One check: a GE expectation (or a custom SQL query) with lake's severity."""

    name: str = Field(description="label in messages and reports; unique within a model")
    expectation: str = Field(description="GE expectation type, e.g. expect_column_values_to_not_be_null")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="GE arguments")
    severity: Severity = "error"
    kind: Kind = Field(description="row: judges each row; table: the whole table; sql: custom query")
    on: Scope = Field(description="data evaluated: the rows being written or the resulting table")
    sql: str | None = Field(default=None, description="a custom check's query as the user wrote it")

    @property
    def column(self) -> str | None:
        c = self.kwargs.get("column")
        return c if isinstance(c, str) else None

    def query_on(self, view: str) -> str:
        """The custom SQL with `{{ this }}` replaced by `view`."""
        assert self.sql is not None
        return THIS.sub(view, self.sql)
