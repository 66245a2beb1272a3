"""A table's column types after a micro-batch, per schema version of its events.

Schema blocks give each version's types (envelope.py); events without one take the table YAML's
`columns:`, the table's own types, or types inferred from a sample of their JSON values. Versions
are taken in arrival order against evolution.py's rules: a version the table cannot take is
rejected on its own (its events go to the dead letter with the reason), the others are written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.location import Location
from framework.ods.envelope import (
    Decoder,
    SchemaBlockError,
    decoder_for_sql_type,
    infer_json_type,
    row_columns,
)
from framework.ods.evolution import merge_batch_types
from models.config import OdsTable


@dataclass
class Columns:
    """`target`: column types after the batch; `versions`: decoders per schema version ("" for
    events without a schema block); `rejected`: versions the table cannot take, with the reason."""

    target: dict[str, str]
    versions: dict[str, dict[str, Decoder]] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)


def resolve_columns(parsed: DataFrame, t: OdsTable, rows: list[Any], current: dict[str, str], path: Location) -> Columns:
    """The columns of table `t` (now `current`, stored at `path`) after the batch whose summary
    rows for `t` are `rows`."""
    out = Columns(dict(current))
    keep_wider = t.schema_narrowing == "keep_wider"

    def take(version: str, dec: dict[str, Decoder]) -> None:
        candidate = dict(out.target)
        for name, d in dec.items():
            res = merge_batch_types(name, candidate.get(name), [d.spark_type], keep_wider=keep_wider)
            if res.error:
                fix = ("set `schema_narrowing: keep_wider` on the table to keep the wider type" if res.narrowing else
                       f"the events stay in the dead letter; fix the source, or re-create the table (remove "
                       f"{path} and re-bootstrap it with lake ingest --bootstrap {t.qualified_name})")
                out.rejected[version] = f"incompatible schema change in {t.source}: {res.error} ({fix})"
                return
            assert res.target is not None
            candidate[name] = res.target
        out.versions[version] = dec
        out.target.update(candidate)

    schemaless_keys: set[str] = set()
    for r in sorted(rows, key=lambda r: r["first_arrival"] or ""):
        if r["is_truncate"]:
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
    return out


def infer_types(parsed: DataFrame, t: OdsTable, keys: list[str]) -> dict[str, str]:
    """Types of new columns of schema-less events, from a sample of their JSON values."""
    sample = (
        parsed.where((F.col("tbl") == t.source) & (F.col("status") == "ok") & F.col("schema_raw").isNull())
        .select(F.when(F.col("op") == "d", F.col("before_raw")).otherwise(F.col("after_raw")).alias("raw"))
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
