"""`reconcile:` of lake.yaml (the source databases `lake reconcile` compares ODS tables with) and
what it finds for one table (framework/reconcile/): printed, returned as JSON and kept in the run
record (`RunRecord.reconciled`)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from models.base import StrictModel
from models.deploy import FIX_SEPARATOR

Dialect = Literal["mariadb", "mysql", "postgres"]
_PORTS = {"mariadb": 3306, "mysql": 3306, "postgres": 5432}


class ConnectSettings(StrictModel):
    """The Kafka Connect worker running the database's Debezium connector: its committed offset
    tells how far the stream has read the database (`lake reconcile` waits for it)."""

    url: str = Field(description="Connect's REST address, e.g. `http://connect:8083` or `${CONNECT_URL}`.")
    connector: str = Field(description="The Debezium connector's name in that worker.")


class SourceDatabase(StrictModel):
    """One source database, by the `<db>` part of the ODS tables' `source:` (the database
    Debezium reads). Put the password in as `${VAR}` (lake refuses one written in the file)."""

    dialect: Dialect = Field(description="`mariadb`, `mysql` or `postgres`.")
    host: str = Field(description="Host name or address, e.g. `${SHOP_DB_HOST}`.")
    port: int | None = Field(default=None, ge=1, le=65535, description="Default 3306 (MariaDB, MySQL) or 5432 (PostgreSQL).")
    user: str = Field(description="A user that may SELECT the tables (for `--repair` with `signal:`, also INSERT on the "
                      "signal table; without it, REPLICATION CLIENT on MariaDB/MySQL to read the binlog position).")
    password: str | None = Field(default=None, description="Always `${VAR}`, never the password itself.")
    database: str | None = Field(default=None, description="The database to connect to; default: the `<db>` of `source:`.")
    signal: str | None = Field(default=None,
                               description="The Debezium connector's signal table, as its `signal.data.collection` names it "
                               "(`<db>.<table>`; `<schema>.<table>` on PostgreSQL). `--repair` then asks the connector for an "
                               "incremental snapshot of the differing keys instead of writing them into ODS itself, and "
                               "`lake ingest` skips the signal table's own change events.")
    connect: ConnectSettings | None = Field(default=None, description="Where the database's Debezium connector runs. "
                                            "With it, a differing key is re-read once ODS has taken every change the database "
                                            "committed before the re-read (exact, however long ingest lags) instead of after "
                                            "`settle_seconds`.")
    signal_max_chars: int = Field(default=2048, ge=256, description="The length of the signal table's `data` column: "
                                  "differing keys are split over as many signals as keep each within it.")

    @field_validator("signal")
    @classmethod
    def _two_parts(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[^.\s]+\.[^.\s]+", v):
            raise ValueError(f"{v!r} is not a table as Debezium's signal.data.collection names it{FIX_SEPARATOR}"
                             "write `<db>.<table>` (MariaDB, MySQL) or `<schema>.<table>` (PostgreSQL), e.g. `shop.debezium_signal`")
        return v

    @property
    def port_or_default(self) -> int:
        return self.port or _PORTS[self.dialect]


class ReconcileSettings(StrictModel):
    """`reconcile:` in lake.yaml: where the source databases are and how `lake reconcile` compares."""

    sources: dict[str, SourceDatabase] = Field(default_factory=dict, description="Source databases by the `<db>` of the ODS "
                                               "tables' `source:` (`shop` for `source: shop.orders`).")
    segments: int = Field(default=32, ge=2, le=1024, description="Key ranges each checksum query splits a range into.")
    fetch_below: int = Field(default=64, ge=1, description="A mismatching range with at most this many rows on either side "
                             "is fetched row by row instead of split further.")
    float_digits: int = Field(default=6, ge=0, le=15, description="FLOAT/DOUBLE columns enter the checksum rounded to this "
                              "many decimals; fetched rows then compare within 10^-digits (relative for large values).")
    settle_seconds: float = Field(default=5.0, ge=0, description="Pause between two reads of a differing key: a key is a "
                                  "difference only when neither side changed between them. Longer than ingest's lag.")
    timeout_seconds: float = Field(default=120.0, ge=0, description="How long differing keys that keep changing are re-read "
                                   "before they are reported as in flight (not as differences).")


    def signal_sources(self) -> list[str]:
        """The routing ids (framework/ods/routing.py) of the signal tables `sources.*.signal`
        names, whose change events ODS skips: `<db>.<table>`; on PostgreSQL
        `<db>.<schema>.<table>`, and `<db>.<table>` too in `public`."""
        out = []
        for db, src in self.sources.items():
            if not src.signal:
                continue
            first, table = src.signal.split(".")
            if src.dialect == "postgres":
                name = src.database or db
                out += [f"{name}.{first}.{table}", *([f"{name}.{table}"] if first == "public" else [])]
            else:
                out.append(src.signal)
        return sorted(out)


# equal: the same live rows on both sides; differs: keys missing, extra or changed (that stayed so
# over two reads); unsettled: only keys still changing when the timeout came; failed: an error.
ReconcileStatus = Literal["equal", "differs", "unsettled", "failed"]
RECONCILE_MODE: dict[str, str] = {"equal": "reconciled", "differs": "differs", "unsettled": "in flight", "failed": "unreconciled"}
RECONCILE_MODES = tuple(RECONCILE_MODE.values())


class RowDiff(BaseModel):
    """One differing key: its key values, the row the database holds and the row ODS holds
    (None: the key is not there), and the columns that differ."""

    key: dict[str, Any]
    kind: Literal["missing", "extra", "changed"]
    columns: list[str] = Field(default_factory=list)
    source: dict[str, Any] | None = None
    ods: dict[str, Any] | None = None


class TableReconcile(BaseModel):
    """One ODS table compared with its source table."""

    table: str
    source: str  # `<db>.<table>` or `<db>.<schema>.<table>`
    status: ReconcileStatus
    reason: str = ""
    key: list[str] = Field(default_factory=list)
    source_rows: int = 0
    ods_rows: int = 0
    missing: int = 0  # keys the database has and ODS lacks
    extra: int = 0  # keys ODS has and the database does not
    changed: int = 0  # keys on both sides whose row differs
    columns: dict[str, int] = Field(default_factory=dict)  # column -> changed keys in which it differs
    unknown: int = 0  # keys equal except for columns ODS holds as the unavailable-value placeholder
    in_flight: int = 0  # keys still changing when the timeout came: not reported as differences
    rechecked: int = 0  # keys that differed at the first read and were read again (in flight then, or differences)
    samples: list[RowDiff] = Field(default_factory=list)
    checksum_queries: int = 0  # aggregate queries run in the database
    rows_fetched: int = 0  # rows read from the database row by row (bisection's end, re-checks)
    seconds: float = 0.0
    repaired: int = 0  # `--repair`: keys written into ODS (upserts and deletes)
    requested: int = 0  # `--repair` with a signal table: keys asked of the connector's incremental snapshot
