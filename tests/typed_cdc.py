"""A source table with typed columns that emits Debezium envelopes with a schema block, encoded as
Debezium's MySQL connector encodes them (decimal.handling.mode=precise): DECIMAL as base64 bytes
with `org.apache.kafka.connect.data.Decimal`, INT int32, BIGINT int64, FLOAT float, DOUBLE double,
DATE int32 `io.debezium.time.Date`, DATETIME(3) int64 `io.debezium.time.Timestamp`, VARCHAR(n)
string (with column.propagate.source.type's parameters). Its rows are the oracle: what the source
holds after every statement, independent of lake."""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from tests.helpers import envelope

INT = {"type": "int32"}
BIGINT = {"type": "int64"}
FLOAT = {"type": "float"}
DOUBLE = {"type": "double"}
DATE = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
DATETIME3 = {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}
STRING = {"type": "string"}


def decimal(p: int, s: int) -> dict[str, Any]:
    return {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
            "parameters": {"scale": str(s), "connect.decimal.precision": str(p)}}


def varchar(n: int) -> dict[str, Any]:
    return {"type": "string", "parameters": {"__debezium.source.column.type": "VARCHAR", "__debezium.source.column.length": str(n)}}


def encode(value: Any, schema: dict[str, Any]) -> Any:
    """A value as the connector writes it for a column of this schema."""
    if value is None:
        return None
    name = schema.get("name")
    if name == "org.apache.kafka.connect.data.Decimal":
        scale = int(schema["parameters"]["scale"])
        unscaled = int(Decimal(value).scaleb(scale))
        assert Decimal(unscaled).scaleb(-scale) == Decimal(value), f"{value} does not fit scale {scale}"
        n = max(1, (unscaled.bit_length() + 8) // 8)
        return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()
    if name == "io.debezium.time.Date":
        return (value - date(1970, 1, 1)).days
    if name == "io.debezium.time.Timestamp":
        return int(value.replace(tzinfo=timezone.utc).timestamp() * 1000)
    return value


class TypedTable:
    """One source table: its columns' Connect schemas (changed by `alter`) and its rows."""

    def __init__(self, table: str, key: str, columns: dict[str, dict[str, Any]]) -> None:
        self.table, self.key = table, key
        self.columns = dict(columns)
        self.rows: dict[Any, dict[str, Any]] = {}
        self.pos = 1000

    def alter(self, column: str, schema: dict[str, Any], convert: Any = None) -> None:
        """ALTER TABLE ... MODIFY column: the new schema; `convert` maps stored values (as the
        database converts them, e.g. a DATE to its midnight DATETIME)."""
        self.columns[column] = schema
        if convert is not None:
            for r in self.rows.values():
                r[column] = None if r[column] is None else convert(r[column])

    def _schema(self) -> dict[str, Any]:
        fields = [{"field": c, "optional": c != self.key, **s} for c, s in self.columns.items()]
        return {"type": "struct", "optional": False, "name": f"{self.table}.Envelope", "fields": [
            {"field": "before", "type": "struct", "optional": True, "fields": fields},
            {"field": "after", "type": "struct", "optional": True, "fields": fields}]}

    def _image(self, row: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if row is None else {c: encode(row.get(c), s) for c, s in self.columns.items()}

    def _emit(self, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
        self.pos += 10
        payload = envelope(op, self.table, self._image(before), self._image(after), pos=self.pos)
        return json.dumps({"schema": self._schema(), "payload": payload})

    def upsert(self, row: dict[str, Any]) -> str:
        k = row[self.key]
        before = self.rows.get(k)
        after = {**(before or {}), **row}
        self.rows[k] = after
        return self._emit("u" if before else "c", before, after)

    def delete(self, k: Any) -> str:
        return self._emit("d", self.rows.pop(k), None)

    def live(self) -> list[dict[str, Any]]:
        return [dict(r) for _, r in sorted(self.rows.items())]


def as_naive_utc(v: Any) -> Any:
    """Timestamps as Spark collects them in a UTC session are naive local times: compare in UTC."""
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(timezone.utc).replace(tzinfo=None)
    return v
