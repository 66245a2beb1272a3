"""A reader of Avro object container files, enough for Hudi's timeline: the files of completed
instants (`.hoodie/timeline/<requested>_<completed>.commit`) hold one `HoodieCommitMetadata`
record in an Avro container (Hudi 1.x, timeline layout 2).

Lake reads them in Python so commands that need a table's last commit (`lake freshness`,
`state:modified` selectors, run statistics) start no JVM on a local warehouse. The project has
no Avro library; the Avro 1.11 specification's binary encoding is small: zig-zag varints, length-
prefixed bytes, blocked arrays and maps, unions by branch index. Codecs: `null` and `deflate`
(what Hudi writes: none).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

MAGIC = b"Obj\x01"


class AvroError(ValueError):
    """Not an Avro container file this reader understands."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise AvroError("truncated Avro data")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def long(self) -> int:
        shift, acc = 0, 0
        while True:
            b = self.take(1)[0]
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7

    def blocks(self) -> Any:
        """Item counts of an array's or a map's blocks (a negative count is followed by a size)."""
        while True:
            n = self.long()
            if n == 0:
                return
            if n < 0:
                n = -n
                self.long()
            yield n


def read_container(data: bytes) -> list[Any]:
    """Every datum of an Avro object container file, decoded with the writer's schema."""
    r = _Reader(data)
    if r.take(4) != MAGIC:
        raise AvroError("not an Avro container file (no `Obj\\x01` magic)")
    meta = {k: v for k, v in _map(r, lambda: r.take(r.long()))}
    schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", b"null").decode()
    if codec not in ("null", "deflate"):
        raise AvroError(f"Avro codec {codec!r} is not supported")
    sync = r.take(16)
    names: dict[str, Any] = {}
    out: list[Any] = []
    while r.pos < len(r.data):
        count, size = r.long(), r.long()
        block = r.take(size)
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        br = _Reader(block)
        out += [_datum(br, schema, names, "") for _ in range(count)]
        if r.take(16) != sync:
            raise AvroError("Avro block sync marker mismatch")
    return out


def _map(r: _Reader, value: Any) -> list[tuple[str, Any]]:
    out = []
    for n in r.blocks():
        for _ in range(n):
            key = r.take(r.long()).decode()
            out.append((key, value()))
    return out


_FIXED_WIDTH = {"float": ("<f", 4), "double": ("<d", 8)}


def _datum(r: _Reader, schema: Any, names: dict[str, Any], ns: str) -> Any:
    """One value of `schema` (names: named types seen so far, for references)."""
    if isinstance(schema, list):  # a union: the branch index, then the value
        return _datum(r, schema[r.long()], names, ns)
    if isinstance(schema, str):
        if schema in names or f"{ns}.{schema}" in names:
            return _datum(r, names.get(schema) or names[f"{ns}.{schema}"], names, ns)
        return _primitive(r, schema)
    kind = schema["type"]
    if kind in ("record", "error", "enum", "fixed"):
        ns = schema.get("namespace", ns)
        full = schema["name"] if "." in schema["name"] or not ns else f"{ns}.{schema['name']}"
        names[full] = names[schema["name"]] = schema
    if kind in ("record", "error"):
        return {f["name"]: _datum(r, f["type"], names, ns) for f in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][r.long()]
    if kind == "fixed":
        return r.take(schema["size"])
    if kind == "array":
        return [_datum(r, schema["items"], names, ns) for n in r.blocks() for _ in range(n)]
    if kind == "map":
        return dict(_map(r, lambda: _datum(r, schema["values"], names, ns)))
    return _primitive(r, kind)  # {"type": "string", "avro.java.string": ...} and logical types


def _primitive(r: _Reader, kind: str) -> Any:
    if kind == "null":
        return None
    if kind == "boolean":
        return r.take(1) != b"\x00"
    if kind in ("int", "long"):
        return r.long()
    if kind in _FIXED_WIDTH:
        fmt, width = _FIXED_WIDTH[kind]
        return struct.unpack(fmt, r.take(width))[0]
    if kind == "bytes":
        return r.take(r.long())
    if kind == "string":
        return r.take(r.long()).decode("utf-8")
    raise AvroError(f"unknown Avro type {kind!r}")
