"""Unit tests of model logic (`lake test`): their YAML and the results `lake test --json` prints.

A test gives rows for a model's upstreams, optionally a list of change events on them, and the
rows the model must return. It lives under `tests:` in the model's YAML, or under `unit_tests:`
(with `model:`) in a project file `tests/<anything>.yaml`:

```yaml
tests:
  - name: counts_per_device
    given:
      - input: ods.user                 # an upstream, named as the model's SQL names it
        rows: [{id: 1, device_model: a}, {id: 2, device_model: a}]
      - input: ods.product
        format: csv
        rows: |
          pid,pprice
          1,9.50
    changes:                            # optional: an incremental test
      - {op: update, input: ods.user, row: {id: 2, device_model: b}}
    expect:
      rows: [{device_model: a, num: 1}, {device_model: b, num: 1}]
```

What the rows mean, how they are typed and what the changes do is framework/modeltest/'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

RowFormat = Literal["dict", "csv"]


def _table_name(v: str) -> str:
    if v.count(".") != 1 or not all(v.split(".")):
        raise ValueError(f"{v!r} is not <layer>.<table>{FIX_SEPARATOR}name the upstream as the model does, e.g. ods.user or dwd.order_detail")
    return v.lower()


class RowSet(StrictModel):
    """Rows inline (`rows:`: a list of mappings, or CSV text with `format: csv`) or in a file
    (`file:`, relative to the YAML file: .csv, or .yaml/.yml/.json holding a list of mappings)."""

    rows: list[dict[str, Any]] | str | None = Field(default=None, description="Rows inline: a list of mappings (a column not given "
                                                    "is NULL), or CSV text with `format: csv`.")
    format: RowFormat = Field(default="dict", description="`csv`: `rows:` is CSV text, a header line first; an empty cell is NULL.")
    file: str | None = Field(default=None, description="Rows in a file, relative to the YAML: .csv, or .yaml/.yml/.json holding a list of mappings.")

    @model_validator(mode="after")
    def _one_source(self) -> RowSet:
        if (self.rows is None) == (self.file is None):
            raise ValueError(
                f"give exactly one of `rows:` and `file:`{FIX_SEPARATOR}e.g. `rows: [{{id: 1, name: a}}]`, "
                "`format: csv` with `rows: |` and CSV lines, or `file: fixtures/users.csv`"
            )
        if isinstance(self.rows, str) and self.format != "csv":
            raise ValueError(f"`rows:` is text, not a list of mappings{FIX_SEPARATOR}add `format: csv` for CSV rows (a header line first)")
        if isinstance(self.rows, list) and self.format == "csv":
            raise ValueError(f"`format: csv` needs `rows:` as CSV text{FIX_SEPARATOR}write `rows: |` followed by a header line and one line per row")
        return self


class GivenInput(RowSet):
    """The rows of one upstream the model reads."""

    input: str = Field(description="An upstream, named as the model's SQL (or `depends_on`) names it: ods.user.")
    # Others come from the upstream's declaration or the values (framework/modeltest/rows.py).
    columns: dict[str, str] = Field(default_factory=dict, description="Spark SQL types of columns, e.g. `{amount: \"decimal(10,2)\"}`; "
                                    "else the upstream's declared type, else inferred from the values.")

    @field_validator("input")
    @classmethod
    def _qualified(cls, v: str) -> str:
        return _table_name(v)


class ChangeEvent(StrictModel):
    """One change of an upstream after the given rows: an insert, an update (`row` holds the key
    and the columns that change; `key:` names the row when the update changes its key) or a
    delete (`row` holds the key)."""

    op: Literal["insert", "update", "delete"] = Field(description="The change.")
    input: str = Field(description="The upstream it changes.")
    row: dict[str, Any] = Field(min_length=1, description="insert: the row; update: the key and the columns that change; delete: the key.")
    key: dict[str, Any] | None = Field(default=None, description="An update that changes the row's key: the old key.")

    @field_validator("input")
    @classmethod
    def _qualified(cls, v: str) -> str:
        return _table_name(v)

    @model_validator(mode="after")
    def _key_for_updates(self) -> ChangeEvent:
        if self.key is not None and self.op != "update":
            raise ValueError(f"`key:` is for updates that change a row's key{FIX_SEPARATOR}remove `key:`; `row:` names the row of an {self.op}")
        return self


class Expectation(RowSet):
    """The rows the model must return. Only the columns they name are compared."""


class UnitTest(StrictModel):
    """One test of one model (under `tests:` in the model's YAML)."""

    name: str = Field(min_length=1, description="One line naming the test.")
    description: str | None = Field(default=None, description="What it checks.")
    given: list[GivenInput] = Field(default_factory=list, description="Rows of the upstreams; an upstream left out is empty.")
    changes: list[ChangeEvent] = Field(default_factory=list, description="Events after `given:`: the test then also builds the model "
                                       "incrementally over them.")
    expect: Expectation = Field(description="The rows the model must return; only the columns they name are compared.")
    ordered: bool = Field(default=False, description="Compare the rows in order (the full computation only; a table has none).")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip() or "\n" in v:
            raise ValueError(f"a test name is one line of text{FIX_SEPARATOR}e.g. `name: counts_per_device`")
        return v.strip()


class ProjectUnitTest(UnitTest):
    """A test in a project file tests/*.yaml: it names its model."""

    model: str = Field(description="The model it tests, `<layer>.<name>`.")


class UnitTestFile(StrictModel):
    """A project file tests/*.yaml."""

    unit_tests: list[ProjectUnitTest] = Field(default_factory=list, description="Tests of any models of the project.")


# --------------------------------------------------------------------------- results
DiffMark = Literal["ok", "missing", "extra", "expected", "actual"]


class DiffLine(BaseModel):
    """One row of a comparison: equal (`ok`), expected but not returned (`missing`), returned but
    not expected (`extra`), or a row whose key matches but whose values differ (`expected` then
    `actual`)."""

    mark: DiffMark
    values: list[str | None]


class Comparison(BaseModel):
    """The model's rows against the expected rows, on the columns the expectation names."""

    matches: bool
    columns: list[str]
    missing: int = 0
    extra: int = 0
    changed: int = 0
    ordered: bool = False
    lines: list[DiffLine] = Field(default_factory=list)

    def summary(self) -> str:
        if self.matches:
            return "matches"
        parts = [f"{n} {what} row{'s' if n != 1 else ''}" for n, what in
                 ((self.missing, "missing"), (self.extra, "extra"), (self.changed, "changed")) if n]
        return ", ".join(parts) or "rows out of order"


class UnitTestResult(BaseModel):
    """The outcome of one unit test."""

    model: str = Field(description="The model it tests, `<layer>.<name>`.")
    test: str
    file: str
    line: int | None = None
    status: Literal["pass", "fail", "error"]
    incremental: bool = False  # the test has `changes:`
    full: Comparison | None = None  # the model over the final rows
    changes: Comparison | None = None  # the model's incremental build over the change events
    mode: str | None = None  # how lake built the changes: the strategy ("aggregate"), or "recompute, full strategy"
    message: str | None = None
    seconds: float = 0.0
    cached: bool = False  # passed before with the same model, test and inputs: not rerun (framework/modeltest/cache.py)
