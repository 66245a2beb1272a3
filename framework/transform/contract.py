"""Enforcing a model's contract (`contract: enforced`, models/contract.py) before its commit.

The columns and types are compared on the output's schema (no Spark job): the model must return
exactly the declared columns, each with its declared type. Columns declared `nullable: false` are
then checked on the rows the build writes (one Spark job, only when such columns exist). Any
difference fails the model before anything of it is committed, naming the column and the fix.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from framework.errors import LakeError
from framework.table.columns import live, visible_columns
from framework.transform.loader import Model
from models.contract import normal_type


class ContractViolation(LakeError):
    """A model's output does not match its declared contract."""


def schema_problems(m: Model, rows: DataFrame) -> list[str]:
    """How the output's columns differ from the contract (empty: they match)."""
    declared = m.config.column_contracts
    shown = set(visible_columns(rows))
    have = {f.name: normal_type(f.dataType.simpleString()) for f in rows.schema.fields if f.name in shown}
    problems = [f"column {c!r} is declared ({declared[c].type}) but the model does not return it" for c in declared if c not in have]
    problems += [f"column {c!r} ({t}) is returned but not declared" for c, t in have.items() if c not in declared]
    problems += [f"column {c!r} is {have[c]}, the contract says {d.type}" for c, d in declared.items() if c in have and have[c] != d.type]
    return problems


def reads_rows(m: Model) -> bool:
    """The contract is checked on the rows too (a `nullable: false` column): keep them held."""
    return m.config.contract == "enforced" and any(not d.nullable for d in m.config.column_contracts.values())


def enforce(m: Model, rows: DataFrame) -> None:
    """Raise :class:`ContractViolation` when `rows` (what the build writes, `_deleted` false for
    rows it keeps) break `m`'s contract; nothing when the model has none."""
    if m.config.contract != "enforced":
        return
    where = f"layers/{m.layer}/{m.stem}.yaml"
    problems = schema_problems(m, rows)
    if problems:
        raise ContractViolation(
            f"{m.name} breaks its contract (`contract: enforced` in {where}): " + "; ".join(problems) + "; nothing was committed",
            fix=f"change {m.rel} to return the declared columns and types (CAST where needed), or change `columns:` in {where} "
                "(readers of the table rely on it)",
        )
    if not reads_rows(m):
        return
    required = [c for c, d in m.config.column_contracts.items() if not d.nullable]
    counts = rows.where(live(rows)).agg(*[F.count(F.when(F.col(f"`{c}`").isNull(), 1)).alias(c) for c in required]).first()
    nulls = {c: int(counts[c]) for c in required} if counts is not None else {}
    bad = [f"column {c!r} holds NULL in {n} row(s)" for c, n in nulls.items() if n]
    if bad:
        raise ContractViolation(
            f"{m.name} breaks its contract (`contract: enforced` in {where}): " + "; ".join(bad)
            + " but is declared `nullable: false`; nothing was committed",
            fix=f"filter or fill the NULLs in {m.rel} (COALESCE), or declare the column nullable in {where}",
        )
