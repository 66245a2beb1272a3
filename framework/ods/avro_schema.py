"""Avro writer schemas (as the Kafka Connect Avro converters write them) → what the JSON path reads.

Pure logic, no Spark. The Avro path joins the JSON path at the envelope: each message is decoded
to the JSON text Kafka Connect's JsonConverter would have written for it (framework/ods/avro.py),
and its writer schema is turned, once per schema id, into the Kafka Connect schema block that
JsonConverter puts beside it (`schemas.enable=true`), so parse.py, envelope.py and everything after
them treat both formats alike.

- :func:`plain_schema`: the writer schema without Avro logical types. The binary encoding is the
  same, and Spark's `from_avro` then yields the raw values JsonConverter writes: a decimal's
  two's-complement bytes (→ base64 in JSON, exactly JsonConverter's encoding of
  `org.apache.kafka.connect.data.Decimal`), a date as days, times and timestamps as epoch
  integers, instead of Spark dates and timestamps whose JSON text would be ISO strings.
- :func:`connect_schema`: the Connect schema block, from the converters' own annotations
  (`connect.name`, `connect.parameters`, `connect.type`; Confluent's AvroData and Apicurio's
  converter write the same), and from Avro logical types where those are missing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

# Avro primitive → Kafka Connect type.
_PRIMITIVE = {"int": "int32", "long": "int64", "float": "float32", "double": "float64", "boolean": "boolean",
              "string": "string", "bytes": "bytes", "null": "null"}
# Avro logical types without a `connect.name` beside them → the Connect logical name that
# envelope.py decodes (the same unit).
_LOGICAL = {
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "time-micros": "io.debezium.time.MicroTime",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "timestamp-micros": "io.debezium.time.MicroTimestamp",
    "local-timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "local-timestamp-micros": "io.debezium.time.MicroTimestamp",
    "uuid": "io.debezium.data.Uuid",
}
DECIMAL = "org.apache.kafka.connect.data.Decimal"


class AvroSchemaError(ValueError):
    """A writer schema lake cannot read (not JSON, not an Avro schema, an unknown named type)."""


def parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise AvroSchemaError(f"the writer schema is not JSON: {e}") from e


def plain_schema(schema: Any) -> str:
    """The schema (Avro JSON) with every `logicalType` removed (module docstring)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "logicalType"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(copy.deepcopy(schema)), separators=(",", ":"))


def record_fields(schema: Any) -> list[str]:
    """Top-level field names of a record schema ([] for any other schema)."""
    if isinstance(schema, dict) and schema.get("type") == "record":
        return [str(f.get("name")) for f in schema.get("fields", []) if isinstance(f, dict)]
    return []


def connect_schema(schema: Any) -> str:
    """The Kafka Connect schema block (JSON text, keys sorted) of an Avro writer schema."""
    return json.dumps(_Converter().convert(schema, None), sort_keys=True, separators=(",", ":"))


class _Converter:
    """Walks one schema, remembering named types (a record is defined once and referred to by name
    afterwards: Debezium's `after` refers to the `Value` record that `before` defined)."""

    def __init__(self) -> None:
        self.named: dict[str, Any] = {}

    def convert(self, node: Any, namespace: str | None, optional: bool = False) -> dict[str, Any]:
        if isinstance(node, list):
            return self._union(node, namespace)
        if isinstance(node, str):
            if node in _PRIMITIVE:
                return {"type": _PRIMITIVE[node], "optional": optional}
            full = node if "." in node or not namespace else f"{namespace}.{node}"
            found = self.named.get(full) or self.named.get(node)
            if found is None:
                raise AvroSchemaError(f"the writer schema refers to an unknown type {node!r}")
            return {**found, "optional": optional}
        if not isinstance(node, dict) or "type" not in node:
            raise AvroSchemaError(f"not an Avro schema: {json.dumps(node)[:80]}")
        out = self._typed(node, namespace)
        out["optional"] = optional
        name = node.get("connect.name")
        logical = node.get("logicalType")
        params = {str(k): str(v) for k, v in (node.get("connect.parameters") or {}).items()}
        if logical == "decimal" and name in (None, DECIMAL):
            name = DECIMAL
            params.setdefault("scale", str(node.get("scale", 0)))
            if "precision" in node:
                params.setdefault("connect.decimal.precision", str(node["precision"]))
        elif name is None and isinstance(logical, str) and logical in _LOGICAL:
            name = _LOGICAL[logical]
        if name is not None:
            out["name"] = str(name)
        if params:
            out["parameters"] = params
        return out

    def _union(self, branches: list[Any], namespace: str | None) -> dict[str, Any]:
        """Debezium's optional fields are ["null", T]; a wider union has no Connect type lake
        decodes, so it is kept as JSON text (a struct)."""
        others = [b for b in branches if b != "null"]
        if len(others) == 1:
            return self.convert(others[0], namespace, optional="null" in branches)
        return {"type": "struct", "optional": "null" in branches, "name": "io.confluent.connect.avro.Union"}

    def _typed(self, node: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        typ = node["type"]
        if isinstance(typ, (dict, list)):  # {"type": {"type": "record", ...}}
            return self.convert(typ, namespace)
        if typ == "record" or typ == "error":
            ns = node.get("namespace", namespace)
            name = str(node.get("name", ""))
            full = name if "." in name or not ns else f"{ns}.{name}"
            ns = full.rpartition(".")[0] or None
            out: dict[str, Any] = {"type": "struct", "name": full, "fields": []}
            self.named[full] = out  # before the fields: a record may refer to itself
            for f in node.get("fields", []):
                out["fields"].append({**self.convert(f.get("type"), ns), "field": str(f.get("name"))})
            return out
        if typ in ("enum", "fixed"):
            ns = node.get("namespace", namespace)
            name = str(node.get("name", ""))
            full = name if "." in name or not ns else f"{ns}.{name}"
            kind = {"type": "string"} if typ == "enum" else {"type": "bytes"}
            self.named[full] = kind
            return dict(kind)
        if typ == "array":
            return {"type": "array", "items": self.convert(node.get("items"), namespace)}
        if typ == "map":
            return {"type": "map", "keys": {"type": "string", "optional": False}, "values": self.convert(node.get("values"), namespace)}
        if typ in _PRIMITIVE:
            connect_type = node.get("connect.type")
            return {"type": str(connect_type) if connect_type in ("int8", "int16") else _PRIMITIVE[typ]}
        return self.convert(typ, namespace)  # a named type given as {"type": "ns.Name"}
