"""Building models: plans (what to do and why), full builds and the three incremental strategies.

A model's progress — for each upstream the completion time of the last instant consumed, and the
model's fingerprint — is written into the extra metadata of the same Hudi commit that writes its
data. Upstreams are read as of the recorded instants, so an ingest committing during a build
cannot tear a read, and a crash leaves either the old commit or the new one.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from framework import hudi
from framework.config import Project
from framework.errors import LakeError
from framework.faults import failpoint
from framework.history import new_run_id
from framework.paths import Layout
from framework.transform.analysis import analyze_model
from framework.transform.gate import ModelGate
from framework.transform.held import Held
from framework.transform.loader import Model
from framework.transform.reader import TableReader, visible_columns
from framework.transform.strategy import Aggregate, Analysis
from models.records import ModelResult

_views = itertools.count()


@dataclass
class Plan:
    model: Model
    analysis: Analysis
    mode: str  # full | incremental | noop
    reason: str
    end: dict[str, str]  # upstream -> completion time to read as of
    begin: dict[str, str] = field(default_factory=dict)  # upstream -> checkpoint completion time
    pending: dict[str, int] = field(default_factory=dict)


class ModelContext:
    """What a Python model receives: `ctx.read("ods.user_order")` returns its upstream."""

    def __init__(self, spark: SparkSession, tables: dict[str, DataFrame]) -> None:
        self.spark = spark
        self._tables = tables

    def read(self, name: str) -> DataFrame:
        if name not in self._tables:
            raise LakeError(f"the Python model read {name}, which it does not declare", fix=f"add {name} to `depends_on` in its YAML")
        return self._tables[name]


class Builder:
    def __init__(self, spark: SparkSession, project: Project, models: dict[str, Model], run_id: str | None = None) -> None:
        self.spark = spark
        self.project = project
        self.models = models
        self.layout = Layout(project.warehouse)
        # Quality checks run before each commit; results and quarantined rows carry the run id.
        self.gate = ModelGate(spark, project, self.layout, run_id or new_run_id())
        self.reader = TableReader(spark, self.layout)
        # ODS tables declared without `key:` (Kafka source) use the key they were created with.
        self.ods_keys = {
            t.qualified_name: tuple(t.key or hudi.record_key(spark, self.layout.table(t.qualified_name)))
            for t in project.ods_tables
        }
        self._analysis: dict[str, Analysis] = {}
        self.local = project.config.spark.master.startswith("local")

    # ------------------------------------------------------------------ analysis
    def key_of(self, name: str) -> tuple[str, ...] | None:
        if name in self.ods_keys:
            return self.ods_keys[name]
        return self.analysis(self.models[name]).key if name in self.models else None

    def analysis(self, m: Model) -> Analysis:
        if m.name in self._analysis:
            return self._analysis[m.name]
        try:
            a = analyze_model(m, self.key_of)
        except ValueError as e:
            raise LakeError(f"{m.rel}: {e}", fix=f"change `strategy:` in layers/{m.layer}/{m.stem}.yaml") from e
        self._analysis[m.name] = a
        return a

    # ------------------------------------------------------------------ planning
    def checkpoint(self, m: Model) -> tuple[dict[str, str] | None, str | None]:
        _inst, meta = hudi.last_commit_metadata(self.spark, self.layout.table(m.name))
        if "ckpt" not in meta:
            return None, None
        return json.loads(meta["ckpt"]), meta.get("fingerprint")

    def plan(self, m: Model, incremental: bool) -> Plan:
        a = self.analysis(m)
        end: dict[str, str] = {}
        instants: dict[str, list[hudi.Instant]] = {}
        for u in m.upstreams:
            inst = hudi.completed_instants(self.spark, self.layout.table(u))
            if not inst:
                raise LakeError(f"{m.name} reads {u}, which has no data yet", fix=f"build or ingest {u} first (lake build +{m.name} builds ancestors)")
            instants[u] = inst
            end[u] = inst[-1].completed
        if not incremental:
            return Plan(m, a, "full", "full build requested", end)
        ckpt, fp = self.checkpoint(m)
        if ckpt is None:
            return Plan(m, a, "full", "no checkpoint: first build", end)
        if fp != m.fingerprint:
            return Plan(m, a, "full", f"the model changed (fingerprint {fp} → {m.fingerprint})", end)
        pending = {}
        for u in m.upstreams:
            c = ckpt.get(u)
            if c is None:
                return Plan(m, a, "full", f"no checkpoint for upstream {u}", end)
            done = {i.completed for i in instants[u]}
            if c not in done:
                if c < instants[u][0].completed:
                    return Plan(m, a, "full", f"checkpoint of {u} ({c}) is older than its timeline ({instants[u][0].completed}): cleaned or archived", end)
                return Plan(m, a, "full", f"checkpoint of {u} ({c}) is not on its timeline: {u} was rebuilt", end)
            pending[u] = sum(1 for i in instants[u] if i.completed > c)
        if not any(pending.values()):
            return Plan(m, a, "noop", "no upstream commits since the checkpoint", end, ckpt, pending)
        if a.strategy == "full":
            return Plan(m, a, "recompute", f"{a.reason}; only the rows that differ from the table are written", end, ckpt, pending)
        own = m.config.recompute_below_mib
        limit = self.project.config.build.recompute_below_mib if own is None else own
        setting = "build.recompute_below_mib" if own is None else f"recompute_below_mib in {m.stem}.yaml"
        if limit > 0:
            size = sum(hudi.table_bytes(self.layout.table(u)) for u in m.upstreams)
            if size <= limit * 2**20:
                reason = (f"upstreams hold {_mib(size)} (≤ {setting}: {limit:g} MiB): recomputing and writing only "
                          f"the rows that differ is cheaper than the {a.strategy} strategy at this size")
                return Plan(m, a, "recompute", reason, end, ckpt, pending)
        return Plan(m, a, "incremental", a.reason, end, ckpt, pending)

    def _recorded(self, m: Model, p: Plan) -> bool:
        """The table's last commit already records this plan's checkpoint and the model's fingerprint."""
        ckpt, fp = self.checkpoint(m)
        return ckpt == p.end and fp == m.fingerprint

    def changed_rows(self, p: Plan) -> dict[str, int]:
        """Rows changed per upstream in the plan's range (for `lake plan`)."""
        out = {}
        for u, n in p.pending.items():
            if n and p.begin.get(u):
                out[u] = self.reader.incremental(u, p.begin[u], p.end[u], cdc=False).count()
        return out

    # ------------------------------------------------------------------ running
    def run(self, p: Plan) -> ModelResult:
        t0 = time.time()
        m, a = p.model, p.analysis
        res = ModelResult(model=m.name, strategy=a.strategy, mode=p.mode, reason=p.reason, upstream=p.end)
        if p.mode == "noop":
            return res
        if p.mode in ("full", "recompute"):
            rows = self._full_rows(p)
            # Both write only the rows that differ from the table: a full rebuild of an existing
            # table has the same result as rewriting every row, without a COW rewrite of every
            # file group (2 M rows: 77 s, BENCHMARKS.md) or a CDC record per row downstream.
            w, d = self._write(m, a, rows, p, scope=None)
        elif a.strategy == "aggregate":
            w, d = self._aggregate_incremental(p)
        elif a.strategy == "rowwise":
            w, d = self._rowwise_incremental(p)
        else:
            w, d = self._rescan_incremental(p)
        res.rows_written, res.rows_deleted = w, d
        res.seconds = round(time.time() - t0, 3)
        return res

    # ------------------------------------------------------------------ query evaluation
    def _query(self, m: Model, inputs: dict[str, DataFrame]) -> DataFrame:
        """The model's output over the given upstream DataFrames."""
        if m.kind == "python":
            return self._python(m)(ModelContext(self.spark, inputs))
        assert m.sql is not None
        names = {}
        for u, df in inputs.items():
            v = f"__lake_{u.replace('.', '_')}_{next(_views)}"
            df.createOrReplaceTempView(v)
            names[u] = v
        return self.spark.sql(rewrite_tables(m.sql, names))

    def _python(self, m: Model) -> Any:
        spec = importlib.util.spec_from_file_location(f"lake_model_{m.layer}_{m.stem}", m.path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fns = [getattr(mod, n) for n in ("model", m.stem) if callable(getattr(mod, n, None))]
        if not fns:
            raise LakeError(f"{m.rel} defines no function `model(ctx)`", fix="define `def model(ctx): return ctx.read('ods.x')...`")
        return fns[0]

    def _snapshots(self, p: Plan, which: str = "end") -> dict[str, DataFrame]:
        at = p.end if which == "end" else p.begin
        return {u: self.reader.snapshot(u, at[u]) for u in p.model.upstreams}

    def _full_rows(self, p: Plan) -> DataFrame:
        a = p.analysis
        if a.strategy == "aggregate":
            return self._finalize(p, self._state_query(p, self._snapshots(p)[a.upstreams[0]]))
        return self._query(p.model, self._snapshots(p))

    # ------------------------------------------------------------------ aggregate
    def _grouped(self, a: Analysis, rows: DataFrame, measures: list[str], broadcast_join: DataFrame | None = None) -> DataFrame:
        """The model's WHERE and GROUP BY over `rows`, computing `measures` per group.
        `broadcast_join`: per-group values (`_lake_w<j>` = the j-th GROUP BY value, NULL-safe)
        joined to every row first, broadcast; measures name them `__lake_b.<column>`."""
        v = f"__lake_grouped_{next(_views)}"
        rows.createOrReplaceTempView(v)
        cols = [f"{e} AS `{alias}`" for e, alias in a.group_by] + measures
        where = f" WHERE {a.where_sql}" if a.where_sql else ""
        groups = ", ".join(e for e, _ in a.group_by)
        if broadcast_join is None:
            return self.spark.sql(f"SELECT {', '.join(cols)} FROM {v}{where} GROUP BY {groups}")
        b = f"__lake_b_{next(_views)}"
        broadcast_join.createOrReplaceTempView(b)
        on = " AND ".join(f"({e}) <=> __lake_b._lake_w{j}" for j, (e, _) in enumerate(a.group_by))
        return self.spark.sql(f"SELECT /*+ BROADCAST(__lake_b) */ {', '.join(cols)} FROM {v} JOIN {b} AS __lake_b ON {on}{where} GROUP BY {groups}")

    def _state_query(self, p: Plan, upstream: DataFrame, holders: bool = False) -> DataFrame:
        """Full aggregate state: row count and, per aggregate, its sum/count/extreme; per MIN/MAX
        also how many rows hold the extreme (`_lake_c`, NULL when unknown), so a retraction
        recomputes a group only when its last holder goes. Spark has no aggregate for "count at
        the minimum": counting takes a second pass (the extremes per group, then every state
        column over the rows joined to their group's extremes), which doubled a full build of a
        MIN/MAX model at 10 M rows. So full builds leave the counts unknown, and `holders=True`
        (the recompute of a few groups) counts them; incremental merges keep them from there."""
        a = p.analysis
        measures = ["count(*) AS _lake_rows"] + [e for g in a.aggregates for e in _state_exprs(g)]
        ext = [g for g in a.aggregates if g.func in ("min", "max")]
        if not holders:
            return self._grouped(a, upstream, measures + [f"CAST(NULL AS BIGINT) AS _lake_c{g.index}" for g in ext])
        extremes = self._grouped(a, upstream, [f"{g.func}({g.arg_sql}) AS _lake_m{g.index}" for g in ext])
        extremes = extremes.select(*[F.col(f"`{alias}`").alias(f"_lake_w{j}") for j, (_, alias) in enumerate(a.group_by)],
                                   *[f"_lake_m{g.index}" for g in ext])
        held = [f"count(CASE WHEN ({g.arg_sql}) = __lake_b._lake_m{g.index} THEN 1 END) AS _lake_c{g.index}" for g in ext]
        # Broadcast the extremes: they are one row per recomputed group, and those groups are
        # broadcast already (`_rows_of_groups`). Left to itself Spark sort-merge joined the
        # upstream rows to them (first incremental build after a full one, every group
        # recomputed, 10 M rows: 44.5 s; with the hint 37.1 s).
        return self._grouped(a, upstream, measures + held, broadcast_join=extremes)

    def _aggregate_incremental(self, p: Plan) -> tuple[int, int]:
        a = p.analysis
        u = a.upstreams[0]
        ch = self._read_change(u, list(self.key_of(u) or ()), p)
        signed = ch.before.withColumn("_lake_sign", F.lit(-1)).unionByName(ch.after.withColumn("_lake_sign", F.lit(1)), allowMissingColumns=True)
        ext = [g for g in a.aggregates if g.func in ("min", "max")]
        if ext:
            # Per group of the change: the extreme of the inserted and of the retracted values, to
            # count how many rows hold each (window over the change only; it is small).
            v = f"__lake_signed_{next(_views)}"
            signed.createOrReplaceTempView(v)
            part = ", ".join(expr for expr, _ in a.group_by)
            win = [f"{g.func}(CASE WHEN _lake_sign {s} 0 THEN ({g.arg_sql}) END) OVER (PARTITION BY {part}) AS _lake_{w}{g.index}"
                   for g in ext for s, w in ((">", "wi"), ("<", "wr"))]
            where = f" WHERE {a.where_sql}" if a.where_sql else ""
            signed = self.spark.sql(f"SELECT *, {', '.join(win)} FROM {v}{where}")
        delta = self._grouped(a, signed, ["sum(_lake_sign) AS _lake_rows"] + [e for g in a.aggregates for e in _delta_exprs(g)])
        key = list(a.key or ())
        # The delta (one row per changed group) feeds the merge, the old-state lookup and the
        # write's scope. Spark would re-read and re-decode the change for each use (exchange
        # reuse is off, see session.py): keep it.
        held = Held()
        try:
            return self._merge_aggregate(p, held(delta.withColumn("_lake_key", lake_key(key))))
        finally:
            held.release()

    def _merge_aggregate(self, p: Plan, delta: DataFrame) -> tuple[int, int]:
        a = p.analysis
        u = a.upstreams[0]
        key = list(a.key or ())
        target = self.reader.raw(p.model.name)
        # Tables written before the holder counts existed: unknown, like after a full build.
        target = target.select("*", *[F.lit(None).cast("bigint").alias(c) for g in a.aggregates for c in g.state if c not in target.columns])
        old = target.join(delta.select("_lake_key"), "_lake_key", "left_semi")
        upstream = self.reader.snapshot(u, p.end[u])  # typed state columns, and the rows of recomputed groups
        state_types = {f.name: f.dataType for f in self._state_query(p, upstream).schema.fields}
        d, o = delta.alias("d"), old.alias("o")
        j = d.join(o, F.col("d._lake_key") == F.col("o._lake_key"), "full_outer")
        merged = [F.coalesce(F.col("d._lake_key"), F.col("o._lake_key")).alias("_lake_key")]
        merged += [F.coalesce(F.col(f"d.`{k}`"), F.col(f"o.`{k}`")).alias(k) for k in key]
        merged.append((F.coalesce(F.col("o._lake_rows"), F.lit(0)) + F.coalesce(F.col("d._lake_rows"), F.lit(0))).cast("bigint").alias("_lake_rows"))
        recompute: Column = F.lit(False)
        for g in a.aggregates:
            i = g.index
            if g.func == "count_star":
                continue
            merged.append((F.coalesce(F.col(f"o._lake_n{i}"), F.lit(0)) + F.coalesce(F.col(f"d._lake_n{i}"), F.lit(0))).cast("bigint").alias(f"_lake_n{i}"))
            if g.func in ("sum", "avg"):
                s = F.coalesce(F.col(f"o._lake_s{i}"), F.lit(0)) + F.coalesce(F.col(f"d._lake_s{i}"), F.lit(0))
                merged.append(s.cast(state_types[f"_lake_s{i}"]).alias(f"_lake_s{i}"))
            elif g.func in ("min", "max"):
                # The new extreme is the better of the old one and the inserted one; it stands if
                # some row still holds it: old holders + inserted holders - retracted holders.
                # (Retracted values beyond the old extreme cannot exist, so only retractions at
                # the new extreme count.) No holder left -> recompute the group from upstream.
                # Unknown old holders (NULL: a full build) -> recompute only if the change
                # retracts a value at the extreme, as if it were the last.
                n = F.coalesce(F.col(f"o._lake_n{i}"), F.lit(0)) + F.coalesce(F.col(f"d._lake_n{i}"), F.lit(0))
                om, dm, dr = F.col(f"o._lake_m{i}"), F.col(f"d._lake_m{i}"), F.col(f"d._lake_r{i}")
                # When every old value was retracted, the inserted ones are all there is.
                replaced = (F.coalesce(F.col(f"o._lake_n{i}"), F.lit(0)) - F.coalesce(F.col(f"d._lake_rn{i}"), F.lit(0))) <= 0
                best = F.when(replaced, dm).otherwise((F.least if g.func == "min" else F.greatest)(om, dm))
                held = F.when(replaced, F.col(f"d._lake_mc{i}")).otherwise(
                    F.when(om == best, F.col(f"o._lake_c{i}")).otherwise(0) + F.when(dm == best, F.col(f"d._lake_mc{i}")).otherwise(0)
                    - F.when(dr == best, F.col(f"d._lake_rc{i}")).otherwise(0))
                hit = F.coalesce(dr == best, F.lit(False))
                beyond = ~replaced & F.coalesce((dr < best) if g.func == "min" else (dr > best), F.lit(False))  # a wrong stored state
                merged.append(F.when(n > 0, best).cast(state_types[f"_lake_m{i}"]).alias(f"_lake_m{i}"))
                merged.append(F.when(n > 0, held).otherwise(0).cast("bigint").alias(f"_lake_c{i}"))
                lost = F.coalesce(held <= 0, hit)  # no holder left; or one of an unknown number (NULL) retracted
                recompute = recompute | ((n > 0) & (best.isNull() | beyond | lost))
        # Never NULL: a NULL flag would drop the group from both the kept and the recomputed rows.
        merged.append(F.coalesce(recompute, F.lit(False)).alias("_lake_recompute"))
        hold = Held()
        state = hold(j.select(*merged))
        try:
            redo = state.where("_lake_recompute AND _lake_rows > 0").select("_lake_key", *[f"`{k}`" for k in key])
            if not redo.isEmpty():
                fresh = self._state_query(p, self._rows_of_groups(a, key, upstream, redo), holders=True)
                fresh = fresh.withColumn("_lake_key", lake_key(key)).join(redo.select("_lake_key"), "_lake_key", "left_semi")
                keep = state.where("NOT (_lake_recompute AND _lake_rows > 0)").drop("_lake_recompute")
                state_all = keep.unionByName(fresh.select(*keep.columns))
            else:
                state_all = state.drop("_lake_recompute")
            out = self._finalize(p, state_all)
            return self._write(p.model, a, out, p, scope=delta.select("_lake_key"))
        finally:
            hold.release()

    def _read_change(self, u: str, key: list[str], p: Plan) -> Any:
        """The net change of upstream `u` in the plan's range (lazy: each use reads it again;
        persisting it measured slower at 1 M rows, see BENCHMARKS.md)."""
        return self.reader.change(u, key, p.begin[u], p.end[u])

    def _rows_of_groups(self, a: Analysis, key: list[str], upstream: DataFrame, groups: DataFrame) -> DataFrame:
        """The upstream rows of the given groups (their key columns), filtered before aggregating
        so a MIN/MAX recompute shuffles only those groups' rows, not the whole upstream. The
        filter compares the typed GROUP BY values NULL-safely against a broadcast of the groups
        (building a JSON key per upstream row cost more than the aggregation it saved)."""
        exprs = dict((alias, e) for e, alias in a.group_by)
        if not all(k in exprs for k in key):
            return upstream
        mine = [f"_lake_g{i}" for i in range(len(key))]
        theirs = [f"_lake_w{i}" for i in range(len(key))]
        rows = upstream.select("*", *[F.expr(exprs[k]).alias(c) for k, c in zip(key, mine, strict=True)])
        wanted = F.broadcast(groups.select(*[F.col(f"`{k}`").alias(c) for k, c in zip(key, theirs, strict=True)]))
        on = [F.col(g).eqNullSafe(F.col(w)) for g, w in zip(mine, theirs, strict=True)]
        return rows.join(wanted, on, "left_semi").drop(*mine)

    def _finalize(self, p: Plan, state: DataFrame) -> DataFrame:
        """Visible columns (typed as the plain query types them) + state + `_deleted` (HAVING)."""
        a = p.analysis
        types = self._output_types(p)
        state_cols = [c for c in state.columns if c.startswith("_lake_") and c not in ("_lake_key", "_lake_recompute")]
        sdtypes = dict(state.dtypes)
        v = f"__lake_fin_{next(_views)}"
        state.createOrReplaceTempView(v)
        exprs = []
        for alias, e in a.finalize.items():
            for g in a.aggregates:
                if g.func == "avg":
                    is_dec = sdtypes.get(f"_lake_s{g.index}", "").startswith("decimal")
                    e = e.replace(f"__AVG_DIVISOR__{g.index}", f"CAST(_lake_n{g.index} AS DECIMAL(20,0))" if is_dec else f"CAST(_lake_n{g.index} AS DOUBLE)")
            exprs.append(f"CAST({e} AS {types[alias]}) AS `{alias}`")
        having = f"NOT coalesce({_fill_avg(a.having_sql, a.aggregates, sdtypes)}, false)" if a.having_sql else "false"
        sql = f"SELECT {', '.join(exprs)}, {', '.join(state_cols)}, ({having}) AS _deleted FROM {v}"
        return self.spark.sql(sql)

    def _output_types(self, p: Plan) -> dict[str, str]:
        empty = {u: self.reader.snapshot(u, p.end[u]).limit(0) for u in p.model.upstreams}
        return {f.name: f.dataType.simpleString() for f in self._query(p.model, empty).schema.fields}

    # ------------------------------------------------------------------ rowwise
    def _rowwise_incremental(self, p: Plan) -> tuple[int, int]:
        a = p.analysis
        u = a.upstreams[0]
        ukey = list(self.key_of(u) or ())
        ch = self._read_change(u, ukey, p)
        rows = self._query(p.model, {u: ch.after})
        scope = ch.keys.select(*[F.col(k).alias(a.key_map[k]) for k in ukey]).select(lake_key(list(a.key or ())).alias("_lake_key"))
        return self._write(p.model, a, rows, p, scope=scope)

    # ------------------------------------------------------------------ rescan
    def _rescan_incremental(self, p: Plan) -> tuple[int, int]:
        m, a = p.model, p.analysis
        key = list(a.key or ())
        # Key-scoped: recompute the output keys the changes reach. Partition-scoped (no key, but
        # `partition_by`): recompute the output partitions they reach and replace them.
        part = m.config.partition_by if not key else None
        scope_col = f"`{part}`" if part else "_lake_key"
        scope_of = (lambda df: df.select(F.col(scope_col))) if part else (lambda df: df.select(lake_key(key).alias("_lake_key")))
        old = self._snapshots(p, "begin")
        new = self._snapshots(p, "end")
        affected: DataFrame | None = None
        for u, n in p.pending.items():
            if not n:
                continue
            ch = self._read_change(u, list(self.key_of(u) or _all_columns(new[u])), p)
            for image, others in ((ch.before, old), (ch.after, new)):
                out = scope_of(self._query(m, {**others, u: image}))
                affected = out if affected is None else affected.union(out)
        assert affected is not None
        held = Held()
        scope = held(affected.distinct())
        try:
            rows = self._query(m, new)
            if part:
                rows = rows.join(scope, part, "left_semi")
            else:
                rows = rows.withColumn("_lake_key", lake_key(key)).join(scope, "_lake_key", "left_semi").drop("_lake_key")
            return self._write(m, a, rows, p, scope=scope, scope_col=part or "_lake_key")
        finally:
            held.release()

    # ------------------------------------------------------------------ writing
    def _write(self, m: Model, a: Analysis, rows: DataFrame, p: Plan, scope: DataFrame | None, scope_col: str = "_lake_key") -> tuple[int, int]:
        """Upsert `rows`; delete target rows inside `scope` (None: the whole table) not in `rows`.
        Without a key, a row's key is all its visible columns (set semantics). Without a scope
        (full rebuilds and recomputes: every row of the model), rows equal to the table's row of
        their key (every column, NULL-safe) are not written, so the commit and its CDC stay as
        small as the change and downstream models read only that."""
        key = list(a.key or ())
        path = self.layout.table(m.name)
        if not key:
            key = visible_columns(rows)
        out = rows.withColumn("_lake_key", lake_key(key))
        if "_deleted" not in out.columns:
            out = out.withColumn("_deleted", F.lit(False))
        if "_lake_rows" in out.columns:  # aggregate: groups whose count reached 0 are deleted
            gone = out.where("_lake_rows <= 0").select("_lake_key")
            out = out.where("_lake_rows > 0")
        else:
            gone = None
        out = out.withColumn("_hoodie_is_deleted", F.lit(False))
        exists = hudi.table_exists(path)
        held = Held()
        try:
            # Into an existing table, the rows are used twice or more (upserts, the anti-join that
            # finds the deletes, the diff): keep them rather than evaluate the model's query again.
            if exists:
                out = held(out)
            # The gate evaluates the checks first and drops quarantined rows from `out`, so their keys
            # are deleted below like any key the query no longer returns.
            if m.config.checks:
                out = self.gate.check(m.name, m.config.checks, out, key, self.reader.raw(m.name) if exists else None, scope, scope_col, gone)
            deletes = None
            if exists:
                # Delete records need the key (and partition path) only: read just those columns.
                full_target = self.reader.raw(m.name)
                required = {f.name for f in full_target.schema.fields if not f.nullable}
                kept = ["_lake_key"] + ([m.config.partition_by] if m.config.partition_by else [])
                if any(t.startswith(("array", "map", "struct")) for c, t in full_target.dtypes if c in required):
                    kept = full_target.columns  # no typed zero for a required nested column: carry the row
                target = full_target.select(*[f"`{c}`" for c in dict.fromkeys(kept + ([scope_col] if scope is not None else []))])
                candidates = target if scope is None else target.join(scope, scope_col, "left_semi")
                vanished = candidates.join(out.select("_lake_key"), "_lake_key", "left_anti")
                if gone is not None:
                    vanished = vanished.unionByName(target.join(gone, "_lake_key", "left_semi")).dropDuplicates(["_lake_key"])
                deletes = vanished.select(*[F.col(c) if c in vanished.columns else _filler(t, c in required).alias(c) for c, t in out.dtypes if c != "_hoodie_is_deleted"],
                                          F.lit(True).alias("_hoodie_is_deleted"))
                if scope is None:
                    out = _changed_rows(out, full_target)
            final = held(out if deletes is None else out.unionByName(deletes))
            counts = {r["_hoodie_is_deleted"]: r["count"] for r in final.groupBy("_hoodie_is_deleted").count().collect()}
            written, deleted = counts.get(False, 0), counts.get(True, 0)
            if written + deleted == 0 and exists and (p.mode != "full" or self._recorded(m, p)):
                return 0, 0
            # (A full rebuild that changes no row still commits, empty, when the table's commit
            # records another fingerprint or checkpoint: else every later build would be full.)
            opts = hudi.write_options(name=m.name.replace(".", "_"), key=["_lake_key"], ordering=None, partition=m.config.partition_by,
                                      table_type="cow", local=self.local, extra=self.project.config.hudi)
            if not exists:
                opts["hoodie.datasource.write.operation"] = "insert"
            meta = {"ckpt": json.dumps(p.end, sort_keys=True), "fingerprint": m.fingerprint, "strategy": a.strategy, "mode": p.mode}
            failpoint("before_model_commit")
            hudi.write(final, path, opts, meta)
            failpoint("after_model_commit")
            return written, deleted
        finally:
            held.release()
            self.gate.release()


def _changed_rows(out: DataFrame, target: DataFrame) -> DataFrame:
    """The rows of `out` that the table does not hold exactly (NULL-safe on every column). When
    the columns differ (one added, dropped or retyped: the model changed) or a column is a map
    (not comparable in Spark), every row counts as changed, so every row is rewritten."""
    cols = [c for c in out.columns if c != "_hoodie_is_deleted"]
    stored = {"tinyint": "int", "smallint": "int"}  # Avro has no 8/16-bit ints: Hudi stores them as int
    mine = {c: stored.get(t, t) for c, t in out.dtypes}
    theirs = {c: stored.get(t, t) for c, t in target.dtypes if not c.startswith("_hoodie_")}
    if {c: mine[c] for c in cols} != theirs or any("map<" in t for t in mine.values()):
        return out
    o, t = out.alias("_o"), target.select(*[f"`{c}`" for c in cols]).alias("_t")
    same = [F.col(f"_o.`{c}`").eqNullSafe(F.col(f"_t.`{c}`")) for c in cols]
    return o.join(t, same, "left_anti")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 / 10 else f"{n / 1024:.0f} KiB"


def _filler(sql_type: str, required: bool) -> Column:
    """A value for a column of a delete record (Hudi needs only its key and partition): NULL, or a
    typed zero where the table's schema does not allow NULL (Avro would refuse the record)."""
    if not required:
        return F.lit(None).cast(sql_type)
    if sql_type == "date":
        return F.lit("1970-01-01").cast("date")
    if sql_type in ("string", "binary"):
        return F.lit("").cast(sql_type)
    return F.lit(0).cast(sql_type)


def lake_key(cols: list[str]) -> Column:
    """The Hudi record key of a model row: its key values as a JSON array (NULL-safe)."""
    return F.to_json(F.array(*[F.col(f"`{c}`").cast("string") for c in cols]))


def _all_columns(df: DataFrame) -> list[str]:
    return visible_columns(df)


def _state_exprs(g: Aggregate) -> list[str]:
    i, x = g.index, g.arg_sql
    if g.func == "count_star":
        return []
    if g.func == "count":
        return [f"count({x}) AS _lake_n{i}"]
    if g.func in ("sum", "avg"):
        return [f"sum({x}) AS _lake_s{i}", f"count({x}) AS _lake_n{i}"]
    return [f"{g.func}({x}) AS _lake_m{i}", f"count({x}) AS _lake_n{i}"]


def _delta_exprs(g: Aggregate) -> list[str]:
    i, x = g.index, g.arg_sql
    if g.func == "count_star":
        return []
    n = f"sum(CASE WHEN ({x}) IS NOT NULL THEN _lake_sign ELSE 0 END) AS _lake_n{i}"
    if g.func == "count":
        return [n]
    if g.func in ("sum", "avg"):
        return [f"sum(CASE WHEN _lake_sign > 0 THEN ({x}) ELSE -({x}) END) AS _lake_s{i}", n]
    return [f"{g.func}(CASE WHEN _lake_sign > 0 THEN ({x}) END) AS _lake_m{i}", f"{g.func}(CASE WHEN _lake_sign < 0 THEN ({x}) END) AS _lake_r{i}", n,
            f"count(CASE WHEN _lake_sign > 0 AND ({x}) = _lake_wi{i} THEN 1 END) AS _lake_mc{i}",
            f"count(CASE WHEN _lake_sign < 0 AND ({x}) = _lake_wr{i} THEN 1 END) AS _lake_rc{i}",
            f"count(CASE WHEN _lake_sign < 0 THEN ({x}) END) AS _lake_rn{i}"]


def _fill_avg(sql: str | None, aggs: tuple[Aggregate, ...], types: dict[str, str]) -> str | None:
    if sql is None:
        return None
    for g in aggs:
        if g.func == "avg":
            is_dec = types.get(f"_lake_s{g.index}", "").startswith("decimal")
            sql = sql.replace(f"__AVG_DIVISOR__{g.index}", f"CAST(_lake_n{g.index} AS DECIMAL(20,0))" if is_dec else f"CAST(_lake_n{g.index} AS DOUBLE)")
    return sql


def rewrite_tables(sql: str, names: dict[str, str]) -> str:
    """Point `ods.user`-style references at temp views, keeping how the SQL refers to them."""
    tree = sqlglot.parse_one(sql, read="spark")

    def swap(node: Any) -> Any:
        if isinstance(node, exp.Table) and node.db:
            full = f"{node.db}.{node.name}".lower()
            if full in names:
                alias = node.alias or node.name
                return exp.alias_(exp.to_table(names[full]), alias, table=True)
        return node

    out: Any = tree.transform(swap)
    return str(out.sql(dialect="spark"))
