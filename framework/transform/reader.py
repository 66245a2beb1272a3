"""Reading upstream tables as models see them: live rows, as of a recorded instant, and the net
change between two instants.

Every lake table marks deleted rows with `_deleted` (ODS soft deletes, groups hidden by HAVING)
or removes them (model outputs use Hudi deletes). Models see live rows and visible columns only.

The net change of a table over (begin, end] (completion times) is one row per changed key with
its before-image (state at `begin`) and after-image (state at `end`). When every change in the
range is in CDC log files (copy-on-write merges; `hudi.cdc_logged`), both images come from the
CDC records alone (first and last per key), so the read grows with the change, not the table.
Otherwise:
- after-images come from Hudi's incremental query (latest state, typed exactly; it reads every
  base file the range rewrote);
- before-images come from the first CDC record per key in the range. Hudi writes CDC log images
  as Avro JSON (timestamps in µs, dates in days, decimals as signed byte arrays), decoded here.
  Images Hudi infers from base files serialize decimals lossily, so they are never used:
  first-in-range `i` records have no before-image by definition, and MOR tables (whose before-
  images come from base files) get their before-images by time travel to `begin` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from framework.errors import LakeError
from framework.ods.decode import decimal_from_bytes
from framework.runtime.location import Location
from framework.runtime.paths import Layout
from framework.table import hudi, timeline
from framework.table.columns import live, visible_columns
from framework.transform import external

if TYPE_CHECKING:
    from framework.project.externals import ExternalTable

# Hudi's refusal, when a query runs, of a time travel to before the earliest retained commit.
CLEANED = "Cleaner cleaned up the timestamp of interest"


@dataclass
class Change:
    """Net change of one upstream: `before`/`after` are typed images of changed keys (live only)."""

    before: DataFrame
    after: DataFrame
    keys: DataFrame  # record keys (key columns) of every changed row


class TableReader:
    """Reads lake's tables in `layout`, and the project's `externals` (framework/transform/external.py)."""

    def __init__(self, spark: SparkSession, layout: Layout, externals: Mapping[str, ExternalTable] | None = None) -> None:
        self.spark = spark
        self.layout = layout
        self.externals = externals or {}

    def path(self, name: str) -> Location:
        return self.layout.table(name)

    def is_mor(self, name: str) -> bool:
        props = self.path(name) / ".hoodie" / "hoodie.properties"
        fs = self.layout.fs
        return "MERGE_ON_READ" in fs.read_text(props) if fs.exists(props) else False

    def latest(self, name: str) -> hudi.Instant | None:
        inst = timeline.completed(self.path(name))
        return inst[-1] if inst else None

    def raw(self, name: str, as_of: str | None = None) -> DataFrame:
        r = self.spark.read.format("hudi")
        if as_of:
            r = r.option("as.of.instant", as_of)
        return r.load(str(self.path(name)))

    def snapshot(self, name: str, as_of: str | None = None) -> DataFrame:
        """Live rows, visible columns, as of a completion time (None: latest); an external table's
        rows as of its version."""
        if name in self.externals:
            return external.frame(self.spark, self.externals[name], as_of)
        df = self.raw(name, as_of)
        return df.where(live(df)).select(*visible_columns(df))

    def incremental(self, name: str, begin: str, end: str, cdc: bool) -> DataFrame:
        """Hudi's incremental query over (begin, end], as CDC records (`op, ts_ms, before, after`)
        or as the latest rows written in the range; never a silent full-table fallback."""
        r = self.spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental")
        if cdc:
            r = r.option("hoodie.datasource.query.incremental.format", "cdc")
        return (r.option("hoodie.datasource.read.begin.instanttime", begin)
                .option("hoodie.datasource.read.end.instanttime", end)
                .option("hoodie.datasource.read.incr.fallback.fulltablescan.enable", "false")
                .load(str(self.path(name))))

    def change(self, name: str, key: list[str], begin: str, end: str) -> Change:
        if name in self.externals:  # planning recomputes the readers of a changed one instead
            raise LakeError(f"{name} is an external table, which has no change feed to read",
                            fix="report this as a lake bug (a plan read an external table incrementally)")
        mor = self.is_mor(name)
        if not mor and timeline.cdc_logged(self.path(name), begin, end):
            return self._logged_change(name, key, begin, end)
        incr = self.incremental(name, begin, end, cdc=False)
        cols = visible_columns(incr)
        typed = self._typed_as(name, end, incr.schema)
        after = _cast(incr.where(live(incr)).select(*cols), typed)
        cdc = self.incremental(name, begin, end, cdc=True)
        schema = incr.schema
        changed = _keyed(cdc, schema, key)
        # Hard deletes (model outputs) appear only in the CDC stream; the incremental query has the rest.
        keys = _cast(changed.select(*key).union(incr.select(*key)).distinct(), typed)
        if mor:
            old = self.raw(name, as_of=begin)
            before = old.where(live(old)).join(keys, key, "left_semi").select(*visible_columns(old))
        else:
            before = _image(_ranked(changed, key), "before", schema, cols)
        return Change(before=_cast(before, typed), after=after, keys=keys)

    def _logged_change(self, name: str, key: list[str], begin: str, end: str) -> Change:
        """The net change from the CDC logs alone, when every change in the range is logged
        (`hudi.cdc_logged`): before-image of the first record per key, after-image of the last.
        The incremental query would read every base file the range rewrote: with changes spread
        over the keys, the whole table."""
        cdc = self.incremental(name, begin, end, cdc=True)
        at_end = self.raw(name, as_of=end)  # the schema the model's snapshot reads has
        cols = visible_columns(at_end)
        schema = self._written_as(name, end, at_end.schema)
        changed = _keyed(cdc, schema, key)
        ranked = _ranked(changed, key)
        before, after = _image(ranked, "before", schema, cols), _image(ranked, "after", schema, cols)
        keys = changed.select(*key).distinct()
        return Change(before=_cast(before, at_end.schema), after=_cast(after, at_end.schema), keys=_cast(keys, at_end.schema))

    def _written_as(self, name: str, end: str, at_end: T.StructType) -> T.StructType:
        """The schema Hudi gives change records of a range ending at `end`: the table's latest, also
        for commits written before a widening (a DECIMAL(10,2) → DECIMAL(12,4) table returns old
        CDC images rescaled: 1.25 as 12500), which can be newer than the schema at `end` when a
        commit lands after the build planned."""
        last = self.latest(name)
        return at_end if last is None or last.completed == end else self.raw(name).schema

    def _typed_as(self, name: str, end: str, latest: T.StructType) -> T.StructType:
        """The schema at `end`, which change images are cast to (see `_written_as`)."""
        last = self.latest(name)
        return latest if last is None or last.completed == end else self.raw(name, as_of=end).schema


def _keyed(cdc: DataFrame, schema: T.StructType, key: list[str]) -> DataFrame:
    """CDC records with their record key decoded into typed key columns (from the before-image
    of a `d`, the after-image otherwise)."""
    keyed = [f for f in schema.fields if f.name in key]
    key_schema = T.StructType([T.StructField(f.name, _avro_json_type(f.dataType)) for f in keyed])
    k = F.from_json(F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after")), key_schema)
    return cdc.select(*[_from_avro_json(k[f.name], f.dataType).alias(f.name) for f in keyed], "op", "ts_ms", "before", "after")


def _ranked(changed: DataFrame, key: list[str]) -> DataFrame:
    """CDC records with `_first`/`_last` marking each key's first and last record in the range.
    A partition move is a `d` (old partition) and an `i` (new one) in the same commit: the `d`
    holds the before-image and sorts first, the `i` the after-image and sorts last."""
    order = [F.col("ts_ms"), F.when(F.col("op") == "i", 1).otherwise(0)]
    w = Window.partitionBy(*key)
    ranked = changed.withColumn("_pos", F.row_number().over(w.orderBy(*order)))
    return ranked.withColumn("_first", F.col("_pos") == 1).withColumn("_last", F.col("_pos") == F.count(F.lit(1)).over(w))


def _image(ranked: DataFrame, which: str, schema: T.StructType, cols: list[str]) -> DataFrame:
    """Typed live `before` images of each key's first CDC record, or `after` images of its last
    (decoded from Hudi's Avro JSON)."""
    full = T.StructType([T.StructField(f.name, _avro_json_type(f.dataType)) for f in schema.fields if f.name in cols or f.name == "_deleted"])
    absent = "i" if which == "before" else "d"
    json = F.when((F.col("op") != absent) & (F.col(which) != "null"), F.col(which))
    parsed = ranked.where(F.col("_first" if which == "before" else "_last")).select(F.from_json(json, full).alias("b")).where(F.col("b").isNotNull())
    typed = parsed.select(*[_from_avro_json(F.col("b")[f.name], schema[f.name].dataType).alias(f.name) for f in full.fields])
    return typed.where(live(typed)).select(*cols)


def _cast(df: DataFrame, schema: T.StructType) -> DataFrame:
    """`df` with each column of `schema` cast to its type there (exact: the values of a range
    ending at the schema's instant fit its types)."""
    types = {f.name: f.dataType for f in schema.fields}
    if all(types.get(f.name, f.dataType) == f.dataType for f in df.schema.fields):
        return df
    return df.select(*[F.col(f"`{f.name}`").cast(types[f.name]).alias(f.name) if types.get(f.name, f.dataType) != f.dataType
                       else F.col(f"`{f.name}`") for f in df.schema.fields])


def _avro_json_type(t: T.DataType) -> T.DataType:
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        return T.LongType()
    if isinstance(t, T.DateType):
        return T.IntegerType()
    if isinstance(t, T.DecimalType):
        return T.ArrayType(T.IntegerType())
    if isinstance(t, T.BinaryType):
        return T.StringType()
    return t


def _from_avro_json(c: Column, t: T.DataType) -> Column:
    if isinstance(t, T.TimestampType | T.TimestampNTZType):
        return F.timestamp_micros(c).cast(t)
    if isinstance(t, T.DateType):
        return F.date_add(F.lit("1970-01-01").cast("date"), c)
    if isinstance(t, T.DecimalType):
        return decimal_from_bytes(c, t.precision, t.scale)
    if isinstance(t, T.BinaryType):
        return F.encode(c, "ISO-8859-1")
    return c
