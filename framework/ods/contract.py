"""An ODS table's contract (`contract: enforced`): the table keeps exactly the columns and types
of its `columns:`, and events that do not fit go to the dead letter instead of widening it.

An event fits when every column of its row image is declared and the declared type holds the
event's type (an INT into a declared BIGINT is taken; a BIGINT into a declared INT is not).
Schema versions (a schema block's columns) are judged as a whole, like a schema change the table
cannot take (framework/ods/columns.py); events without a schema block are judged one by one
(`undeclared`), since their image's keys are all lake knows of their columns. A table written
before its contract was declared must already fit it: a stored column the contract leaves out, or
holds in a narrower type, sends the table's events to the dead letter with the fix, so a contract
never silently drops a column. A contract wider than the stored type (the user widened it) widens
the table, as a schema change would.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from framework.ods.columns import Columns, before_hand_off, needs_rewrite
from framework.ods.envelope import Decoder, SchemaBlockError, decoder_for_sql_type, row_columns
from framework.project.types import WALL_CLOCK, merge_batch_types, normalize, stored
from models.config import OdsTable


def _fix(t: OdsTable, file: str) -> str:
    return (f"if the change is wanted, declare it in `columns:` of {t.qualified_name} in {file}, then put the events back: "
            f"lake dead-letter replay --table {t.qualified_name}")


def _fits(column: str, declared: str, incoming: Decoder) -> bool:
    """Whether a column `declared` in the contract holds the event type of `incoming`."""
    res = merge_batch_types(column, declared, [incoming.spark_type], keep_wider=True, wall_clock=incoming.kind in WALL_CLOCK)
    return res.error is None and res.target is not None and normalize(res.target) == normalize(declared)


def stored_problem(t: OdsTable, current: dict[str, str], file: str) -> str | None:
    """Why the stored table (`current`: its column types) breaks its contract, or None."""
    declared = t.columns
    for name, typ in current.items():
        if name not in declared:
            return (f"{t.qualified_name} holds column {name!r} ({typ.upper()}), which its contract (`contract: enforced` in {file}) "
                    f"does not declare (fix: declare `{name}: {typ}` in `columns:`, then lake dead-letter replay --table "
                    f"{t.qualified_name})")
        want = declared[name]
        if stored(typ) == stored(want):  # a declared SMALLINT reads back from the table as INT
            continue
        ok = merge_batch_types(name, want, [typ], keep_wider=True)
        if ok.error is not None or ok.target is None or normalize(ok.target) != normalize(want):
            return (f"{t.qualified_name} holds column {name!r} as {typ.upper()}, which its contract's {want.upper()} (in {file}) "
                    f"cannot hold (fix: declare `{name}: {typ}` or wider, then lake dead-letter replay --table {t.qualified_name})")
    return None


def contracted_columns(t: OdsTable, rows: list[Any], current: dict[str, str], watermark: str | None, file: str) -> Columns:
    """The columns of table `t` under its contract after the batch whose summary rows are `rows`
    (framework/ods/columns.py's `resolve_columns` for a table without one)."""
    declared = dict(t.columns)
    out = Columns(dict(declared))
    problem = stored_problem(t, current, file)
    for r in sorted(rows, key=lambda r: r["first_arrival"] or ""):
        if r["is_truncate"] or before_hand_off(r["pos_max"], watermark):
            continue
        version = r["schema_hash"] or ""
        if problem:
            out.rejected[version] = problem
            continue
        if not r["schema_raw"]:  # judged event by event (`undeclared`), decoded in the declared types
            out.versions[""] = {k: decoder_for_sql_type(v) for k, v in declared.items()}
            continue
        try:
            cols = row_columns(r["schema_raw"])
        except SchemaBlockError as e:
            out.rejected[version] = f"unreadable schema block: {e}"
            continue
        extra = [c.name for c in cols if c.name not in declared]
        wider = [c for c in cols if c.name in declared and not _fits(c.name, declared[c.name], c.decoder)]
        problems = [f"column(s) {', '.join(extra)} not in the contract of {t.qualified_name}"] if extra else []
        problems += [f"column {c.name!r} arrives as {c.decoder.spark_type.upper()}, which the contract's {declared[c.name].upper()} "
                     "cannot hold" for c in wider]
        if problems:
            out.rejected[version] = f"schema change in {t.source}: {'; '.join(problems)} (fix: {_fix(t, file)})"
            continue
        out.versions[version] = {c.name: (decoder_for_sql_type(declared[c.name]) if c.decoder.kind == "plain" else c.decoder)
                                 for c in cols}
    out.rewrite = {c: (current[c], new) for c, new in out.target.items() if c in current and needs_rewrite(t, c, current[c], new)}
    return out


def undeclared(t: OdsTable, file: str) -> Column:
    """Why an event's row image (`img`) does not fit the contract of `t`: the columns it carries
    that `columns:` does not declare; NULL when it fits."""
    extra = F.array_except(F.map_keys(F.col("img")), F.array(*[F.lit(c) for c in t.columns]))
    return F.when(F.size(extra) > 0, F.concat(
        F.lit("column(s) "), F.array_join(F.array_sort(extra), ", "),
        F.lit(f" not in the contract of {t.qualified_name} (fix: {_fix(t, file)})")))
