"""`lake verify`: is a model's table what a full build gives? One model at a time, read-only.

The last commit of the model's table that carries a checkpoint (DESIGN.md §2) records, per
upstream, the instant it had read up to. The model is built in full, in memory, from its
upstreams as of exactly those instants (Hudi time travel: Evaluator.rows_as_of), and compared by
key with the table as of its latest commit (which may be a commit lake did not write, after it:
that is drift too). Hudi's and lake's bookkeeping columns (`_hoodie_*`, `_lake_*`, `_deleted`)
and an aggregate's hidden groups (framework/transform/hidden.py) are left out: the user-visible
rows are compared, and only those.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.table import timeline
from framework.table.columns import live, visible_columns
from framework.transform import external, rowdiff
from framework.transform.evaluate import Evaluator
from framework.transform.loader import Model
from framework.transform.reader import CLEANED
from models.commit_meta import ModelCheckpoint
from models.verify import ModelVerify


def verify_model(ev: Evaluator, m: Model, sample: float | None = None, samples: int = 5) -> ModelVerify:
    """Compare `m`'s table with a full build as of its checkpoint (`sample`: only the keys whose
    hash falls in that fraction); never raises for the model's own data: a failure is its result."""
    t0 = time.time()
    out = _target(ev, m)
    if out.status == "skipped":
        return out
    try:
        full = table_rows(ev.rows_as_of(m, out.upstream))
        table = ev.reader.snapshot(m.name, out.table_instant)
        key = list(ev.analyses.of(m).key or ()) or visible_columns(full)
        if sample is not None:
            full, table = rowdiff.in_sample(full, key, sample), rowdiff.in_sample(table, key, sample)
        found = rowdiff.diff(table, full, key, samples)
    except Exception as e:  # noqa: BLE001 - reported per model; the others are verified
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        why = ("an upstream's cleaner removed the files of an instant the checkpoint recorded: the full build it was made "
               "from cannot be read any more" if CLEANED in first else f"{type(e).__name__}: {first[:300]}")
        return out.model_copy(update={"status": "failed", "reason": why, "seconds": round(time.time() - t0, 3)})
    differing = found.missing + found.extra + found.changed
    status = "differs" if differing or found.schema else "equal"
    res = out.model_copy(update={"status": status, "key": key, "sampled": sample, "table_rows": found.table_rows,
                                 "full_rows": found.full_rows, "missing": found.missing, "extra": found.extra, "changed": found.changed,
                                 "columns": found.columns, "schema_changes": found.schema, "samples": found.samples,
                                 "seconds": round(time.time() - t0, 3)})
    return res.model_copy(update={"reason": describe(res)})


def _target(ev: Evaluator, m: Model) -> ModelVerify:
    """What to compare: the table's latest instant and the checkpoint of its last lake commit;
    `skipped` with the reason when there is nothing to compare."""
    def skip(why: str) -> ModelVerify:
        return ModelVerify(model=m.name, status="skipped", reason=why)

    if m.kind == "seed":
        return skip("a seed is loaded from its file, not built from upstream tables")
    path = ev.layout.table(m.name)
    done = timeline.completed(path)
    lake = [c for c in timeline.commits(path) if "ckpt" in c.lake]
    if not done or not lake:
        return skip("no build has committed to its table yet")
    ckpt = ModelCheckpoint.from_meta(lake[-1].lake)
    assert ckpt is not None
    if ckpt.fingerprint != m.fingerprint:
        return skip(f"{m.rel} (or its YAML) changed since its last build: a full build now differs by design; build it, then verify")
    if set(ckpt.checkpoint) != set(m.upstreams):
        return skip(f"its last commit records no instant of {', '.join(sorted(set(m.upstreams) - set(ckpt.checkpoint)))}: build it, then verify")
    moved = _moved_folders(ev, ckpt.checkpoint)
    if moved:
        return skip(f"{', '.join(moved)} changed since its last build, and a folder of Parquet files cannot be read as it was then "
                    "(only Hudi tables keep their past): build it, then verify")
    return ModelVerify(model=m.name, status="equal", table_instant=done[-1].completed, checkpoint_instant=lake[-1].instant.completed,
                       upstream=dict(ckpt.checkpoint))


def _moved_folders(ev: Evaluator, recorded: dict[str, str]) -> list[str]:
    """The external Parquet folders among the upstreams whose files changed since the version the
    checkpoint recorded (a Hudi upstream is read as of its instant; a catalog table has no version
    and is read as it is: docs/limits.md)."""
    out = []
    for name, version in sorted(recorded.items()):
        ext = ev.project.externals.get(name)
        if ext is not None and ext.kind != "hudi" and ext.location is not None and external.version(ext) != version:
            out.append(name)
    return out


def table_rows(rows: DataFrame) -> DataFrame:
    """Of a full build's rows (Evaluator.rows_as_of), the visible columns of those the model's
    table holds: not an aggregate's emptied or hidden groups (HAVING; framework/transform/commit.py)."""
    if "_lake_rows" in rows.columns:
        rows = rows.where(F.col("_lake_rows") > 0)
    return rows.where(live(rows)).select(*[F.col(f"`{c}`") for c in visible_columns(rows)])


def describe(r: ModelVerify) -> str:
    """One line: equal, or what differs."""
    scope = f" (on a {r.sampled:.2%} sample of keys)" if r.sampled is not None else ""
    if r.status == "equal":
        return f"equal to a full build as of its checkpoint: {r.table_rows} rows{scope}"
    parts = [f"{r.missing} missing", f"{r.extra} extra", f"{r.changed} changed"]
    cols = f"; columns that differ: {', '.join(f'{c} ({n})' for c, n in r.columns.items())}" if r.columns else ""
    schema = f"; {'; '.join(r.schema_changes)}" if r.schema_changes else ""
    n = r.missing + r.extra + r.changed
    return f"{n} key(s) differ from a full build as of its checkpoint{scope}: {', '.join(parts)}{cols}{schema}"


def repair_note(r: ModelVerify) -> str:
    """What a repair records in its commit (ModelCheckpoint.note)."""
    n = r.missing + r.extra + r.changed
    sampled = f" in a {r.sampled:.2%} sample" if r.sampled is not None else ""
    return f"repair after verify: {n} keys differed{sampled}"


def check_fraction(text: str) -> float:
    """`--sample`'s fraction: `1%`, `0.5%` or `0.01`; refused outside (0, 1]."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise LakeError(f"--sample {text!r} is not a fraction", fix="give a percentage of keys, e.g. --sample 1%") from None
    if not 0 < value <= 1:
        raise LakeError(f"--sample {text} is outside (0%, 100%]", fix="give a percentage of keys above 0 and at most 100, e.g. --sample 1%")
    return value
