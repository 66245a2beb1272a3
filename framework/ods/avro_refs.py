"""Schema references: a writer schema that names types registered as other subjects.

A Confluent-compatible registry can keep a named type (Debezium's `Source` record, shared by every
table of a connector) as a subject of its own; a writer schema then uses the type by name and lists
it in `references` ({name, subject, version}). Spark's `from_avro` takes one self-contained schema,
so the definitions are put back in: each referenced name at its first use in document order (Avro
needs a named type defined before it is used again), the later uses stay names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_NAMED = ("record", "enum", "fixed", "error")
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def inline(schema: str, definitions: Mapping[str, Any]) -> str:
    """`schema` (Avro JSON text) with each name of `definitions` (full name -> parsed schema, its
    own references already inlined) defined at its first use."""
    if not definitions:
        return schema
    defined: set[str] = set()

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES:
                return node
            full = next((n for n in (_full(node, namespace), node) if n in definitions), None)
            if full is None or full in defined:
                return node
            given = definitions[full]
            if isinstance(given, dict) and given.get("type") in _NAMED and "namespace" not in given and "." not in given.get("name", ""):
                given = {**given, "name": full}  # keep the name it was referenced by, wherever it lands
            return walk(given, namespace)
        if isinstance(node, list):
            return [walk(x, namespace) for x in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        out = dict(node)
        if kind in _NAMED and isinstance(node.get("name"), str):
            own = node.get("namespace")
            full = _full(node["name"], own if own is not None else namespace)
            defined.add(full)
            namespace = full.rpartition(".")[0]
            if kind in ("record", "error"):
                out["fields"] = [{**f, "type": walk(f.get("type"), namespace)} for f in node.get("fields", [])]
            return out
        if kind == "array":
            out["items"] = walk(node.get("items"), namespace)
        elif kind == "map":
            out["values"] = walk(node.get("values"), namespace)
        elif isinstance(kind, dict | list) or (isinstance(kind, str) and kind not in _PRIMITIVES and kind not in ("array", "map")):
            out["type"] = walk(kind, namespace)
        return out

    return json.dumps(walk(json.loads(schema), ""))
