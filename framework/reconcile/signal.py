"""`lake reconcile --repair` through the stream: a Debezium incremental snapshot of exactly the
differing keys, asked for by a row in the connector's signal table (`execute-snapshot` with
`additional-conditions`). The connector reads those rows between its watermarks and publishes
them as read events in the stream's order, so ODS takes them as it takes every other event: a
change written after the snapshot read is newer and wins, nothing is written around the stream.

The filter is SQL the connector runs in the database: a key is matched on its columns' values (an
integer or a string column as itself, so the primary key's index serves it; any other kind by its
canonical text, as the keyed reads of framework/reconcile/source.py match it). The keys are split
over as many signals as keep each signal's `data` within `signal_max_chars` (the signal table's
`data` column: VARCHAR(2048) in Debezium's documentation)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence

from framework.errors import LakeError
from framework.reconcile.canonical import ColumnSpec
from framework.reconcile.rows import Key
from framework.reconcile.sql import Dialect, MySql
from framework.reconcile.target import SourceTarget

_INT = re.compile(r"-?\d+")


def literal(sql: Dialect, text: str) -> str:
    """`text` as an SQL string literal of the dialect (MySQL: backslashes escaped too, as its
    default sql_mode reads them; PostgreSQL: an E'' literal, whatever standard_conforming_strings says)."""
    body = text.replace("\\", "\\\\").replace("'", "''")
    return f"'{body}'" if isinstance(sql, MySql) else f"E'{body}'"


def _column_match(sql: Dialect, c: ColumnSpec, value: str | None, float_digits: int) -> str:
    if value is None:
        return f"{sql.quote(c.source_name)} IS NULL"
    if c.kind == "int" and _INT.fullmatch(value):
        return f"{sql.quote(c.source_name)} = {value}"
    if c.kind == "string":
        return f"{sql.quote(c.source_name)} = {literal(sql, value)}"
    # The canonical text, as the keyed reads match it; its SQL is written for a driver that
    # formats parameters ('%%' for '%'), the connector runs it as it is.
    return f"{sql.text(c, float_digits).replace('%%', '%')} = {literal(sql, value)}"


def key_conditions(sql: Dialect, key: Sequence[ColumnSpec], keys: Sequence[Key], float_digits: int) -> list[str]:
    """One SQL condition per key, matching its row in the source table.

    Example:
        >>> from framework.reconcile.sql import dialect
        >>> key_conditions(dialect("mariadb"), [ColumnSpec("id", "id", "int")], [("7",)], 6)
        ['`id` = 7']
    """
    out = []
    for k in keys:
        parts = [_column_match(sql, c, v, float_digits) for c, v in zip(key, k, strict=True)]
        out.append(parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")")
    return out


def _filter(conditions: Sequence[str]) -> str:
    ints = [re.fullmatch(r"(\S+) = (-?\d+)", c) for c in conditions]
    if len(conditions) > 1 and all(ints) and len({m.group(1) for m in ints if m}) == 1:  # one integer key: IN (...)
        col = ints[0].group(1) if ints[0] else ""
        return f"{col} IN ({', '.join(m.group(2) for m in ints if m)})"
    return " OR ".join(conditions)


def collection(target: SourceTarget) -> str:
    """The table as Debezium names its data collection: `<db>.<table>` (MariaDB, MySQL),
    `<schema>.<table>` (PostgreSQL)."""
    return ".".join(target.parts)


def payload(coll: str, conditions: Sequence[str]) -> str:
    """The `data` of one `execute-snapshot` signal: an incremental snapshot of `coll`'s rows that
    match any of `conditions`."""
    return json.dumps({"data-collections": [coll], "type": "incremental",
                       "additional-conditions": [{"data-collection": coll, "filter": _filter(conditions)}]},
                      separators=(",", ":"), ensure_ascii=False)


def payloads(coll: str, conditions: Sequence[str], max_chars: int) -> list[str]:
    """The signals' `data` for `conditions`: as few as keep each within `max_chars` characters,
    every condition in exactly one of them."""
    out: list[str] = []
    batch: list[str] = []
    for c in conditions:
        if batch and len(payload(coll, [*batch, c])) > max_chars:
            out.append(payload(coll, batch))
            batch = []
        batch.append(c)
        if len(payload(coll, batch)) > max_chars:
            raise LakeError(f"one key's snapshot signal for {coll} is {len(payload(coll, batch))} characters, over signal_max_chars "
                            f"({max_chars}): {c[:200]}",
                            fix="widen the signal table's `data` column and raise reconcile.sources.<db>.signal_max_chars to match")
    if batch:
        out.append(payload(coll, batch))
    return out


def snapshot_ranks(dialect: str) -> bool:
    """Whether the connector's incremental-snapshot reads carry a source position ODS can rank
    against the rows they repair. MariaDB/MySQL: yes (the binlog file and position of the moment
    of the read). PostgreSQL: no; Debezium's PostgreSQL read events of an incremental snapshot
    have no `source.lsn`, so they rank below every stored row and would repair only missing keys
    (seen on the real chain, tests/integration/test_reconcile.py). There the repair writes the
    rows itself."""
    return dialect != "postgres"


def signal_id() -> str:
    """A signal's id: unique, and at most 42 characters (the id column of Debezium's documentation)."""
    return "lake-reconcile-" + uuid.uuid4().hex[:27]
