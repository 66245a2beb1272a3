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
from models.layout import TableLayout
from models.quality import CheckSpec
from models.schedule import ScheduleConfig
from models.unit_test import UnitTest

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
    master: str = "local[*]"
    conf: dict[str, str] = Field(default_factory=dict)

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

    kind: Literal["files"] = "files"
    path: str = "cdc"  # a folder (relative to the project) or a URI: s3a://bucket/cdc
    format: Literal["debezium-json"] = "debezium-json"
    glob: str = "*"
    max_files_per_trigger: int | None = Field(default=None, ge=1)
    # Spark's `maxFileAge`: a new file older than this, measured from the newest file already
    # ingested, is skipped (Spark's default, 7d, silently dropped restored archive files). Spark
    # keeps a seen-file entry (path and mtime) per file within this age, in the driver's memory.
    max_file_age: str = "3650d"
    # A line longer than this goes to the dead letter (its first KiB and its size) unprocessed.
    max_line_bytes: int = Field(default=64 * 1024 * 1024, ge=1)

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


class KafkaSourceConfig(StrictModel):
    """Kafka topics carrying Debezium envelopes: one topic per table (`server.db.table`) or all
    tables of a database in one topic — events are routed by their `source` block either way.

    Security settings never go in YAML: every environment variable `LAKE_KAFKA_<NAME>` becomes
    the Kafka client option `<name>` (lower case, `_` -> `.`), e.g. `LAKE_KAFKA_SASL_JAAS_CONFIG`
    -> `sasl.jaas.config`. They are passed to Spark and never logged or stored.
    """

    kind: Literal["kafka"]
    bootstrap_servers: str = Field(min_length=1)
    topics: list[str] | None = None
    topic_pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    format: Literal["debezium-json"] = "debezium-json"
    max_offsets_per_trigger: int | None = Field(default=None, ge=1)
    # Kafka's own semantics: fail when offsets were deleted by retention before lake read them.
    fail_on_data_loss: bool = True
    # How long `lake ingest` retries reaching the brokers before it gives up with an error.
    connect_timeout_seconds: int = Field(default=30, ge=1)
    # Other (non-secret) Kafka consumer options, e.g. {client.id: lake}.
    options: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_of_topics(self) -> KafkaSourceConfig:
        if bool(self.topics) == bool(self.topic_pattern):
            raise ValueError("give exactly one of `topics: [...]` or `topic_pattern: ...`")
        return self

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if re.search(r"password|jaas|secret|token|\.key$", k, re.IGNORECASE):
                env = "LAKE_KAFKA_" + k.upper().replace(".", "_")
                raise ValueError(f"{k!r} is a secret: set it in the environment variable {env} instead of lake.yaml")
        return {str(k): str(val) for k, val in v.items()}

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, v: str) -> str:
        for hp in v.split(","):
            host, _, port = hp.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"{hp.strip()!r} is not host:port; give e.g. `localhost:9092` (several: comma-separated)")
        return v


SourceConfig = Annotated[FileSourceConfig | KafkaSourceConfig, Field(discriminator="kind")]


class AutoCreate(StrictModel):
    """Create ODS tables for undeclared source tables whose row images carry these key columns."""

    enabled: bool = False
    key: list[str] = Field(default_factory=lambda: ["id"], min_length=1)
    type: Literal["cow", "mor"] = "cow"


class OdsSettings(StrictModel):
    source: SourceConfig = Field(default_factory=FileSourceConfig)
    auto_create: AutoCreate = Field(default_factory=AutoCreate)
    # What a Debezium `t` (truncate) event does: delete every row (default) or nothing.
    truncate: Literal["delete_all", "ignore"] = "delete_all"
    # Fail a micro-batch (nothing committed) when more than this share of its events are bad.
    max_dead_letter_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    trigger_seconds: int = Field(default=10, ge=1)
    # Days a deleted key's tombstone (its delete's source position) is kept: a replay of events
    # older than a delete stays dropped for this long; after it, such a replay can re-insert the key.
    tombstone_retention_days: float = Field(default=30, ge=0)
    # Every ODS table's `freshness:` unless the table sets its own (`freshness: null`: none).
    freshness: FreshnessConfig | None = None
    # What Debezium's PostgreSQL connector writes for an unchanged TOASTed value (its
    # `unavailable.value.placeholder`): lake keeps the key's earlier value instead (framework/ods/unavailable.py).
    unavailable_value_placeholder: str = Field(default="__debezium_unavailable_value", min_length=1)


class BuildSettings(StrictModel):
    """`build:` in lake.yaml: how `lake build --incremental` chooses its work."""

    # A model whose upstreams hold at most this many MiB of files (latest file slices) is
    # recomputed from them and only the rows that differ from its table are written, instead of
    # running its incremental strategy: below this size the recompute is the cheaper of the two
    # (BENCHMARKS.md). 0 always runs the incremental strategies.
    recompute_below_mib: float = Field(default=256, ge=0)


class LakeConfig(StrictModel):
    """`lake.yaml`."""

    name: str
    # A local folder (relative to the project) or a Hadoop file system URI: s3a://bucket/wh, hdfs://nn/wh.
    warehouse: str = "warehouse"
    locks: LockSettings = Field(default_factory=LockSettings)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    ods: OdsSettings = Field(default_factory=OdsSettings)
    build: BuildSettings = Field(default_factory=BuildSettings)
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    # Extra Hudi write options applied to every table this project writes (after ours).
    hudi: dict[str, str] = Field(default_factory=dict)
    schedules: list[ScheduleConfig] = Field(default_factory=list)

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
    column: str
    granularity: Literal["day", "month", "year"] = "month"
    # Name of the derived partition column; default follows the seeds (`year_month` for month).
    name: str | None = None

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

    # `db.table`, or `db.schema.table` for a schema other than the default `public`/`dbo` of
    # Postgres/SQL Server (framework/ods/routing.py).
    source: str
    # Checked even when left out: the default, the source's table part, must be an identifier.
    name: str | None = Field(default=None, validate_default=True)
    # Record key columns. Empty only with the Kafka source: then the message key gives them.
    key: list[str] = Field(default_factory=list)
    ordering: list[str] = Field(default_factory=list)
    partition_by: PartitionBy | None = None
    # `type`, `index`, `buckets`, `compact_every`: models/layout.py.
    # A source column whose type narrows (BIGINT -> INT): dead-letter the table's events (default)
    # or keep writing the wider type (what Paimon's CDC sync does).
    schema_narrowing: Literal["dead_letter", "keep_wider"] = "dead_letter"
    # Column types for events without a `schema` block, e.g. {price: "decimal(10,2)"}.
    columns: dict[str, str] = Field(default_factory=dict)
    # `columns: {price: {type: "decimal(10,2)", description: "..."}}` puts the description here.
    column_descriptions: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    owner: str | None = None
    tags: list[str] = Field(default_factory=list)
    # How old its newest ingested source event may get (`lake freshness`); default `ods.freshness`.
    freshness: FreshnessConfig | None = None
    # Quality checks on the rows each micro-batch writes (see models/quality.py; parsed from
    # their YAML forms by framework/project/checks.py).
    checks: list[CheckSpec] = Field(default_factory=list)

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

    @property
    def table_name(self) -> str:
        return self.name or self.source.rsplit(".", 1)[1].lower()

    @property
    def qualified_name(self) -> str:
        return f"ods.{self.table_name}"


class OdsFile(StrictModel):
    """A YAML file under `layers/ods/`."""

    tables: list[OdsTable] = Field(default_factory=list)


class ModelConfig(TableLayout):
    """Sidecar `<stem>.yaml` of a DWD/DWS model."""

    key: list[str] | None = None
    partition_by: str | None = None
    strategy: Literal["rowwise", "aggregate", "rescan", "full"] | None = None
    # `type`, `index`, `buckets`, `compact_every` of its table: models/layout.py.
    # This model's own `build.recompute_below_mib` (e.g. 0 for a row-wise model over a large
    # upstream, where the strategy beats a recompute; BENCHMARKS.md).
    recompute_below_mib: float | None = Field(default=None, ge=0)
    depends_on: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    owner: str | None = None
    # Column descriptions for `lake docs`: `{name: "text"}`, `{name: {description: "text"}}` or
    # dbt's list `[{name: x, description: "text"}]`.
    columns: dict[str, str] = Field(default_factory=dict)
    # Quality checks (Great Expectations names and arguments, shorthands, custom SQL); see
    # models/quality.py and framework/project/checks.py. Evaluated by the quality gate before the Hudi commit.
    checks: list[CheckSpec] = Field(default_factory=list)
    # Unit tests of the model's logic (`lake test`; models/unit_test.py). Not in the fingerprint.
    tests: list[UnitTest] = Field(default_factory=list)

    @field_validator("columns", mode="before")
    @classmethod
    def _column_descriptions(cls, v: object) -> object:
        if isinstance(v, list):  # dbt's form
            if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in v):
                raise ValueError(f"each entry needs a `name:`{FIX_SEPARATOR}write e.g. columns: [{{name: user_id, description: the user}}]")
            v = {c["name"]: {k: x for k, x in c.items() if k != "name"} for c in v}
        if isinstance(v, dict):
            _, docs = split_column_docs(v, value_is="description")
            return docs
        return v

    @field_validator("depends_on")
    @classmethod
    def _qualified(cls, v: list[str]) -> list[str]:
        for name in v:
            if name.count(".") != 1:
                raise ValueError(f"{name!r} must be <layer>.<table>, e.g. ods.user_order or dwd.order_detail")
        return v
