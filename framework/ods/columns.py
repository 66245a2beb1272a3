"""A table's column types after a micro-batch, per schema version of its events.

Schema blocks give each version's types (envelope.py); events without one take the table YAML's
`columns:`, the table's own types, or types inferred from a sample of their JSON values. Versions
are taken in arrival order against framework/project/types.py's rules: a version the table cannot take is
rejected on its own (its events go to the dead letter with the reason), the others are written.
A version whose events all precede the table's bootstrap hand-off is not judged: they are dropped
anyway (a table rebuilt from a dump taken after a type change would reject them otherwise).
A widening Hudi cannot make in place (DATE → TIMESTAMP, a key column whose text changes) is
taken by rewriting the table before the batch commits (`rewrite`; framework/ods/rewrite.py),
except on an `ordering:` column, whose stored sequence it would change: that needs a rebuild.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from framework.ods.envelope import (
    Decoder,
    SchemaBlockError,
    decoder_for_sql_type,
    infer_json_type,
    row_columns,
)
from framework.ods.position import slice_of
from framework.project.types import (
    WALL_CLOCK,
    in_place,
    key_text_kept,
    merge_batch_types,
    normalize,
)
from models.config import OdsTable


@dataclass
class Columns:
    """`target`: column types after the batch; `versions`: decoders per schema version ("" for
    events without a schema block); `rejected`: versions the table cannot take, with the reason."""

    target: dict[str, str]
    versions: dict[str, dict[str, Decoder]] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    rewrite: dict[str, tuple[str, str]] = field(default_factory=dict)  # column -> (stored, new): by a rewrite


def needs_rewrite(t: OdsTable, column: str, old: str, new: str) -> bool:
    """Whether table `t` takes `column`'s change from `old` to `new` only by a rewrite."""
    if normalize(old) == normalize(new):
        return False
    return not in_place(old, new) or (column in t.key and not key_text_kept(old, new))


def _fix(t: OdsTable, narrowing: bool, file: str) -> str:
    """The fix a rejected schema change's reason names (commands that exist)."""
    q = t.qualified_name
    if narrowing:
        return (f"set `schema_narrowing: keep_wider` on {q} in {file} to keep the wider type, then put the events back: "
                f"lake dead-letter replay --table {q}")
    return (f"the events wait in the dead letter; rebuild the table in the new type from a dump taken after the change: "
            f"lake ingest --rebuild {q} --path DUMP --position POS (then lake dead-letter purge --table {q} --yes), "
            f"or, once the source sends the old type again, lake dead-letter replay --table {q}")


def resolve_columns(parsed: DataFrame, t: OdsTable, rows: list[Any], current: dict[str, str],
                    watermark: str | None = None, file: str = "layers/ods/") -> Columns:
    """The columns of table `t` (now `current`, declared in `file`) after the
    batch whose summary rows for `t` are `rows`; `watermark`: its bootstrap hand-off position."""
    out = Columns(dict(current))
    keep_wider = t.schema_narrowing == "keep_wider"

    def take(version: str, dec: dict[str, Decoder]) -> None:
        candidate = dict(out.target)
        for name, d in dec.items():
            res = merge_batch_types(name, candidate.get(name), [d.spark_type], keep_wider=keep_wider, wall_clock=d.kind in WALL_CLOCK)
            if res.error:
                out.rejected[version] = f"incompatible schema change in {t.source}: {res.error} (fix: {_fix(t, res.narrowing, file)})"
                return
            assert res.target is not None
            old = current.get(name)
            if name in t.ordering and old is not None and needs_rewrite(t, name, old, res.target):
                out.rejected[version] = (
                    f"schema change in {t.source}: `ordering:` column {name!r} changed type from {old.upper()} to "
                    f"{res.target.upper()}, which changes the order lake stored (fix: rebuild the table from what the "
                    f"source still has: lake ingest --rebuild {t.qualified_name}, or from a dump: add --path DUMP --position POS)")
                return
            if t.history and old is not None and needs_rewrite(t, name, old, res.target):
                out.rejected[version] = (
                    f"schema change in {t.source}: column {name!r} changed type from {old.upper()} to {res.target.upper()}, which "
                    f"Hudi takes only by rewriting the table, and {t.history_name} keeps every version in the old type (fix: "
                    f"rebuild both from what the source still has: remove {t.history_name}'s table, then lake ingest --rebuild "
                    f"{t.qualified_name}; the history then starts at the oldest event the source keeps)")
                return
            candidate[name] = res.target
        out.versions[version] = dec
        out.target.update(candidate)

    schemaless_keys: set[str] = set()
    for r in sorted(rows, key=lambda r: r["first_arrival"] or ""):
        if r["is_truncate"] or before_hand_off(r["pos_max"], watermark):
            continue
        if not r["schema_raw"]:
            schemaless_keys.update(r["keys"] or [])
            continue
        try:
            cols = row_columns(r["schema_raw"])
        except SchemaBlockError as e:
            out.rejected[r["schema_hash"]] = f"unreadable schema block: {e}"
            continue
        take(r["schema_hash"], {c.name: (decoder_for_sql_type(t.columns[c.name]) if c.name in t.columns and c.decoder.kind == "plain" else c.decoder)
                                for c in cols})
    if schemaless_keys:
        unknown = [k for k in schemaless_keys if k not in current and k not in t.columns]
        inferred = infer_types(parsed, t, unknown) if unknown else {}
        take("", {k: decoder_for_sql_type(t.columns.get(k) or current.get(k) or inferred.get(k, "string")) for k in sorted(schemaless_keys)})
    out.rewrite = {c: (current[c], new) for c, new in out.target.items() if c in current and needs_rewrite(t, c, current[c], new)}
    return out


def before_hand_off(pos_max: str | None, watermark: str | None) -> bool:
    """Every event of a summary row (greatest position `pos_max`) precedes the hand-off."""
    if not watermark or pos_max is None:
        return False
    start, length, value = slice_of(watermark)
    return pos_max[start - 1 : start - 1 + length] < value


def _image_text(which: Column) -> Column:
    """The JSON text of the row image `which` ("before" / "after") of a message, bare or in a
    `payload` (the batch keeps the parsed image, not its text)."""
    def at(path: str) -> Column:
        return F.get_json_object(F.col("value"), path)

    bare = F.when(which == "before", at("$.before")).otherwise(at("$.after"))
    wrapped = F.when(which == "before", at("$.payload.before")).otherwise(at("$.payload.after"))
    return F.coalesce(wrapped, bare)


def infer_types(parsed: DataFrame, t: OdsTable, keys: list[str]) -> dict[str, str]:
    """Types of new columns of schema-less events, from a sample of their JSON values."""
    sample = (
        parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok") & F.col("schema_raw").isNull())
        .select(_image_text(F.when(F.col("op") == "d", F.lit("before")).otherwise(F.lit("after"))).alias("raw"))
        .limit(200)
        .collect()
    )
    values: dict[str, list[Any]] = {k: [] for k in keys}
    for (raw,) in sample:
        try:
            obj = json.loads(raw)
        except (TypeError, json.JSONDecodeError):
            continue
        for k in keys:
            if isinstance(obj, dict) and obj.get(k) is not None:
                values[k].append(obj[k])
    return {k: infer_json_type(v) for k, v in values.items()}
