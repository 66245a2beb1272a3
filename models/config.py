"""Typed schema of every configuration file of a lake project.

`lake.yaml` at the project root is :class:`LakeConfig`; every YAML file under `layers/ods/` is an
:class:`OdsFile`. Unknown keys are rejected everywhere (``extra="forbid"``) so a typo is an error
that names the file, the line and the field, never a silently ignored setting.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from models.base import StrictModel
from models.catalog import CATALOG_CONFS, CatalogConfig, check_sync_options
from models.deploy import FIX_SEPARATOR, LockSettings, check_location, check_lock_service
from models.docs import split_column_docs
from models.freshness import FreshnessConfig
from models.kafka_source import KafkaSourceConfig
from models.layout import TableLayout
from models.ops import AlertsConfig, LineageConfig, MetricsConfig
from models.quality import CheckSpec
from models.reconcile import ReconcileSettings
from models.schedule import ScheduleConfig

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Spark SQL types accepted in `columns:` of a table YAML (schema-less events).
_SQL_TYPE = re.compile(
    r"^(string|boolean|tinyint|smallint|int|integer|bigint|float|double|date|timestamp|binary"
    r"|decimal\(\s*\d+\s*,\s*\d+\s*\))$",
    re.IGNORECASE,
)

# Types an `ordering:` column may have (framework/ods/decode.py ordering_prefix takes these), after
# framework/project/types.py normalize; and those a `partition_by.column` cannot be cast from.
ORDERING_TYPES = frozenset({"timestamp", "date", "tinyint", "smallint", "int", "bigint"})
NOT_TIME_TYPES = frozenset({"binary"})


class SparkConfig(StrictModel):
    """`spark:` in lake.yaml: where lake's Spark driver runs its jobs and with which settings."""

    master: str = Field(default="local[*]", description="Spark master: `local[2]`, `spark://host:7077`, `yarn`, `k8s://...`.")
    conf: dict[str, str] = Field(default_factory=dict, description="Any Spark conf, applied after lake's own (the catalog's are `catalog:`'s).")

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, v: object) -> object:
        if isinstance(v, dict):
            return {str(k): str(val).lower() if isinstance(val, bool) else str(val) for k, val in v.items()}
        return v

    @field_validator("conf")
    @classmethod
    def _catalog_elsewhere(cls, v: dict[str, str]) -> dict[str, str]:
        for k in CATALOG_CONFS:
            if k in v:
                raise ValueError(
                    f"{k} is decided by `catalog:`{FIX_SEPARATOR}remove it from spark.conf; for a Hive metastore set "
                    "`catalog: {kind: hive, uri: thrift://host:9083}` in lake.yaml"
                )
        return v


class FileSourceConfig(StrictModel):
    """A directory of CDC files: one Kafka message value (a Debezium envelope) per line."""

    kind: Literal["files"] = Field(default="files", description="A directory of CDC files.")
    path: str = Field(default="cdc", description="A folder (relative to the project) or a URI: s3a://bucket/cdc.")
    format: Literal["debezium-json"] = Field(default="debezium-json", description="Debezium JSON envelopes, with or without the schema block.")
    glob: str = Field(default="*", description="Which files of the folder to read.")
    max_files_per_trigger: int | None = Field(default=None, ge=1, description="Cap a micro-batch at this many files.")
    # Spark's default, 7d, silently dropped restored archive files. Spark keeps a seen-file entry
    # (path and mtime) per file within this age, in the driver's memory.
    max_file_age: str = Field(default="3650d", description="Spark's `maxFileAge`: a new file older than this, measured from the "
                              "newest file already ingested, is skipped.")
    max_line_bytes: int = Field(default=64 * 1024 * 1024, ge=1, description="A longer line goes to the dead letter unprocessed "
                                "(its first KiB and its size).")

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        return check_location(v, "cdc or s3a://bucket/cdc")

    @field_validator("max_file_age")
    @classmethod
    def _duration(cls, v: str) -> str:
        if not re.fullmatch(r"\d+(ms|s|m|min|h|d)", v.strip()):
            raise ValueError(f"{v!r} is not a duration; give a number with a unit (ms, s, m, h, d), e.g. `3650d`")
        return v.strip()


SourceConfig = Annotated[FileSourceConfig | KafkaSourceConfig, Field(discriminator="kind")]


class AutoCreate(StrictModel):
    """Create ODS tables for undeclared source tables whose row images carry these key columns."""

    enabled: bool = Field(default=False, description="Create a table for each undeclared source table instead of dead-lettering its events.")
    key: list[str] = Field(default_factory=lambda: ["id"], min_length=1, description="The key columns of the tables it creates.")
    type: Literal["cow", "mor"] = Field(default="cow", description="The Hudi table type of the tables it creates.")


class OdsSettings(StrictModel):
    """`ods:` in lake.yaml: the CDC source and what ingest does with its events."""

    source: SourceConfig = Field(default_factory=FileSourceConfig, description="Where the CDC events come from: `kind: files` or `kind: kafka`.")
    auto_create: AutoCreate = Field(default_factory=AutoCreate, description="ODS tables for undeclared source tables.")
    truncate: Literal["delete_all", "ignore"] = Field(default="delete_all", description="What a Debezium `t` (truncate) event does: "
                                                      "delete every row older than it, or nothing.")
    max_dead_letter_ratio: float | None = Field(default=None, ge=0.0, le=1.0, description="E.g. 0.01: a micro-batch (or a table in it) "
                                                "with a larger share of bad events commits nothing and fails.")
    trigger_seconds: int = Field(default=10, ge=1, description="The interval of `lake ingest --continuous`.")
    tombstone_retention_days: float = Field(default=30, ge=0, description="How long a deleted key's delete position stops a replay of "
                                            "older events from re-inserting it.")
    freshness: FreshnessConfig | None = Field(default=None, description="Every ODS table's `freshness:` unless the table sets its own (`freshness: null`: none).")
    commit_threads: int = Field(default=4, ge=1, le=64, description="How many ODS tables of a micro-batch are prepared (decoded, "
                                "sequenced, counted) and written (tombstones, Hudi commit) at once; 1: one after another. A failed "
                                "table leaves the others committed and the micro-batch unacknowledged.")
    unavailable_value_placeholder: str = Field(default="__debezium_unavailable_value", min_length=1, description="Debezium's `unavailable.value.placeholder` (PostgreSQL's unchanged TOASTed values): lake keeps the key's earlier value instead.")


class BuildSettings(StrictModel):
    """`build:` in lake.yaml: how `lake build --incremental` chooses its work."""

    # Below this size the recompute is the cheaper of the two (BENCHMARKS.md).
    recompute_below_mib: float = Field(default=256, ge=0, description="A model whose upstreams hold at most this many MiB (latest file "
                                       "slices) is recomputed, writing only the rows that differ, instead of running its incremental "
                                       "strategy; 0: always the strategies.")


class LakeConfig(StrictModel):
    """`lake.yaml`."""

    name: str = Field(description="The project's name: letters, digits and underscores.")
    warehouse: str = Field(default="warehouse", description="Where the tables, checkpoints and run records live: a folder (relative "
                           "to the project) or a Hadoop URI, s3a://bucket/wh, hdfs://nn/wh.")
    locks: LockSettings = Field(default_factory=LockSettings, description="How two lake processes writing one table are kept apart.")
    spark: SparkConfig = Field(default_factory=SparkConfig, description="Spark's master and confs.")
    ods: OdsSettings = Field(default_factory=OdsSettings, description="The CDC source and the ODS stage.")
    build: BuildSettings = Field(default_factory=BuildSettings, description="How incremental builds choose their work.")
    catalog: CatalogConfig = Field(default_factory=CatalogConfig, description="Where the tables' names live.")
    hudi: dict[str, str] = Field(default_factory=dict, description="Extra Hudi write options for every table this project writes "
                                 "(after lake's own).")
    schedules: list[ScheduleConfig] = Field(default_factory=list, description="What `lake schedule` runs, and when.")
    alerts: AlertsConfig | None = Field(default=None, description="Where failures, blocked gates, stale sources, dead letters and lost "
                                        "locks are sent, once per incident (models/ops.py).")
    metrics: MetricsConfig | None = Field(default=None, description="Prometheus metrics of `lake run --continuous` and `lake schedule`: "
                                          "a port and/or a node_exporter textfile.")
    lineage: LineageConfig | None = Field(default=None, description="OpenLineage run events of every ingest and build (http or file).")
    reconcile: ReconcileSettings | None = Field(default=None, description="The source databases `lake reconcile` compares the ODS "
                                                "tables with (models/reconcile.py).")

    @field_validator("hudi")
    @classmethod
    def _sync_by_catalog(cls, v: dict[str, str]) -> dict[str, str]:
        return check_sync_options(v)

    @field_validator("schedules")
    @classmethod
    def _unique_schedules(cls, v: list[ScheduleConfig]) -> list[ScheduleConfig]:
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"schedule name {dup[0]!r} is used twice{FIX_SEPARATOR}give each schedule its own name")
        return v

    @field_validator("warehouse")
    @classmethod
    def _warehouse(cls, v: str) -> str:
        return check_location(v, "warehouse or s3a://bucket/warehouse")

    @model_validator(mode="after")
    def _lock_service(self) -> LakeConfig:
        check_lock_service(self.warehouse, self.locks)
        return self

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError("must be letters, digits and underscores, not starting with a digit")
        return v


class PartitionBy(StrictModel):
    """`partition_by:` of an ODS table: partitions derived from a time column."""

    column: str = Field(description="The source column (a timestamp or date) the partition is derived from.")
    granularity: Literal["day", "month", "year"] = Field(default="month", description="One partition per day, month or year.")
    name: str | None = Field(default=None, description="The derived partition column; default `dt`, `year_month` or `year`.")

    @field_validator("column")
    @classmethod
    def _column(cls, v: str) -> str:
        if not v.strip():
            raise ValueError(f"an empty column name{FIX_SEPARATOR}name the time column, e.g. `partition_by: {{column: create_time}}`")
        return v

    @property
    def derived_name(self) -> str:
        if self.name:
            return self.name
        return {"day": "dt", "month": "year_month", "year": "year"}[self.granularity]


class OdsTable(TableLayout):
    """One CDC source table and the ODS Hudi table it lands in."""

    # framework/ods/routing.py routes events by it.
    source: str = Field(description="`<db>.<table>` as in the events' source block; `<db>.<schema>.<table>` for a schema other "
                        "than the default `public`/`dbo`.")
    # Checked even when left out: the default, the source's table part, must be an identifier.
    name: str | None = Field(default=None, validate_default=True, description="The table is `ods.<name>`; default: the source's table "
                             "part, lower case.")
    key: list[str] = Field(default_factory=list, description="Record key columns. Only with the Kafka source may it be left out: "
                           "the Debezium message key gives them.")
    ordering: list[str] = Field(default_factory=list, description="Columns (timestamp, date or integer) that order a row's versions "
                                "before the CDC position; default: the CDC position alone.")
    partition_by: PartitionBy | None = Field(default=None, description="Partitions derived from a time column.")
    # `type`, `index`, `buckets`, `compact_every`: models/layout.py.
    schema_narrowing: Literal["dead_letter", "keep_wider"] = Field(default="dead_letter", description="A source column whose type "
                                                                   "narrows (BIGINT -> INT): dead-letter its events, or keep the wider type.")
    columns: dict[str, str] = Field(default_factory=dict, description="Spark SQL types for events without a schema block, e.g. "
                                    "`{price: \"decimal(10,2)\"}`; an entry may be `{type: ..., description: ...}`.")
    column_descriptions: dict[str, str] = Field(default_factory=dict, description="Column descriptions for `lake docs` (also written "
                                                "as `description:` inside `columns:`).")
    contract: Literal["enforced"] | None = Field(default=None, description="`enforced`: the table has exactly the columns and types of "
                                                 "`columns:` (which must then list every column, key included). An event with a column "
                                                 "the contract does not declare, or a type it cannot hold, goes to the dead letter with "
                                                 "the reason instead of widening the table.")
    history: bool = Field(default=False, description="`true`: keep beside `ods.<name>` the history table `ods.<name>_history`, "
                          "one row per version of each key with `_valid_from`, `_valid_to` (NULL: current), `_is_current` and "
                          "`_ended_by_delete` (SCD type 2; framework/ods/history.py). Needs `key:`.")
    description: str | None = Field(default=None, description="What the table holds (`lake docs`).")
    owner: str | None = Field(default=None, description="Who answers for it (`lake docs`).")
    tags: list[str] = Field(default_factory=list, description="Labels; `tag:NAME` selects them.")
    freshness: FreshnessConfig | None = Field(default=None, description="How old its newest ingested source event may get "
                                              "(`lake freshness`); default `ods.freshness`.")
    # Parsed from their YAML forms by framework/project/checks.py.
    checks: list[CheckSpec] = Field(default_factory=list, description="Quality checks on each micro-batch (reference: Checks).")

    @field_validator("source")
    @classmethod
    def _source(cls, v: str) -> str:
        if v.count(".") not in (1, 2) or not all(v.split(".")):
            raise ValueError(
                "must be `<db>.<table>` or `<db>.<schema>.<table>` as in the event's source block, "
                "e.g. test_db.user or inventory.sales.customers"
            )
        return v

    @field_validator("name")
    @classmethod
    def _table_name(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not _IDENT.match(v):
            raise ValueError("must be letters, digits and underscores (it becomes ods.<name>)")
        source = info.data.get("source")  # absent when `source` itself is wrong
        if v is None and source:
            # The name is a folder of the warehouse and a SQL name: `inventory./tmp/x` must not
            # put a table at /tmp/x.
            derived = source.rsplit(".", 1)[1].lower()
            if not _IDENT.match(derived):
                fixed = re.sub(r"[^a-z0-9_]+", "_", derived).strip("_") or "t"
                fixed = "t_" + fixed if fixed[0].isdigit() else fixed
                raise ValueError(
                    f"the table name {derived!r} taken from `source:` is not letters, digits and "
                    f"underscores (not starting with a digit){FIX_SEPARATOR}give the table a name, e.g. "
                    f"`name: {fixed}` (it becomes ods.{fixed})"
                )
        return v

    @field_validator("key")
    @classmethod
    def _key(cls, v: list[str]) -> list[str]:
        if not v:  # explicitly empty; leaving `key` out is allowed with the Kafka source
            raise ValueError("give `key` as a non-empty list, e.g. `key: [id]`")
        return v

    @field_validator("ordering")
    @classmethod
    def _ordering(cls, v: list[str]) -> list[str]:
        if any(not c.strip() for c in v):
            raise ValueError(f"an empty column name{FIX_SEPARATOR}name the column(s), e.g. `ordering: [modify_time]`")
        dup = sorted({c for c in v if v.count(c) > 1})
        if dup:
            raise ValueError(f"column {dup[0]!r} is listed twice{FIX_SEPARATOR}list each ordering column once")
        return v

    @model_validator(mode="before")
    @classmethod
    def _column_docs(cls, data: object) -> object:
        """`columns:` entries written as `{type:, description:}` mappings: the type stays in
        `columns`, the description goes to `column_descriptions` (`lake docs`)."""
        if isinstance(data, dict) and isinstance(data.get("columns"), dict):
            types, docs = split_column_docs(data["columns"], value_is="type")
            data = {**data, "columns": types, "column_descriptions": {**docs, **data.get("column_descriptions", {})}}
        return data

    @field_validator("columns")
    @classmethod
    def _column_types(cls, v: dict[str, str]) -> dict[str, str]:
        for col, typ in v.items():
            if not _SQL_TYPE.match(typ.strip()):
                raise ValueError(
                    f"column {col!r}: unknown type {typ!r}; use one of string, boolean, int, bigint, "
                    "float, double, date, timestamp, binary, decimal(p,s)"
                )
        return {k: t.strip().lower() for k, t in v.items()}

    @model_validator(mode="after")
    def _contract(self) -> OdsTable:
        if self.contract != "enforced":
            return self
        if not self.columns:
            raise ValueError(f"`contract: enforced` without `columns:`{FIX_SEPARATOR}declare every column with its type, e.g. "
                             "`columns: {id: bigint, name: string}`, or drop `contract`")
        missing = [c for c in [*self.key, *self.ordering] if c not in self.columns]
        if missing:
            raise ValueError(f"`contract: enforced`: column {missing[0]!r} (a `key`/`ordering` column) is not in `columns:`"
                             f"{FIX_SEPARATOR}declare it with its type, e.g. `{missing[0]}: bigint`")
        return self

    @property
    def table_name(self) -> str:
        return self.name or self.source.rsplit(".", 1)[1].lower()

    @property
    def qualified_name(self) -> str:
        return f"ods.{self.table_name}"

    def readable(self) -> dict[str, tuple[str, ...]]:
        """The tables of this declaration models may read, with their keys: `ods.<name>`, and its
        history (keyed by the key and each version's `_seq`) when kept."""
        out = {self.qualified_name: tuple(self.key)}
        if self.history_name:
            out[self.history_name] = (*self.key, "_seq")
        return out

    @property
    def history_name(self) -> str | None:
        """`ods.<name>_history` when the table keeps a history (`history: true`), else None."""
        return f"ods.{self.table_name}_history" if self.history else None


class OdsFile(StrictModel):
    """A YAML file under `layers/ods/`."""

    tables: list[OdsTable] = Field(default_factory=list, description="The source tables this file declares.")


# Re-exported: models/model_config.py holds the model sidecar's schema.
from models.model_config import ModelConfig as ModelConfig  # noqa: E402
