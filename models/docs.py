"""What `lake docs generate` knows about a project: written as `out/docs/catalog.json` beside the
HTML site (like dbt's catalog.json), so other tools can read the same facts."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from models.deploy import FIX_SEPARATOR


class ColumnDoc(BaseModel):
    name: str
    type: str | None = None  # as the table in the warehouse has it; None before the first write
    description: str | None = None
    sources: list[str] = Field(default_factory=list)  # ODS columns it comes from (column lineage)


class CheckDoc(BaseModel):
    name: str
    severity: str
    success: bool
    summary: str


class LastBuild(BaseModel):
    """The newest run that built (or ingested into) the table."""

    run_id: str
    at: datetime
    mode: str  # full | incremental | recompute | ingest | failed | skipped
    strategy: str | None = None
    reason: str | None = None
    rows_written: int = 0
    rows_deleted: int = 0
    seconds: float = 0.0
    freshness_s: float | None = None  # source event -> commit, newest event of that `lake run` cycle


# Every kind of node of the project graph (framework/transform/dag.py): an ODS table, an external
# table (read, never written), a seed (a CSV of the project), a SQL or Python model, and the history
# an ODS table or a model keeps (`history: true`).
TableKind = Literal["ods", "external", "seed", "sql", "python", "history"]


class TableDoc(BaseModel):
    name: str
    layer: str
    kind: TableKind
    file: str | None = None  # where it is declared, relative to the project
    description: str | None = None
    owner: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: str | None = None  # SQL or Python text; for ODS the source table; for an external table what it reads
    key: list[str] = Field(default_factory=list)
    strategy: str | None = None
    strategy_reason: str | None = None
    upstreams: list[str] = Field(default_factory=list)
    downstreams: list[str] = Field(default_factory=list)
    columns: list[ColumnDoc] = Field(default_factory=list)
    last_build: LastBuild | None = None
    checks: list[CheckDoc] = Field(default_factory=list)
    checks_run_id: str | None = None


class DocsCatalog(BaseModel):
    project: str
    generated_at: datetime
    warehouse: str
    tables: list[TableDoc]
    status: dict[str, str] = Field(default_factory=dict)  # table -> its state in the last run (the DAG's colours)


def typed_short_form(v: object) -> object:
    """`columns:` written `{name: type}` as `{name: {type: type}}` (seed and external table YAML)."""
    if isinstance(v, dict):
        return {k: {"type": c} if isinstance(c, str) else c for k, c in v.items()}
    return v


def split_column_docs(columns: dict[object, object], value_is: Literal["type", "description"]) -> tuple[dict[object, object], dict[object, object]]:
    """A `columns:` mapping as (types, descriptions): a plain value is a `value_is`, a mapping
    may hold `type:` and `description:` (anything else is an error naming the column)."""
    types: dict[object, object] = {}
    docs: dict[object, object] = {}
    for name, spec in columns.items():
        if isinstance(spec, dict):
            allowed = {"type", "description"} if value_is == "type" else {"description"}
            extra = sorted(str(k) for k in spec if k not in allowed)
            if extra:
                raise ValueError(f"column {name!r}: unknown key {extra[0]!r}{FIX_SEPARATOR}use {' and '.join(sorted(allowed))}")
            if "type" in spec:
                types[name] = spec["type"]
            if "description" in spec:
                docs[name] = spec["description"]
        elif value_is == "type":
            types[name] = spec
        else:
            docs[name] = spec
    return types, docs
