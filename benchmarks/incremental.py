"""Incremental model builds against full rebuilds, after CDC changing 0.1 %, 1 % and 10 % of N orders.

    .venv/bin/python benchmarks/incremental.py [--rows 1000000] [--small-rows N/10] [--out BENCHMARKS.md] [--results run.json]
    .venv/bin/python benchmarks/incremental.py --render run.json [--render other.json] [--note TEXT] --out BENCHMARKS.md

The issue's target size is 10M orders (`--rows 10000000`); it is not run by default (the shared
2-core machine takes hours at that size). One Python process, one SparkSession, one temporary
directory per table size:

1. a project with ODS tables `shop.orders` (key id; id, uid, pid, amount decimal(12,2), qty,
   status, ts) and `shop.users` (key id; id, city, score) and three models:
   rowwise `dwd.paid_orders`, aggregate `dws.sales_by_product` (~1000 groups, SUM/COUNT/MIN/MAX/AVG)
   and rescans `dws.orders_by_city` (join with users, GROUP BY city: 100 output keys, all reached by
   a change of 1,000 events) and `dws.orders_by_user` (the same join GROUP BY user: 10,000 output
   keys, ~10 % reached by 1,000 events, the case issue 19's rescan goal is about);
2. initial ODS state of N orders + 10k users: a Parquet dump generated with Spark (`spark.range` and
   deterministic expressions the Python generator reproduces) loaded with `run_bootstrap` at
   `mysql-bin.000001:4`; initial `build(..., incremental=True)` (full; reported, not compared);
3. per change fraction: bare Debezium envelopes on orders (70 % updates of live ids changing
   amount/qty/status, 20 % inserts, 10 % deletes) at positions in `mysql-bin.000002` (after the
   bootstrap hand-off), ingested with `run_ingest` (not measured); then per model
   - incremental: `Evaluator.plan(model, incremental=True)` + `Evaluator.run(plan)`, wall time;
   - full: `Evaluator.plan(model, incremental=False)` + `strategies.full.rows(plan)` written to Spark's `noop`
     sink: everything computed, nothing written, so the full figure excludes the Hudi write (which
     makes full/incremental conservative for lake); the model table is left as the incremental
     build wrote it;
   - check: the incremental table's live rows equal the full computation (count and a checksum of
     row hashes); a mismatch stops the run;
   then on a copy of the whole project taken after the ingest (shutil.copytree, own Builder):
   - the incremental builds again, with the change read forced first (persist + count of the
     before/after/key images) so the step timings separate it (not the measured figure);
   - on a second copy taken at the same time (the state the incremental builds started from), a
     real full rebuild (plan + run, Hudi write included: what `lake build <model>` does) of each model;
4. print a table per fraction and, with --out, replace this benchmark's section of BENCHMARKS.md
   (--results keeps the figures as JSON; --render rewrites the section from one or more such files,
   e.g. the default run plus a 10M run, without running Spark).

A smaller table (`--small-rows`, default N/10; 0 skips it) goes through the same steps first in
the same process, so equal absolute changes can be compared at two table sizes (0.1 % of N = 1 %
of N/10). A tiny warm-up project runs first so JVM code paths are warm for both; its second round
changes one row, and its builds are reported as the fixed cost of a build (with the bound it sets
on full/incremental at N rows).

Runs with more than 50k rows wait (polling every 30 s) while a pytest process is running on the
machine, before the bootstrap and before each fraction's measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._common import (  # noqa: E402
    CpuMark,
    Phases,
    jvm_peak_rss,
    machine_info,
    read_event_log,
    vm_hwm_mib,
    write_markdown,
)

SECTION = "## Incremental builds (benchmarks/incremental.py)"

TABLES_YAML = """\
tables:
  - source: shop.orders
    key: [id]
    columns: {id: bigint, uid: bigint, pid: bigint, amount: "decimal(12,2)", qty: int, status: string, ts: timestamp}
  - source: shop.users
    key: [id]
    columns: {id: bigint, city: string, score: int}
"""

MODELS = {
    "dwd/paid_orders.sql": "select id, uid, pid, amount, qty from ods.orders where status = 'paid'",
    "dws/sales_by_product.sql": "select pid, count(*) as orders, sum(amount) as revenue, min(qty) as min_qty, "
                                "max(qty) as max_qty, avg(qty) as avg_qty from ods.orders group by pid",
    "dws/orders_by_city.sql": "select u.city, count(*) as orders, sum(o.amount) as revenue "
                              "from ods.orders o join ods.users u on o.uid = u.id group by u.city",
    "dws/orders_by_user.sql": "select o.uid, u.city, count(*) as orders, sum(o.amount) as revenue "
                              "from ods.orders o join ods.users u on o.uid = u.id group by o.uid, u.city",
}
MODEL_ORDER = ["dwd.paid_orders", "dws.sales_by_product", "dws.orders_by_city", "dws.orders_by_user"]
AGGREGATE_MODEL = "dws.sales_by_product"

STATUSES = ["new", "paid", "shipped", "delivered", "cancelled"]
BASE_TS = 1_704_067_200  # 2024-01-01T00:00:00Z, seconds
BOOTSTRAP_POSITION = "mysql-bin.000001:4"
CDC_FILE = "mysql-bin.000002"
LINES_PER_FILE = 25_000
PYTEST_IDLE_ABOVE = 50_000


# --------------------------------------------------------------------------- data
def iso(secs: int) -> str:
    return datetime.fromtimestamp(secs, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Shape:
    users: int = 10_000
    products: int = 1_000
    cities: int = 100

    def order(self, i: int) -> dict[str, Any]:
        """Initial row of order `i`, exactly as `orders_dump` generates it in Spark."""
        return {
            "id": i,
            "uid": (i * 7919) % self.users + 1,
            "pid": (i * 104729) % self.products + 1,
            "amount": ((i * 2654435761) % 100_000 + 100) / 100,
            "qty": (i * 31) % 10 + 1,
            "status": STATUSES[(i * 13) % 5],
            "ts": iso(BASE_TS + i),
        }

    def orders_dump(self, spark: Any, n: int) -> Any:
        statuses = ", ".join(f"'{s}'" for s in STATUSES)
        return spark.range(1, n + 1).selectExpr(
            "id",
            f"(id * 7919) % {self.users} + 1 AS uid",
            f"(id * 104729) % {self.products} + 1 AS pid",
            "CAST(CAST((id * 2654435761) % 100000 + 100 AS DECIMAL(12,0)) / 100 AS DECIMAL(12,2)) AS amount",
            "CAST((id * 31) % 10 + 1 AS INT) AS qty",
            f"element_at(array({statuses}), CAST((id * 13) % 5 AS INT) + 1) AS status",
            f"timestamp_seconds({BASE_TS} + id) AS ts",
        )

    def users_dump(self, spark: Any) -> Any:
        return spark.range(1, self.users + 1).selectExpr(
            "id",
            f"concat('city_', lpad(CAST((id * 17) % {self.cities} AS STRING), 3, '0')) AS city",
            "CAST(id % 100 AS INT) AS score",
        )


class OrdersCdc:
    """CDC traffic on orders after the dump; knows every row's current image."""

    def __init__(self, shape: Shape, n: int, seed: int) -> None:
        self.shape = shape
        self.rng = random.Random(seed)
        self.next_id = n + 1
        self.changed: dict[int, dict[str, Any]] = {}  # ids whose row differs from the dump's
        self.deleted: set[int] = set()
        self.pos = 4
        self.ts_ms = (BASE_TS + 400 * 86_400) * 1000
        self.files = 0

    @property
    def live(self) -> int:
        return self.next_id - 1 - len(self.deleted)

    def _row(self, i: int) -> dict[str, Any]:
        return self.changed[i] if i in self.changed else self.shape.order(i)

    def _pick_live(self) -> int:
        while True:
            i = self.rng.randint(1, self.next_id - 1)
            if i not in self.deleted:
                return i

    def events(self, count: int) -> tuple[list[str], dict[str, int], int]:
        """`count` envelopes (70 % u, 20 % c, 10 % d, shuffled); returns lines, op counts, distinct keys."""
        from tests.helpers import envelope

        rng = self.rng
        ops = ["u"] * round(count * 0.7) + ["c"] * round(count * 0.2)
        ops += ["d"] * (count - len(ops))
        rng.shuffle(ops)
        lines, keys = [], set()
        for op in ops:
            self.pos += rng.randint(150, 900)
            self.ts_ms += rng.randint(1, 50)
            now = iso(self.ts_ms // 1000)
            if op == "c":
                i = self.next_id
                self.next_id += 1
                before = None
                after = {"id": i, "uid": rng.randint(1, self.shape.users), "pid": rng.randint(1, self.shape.products),
                         "amount": rng.randint(100, 100_099) / 100, "qty": rng.randint(1, 10), "status": "new", "ts": now}
                self.changed[i] = after
            elif op == "u":
                i = self._pick_live()
                before = self._row(i)
                after = dict(before, amount=rng.randint(100, 100_099) / 100, qty=rng.randint(1, 10), status=rng.choice(STATUSES), ts=now)
                self.changed[i] = after
            else:
                i = self._pick_live()
                before, after = self._row(i), None
                self.deleted.add(i)
                self.changed.pop(i, None)
            keys.add(i)
            lines.append(json.dumps(envelope(op, "shop.orders", before, after, pos=self.pos, ts=self.ts_ms, file=CDC_FILE)))
        counts = {o: ops.count(o) for o in ("u", "c", "d")}
        return lines, counts, len(keys)

    def write(self, cdc: Path, lines: list[str]) -> None:
        for start in range(0, len(lines), LINES_PER_FILE):
            self.files += 1
            path = cdc / f"{self.files:05d}.json"
            path.write_text("\n".join(lines[start:start + LINES_PER_FILE]) + "\n")
            t = 1_700_000_000 + self.files * 10  # mtimes increase: arrival order = write order
            os.utime(path, (t, t))


def make_project(root: Path, model_layout: str = "", ods_layout: str = "") -> None:
    """The benchmark's project; `model_layout` / `ods_layout` are YAML mappings of layout settings
    (models/layout.py, e.g. `type: mor, index: bucket`) given to every model / to `shop.orders`."""
    (root / "layers" / "ods").mkdir(parents=True, exist_ok=True)
    (root / "cdc").mkdir(exist_ok=True)
    # The incremental strategies are what this measures: no size-based recompute (the copy
    # measures that separately with --recompute).
    (root / "lake.yaml").write_text('name: bench\nwarehouse: warehouse\nspark: {master: "local[2]"}\nbuild: {recompute_below_mib: 0}\n')
    tables = TABLES_YAML
    if ods_layout:
        tables = tables.replace("    key: [id]\n    columns: {id: bigint, uid", f"    key: [id]\n    {ods_layout.replace(', ', chr(10) + '    ')}\n    columns: {{id: bigint, uid", 1)
    (root / "layers" / "ods" / "shop.yaml").write_text(tables)
    for rel, sql in MODELS.items():
        path = root / "layers" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sql + "\n")
        if model_layout:
            path.with_suffix(".yaml").write_text(model_layout.replace(", ", "\n") + "\n")


# --------------------------------------------------------------------------- step timers
class Steps:
    """Wraps the engine's methods (in this process only; the engine is not modified) with timers.

    Spark is lazy, so a step's time is the Spark work its own actions run: the change read is
    fused into the first action that needs it unless `force_change` materializes it first."""

    PLAN = "plan"
    CHANGE_OPEN = "open change"
    CHANGE_READ = "change read"
    OPEN = "open tables"
    TYPES = "types"
    DELTA = "delta + merge"
    FINAL = "final rows + deletes"
    WRITE = "Hudi write"
    ORDER = [PLAN, CHANGE_OPEN, CHANGE_READ, OPEN, TYPES, DELTA, FINAL, WRITE]
    LEGEND = {
        PLAN: "`Evaluator.plan`: timelines of the upstreams, the model's checkpoint",
        CHANGE_OPEN: "`TableReader.change`: opening Hudi's incremental and CDC queries (lazy: file listing, no rows read)",
        CHANGE_READ: "profile only: the change's before/after/key images persisted and counted before the engine uses them",
        OPEN: "`TableReader.raw`: opening snapshot / time-travel relations of upstreams and of the model's own table",
        TYPES: "`_output_types`: analysis of the plain query over empty inputs",
        DELTA: "Spark actions in the strategy itself; aggregate: `isEmpty` of the merged state = signed delta "
               "GROUP BY + full outer join with the old state rows (+ the change read when not forced)",
        FINAL: "`Committer.write` up to the Hudi call: persist + count of upserts and deletes (rowwise: filter of the after-images, "
               "delete scope against the model table; aggregate: finalize + MIN/MAX group recompute; rescan: the affected "
               "keys and the recomputation of the query for them)",
        WRITE: "`hudi.write`: Hudi upsert of the persisted rows (index lookup, file group rewrite, CDC log, commit)",
    }

    def __init__(self) -> None:
        self.current = Phases()
        self.force_change = False
        self.state_queries = 0
        self._persisted: list[Any] = []

    def reset(self) -> None:
        self.current = Phases()
        self.state_queries = 0

    def release(self) -> None:
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()

    def breakdown(self) -> dict[str, float]:
        """Exclusive seconds per step; the run's own time is the aggregate's delta/merge actions."""
        out = {k: v for k, v in self.current.excl.items() if k != "run"}
        out[self.DELTA] = out.get(self.DELTA, 0.0) + self.current.excl.get("run", 0.0)
        return out

    def install(self) -> None:
        from framework.table import hudi
        from framework.transform import commit, evaluate, reader
        from framework.transform.strategies import aggregate

        def wrap(owner: Any, attr: str, label: str, after: Callable[..., Any] | None = None) -> None:
            original = getattr(owner, attr)

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.current.phase(label):
                    out = original(*args, **kwargs)
                return after(out) if after else out

            setattr(owner, attr, wrapper)

        def materialize(ch: Any) -> Any:
            if self.force_change:
                with self.current.phase(self.CHANGE_READ):
                    for df in (ch.before, ch.after, ch.keys):
                        df.persist()
                        df.count()
                        self._persisted.append(df)
            return ch

        def count_state(out: Any) -> Any:
            self.state_queries += 1
            return out

        wrap(evaluate.Evaluator, "plan", self.PLAN)
        wrap(evaluate.Evaluator, "run", "run")
        wrap(commit.Committer, "write", self.FINAL)
        wrap(aggregate, "_output_types", self.TYPES)
        wrap(aggregate, "state_query", "run", count_state)  # counts calls: a 2nd = MIN/MAX recompute
        wrap(reader.TableReader, "change", self.CHANGE_OPEN, materialize)
        wrap(reader.TableReader, "raw", self.OPEN)
        wrap(hudi, "write", self.WRITE)


def full_rows(builder: Any, p: Any) -> Any:
    """The model's full computation (not written)."""
    from framework.transform.strategies import full

    return full.rows(builder.ctx, p)


# --------------------------------------------------------------------------- measurements
@dataclass
class ModelFigures:
    model: str
    strategy: str
    mode: str
    incr: float
    full: float
    incr_others: float  # cores used by other processes during the incremental build
    full_others: float
    written: int
    deleted: int
    recompute: bool
    steps: dict[str, float]
    rows: int  # live rows of the model table after the build
    window: tuple[float, float] = (0.0, 0.0)  # epoch s of the incremental measurement
    phases: Phases | None = None
    profile: dict[str, float] = field(default_factory=dict)
    profile_seconds: float = 0.0
    real_full: float | None = None
    recompute_s: float | None = None  # --recompute: the same build as a recompute with a rows-that-differ write
    recompute_written: tuple[int, int] = (0, 0)
    jobs: int = 0  # Spark jobs the incremental build ran (from the event log)
    job_steps: dict[str, int] = field(default_factory=dict)


@dataclass
class FractionFigures:
    rows: int
    fraction: float
    events: int
    ops: dict[str, int]
    keys: int
    ingest_seconds: float
    models: list[ModelFigures]


def pytest_running() -> bool:
    return subprocess.run(["pgrep", "-f", "pytest"], capture_output=True).returncode == 0


class Bench:
    def __init__(self, spark: Any, steps: Steps, say: Callable[[str], None], shape: Shape, seed: int) -> None:
        self.spark = spark
        self.steps = steps
        self.say = say
        self.shape = shape
        self.seed = seed
        self.waited = 0.0
        self.compare_recompute = False
        self.model_layout = ""
        self.ods_layout = ""

    def wait_idle(self, rows: int) -> None:
        if rows <= PYTEST_IDLE_ABOVE:
            return
        t0 = time.perf_counter()
        if pytest_running():
            self.say("pytest is running on the machine: waiting for it to finish (polling every 30 s)")
            while pytest_running():
                time.sleep(30)
            self.waited += time.perf_counter() - t0
            self.say(f"pytest done after {time.perf_counter() - t0:.0f} s of waiting")

    # ---------------------------------------------------------------- set-up
    def setup(self, root: Path, n: int) -> tuple[Any, Any, OrdersCdc, dict[str, float]]:
        from pyspark.sql import functions as F

        from framework.ods.bootstrap import run_bootstrap
        from framework.project.config import load_project
        from framework.transform.evaluate import Evaluator as Builder
        from framework.transform.runner import build, load

        make_project(root, self.model_layout, self.ods_layout)
        project = load_project(root)
        dumps = root.parent / f"{root.name}-dumps"
        t0 = time.perf_counter()
        self.shape.orders_dump(self.spark, n).write.mode("overwrite").parquet(str(dumps / "orders"))
        self.shape.users_dump(self.spark).write.mode("overwrite").parquet(str(dumps / "users"))
        # The Python generator must know the dump's rows exactly (before-images of updates/deletes).
        sample = [1, 2, 3, n // 2 or 1, n]
        dumped = self.spark.read.parquet(str(dumps / "orders")).where(f"id in ({', '.join(map(str, sample))})")
        dumped = dumped.withColumn("ts", F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss'Z'"))  # session time zone is UTC
        got = {r["id"]: r.asDict() for r in dumped.collect()}
        for i in sample:
            want, row = self.shape.order(i), got[i]
            have = {**row, "amount": float(row["amount"])}
            if have != want:
                raise SystemExit(f"FAILED: dump row {i} is {have}, the generator expects {want}")
        for t, d in (("orders", "orders"), ("users", "users")):
            r = run_bootstrap(self.spark, project, project.ods_table(t), dumps / d, position=BOOTSTRAP_POSITION)
            self.say(f"  bootstrap ods.{t}: {r.rows:,} rows at {r.position}")
        shutil.rmtree(dumps, ignore_errors=True)
        self.say(f"  dump + bootstrap in {time.perf_counter() - t0:.1f} s (not measured)")
        t0 = time.perf_counter()
        self.steps.reset()
        results = build(self.spark, project, [], [], incremental=True)
        initial = {}
        for r in results:
            if r.mode != "full":
                raise SystemExit(f"FAILED: initial build of {r.model}: {r.mode} ({r.reason})\n{r.error or ''}")
            initial[r.model] = r.seconds
            self.say(f"  initial build {r.model:<22} {r.strategy:<9} {r.mode:<5} {r.seconds:7.1f} s, {r.rows_written:,} rows")
        self.say(f"  initial build in {time.perf_counter() - t0:.1f} s")
        models, _ = load(project)
        return project, Builder(self.spark, project, models), OrdersCdc(self.shape, n, self.seed + n), initial

    # ---------------------------------------------------------------- one fraction
    def fraction(self, root: Path, project: Any, builder: Any, gen: OrdersCdc, n: int, frac: float, copy: bool) -> FractionFigures:
        from framework.ods.ingest import run_ingest

        count = max(1, round(n * frac))
        lines, ops, keys = gen.events(count)
        gen.write(root / "cdc", lines)
        self.wait_idle(n)
        t0 = time.perf_counter()
        summary = run_ingest(self.spark, project)
        ingest_s = time.perf_counter() - t0
        dead = sum(b.dead_letter for b in summary.batches)
        early = sum(t.before_bootstrap for b in summary.batches for t in b.tables.values())
        live = builder.reader.snapshot("ods.orders").count()
        self.say(f"  {count:,} events ({ops['u']:,} u / {ops['c']:,} c / {ops['d']:,} d, {keys:,} keys) ingested in {ingest_s:.1f} s "
                 f"(not measured); ods.orders live rows {live:,} (expected {gen.live:,}), dead letters {dead}, before bootstrap {early}")
        from framework.table import hudi

        sizes = {t: hudi.table_bytes(root / "warehouse" / "ods" / t) / 2**20 for t in ("orders", "users")}
        self.say("  ODS files (latest slices): " + ", ".join(f"ods.{t} {mib:.1f} MiB" for t, mib in sizes.items()))
        if summary.status != "ok" or dead or early or live != gen.live:
            raise SystemExit("FAILED: the ingest did not produce the expected ODS state")
        copy_root = root.parent / f"{root.name}-copy"
        full_root = root.parent / f"{root.name}-full"  # a second copy: real full rebuilds from the same state
        if copy:
            for r in (copy_root, full_root):
                shutil.rmtree(r, ignore_errors=True)
                shutil.copytree(root, r)
        self.wait_idle(n)
        self.spark.catalog.clearCache()

        figures = []
        for name in MODEL_ORDER:
            m = builder.models[name]
            # (a) incremental
            self.steps.reset()
            t0, c0, w0 = time.perf_counter(), CpuMark.now(), time.time()
            plan = builder.plan(m, incremental=True)
            res = builder.run(plan)
            incr = time.perf_counter() - t0
            window, phases = (w0, time.time()), self.steps.current
            incr_others = CpuMark.now().cores_since(c0)[1]
            steps = self.steps.breakdown()
            recompute = plan.analysis.strategy == "aggregate" and self.steps.state_queries > 1
            if res.mode != "incremental":
                self.say(f"  WARNING: {name} built {res.mode}: {res.reason}")
            # (b) full computation of the same upstream state, not written
            t0, c0 = time.perf_counter(), CpuMark.now()
            fplan = builder.plan(m, incremental=False)
            full_rows(builder, fplan).write.format("noop").mode("overwrite").save()
            full = time.perf_counter() - t0
            full_others = CpuMark.now().cores_since(c0)[1]
            # (c) correctness
            rows = self.check(builder, m, fplan)
            figures.append(ModelFigures(name, res.strategy, res.mode, incr, full, incr_others, full_others,
                                        res.rows_written, res.rows_deleted, recompute, steps, rows, window, phases))
            self.say(f"  {name:<22} {res.strategy:<9} incremental {incr:7.2f} s (written {res.rows_written:,}, deleted {res.rows_deleted:,}"
                     f"{', MIN/MAX groups recomputed from a full scan' if recompute else ''}), full (noop) {full:7.2f} s, "
                     f"ratio {full / incr:5.1f}; check ok ({rows:,} rows); other processes {incr_others:.2f}/{full_others:.2f} cores")
            self.spark.catalog.clearCache()
        if copy:
            self.on_copy(copy_root, full_root, figures)
            shutil.rmtree(copy_root, ignore_errors=True)
            shutil.rmtree(full_root, ignore_errors=True)
        return FractionFigures(n, frac, count, ops, keys, ingest_s, figures)

    def check(self, builder: Any, m: Any, fplan: Any) -> int:
        """The incremental table's live rows equal the full computation: count + checksum."""
        from pyspark.sql import functions as F

        from framework.transform.reader import visible_columns

        full = full_rows(builder, fplan)
        cols = visible_columns(full)
        if "_deleted" in full.columns:
            full = full.where("NOT _deleted")
        actual = builder.reader.snapshot(m.name)

        def digest(df: Any) -> tuple[int, Any, dict[str, str]]:
            df = df.select(*cols)
            types = dict(df.dtypes)
            parts = [(F.round(F.col(c), 6) if types[c] in ("double", "float") else F.col(c)).cast("string") for c in cols]
            r = df.select(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*parts).cast("decimal(38,0)")).alias("h")).first()
            return r["n"], r["h"], types

        want, got = digest(full), digest(actual)
        if want[2] != got[2]:
            self.say(f"  note: {m.name} column types differ: table {got[2]} vs full {want[2]} (compared as text)")
        if want[:2] != got[:2]:
            raise SystemExit(f"FAILED: {m.name}: incremental table has {got[0]:,} rows (checksum {got[1]}), "
                             f"the full computation {want[0]:,} rows (checksum {want[1]})")
        return int(got[0])

    def on_copy(self, copy_root: Path, full_root: Path, figures: list[ModelFigures]) -> None:
        """Step profile of the incremental builds (change read forced first), then a real full
        rebuild of the aggregate model, on a copy of the project taken after the ingest."""
        from framework.project.config import load_project
        from framework.transform.evaluate import Evaluator as Builder
        from framework.transform.runner import load

        project = load_project(copy_root)
        models, _ = load(project)
        b = Builder(self.spark, project, models)
        for f in figures if self.compare_recompute else []:
            plan = b.plan(models[f.model], incremental=True)
            plan.mode = "recompute"
            t0 = time.perf_counter()
            res = b.run(plan)
            f.recompute_s = time.perf_counter() - t0
            f.recompute_written = (res.rows_written, res.rows_deleted)
            self.check(b, models[f.model], b.plan(models[f.model], incremental=False))
            self.say(f"  copy: {f.model} recompute {f.recompute_s:.2f} s (written {res.rows_written:,}, deleted {res.rows_deleted:,}; "
                     f"check ok) vs incremental {f.incr:.2f} s, full (noop) {f.full:.2f} s")
            self.spark.catalog.clearCache()
        for f in figures if not self.compare_recompute else []:
            self.steps.reset()
            self.steps.force_change = True
            try:
                t0 = time.perf_counter()
                res = b.run(b.plan(models[f.model], incremental=True))
                f.profile_seconds = time.perf_counter() - t0
                f.profile = self.steps.breakdown()
            finally:
                self.steps.force_change = False
                self.steps.release()
            if res.mode != "incremental":
                self.say(f"  WARNING: profile run of {f.model} was {res.mode}: {res.reason}")
            self.spark.catalog.clearCache()
        # A real full rebuild of each model (what `lake build <model>` does: every row computed,
        # the rows that differ written, vanished keys deleted), on the second copy: the state the
        # measured incremental builds started from.
        fproject = load_project(full_root)
        fmodels, _ = load(fproject)
        fb = Builder(self.spark, fproject, fmodels)
        for f in figures:
            self.steps.reset()
            t0 = time.perf_counter()
            res = fb.run(fb.plan(fmodels[f.model], incremental=False))
            f.real_full = time.perf_counter() - t0
            self.say(f"  copy: real full rebuild of {f.model} (Hudi write included) {f.real_full:.2f} s, {res.rows_written:,} rows "
                     f"(ratio {f.real_full / f.incr:.2f} vs the measured incremental)")
            self.spark.catalog.clearCache()
        if not self.compare_recompute:
            self.say(f"  copy: profiled incremental runs {', '.join(f'{f.model} {f.profile_seconds:.1f} s' for f in figures)}")

    # ---------------------------------------------------------------- one size
    def size(self, tmp: Path, n: int, fractions: list[float], copy: bool, label: str) -> tuple[dict[str, float], list[FractionFigures]]:
        root = tmp / label
        self.say(f"{label}: {n:,} orders, {self.shape.users:,} users")
        self.wait_idle(n)
        project, builder, gen, initial = self.setup(root, n)
        out = []
        for frac in fractions:
            self.say(f"{label}: change {frac:.1%} of {n:,}")
            ff = self.fraction(root, project, builder, gen, n, frac, copy)
            print_fraction(ff)
            out.append(ff)
        shutil.rmtree(root, ignore_errors=True)
        return initial, out


# --------------------------------------------------------------------------- report
def print_fraction(ff: FractionFigures) -> None:
    print(f"\n{ff.rows:,} orders, change {ff.fraction:.1%} = {ff.events:,} events ({ff.keys:,} keys)")
    print(f"{'model':<22} {'strategy':<10} {'incremental s':>13} {'full s (noop)':>14} {'full/incr':>9} {'real full s':>11} {'real/incr':>9}")
    for f in ff.models:
        real = f"{f.real_full:11.2f} {f.real_full / f.incr:9.1f}" if f.real_full is not None else f"{'-':>11} {'-':>9}"
        print(f"{f.model:<22} {f.strategy:<10} {f.incr:13.2f} {f.full:14.2f} {f.full / f.incr:9.1f} {real}")
    print("where the incremental time goes (measured run; exclusive s per step):")
    for f in ff.models:
        parts = ", ".join(f"{k.split(' (')[0]} {v:.2f}" for k, v in sorted(f.steps.items(), key=lambda kv: Steps.ORDER.index(kv[0])) if v >= 0.005)
        print(f"  {f.model:<22} {parts}")
    if any(f.recompute_s is not None for f in ff.models):
        print("recompute with a rows-that-differ write, on the copy (build.recompute_below_mib):")
        for f in ff.models:
            if f.recompute_s is not None:
                print(f"  {f.model:<22} recompute {f.recompute_s:6.2f} s (written {f.recompute_written[0]:,}, deleted {f.recompute_written[1]:,}); "
                      f"incremental/recompute {f.incr / f.recompute_s:5.2f}; full (noop)/recompute {f.full / f.recompute_s:5.2f}")
    if any(f.profile for f in ff.models):
        print("profile on the copy (change read forced first):")
        for f in ff.models:
            parts = ", ".join(f"{k.split(' (')[0]} {v:.2f}" for k, v in sorted(f.profile.items(), key=lambda kv: Steps.ORDER.index(kv[0])) if v >= 0.005)
            print(f"  {f.model:<22} total {f.profile_seconds:.2f}: {parts}")
    print()


def step_table(title: str, runs: list[FractionFigures], attr: str) -> list[str]:
    figs = [(ff, f) for ff in runs for f in ff.models if getattr(f, attr)]
    if not figs:
        return []
    cols = [k for k in Steps.ORDER if any(getattr(f, attr).get(k, 0.0) >= 0.005 for _, f in figs)]
    jobs = attr == "steps" and any(f.jobs for _, f in figs)
    head = "| rows | change | model | " + " | ".join(cols) + " | total s |" + (" Spark jobs |" if jobs else "")
    lines = [title, "", head, "|---:|---:|---|" + "---:|" * (len(cols) + 1 + jobs)]
    for ff, f in figs:
        steps = getattr(f, attr)
        total = f.incr if attr == "steps" else f.profile_seconds
        cells = " | ".join(f"{steps.get(k, 0.0):.2f}" for k in cols)
        lines.append(f"| {ff.rows:,} | {ff.fraction:.1%} | {f.model} | {cells} | {total:.2f} |" + (f" {f.jobs} |" if jobs else ""))
    return lines + [""]


def job_line(f: ModelFigures) -> str:
    parts = ", ".join(f"{k} {v}" for k, v in sorted(f.job_steps.items(), key=lambda kv: -kv[1]))
    return f"{f.jobs} Spark jobs ({parts})"


def ratio(a: float, b: float) -> str:
    x = a / b
    return f"{x:.2f}" if x < 1 else f"{x:.1f}"


def find(runs: list[FractionFigures], rows: int, events: int, model: str) -> ModelFigures | None:
    for ff in runs:
        if ff.rows == rows and ff.events == events:
            return next((f for f in ff.models if f.model == model), None)
    return None


def growth_by_table(runs: list[FractionFigures]) -> list[tuple[int, int, int, str, float, float]]:
    """(events, small rows, large rows, model, small s, large s) for equal changes at consecutive table sizes."""
    sizes = sorted({ff.rows for ff in runs})
    out = []
    for lo, hi in zip(sizes, sizes[1:], strict=False):
        for ff in runs:
            if ff.rows != hi:
                continue
            for f in ff.models:
                s = find(runs, lo, ff.events, f.model)
                if s:
                    out.append((ff.events, lo, hi, f.model, s.incr, f.incr))
    return out


def summary_lines(runs: list[FractionFigures]) -> list[str]:
    """Plain statements computed from the figures (the target, growth with change vs table, rescan)."""
    out = []
    n = max(ff.rows for ff in runs)
    low = min((ff for ff in runs if ff.rows == n), key=lambda ff: ff.fraction)
    by = {f.model: f for f in low.models}
    parts = []
    for name in ("dwd.paid_orders", AGGREGATE_MODEL):
        f = by.get(name)
        if f:
            real = f" ({ratio(f.real_full, f.incr)}x against a real full rebuild)" if f.real_full is not None else ""
            parts.append(f"{name} ({f.strategy}) {ratio(f.full, f.incr)}x{real}")
    met = all(by[m].full / by[m].incr >= 20 for m in ("dwd.paid_orders", AGGREGATE_MODEL) if m in by)
    size = "at the target size" if n >= 10_000_000 else f"at {n:,} rows, not the target's 10M"
    out.append(f"**Target** (the issue: full/incremental >= 20x at 0.1 % for the aggregate and rowwise models at 10M rows). "
               f"Measured {size}: at {low.fraction:.1%} ({low.events:,} events) full/incremental is "
               + "; ".join(parts) + (": met." if met else ": **not met**."))
    out.append("")
    pairs = growth_by_table(runs)
    text = ""
    if pairs:
        text += "**Change vs table**: for the same number of changed rows, 10x the table took "
        spans = []
        for lo, hi in sorted({(p[1], p[2]) for p in pairs}):
            g = [p[5] / p[4] for p in pairs if (p[1], p[2]) == (lo, hi)]
            spans.append(f"{min(g):.1f}x to {max(g):.1f}x the time from {lo:,} to {hi:,} rows")
        text += "; ".join(spans) + ". "
    spans = []
    for rows in sorted({ff.rows for ff in runs}):
        rr = sorted((ff for ff in runs if ff.rows == rows), key=lambda ff: ff.fraction)
        g = [fb.incr / fa.incr for a, b in zip(rr, rr[1:], strict=False) if b.fraction > a.fraction  # repeated fractions: no growth to report
             for fa, fb in zip(a.models, b.models, strict=True)]
        if g:
            spans.append(f"{min(g):.1f}x to {max(g):.1f}x at {rows:,} rows")
    if spans:
        text += "On the same table, 10x the change took " + "; ".join(spans) + ". "
    if text:
        out += [text.strip(), ""]
    resc = sorted(((ff, f) for ff in runs if ff.rows == n for f in ff.models if f.strategy == "rescan"), key=lambda p: p[0].fraction)
    if resc:
        out.append(f"**Rescan** (`dws.orders_by_city`) at {n:,} rows: full/incremental " + ", ".join(f"{ratio(f.full, f.incr)}x at {ff.fraction:.1%}" for ff, f in resc)
                   + f". The rescan recomputes the join only for the output keys (cities) the change reaches; here the smallest change already "
                   f"reached {resc[0][1].written:,} of {resc[0][1].rows:,} cities, so it recomputes the whole join, on top of the change read "
                   "and the key scoping, and cannot beat the full rebuild.")
        out.append("")
    return out


def floor_lines(floor: FractionFigures | None, runs: list[FractionFigures]) -> list[str]:
    """The fixed cost of an incremental build (one event on the warm-up tables) and what it bounds:
    no strategy can beat `real full / fixed cost` while each build makes one Hudi commit."""
    if floor is None:
        return []
    n = max(ff.rows for ff in runs)
    low = min((ff for ff in runs if ff.rows == n), key=lambda ff: ff.fraction)
    by = {f.model: f for f in low.models}
    out = [f"**Fixed cost** of an incremental build: one changed row ({floor.events} event) on the {floor.rows:,}-row warm-up tables, "
           "warm JVM, same session (plan, change read, strategy, one Hudi commit; nothing here grows with a table):", "",
           f"| model | strategy | incremental s | of which Hudi write s | at {n:,} rows, {low.fraction:.1%}: full s (noop) | real full s "
           "| full (noop) / fixed cost | real full / fixed cost |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for f in floor.models:
        big = by.get(f.model)
        if big is None:
            continue
        real = f"{big.real_full:.2f} | {ratio(big.real_full, f.incr)}" if big.real_full is not None else "- | -"
        out.append(f"| {f.model} | {f.strategy} | {f.incr:.2f} | {f.steps.get(Steps.WRITE, 0.0):.2f} | {big.full:.2f} | {real.split(' | ')[0]} | "
                   f"{ratio(big.full, f.incr)} | {real.split(' | ')[1]} |")
    out += ["", "The last two columns bound full/incremental at that size: an incremental build that cost only its fixed part would "
            "reach them and no more.", ""]
    return out


def markdown_section(results: list[dict[str, Any]]) -> str:
    """The section for one run, or several (`--render a.json --render b.json`: the same script, other sizes)."""
    r = results[0]
    runs: list[FractionFigures] = sorted((ff for x in results for ff in x["runs"]), key=lambda ff: (ff.rows, ff.fraction))
    sizes = sorted({ff.rows for ff in runs})
    initial = {k: v for x in results for k, v in x["initial"].items()}
    waited = sum(x["waited"] for x in results)
    lines = [
        SECTION,
        "",
        "- Date: " + ", ".join(sorted({x["date"] for x in results})),
        "- Machine: " + "; ".join(f"{k} {v}" for k, v in r["machine"].items()),
        "- Command" + ("s" if len(results) > 1 else "") + ": " + "; ".join(f"`{x['command']}`" for x in results)
        + (" (separate processes; each table size has its own project)" if len(results) > 1 else ""),
        "- Data: ODS `orders` of " + ", ".join(f"{s:,}" for s in sizes)
        + f" rows (one project per size) + `users` of {r['users']:,} rows, bootstrapped from a Spark-generated Parquet dump at "
        f"`{BOOTSTRAP_POSITION}`; changes are Debezium envelopes in `{CDC_FILE}` (70 % u / 20 % c / 10 % d on orders) ingested with "
        f"`run_ingest` (not measured) before the builds. {r['products']:,} products, {r['cities']} cities.",
        "- Models: rowwise `dwd.paid_orders` (`where status = 'paid'`), aggregate `dws.sales_by_product` "
        "(count/sum/min/max/avg by pid), rescan `dws.orders_by_city` (orders join users, group by city).",
        "- Incremental = `Evaluator.plan(m, incremental=True)` + `Evaluator.run(plan)`. Full = `Evaluator.plan(m, incremental=False)` + "
        "`strategies.full.rows(plan)` written to Spark's `noop` sink: computed, not written, so **the full figure excludes the Hudi write and "
        "full/incremental is conservative for lake**. Real full = plan + run of a full rebuild (Hudi write included: what `lake build "
        "<model>` does) of each model on a copy of the project (shutil.copytree after the ingest). Model time only: SparkSession up "
        "and warmed by a tiny project first.",
        "- Check after every fraction: each incremental table's live rows equal the full computation (row count and sum of xxhash64 of "
        "the rows): all passed.",
        "- Initial full builds (`build(..., incremental=True)` on empty model tables): "
        + "; ".join(f"{s:,} rows: " + ", ".join(f"{k} {v:.1f} s" for k, v in initial[s].items()) for s in sizes if s in initial) + ".",
    ]
    if waited:
        lines.append(f"- The script waited {waited:.0f} s in all for pytest runs to finish before measuring.")
    lines += [
        "",
        "| rows | change | events (keys) | model | strategy | incremental s | full s (noop) | full/incr | real full s | real full/incr | other procs, cores |",
        "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for ff in runs:
        for f in ff.models:
            real = f"{f.real_full:.2f} | {ratio(f.real_full, f.incr)}" if f.real_full is not None else "- | -"
            lines.append(f"| {ff.rows:,} | {ff.fraction:.1%} | {ff.events:,} ({ff.keys:,}) | {f.model} | {f.strategy} | {f.incr:.2f} | "
                         f"{f.full:.2f} | **{ratio(f.full, f.incr)}** | {real} | {f.incr_others:.2f} / {f.full_others:.2f} |")
    lines += [
        "",
        "\"other procs\": average cores used by other processes on the machine during the incremental / full measurement "
        "(more than ~0.2 means the figure shared the CPUs).",
        "",
    ]
    pairs = growth_by_table(runs)
    if pairs:
        lines += ["The same absolute change at two table sizes (incremental seconds):", "",
                  "| events | model | smaller table | s | 10x table | s | growth |", "|---:|---|---:|---:|---:|---:|---:|"]
        for events, lo, hi, model, a, b in sorted(pairs):
            lines.append(f"| {events:,} | {model} | {lo:,} | {a:.2f} | {hi:,} | {b:.2f} | {b / a:.1f}x |")
        lines.append("")
    lines += summary_lines(runs)
    lines += floor_lines(r.get("floor"), runs)
    notes = [x["note"] for x in results if x.get("note")]
    for note in notes:
        lines += [note, ""]
    profiled = [ff for ff in runs if any(f.profile for f in ff.models)]
    lines += step_table("Where the incremental time goes (measured runs; exclusive wall seconds per step of the engine, timed by "
                        "wrapping its methods in the script; Spark is lazy, so a step's time is the Spark work its own actions ran, and the "
                        "change read is fused into the first action that needs it; Spark jobs from the event log):", profiled, "steps")
    lines += step_table("The same builds repeated on the project copy with the change read forced first (persist + count of the change's "
                        "before/after/key images, so it has its own column; not the measured figure):", profiled, "profile")
    lines += ["Steps:", ""] + [f"- {k}: {v}" for k, v in Steps.LEGEND.items()] + [""]
    recomputed = [f"{ff.rows:,} rows {ff.fraction:.1%}" for ff in runs for f in ff.models if f.recompute]
    if recomputed:
        total = sum(1 for ff in runs for f in ff.models if f.strategy == "aggregate")
        lines += [f"The aggregate model recomputed MIN/MAX groups from a scan of `ods.orders` in {len(recomputed)} of the {total} builds measured "
                  f"({', '.join(recomputed)}): a change retracted the current min or max qty of a group whose holders were unknown (after a full "
                  "build) or all retracted (qty is 1..10, so with unknown holders nearly every change batch does).", ""]
    return "\n".join(lines)


def save_results(path: Path, result: dict[str, Any]) -> None:
    out = dict(result)
    def plain(obj: Any, skip: str) -> dict[str, Any]:
        return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name != skip}

    out["runs"] = [{**plain(ff, "models"), "models": [plain(f, "phases") for f in ff.models]} for ff in result["runs"]]
    out["initial"] = {str(k): v for k, v in result["initial"].items()}
    if result.get("floor") is not None:
        ff = result["floor"]
        out["floor"] = {**plain(ff, "models"), "models": [plain(f, "phases") for f in ff.models]}
    path.write_text(json.dumps(out, indent=1, default=str))


def load_results(path: Path) -> dict[str, Any]:
    r = json.loads(path.read_text())
    r["initial"] = {int(k): v for k, v in r["initial"].items()}
    def figures(ff: dict[str, Any]) -> FractionFigures:
        return FractionFigures(**{**ff, "models": [ModelFigures(**{**f, "window": tuple(f["window"])}) for f in ff["models"]]})

    r["runs"] = [figures(ff) for ff in r["runs"]]
    r["floor"] = figures(r["floor"]) if r.get("floor") else None
    return r


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="orders in the ODS table (target size 10,000,000)")
    ap.add_argument("--small-rows", type=int, default=None, help="a second, smaller table size run first (default rows/10; 0: none)")
    ap.add_argument("--fractions", default="0.001,0.01,0.1", help="changed share of the table per round (comma-separated)")
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--products", type=int, default=1_000)
    ap.add_argument("--cities", type=int, default=100)
    ap.add_argument("--warmup-rows", type=int, default=2_000)
    ap.add_argument("--no-copy", action="store_true", help="skip the project copy (step profile and real full rebuild)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--recompute", action="store_true",
                    help="on the copy, time each build as a recompute (build.recompute_below_mib) instead of the step profile")
    ap.add_argument("--model-layout", default="", metavar="YAML",
                    help="layout settings for every model, e.g. 'type: mor, index: bucket, buckets: 8' (models/layout.py)")
    ap.add_argument("--ods-layout", default="", metavar="YAML", help="layout settings for ods.orders, e.g. 'type: mor, index: bucket'")
    ap.add_argument("--out", type=Path, default=None, help="replace this benchmark's section of this Markdown file")
    ap.add_argument("--note", default=None, help="a paragraph added to the Markdown section")
    ap.add_argument("--results", type=Path, default=None, help="also save the figures as JSON here")
    ap.add_argument("--render", type=Path, action="append", default=None,
                    help="no run: write the section (--out) from figures saved with --results (repeat to combine runs)")
    args = ap.parse_args(argv)
    if args.render:
        results = [load_results(path) for path in args.render]
        if args.note:
            results[0]["note"] = args.note
        text = markdown_section(results)
        if args.out:
            write_markdown(args.out, text)
        else:
            print(text)
        return 0
    n = args.rows
    small = n // 10 if args.small_rows is None else args.small_rows
    fractions = [float(x) for x in args.fractions.split(",")]
    shape = Shape(args.users, args.products, args.cities)
    command = "python benchmarks/incremental.py " + " ".join(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-incr-"))
    spark = None
    try:
        from framework.project.config import load_project
        from framework.table.session import spark_session

        make_project(tmp / "session")
        event_log = tmp / "eventlog"
        event_log.mkdir()
        t0 = time.perf_counter()
        spark = spark_session(load_project(tmp / "session"), {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": event_log.as_uri(),
            "spark.eventLog.compress": "false",
        })
        say(f"SparkSession up in {time.perf_counter() - t0:.1f} s; temp dir {tmp}")
        steps = Steps()
        steps.install()
        bench = Bench(spark, steps, say, shape, args.seed)
        bench.compare_recompute = args.recompute
        bench.model_layout, bench.ods_layout = args.model_layout, args.ods_layout

        t0 = time.perf_counter()
        # The warm-up's second round (one event, warm JVM) is the fixed cost of a build: what an
        # incremental build costs when nothing scales with the table or the change.
        _, warm = bench.size(tmp, args.warmup_rows, [0.01, 1 / args.warmup_rows], copy=not args.no_copy, label="warmup")
        floor = warm[-1]
        say(f"warm-up done in {time.perf_counter() - t0:.1f} s (not reported but for the fixed cost of the 1-event round)")

        runs: list[FractionFigures] = []
        initial: dict[int, dict[str, float]] = {}
        rss: dict[int, dict[str, float | None]] = {}
        for rows, label in ((small, "small"), (n, "main")):
            if rows <= 0:
                continue
            t0 = time.perf_counter()
            initial[rows], got = bench.size(tmp, rows, fractions, copy=not args.no_copy and rows == n, label=label)
            runs += got
            # Peak RSS so far (monotonic): after the smaller size, then after the 10x one (goal 5).
            rss[rows] = {"python_mib": vm_hwm_mib(os.getpid()), "jvm_mib": jvm_peak_rss()}
            say(f"{label} ({rows:,} rows) done in {time.perf_counter() - t0:.1f} s")

        info = machine_info()
        spark.stop()
        spark = None
        jobs, _stages = read_event_log(event_log)
        for ff in runs:
            for f in ff.models:
                mine = [j for j in jobs if f.window[0] * 1000 <= j.submitted <= f.window[1] * 1000]
                f.jobs = len(mine)
                if f.phases is not None:
                    for j in mine:
                        step = f.phases.step_of(j.submitted / 1000)
                        step = Steps.DELTA if step in ("run", "(outside any step)") else step
                        f.job_steps[step] = f.job_steps.get(step, 0) + 1
                if ff.rows == n:
                    say(f"  {ff.fraction:.1%} {f.model}: {job_line(f)}")
        result = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": info, "command": command,
            "rows": n, "small_rows": small, "users": shape.users, "products": shape.products, "cities": shape.cities,
            "runs": runs, "initial": initial, "waited": bench.waited, "note": args.note, "floor": floor,
            "rss": rss, "model_layout": args.model_layout, "ods_layout": args.ods_layout,
        }
        if args.results:
            save_results(args.results, result)
            say(f"saved the figures to {args.results}")
        if args.out:
            write_markdown(args.out, markdown_section([result]))
            say(f"wrote the section to {args.out}")
        else:
            print(markdown_section([result]))
        say("done")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
