"""Table settings that only the events can check: the `ordering:` and `partition_by.column` of a
table YAML against the column types a micro-batch resolved.

A problem is the table's alone: its events of the batch go to the dead letter with the reason
returned here (file, field, fix) and the other tables commit (framework/ods/batch.py). Types
declared in `columns:` are checked before Spark starts (framework/project/config.py).
"""

from __future__ import annotations

from framework.project.types import normalize
from models.config import NOT_TIME_TYPES, ORDERING_TYPES, OdsTable


def table_config_problem(t: OdsTable, target: dict[str, str], file: str) -> str | None:
    """Why `t` cannot write a batch whose columns have the Spark types `target` (the table's
    columns after the batch), or None. `file` is the table YAML that declares `t`."""
    where = f"{file}: {t.qualified_name}"
    have = ", ".join(sorted(target)) or "none"
    for c in t.ordering:
        typ = target.get(c)
        if typ is None:
            return (f"{where} `ordering:` names column {c!r}, which the events of {t.source} do not have "
                    f"(columns: {have}); fix: name a timestamp, date or integer column they carry, or remove it")
        typ = normalize(typ)
        if typ not in ORDERING_TYPES:
            declare = ("" if c in t.columns
                       else f", or declare its type if the values are one (e.g. `columns: {{{c}: timestamp}}`)")
            return (f"{where} `ordering:` column {c!r} has type {typ.upper()}; fix: order by a timestamp, "
                    f"date or integer column{declare}")
    p = t.partition_by
    if p is not None:
        typ = target.get(p.column)
        if typ is None:
            return (f"{where} `partition_by.column` {p.column!r} is not a column of the events of {t.source} "
                    f"(columns: {have}); fix: name a timestamp, date or text date column they carry")
        if normalize(typ) in NOT_TIME_TYPES:
            return (f"{where} `partition_by.column` {p.column!r} has type {typ.upper()}, which has no time "
                    f"to partition by; fix: partition by a timestamp, date or text date column")
    return None
