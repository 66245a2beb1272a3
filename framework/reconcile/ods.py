"""The ODS side of `lake reconcile`: the same canonical texts, hashes and range coordinates as
the source's SQL (framework/reconcile/sql.py), as Spark expressions over the ODS table's live rows
(an ODS table holds live rows only: a delete removes the row, its tombstone is kept apart).

Each row's coordinate and hash (two longs) are computed once and cached for the bisection's
levels; the rows of the last ranges are read from the table as of the same commit (a filter on
the coordinate: on an integer key, the Parquet files' key statistics skip most of the table).
Caching the rows' texts instead cost the first step most of its time: a million rows' texts
written to memory for the few hundred the bisection ever fetches. The re-reads of differing keys
read the table afresh, to see what ingest committed since."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from framework.reconcile.canonical import NULL_MARK, SEPARATOR, ColumnSpec
from framework.reconcile.rows import Key, Row, Span, Sums
from framework.reconcile.sql import Ranged
from framework.table import timeline
from framework.table.lake_table import LakeTable


def text(c: ColumnSpec, float_digits: int, *, raw_float: bool = False) -> Column:
    """One column's canonical text (canonical.py's rule for its kind); raw_float: a float's full
    value (what fetched rows compare within the tolerance)."""
    col = F.col(f"`{c.name}`")
    k = c.kind
    if k == "float" and raw_float:
        return col.cast("double").cast("string")
    if k == "int":
        return col.cast("string")
    if k == "bool":
        return F.when(col, F.lit("1")).when(~col, F.lit("0"))
    if k == "decimal":
        return plain(col, c.scale)
    if k == "float":
        return plain(F.round(col.cast("double"), float_digits).cast(f"decimal(38,{float_digits})"), float_digits)
    if k in ("string", "time"):
        return col.cast("string")
    if k == "date":
        return F.date_format(col, "yyyy-MM-dd")
    if k == "timestamp":
        return F.unix_micros(col).cast("string")
    return F.hex(col)


def plain(d: Column, scale: int) -> Column:
    """A decimal's plain text at `scale` ('-0.0500'), never the scientific form Spark's cast to
    string gives small values at a large scale ('1E-10', '0E-10'). Up to 6 decimals the cast is
    plain (Java's BigDecimal.toString turns scientific only below an adjusted exponent of -6, and
    a value at scale s never goes below -s), and four times cheaper than the general path:
    format_number formats the exact BigDecimal in Locale.US, whose grouping commas go."""
    if scale <= 6:
        return d.cast("string")
    return F.regexp_replace(F.format_number(d, scale), ",", "")


def framed(t: Column) -> Column:
    return F.when(t.isNull(), F.lit(NULL_MARK)).otherwise(F.concat(F.length(t).cast("string"), F.lit(":"), t))


def row_text(cols: Sequence[ColumnSpec], float_digits: int) -> Column:
    parts: list[Column] = []
    for i, c in enumerate(cols):
        if i:
            parts.append(F.lit(SEPARATOR))
        parts.append(framed(text(c, float_digits)))
    return F.concat(*parts)


def hash60(t: Column) -> Column:
    """The low 60 bits of the MD5 (fits a long; sums are taken as decimals)."""
    return F.conv(F.substring(F.md5(t), 18, 15), 16, 10).cast("bigint")


def _sum(h: str) -> Column:
    return F.sum(F.col(h).cast("decimal(38,0)"))


_BATCH = 64  # ranges per Spark job (a CASE of that many branches)


def _which(spans: Sequence[Span]) -> Column:
    """The index of the span a row's coordinate `_c` falls in (NULL: none)."""
    c = F.col("_c")
    out = None
    for i, (lo, hi, _w) in enumerate(spans):
        inside = (c >= F.lit(lo)) & (c < F.lit(hi))
        out = F.when(inside, F.lit(i)) if out is None else out.when(inside, F.lit(i))
    assert out is not None
    return out


def coordinate(r: Ranged, float_digits: int) -> Column:
    if r.by_value:
        return F.col(f"`{r.key[0].name}`").cast("bigint")
    return F.conv(F.substring(F.md5(row_text(r.key, float_digits)), 1, 8), 16, 10).cast("bigint")


class OdsSide:
    """An ODS table as the bisection's `Side`."""

    def __init__(self, spark: SparkSession, table: LakeTable, r: Ranged, cols: Sequence[ColumnSpec], float_digits: int) -> None:
        self.spark, self.table, self.r, self.cols, self.digits = spark, table, r, tuple(cols), float_digits
        self._at = self._latest_instant()
        self._df = (self.table.read(spark, self._at).select(coordinate(r, float_digits).alias("_c"), hash60(row_text(self.cols, float_digits)).alias("_h"))
                    .persist(StorageLevel.MEMORY_AND_DISK))

    def _latest_instant(self) -> str | None:
        """The table's latest completed commit, found in the timeline now: a plain snapshot read
        in a process that read the table before may see it as it was then."""
        done = timeline.completed(self.table.location)
        return done[-1].completed if done else None

    def _project(self, df: DataFrame) -> DataFrame:
        texts = [text(c, self.digits, raw_float=True).alias(f"_t{i}") for i, c in enumerate(self.cols)]
        return df.select(coordinate(self.r, self.digits).alias("_c"), *texts)

    def _snapshot(self) -> DataFrame:
        """Coordinate and texts of the table as of the commit the hashes were taken at."""
        return self._project(self.table.read(self.spark, self._at))

    def close(self) -> None:
        self._df.unpersist()

    def bounds(self) -> tuple[int | None, int | None]:
        r = self._df.agg(F.min("_c"), F.max("_c")).first()
        assert r is not None
        return r[0], r[1]

    def _in(self, df: DataFrame, lo: int, hi: int) -> DataFrame:
        return df.where((F.col("_c") >= F.lit(lo)) & (F.col("_c") < F.lit(hi)))

    def checksums(self, lo: int, hi: int, width: int) -> Sums:
        got = (self._in(self._df, lo, hi).groupBy(F.expr(f"(_c - ({lo})) div {width}").alias("b"))
               .agg(F.count(F.lit(1)).alias("n"), _sum("_h").alias("s")).collect())
        return {int(x["b"]): (int(x["n"]), int(x["s"])) for x in got}

    def checksums_many(self, spans: Sequence[Span]) -> list[Sums]:
        """Every span's checksums in one Spark job over the cached hashes (a job per range cost
        most of a bisection: each scans the whole cache): each row's span by a CASE over the
        (disjoint) ranges, grouped by span and sub-range."""
        out: list[Sums] = []
        for i in range(0, len(spans), _BATCH):
            part = spans[i : i + _BATCH]
            if len(part) == 1:
                out.append(self.checksums(*part[0]))
                continue
            # Each row's span (CASE over the disjoint ranges), then its sub-range within it.
            spanned = self._df.select("_c", "_h", _which(part).alias("_s")).where(F.col("_s").isNotNull())
            spanned = spanned.select("_s", "_h", "_c",
                                     F.element_at(F.array(*[F.lit(a).cast("bigint") for a, _, _ in part]), F.col("_s") + 1).alias("_lo"),
                                     F.element_at(F.array(*[F.lit(w).cast("bigint") for _, _, w in part]), F.col("_s") + 1).alias("_w"))
            got = (spanned.select("_s", "_h", F.expr("(_c - _lo) div _w").alias("b"))
                   .groupBy("_s", "b").agg(F.count(F.lit(1)).alias("n"), _sum("_h").alias("s")).collect())
            sums: list[Sums] = [{} for _ in part]
            for x in got:
                sums[int(x["_s"])][int(x["b"])] = (int(x["n"]), int(x["s"]))
            out += sums
        return out

    def rows_many(self, ranges: Sequence[tuple[int, int]]) -> dict[Key, Row]:
        """The rows of all these ranges, in one Spark job per `_BATCH` ranges."""
        out: dict[Key, Row] = {}
        for i in range(0, len(ranges), _BATCH):
            part = ranges[i : i + _BATCH]
            cond = reduce(lambda a, b: a | b, [(F.col("_c") >= F.lit(lo)) & (F.col("_c") < F.lit(hi)) for lo, hi in part])
            out.update(self._rows(self._snapshot().where(cond)))
        return out

    def _rows(self, df: DataFrame) -> dict[Key, Row]:
        names = [c.name for c in self.cols]
        at = [names.index(k.name) for k in self.r.key]
        out: dict[Key, Row] = {}
        for rec in df.select("_c", *[f"_t{i}" for i in range(len(self.cols))]).collect():
            values = tuple(rec[1:])
            out[tuple(values[i] for i in at)] = Row(coordinate=int(rec[0]), values=values)
        return out

    def rows(self, lo: int, hi: int) -> dict[Key, Row]:
        return self._rows(self._in(self._snapshot(), lo, hi))

    def keyed(self, keys: Sequence[Key]) -> dict[Key, Row]:
        """The rows of these keys in the table as it is now (its latest commit, read afresh)."""
        if not keys:
            return {}
        cond = reduce(lambda a, b: a | b, [
            reduce(lambda x, y: x & y, [text(k, self.digits).eqNullSafe(F.lit(v)) for k, v in zip(self.r.key, key, strict=True)])
            for key in keys])
        return self._rows(self._project(self.table.read(self.spark, self._latest_instant()).where(cond)))
