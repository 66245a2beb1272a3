"""`lake reconcile` for one ODS table: its compared columns, the bisection over key ranges, the
re-reads that tell differences from changes in flight, and the result with samples."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from framework.project.config import Project
from framework.reconcile.bisect import bisect
from framework.reconcile.canonical import ColumnSpec, UnsupportedColumn, kind_of
from framework.reconcile.caught_up import CatchUp
from framework.reconcile.compare import KeyDiff, compare_rows
from framework.reconcile.ods import OdsSide
from framework.reconcile.rows import Row
from framework.reconcile.settle import Settled, settle
from framework.reconcile.source import SourceSide, SourceTable
from framework.reconcile.sql import Ranged
from framework.reconcile.target import SourceTarget, settings_of
from framework.runtime.paths import Layout
from framework.table import kinds
from framework.table.lake_table import LakeTable, ProjectDefaults
from models.config import OdsTable
from models.reconcile import ReconcileSettings, RowDiff, TableReconcile

SAMPLES = 10
_HASH_RANGE = (0, 1 << 32)


def ods_table(project: Project, t: OdsTable) -> LakeTable:
    return kinds.ods(Layout(project.warehouse), ProjectDefaults.of(project), t)


def compared_columns(t: OdsTable, ods_types: dict[str, str], source_types: dict[str, str], key: Sequence[str]) -> tuple[list[ColumnSpec], list[str]]:
    """The columns both sides have (lake's `_` columns and a derived partition column left out),
    in ODS order, and what is left out and why."""
    by_lower = {n.lower(): n for n in source_types}
    derived = t.partition_by.derived_name if t.partition_by else None
    cols, notes = [], []
    for name, typ in ods_types.items():
        if name.startswith("_") or (name == derived and name.lower() not in by_lower):
            continue
        src = by_lower.get(name.lower())
        if src is None:
            notes.append(f"{name} (not in the source)")
            continue
        try:
            kind, scale = kind_of(typ, source_types[src])
        except UnsupportedColumn as e:
            if name in key:
                raise
            notes.append(f"{name} ({e})")
            continue
        cols.append(ColumnSpec(name, src, kind, scale, typ))
    ods_lower = {n.lower() for n in ods_types}
    notes += [f"{n} (not in ODS yet)" for n in source_types if n.lower() not in ods_lower]
    return cols, notes


def reconcile_table(spark: SparkSession, project: Project, t: OdsTable, target: SourceTarget,
                    cfg: ReconcileSettings | None = None) -> tuple[TableReconcile, Settled, list[ColumnSpec], Ranged]:
    """Compare one ODS table with its source table (`cfg`: lake.yaml's `reconcile:` unless
    given); nothing is written."""
    started = time.monotonic()
    cfg = cfg or settings_of(project)
    placeholder = project.config.ods.unavailable_value_placeholder
    table = ods_table(project, t)
    res = TableReconcile(table=t.qualified_name, source=t.source, status="failed")
    if not table.committed():
        res.reason = "no ODS table yet: run `lake ingest` first"
        return res, Settled(), [], Ranged(())
    key = list(t.key) or table.record_key()
    res.key = key
    ods_types = {f.name: f.dataType.simpleString() for f in table.schema(spark).fields}
    with SourceTable(target.settings, target.db_name, target.parts, cfg.float_digits) as src:
        cols, notes = compared_columns(t, ods_types, src.columns(), key)
        missing_key = [k for k in key if k not in {c.name for c in cols}]
        if missing_key:
            res.reason = f"key column(s) {', '.join(missing_key)} not found on both sides"
            return res, Settled(), cols, Ranged(())
        r = Ranged(tuple(next(c for c in cols if c.name == k) for k in key))
        ods = OdsSide(spark, table, r, cols, cfg.float_digits)
        source = SourceSide(src, r, cols)
        try:
            (lo, hi), more = _range(src, ods, r)
            found = bisect(source, ods, lo, hi, segments=cfg.segments, fetch_below=cfg.fetch_below, more=more)
            ods.close()  # the re-reads below read the table afresh
            first = compare_rows(cols, found.source, found.ods, float_digits=cfg.float_digits, placeholder=placeholder)
            settled = settle(source, ods, cols, first, found.source, found.ods, settle_seconds=cfg.settle_seconds,
                             timeout=cfg.timeout_seconds, float_digits=cfg.float_digits, placeholder=placeholder,
                             catch_up=CatchUp.of(spark, project, t, src) if first else None)
        finally:
            ods.close()
        res.source_rows, res.ods_rows = found.source_rows, found.ods_rows
        res.checksum_queries, res.rows_fetched = src.queries, src.fetched
    _fill(res, settled, cols, found.ranges)
    if notes:
        res.reason += f"; not compared: {', '.join(notes)}"
    res.seconds = round(time.monotonic() - started, 3)
    return res, settled, cols, r


def _range(src: SourceTable, ods: OdsSide, r: Ranged) -> tuple[tuple[int, int], Callable[[], list[tuple[int, int]]] | None]:
    """The first range to compare, and the ranges to add once ODS has been read. A key ranged by
    value starts from the database's bounds (an index lookup), so the database's first checksum
    query runs while Spark reads ODS; ODS keys outside those bounds are compared as ranges of
    their own after it (`bisect`'s `more`). Reading ODS's bounds first would serialise the two."""
    if not r.by_value:
        return _HASH_RANGE, None
    s_lo, s_hi = src.bounds(r)
    if s_lo is None or s_hi is None:  # an empty source table: whatever ODS holds is extra
        o_lo, o_hi = ods.bounds()
        return ((o_lo, o_hi + 1) if o_lo is not None and o_hi is not None else (0, 1)), None

    def outside() -> list[tuple[int, int]]:
        o_lo, o_hi = ods.bounds()  # from the cache the first checksums filled
        return [] if o_lo is None or o_hi is None else [(o_lo, s_lo), (s_hi + 1, o_hi + 1)]

    return (s_lo, s_hi + 1), outside


def _fill(res: TableReconcile, s: Settled, cols: list[ColumnSpec], ranges: int) -> None:
    kinds_ = Counter(d.kind for d, _, _ in s.differences)
    res.missing, res.extra, res.changed = kinds_["missing"], kinds_["extra"], kinds_["changed"]
    res.columns = dict(Counter(c for d, _, _ in s.differences for c in d.columns))
    res.unknown, res.in_flight, res.rechecked = len(s.unknown), len(s.in_flight), s.rechecked
    res.samples = [_sample(d, a, b, cols, res.key) for d, a, b in s.differences[:SAMPLES]]
    differing = res.missing + res.extra + res.changed
    res.status = "differs" if differing else "unsettled" if s.in_flight else "equal"
    parts = [f"{res.source_rows} rows in the source, {res.ods_rows} in ODS; {ranges} range(s) compared"]
    if differing:
        parts.append(f"{res.missing} missing, {res.extra} extra, {res.changed} changed"
                     + (f" ({', '.join(f'{c}: {n}' for c, n in sorted(res.columns.items()))})" if res.columns else ""))
    if s.unknown:
        parts.append(f"{len(s.unknown)} key(s) equal but for unavailable (TOASTed) values ODS never received")
    if s.rechecked > differing + len(s.in_flight):
        parts.append(f"{s.rechecked - differing - len(s.in_flight)} key(s) in flight at the first read, equal once re-read")
    if s.caught_up:
        parts.append("re-read once ODS had taken every change the database committed before the re-read")
    if s.in_flight and s.waited:
        parts.append(f"{len(s.in_flight)} key(s) in flight, not counted: {s.waited}")
    elif s.in_flight:
        parts.append(f"{len(s.in_flight)} key(s) still changing at the timeout (in flight, not counted)")
    res.reason = "; ".join(parts)


def _sample(d: KeyDiff, a: Row | None, b: Row | None, cols: list[ColumnSpec], key: list[str]) -> RowDiff:
    names = [c.name for c in cols]
    kind = "changed" if d.kind == "unknown" else d.kind
    return RowDiff(key={k: d.key[i] for i, k in enumerate(key)}, kind=kind, columns=list(d.columns),
                   source=dict(zip(names, a.values, strict=True)) if a else None,
                   ods=dict(zip(names, b.values, strict=True)) if b else None)
