"""The model's rows against a test's expected rows, and the DataFrames a test's rows make.

Both sides are compared as text: the expected values are cast to the type of the model's column
(so `1.5` equals a DECIMAL(10,2) `1.50`, `2024-05-01` a DATE), then both sides are cast to
STRING by Spark (timestamps in the session's UTC); DOUBLE and FLOAT compare to 12 significant
digits, arrays, maps and structs as JSON. Only the columns the expectation names are compared.
Without `ordered: true` rows are a multiset: an expected row matches one equal returned row; a
missing and an extra row with the same model key are shown as one changed row.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.errors import LakeError
from framework.modeltest.rows import Row, canonical_float, text
from models.unit_test import Comparison, DiffLine

Values = tuple[str | None, ...]
_COMPLEX = (T.ArrayType, T.MapType, T.StructType)


def frame(spark: SparkSession, columns: Sequence[tuple[str, str]], rows: Sequence[Row]) -> DataFrame:
    """A DataFrame of `rows` with these (column, Spark type) columns; absent values are NULL."""
    schema = T.StructType([T.StructField(c, T.StringType()) for c, _t in columns])
    data = [tuple(text(r.get(c)) for c, _t in columns) for r in rows]
    return spark.createDataFrame(data, schema).select(*[F.col(f"`{c}`").cast(t).alias(c) for c, t in columns])


def compare(spark: SparkSession, actual: DataFrame, expected: Sequence[Row], columns: Sequence[str],
            key: Sequence[str] | None, ordered: bool) -> Comparison:
    """`actual` (the model's rows) against `expected` on `columns`; `key`: the model's key."""
    fields = {f.name.lower(): f for f in actual.schema.fields}
    absent = [c for c in columns if c.lower() not in fields]
    if absent:
        raise LakeError(f"the model returns no column {absent[0]} (its columns: {', '.join(f.name for f in actual.schema.fields)})",
                        fix="name only columns the model returns in `expect:`")
    chosen = [fields[c.lower()] for c in columns]
    got = [_canonical(r, chosen) for r in actual.select(*[_as_text(f) for f in chosen]).collect()]
    want = _expected(spark, expected, columns, chosen)
    idx = [i for i, c in enumerate(columns) if c.lower() in {k.lower() for k in key or ()}]
    keyed = idx if key and len(idx) == len(key) else None
    found = _ordered(want, got) if ordered else _unordered(want, got, keyed)
    return found.model_copy(update={"columns": list(columns), "ordered": ordered})


def _as_text(f: T.StructField) -> Column:
    c = F.col(f"`{f.name}`")
    return F.to_json(c) if isinstance(f.dataType, _COMPLEX) else c.cast("string")


def _canonical(row: Sequence[object], fields: Sequence[T.StructField]) -> Values:
    out: list[str | None] = []
    for v, f in zip(row, fields, strict=True):
        if v is None:
            out.append(None)
        elif isinstance(f.dataType, T.DoubleType | T.FloatType):
            out.append(canonical_float(float(str(v))))
        elif isinstance(f.dataType, _COMPLEX):
            out.append(json.dumps(json.loads(str(v)), sort_keys=True))
        else:
            out.append(str(v))
    return tuple(out)


def _expected(spark: SparkSession, rows: Sequence[Row], columns: Sequence[str], fields: Sequence[T.StructField]) -> list[Values]:
    """The expected rows cast to the model's column types, as text (LakeError for a value that is
    not of its column's type)."""
    raw = [tuple(text(r.get(c)) for c in columns) for r in rows]
    atomic = [i for i, f in enumerate(fields) if not isinstance(f.dataType, _COMPLEX)]
    schema = T.StructType([T.StructField(f"c{i}", T.StringType()) for i in atomic])
    df = spark.createDataFrame([tuple(r[i] for i in atomic) for r in raw], schema)
    cast = df.select(*[F.col(f"c{i}").cast(fields[i].dataType).cast("string") for i in atomic]).collect() if atomic else [()] * len(raw)
    out = []
    for n, (r, typed) in enumerate(zip(raw, cast, strict=True)):
        values: list[str | None] = list(r)
        for i, v in zip(atomic, typed, strict=True):
            if r[i] is not None and v is None:
                raise LakeError(f"expected row {n + 1}: {r[i]!r} in column {columns[i]} is not a {fields[i].dataType.simpleString()}",
                                fix=f"give a {fields[i].dataType.simpleString()} value (the type the model returns for {columns[i]})")
            values[i] = v
        for i, v in enumerate(r):
            if i not in atomic and v is not None:
                values[i] = _json_text(v, columns[i])
        out.append(_canonical(values, fields))
    return out


def _json_text(v: str, column: str) -> str:
    try:
        return json.dumps(json.loads(v), sort_keys=True)
    except json.JSONDecodeError:
        raise LakeError(f"expected value {v!r} in column {column} is not JSON (the column is an array, map or struct)",
                        fix="give a list or mapping in YAML, or JSON text in CSV") from None


def _unordered(want: list[Values], got: list[Values], key: list[int] | None) -> Comparison:
    available = Counter(got)
    status: list[bool] = []
    for e in want:
        status.append(available[e] > 0)
        available[e] -= 1 if available[e] > 0 else 0
    extras = sorted((x for x, n in available.items() for _ in range(n)), key=lambda x: [str(v) for v in x])
    lines, changed = [], 0
    for e, ok in zip(want, status, strict=True):
        if ok:
            lines.append(DiffLine(mark="ok", values=list(e)))
            continue
        twin = next((x for x in extras if key is not None and all(x[i] == e[i] for i in key)), None)
        if twin is None:
            lines.append(DiffLine(mark="missing", values=list(e)))
        else:
            extras.remove(twin)
            changed += 1
            lines += [DiffLine(mark="expected", values=list(e)), DiffLine(mark="actual", values=list(twin))]
    lines += [DiffLine(mark="extra", values=list(x)) for x in extras]
    missing = sum(1 for line in lines if line.mark == "missing")
    return Comparison(matches=not (missing or extras or changed), columns=[], missing=missing, extra=len(extras), changed=changed, lines=lines)


def _ordered(want: list[Values], got: list[Values]) -> Comparison:
    lines, counts = [], Counter[str]()
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(a=want, b=got, autojunk=False).get_opcodes():
        if op == "equal":
            lines += [DiffLine(mark="ok", values=list(v)) for v in want[a0:a1]]
            continue
        pairs = min(a1 - a0, b1 - b0) if op == "replace" else 0
        for i in range(pairs):
            lines += [DiffLine(mark="expected", values=list(want[a0 + i])), DiffLine(mark="actual", values=list(got[b0 + i]))]
        lines += [DiffLine(mark="missing", values=list(v)) for v in want[a0 + pairs:a1]]
        lines += [DiffLine(mark="extra", values=list(v)) for v in got[b0 + pairs:b1]]
        counts.update(changed=pairs, missing=a1 - a0 - pairs, extra=b1 - b0 - pairs)
    return Comparison(matches=want == got, columns=[], missing=counts["missing"], extra=counts["extra"], changed=counts["changed"], lines=lines)
